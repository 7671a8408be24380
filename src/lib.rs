//! # sparsec
//!
//! A compiler for sparse tensor programs in the style of SparseTIR. This crate is the facade
//! over the workspace crates and holds the driver used by the `sparsec` command line:
//!
//! * [`ir`] — the three-stage IR, the `.sptir` text format and the verifier;
//! * [`interp`] — the reference interpreter;
//! * [`formats`] — sparse matrix containers, Matrix Market I/O, generators and bindings;
//! * [`passes`] — the lowering passes and the pass manager;
//! * [`schedule`] — schedule primitives and replayable traces;
//! * [`backend`] — the backend contract and the one path every run takes;
//! * [`assembly`] — sparse outputs at run time: the symbolic phase before the program;
//! * [`driver`] — loading, lowering and binding programs;
//! * [`einsum`] — programs from TACO's index notation (`C(i,k) = A(i,j) * B(j,k)`);
//! * [`npy`] — NumPy `.npy` array files;
//! * [`estimate`] — an estimate of a GPU kernel's time from its memory-access trace;
//! * [`alloc`] — a global allocator that aligns large arrays to cache lines and huge pages.

pub use sparsec_formats as formats;
pub use sparsec_interp as interp;
pub use sparsec_ir as ir;
pub use sparsec_passes as passes;
pub use sparsec_schedule as schedule;

pub mod alloc;
pub mod assembly;
pub mod backend;
pub mod driver;
pub mod einsum;
pub mod estimate;
pub mod npy;
