//! # sparsec-backend-mlir
//!
//! The MLIR backend of sparsec: a scheduled Stage-III function becomes an MLIR module built
//! with melior's operation builders (never parsed from text), verified before use.
//!
//! * **GPU** — [`emit_mlir`] gives a `gpu.module` with one `gpu.func` per kernel (each
//!   top-level nest with thread bindings) and a host `func.func` that launches them with
//!   `gpu.launch_func`; [`emit_ptx`] runs the NVVM pipeline ([`ptx_pipeline`]) in-process and
//!   returns the PTX; [`gpu_plan`] describes the launches for running that PTX elsewhere.
//! * **CPU** — [`CpuKernel::compile`] lowers the same function (thread bindings to
//!   `scf.parallel`/`scf.for`) to the LLVM dialect ([`CPU_PIPELINE`]) and JIT-compiles it with
//!   the MLIR execution engine; [`run_cpu`] has the interpreter's contract.
//!   [`CpuOptions::emulate_gpu`] runs the GPU kernels themselves over their grid on the CPU,
//!   to check GPU code without a GPU.
//! * **A peer** — [`SparsifierKernel`] is MLIR's own sparsifier on CSR SpMM or SpMV, JIT-compiled
//!   in-process for `sparsec bench --compare sparsifier`.
//!
//! ## Translation
//!
//! | Stage III | MLIR |
//! |---|---|
//! | `for` serial / vectorized / unrolled | `scf.for` (LLVM vectorises and unrolls) |
//! | `for` parallel (CPU) | `scf.parallel` (outermost only, when it has more than one iteration), OpenMP threads |
//! | `for` bound to `blockIdx`/`threadIdx` (GPU) | `gpu.block_id`/`gpu.thread_id` + guard `scf.if id < extent` |
//! | `for` bound (CPU) | `blockIdx` → `scf.parallel`, `threadIdx` → `scf.for` |
//! | `if` / `while` | `scf.if` / `scf.while` |
//! | block | iterator bindings evaluated; `init` under `scf.if` (all reduce iterators 0) |
//! | `let` | SSA value |
//! | buffer | `memref<?xT>` (multi-dimensional shapes flattened row-major) |
//! | load / store | `memref.load` / `memref.store`, index in 64-bit `index` arithmetic from the induction variables |
//! | function-level `alloc` | CPU `memref.alloc` + fill + `memref.dealloc`; GPU host `gpu.alloc` + `gpu.memset` |
//! | statement `alloc`, constant size | static `memref.alloca` hoisted to the function, kernel or `scf.parallel` body entry; filled in place |
//! | statement `alloc`, variable size (CPU) | `memref.alloc` + fill, `memref.dealloc` at the end of its list |
//! | statement `alloc` shared | GPU workgroup attribution (address space 3), not filled |
//! | `atomic_add` | `memref.atomic_rmw addf/addi` |
//! | `exp`, `log`, ... | `math` dialect; `sigmoid` as `1 / (1 + exp(-x))` |
//! | `&&`, `||` whose right side loads | `scf.if` (short-circuit) |
//!
//! On the CPU, loop-invariant loads from storage a loop never writes are read once before
//! it (distinct parameters never alias), so that LLVM vectorises inner loops.
//!
//! ## Calling convention
//!
//! See [`signature`]: parameters in the function's order, handles as rank-1 memref
//! descriptors, scalars as their own type. The GPU host function, the kernels (followed by
//! the function-level allocations) and the CPU runner all use it.

mod abi;
mod context;
mod cpu;
mod error;
mod gpu;
mod hoist;
mod regtile;
mod sparsifier;
mod translate;

pub use abi::{signature, AbiParam, ArgKind};
pub use cpu::{default_openmp_runtime, emit_cpu_mlir, host_has_fast_gather, host_vector_bytes, run_cpu, CpuKernel, CpuOptions, CPU_PIPELINE};
pub use error::{MlirError, Result};
pub use gpu::{emit_mlir, emit_mlir_located, emit_ptx, gpu_plan, index_bits, ptx_pipeline, DeviceAlloc, GpuPlan, KernelLaunch};
pub use sparsifier::{sparsifier_module, sparsifier_pipeline, SparsifierKernel, SparsifierOp};
pub use translate::Source;
