//! The CPU path: the Stage-III function as one `func.func`, lowered to the LLVM dialect and
//! run in-process by the MLIR execution engine.
//!
//! `parallel` loops and loops bound to `blockIdx.*` become `scf.parallel` (the outermost one
//! of a nest only; a loop of one iteration runs as `scf.for` on the calling thread), which
//! `convert-scf-to-openmp` turns into an OpenMP parallel region run by LLVM's OpenMP
//! runtime (`libomp.so`: a persistent team of one thread per core). Every other loop,
//! `threadIdx.*`, `vectorized` and `unrolled` included, is an `scf.for`; LLVM's optimiser at
//! `-O3` vectorises and unrolls them, except that a `vectorized` loop with a vector form
//! (`sparsec_ir::vector`) becomes `vector` ops, and a serial loop around a vectorized
//! accumulation is register-tiled with `vector` ops of the host's width (`regtile`).

use crate::abi::{signature, AbiParam, ArgKind};
use crate::context::{new_context, run_pipeline, verify};
use crate::error::{MlirError, Result};
use crate::gpu::{arg_type, bind_params, check_stage, function_allocs, kernel_specs, launch_sizes, KernelSpec};
use crate::translate::{Target, Tr, Val};
use half::{bf16, f16};
use melior::ir::{Block, BlockLike, Location, Module, Type};
use melior::Context;
use mlir_sys::{
    mlirExecutionEngineCreate, mlirExecutionEngineDestroy, MlirExecutionEngine,
    MlirStringRef,
};
use sparsec_ir::data::{Args, Array, RunTimes, Scalar};
use sparsec_ir::{BinOp, DType, Expr, Func, Layout, ParamKind, Storage};
use std::ffi::c_void;
use std::time::Instant;

/// Options of the CPU path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuOptions {
    /// Map `parallel` and `blockIdx` loops to `scf.parallel` on the OpenMP runtime's
    /// threads; when false every loop is serial.
    pub parallel: bool,
    /// LLVM optimisation level of the JIT (0 to 3).
    pub opt_level: usize,
    /// Path of the OpenMP runtime `libomp.so`; by default the one of the LLVM the crate was
    /// built against (`$MLIR_SYS_220_PREFIX/lib`).
    pub openmp_runtime: Option<String>,
    /// Run the GPU translation instead: every kernel of [`crate::emit_mlir`] (the same
    /// translated body, thread ids and guards) runs once per block and thread, serially, over
    /// its grid. For checking the GPU code without a GPU; shared memory is unsupported.
    pub emulate_gpu: bool,
    /// Keep the JIT's object code, so that [`CpuKernel::write_object`] can write it out (to
    /// read the machine code the kernel runs).
    pub keep_object: bool,
    /// How long the OpenMP threads of a threaded kernel spin after its parallel region before
    /// they sleep (libomp's blocktime, set for the calling thread before each call). `None`
    /// keeps the runtime's default (200 ms: back-to-back kernels start at once); `Some(0)`
    /// gives the cores back at once, for callers that run other parallel work between
    /// kernels (Burn's Flex backend on rayon), where spinning threads slow both.
    pub openmp_blocktime_ms: Option<i32>,
}

impl Default for CpuOptions {
    fn default() -> Self {
        CpuOptions {
            parallel: true,
            opt_level: 3,
            openmp_runtime: None,
            emulate_gpu: false,
            keep_object: false,
            openmp_blocktime_ms: None,
        }
    }
}

/// Bytes of the widest vector registers of the host the JIT compiles for: 64 with
/// AVX-512, 32 with AVX, 16 otherwise (`SPARSEC_CPU_VECTOR_BYTES=16|32|64` overrides it, to
/// compare widths). Register tiles (`regtile`) use vectors of this size.
pub fn host_vector_bytes() -> usize {
    if let Some(b) = std::env::var("SPARSEC_CPU_VECTOR_BYTES").ok().and_then(|v| v.parse::<usize>().ok()) {
        if [16, 32, 64].contains(&b) {
            return b;
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return 64;
        }
        if std::arch::is_x86_feature_detected!("avx") {
            return 32;
        }
    }
    16
}

/// Whether the host has hardware gathers that LLVM uses (AVX-512; LLVM scalarises AVX2
/// gathers on AMD CPUs). Elsewhere a vector form's gather is one load per lane.
pub fn host_has_fast_gather() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The default location of the OpenMP runtime (Debian's `libomp-22-dev`).
pub fn default_openmp_runtime() -> String {
    let prefix = option_env!("MLIR_SYS_220_PREFIX").unwrap_or("/usr/lib/llvm-22");
    format!("{prefix}/lib/libomp.so")
}

/// The lowering pipeline of the CPU module. `convert-scf-to-openmp` wraps each parallel
/// body in `memref.alloca_scope`, which must become LLVM (`finalize-memref-to-llvm`) before
/// `convert-scf-to-cf` gives its region several blocks; the second `finalize-memref-to-llvm`
/// lowers what the vector lowering leaves.
pub const CPU_PIPELINE: &str = "builtin.module(convert-scf-to-openmp, expand-strided-metadata, finalize-memref-to-llvm, \
     convert-scf-to-cf, convert-vector-to-llvm, finalize-memref-to-llvm, convert-math-to-llvm, convert-math-to-libm, \
     convert-arith-to-llvm, convert-index-to-llvm, convert-cf-to-llvm, convert-openmp-to-llvm, convert-func-to-llvm, \
     reconcile-unrealized-casts)";

/// Builds and verifies the CPU module; also returns whether it has `scf.parallel` loops.
pub(crate) fn cpu_module<'c>(ctx: &'c Context, func: &Func, opts: &CpuOptions) -> Result<(Module<'c>, bool)> {
    let parallel = opts.parallel && !opts.emulate_gpu;
    check_stage(func)?;
    let sig = signature(func)?;
    let module = Module::new(Location::unknown(ctx));
    let mut tr = Tr::new(ctx, func, Target::Cpu { parallel });
    let inputs: Vec<Type<'c>> = sig.iter().map(|p| arg_type(&tr, p.kind)).collect();
    let allocs = function_allocs(func);
    let region = tr.region(&inputs, |t, b, args| {
        t.set_entry(b);
        bind_params(t, func, &args)?;
        let mut owned: Vec<Val<'c>> = Vec::new();
        for &buf in &allocs {
            let d = func.buffers.try_get(buf).map(|x| x.dtype).unwrap_or(DType::F32);
            let n = t.buffer_size(b, buf)?;
            let seg = t.attr("array<i32: 1, 0>")?;
            let m = t.emit1(b, "memref.alloc", &[n], t.memref(d), &[("operandSegmentSizes", seg)])?;
            t.fill(b, buf, m, n)?;
            t.bind_buf(buf, m);
            owned.push(m);
        }
        if opts.emulate_gpu {
            for spec in kernel_specs(func)? {
                let sizes = launch_sizes(t, b, &spec)?;
                emulate(t, b, &spec, &sizes, &mut Vec::new())?;
            }
        } else {
            t.stmts(b, &func.body)?;
        }
        for m in owned {
            t.emit(b, "memref.dealloc", &[m], &[], &[])?;
        }
        t.emit(b, "func.return", &[], &[], &[]).map(drop)
    })?;
    let ciface = melior::ir::Attribute::unit(ctx);
    let f = tr.function_op("func.func", &func.name, &inputs, region, &[("llvm.emit_c_interface", ciface)])?;
    module.body().append_operation(f);
    verify(ctx, &module)?;
    let text = module.as_operation().to_string();
    Ok((module, text.contains("scf.parallel")))
}

/// Serial loops over the grid (blocks outside, threads inside), then the kernel body
/// translated for the GPU with the loop variables as ids.
///
/// A kernel with barriers (`sparsec_ir::sync::has_barriers`) is emulated in phases: loops over
/// the blocks only, and each thread-bound loop runs all the block's units in turn before the
/// statement after it, which orders them as the barriers do.
fn emulate<'c, 'f>(t: &mut Tr<'c, 'f>, b: &Block<'c>, spec: &KernelSpec<'f>, sizes: &[Val<'c>], ids: &mut Vec<Val<'c>>) -> Result<()> {
    let phased = sparsec_ir::sync::has_barriers(t.func, spec.stmts);
    let grid = if phased { &sizes[..sizes.len().min(3)] } else { sizes };
    emulate_grid(t, b, spec, grid, &sizes[grid.len()..], phased, ids)
}

fn emulate_grid<'c, 'f>(
    t: &mut Tr<'c, 'f>,
    b: &Block<'c>,
    spec: &KernelSpec<'f>,
    grid: &[Val<'c>],
    units: &[Val<'c>],
    phased: bool,
    ids: &mut Vec<Val<'c>>,
) -> Result<()> {
    let Some((&n, rest)) = grid.split_first() else {
        let mut tids = [None; 6];
        for (slot, id) in tids.iter_mut().zip(ids.iter()) {
            *slot = Some(*id);
        }
        let saved = t.target;
        t.target = Target::Gpu;
        t.emulated = true;
        t.set_gpu_ids(tids);
        t.sync = Some(crate::translate::KernelSync::new(t.func, spec.stmts, phased));
        t.phase_units = [units.first().copied(), units.get(1).copied(), units.get(2).copied()];
        // Each unit's allocations live in a scope of their own, so the stack does not grow
        // with the grid.
        let r = if crate::translate::allocates(t.func, spec.stmts, |_| true) {
            t.alloca_scope(b, |t, blk| t.stmts(blk, spec.stmts))
        } else {
            t.set_entry(b);
            t.stmts(b, spec.stmts)
        };
        t.sync = None;
        t.phase_units = [None; 3];
        t.target = saved;
        return r;
    };
    let zero = t.cidx(b, 0)?;
    let one = t.cidx(b, 1)?;
    let it = t.index();
    let region = t.region(&[it], |t, blk, iv| {
        ids.push(iv[0]);
        let r = emulate_grid(t, blk, spec, rest, units, phased, ids);
        ids.pop();
        r?;
        t.emit(blk, "scf.yield", &[], &[], &[]).map(drop)
    })?;
    b.append_operation(t.build("scf.for", &[zero, n, one], &[], &[], vec![region])?);
    Ok(())
}

/// The CPU module of a Stage-III function as MLIR text, before lowering (verified).
pub fn emit_cpu_mlir(func: &Func, opts: &CpuOptions) -> Result<String> {
    let ctx = new_context();
    let (module, _) = cpu_module(&ctx, func, opts)?;
    Ok(module.as_operation().to_string())
}

/// A JIT-compiled Stage-III function, compiled once and run many times. It is `Send` (not
/// `Sync`).
pub struct CpuKernel {
    jit: Jit,
    func: Func,
    sig: Vec<AbiParam>,
    threaded: bool,
    /// Whether the engine keeps its object code ([`CpuOptions::keep_object`]).
    object: bool,
    /// [`CpuOptions::openmp_blocktime_ms`].
    blocktime: Option<i32>,
}

/// An execution engine and the packed entry point of one function in it.
pub(crate) struct Jit {
    engine: MlirExecutionEngine,
    /// The packed entry point of the C interface (`_mlir_ciface_<name>`, taking a pointer to
    /// each argument, a memref's to its descriptor), looked up once: a lookup through the
    /// JIT's symbol tables costs about 1 µs a call.
    entry: unsafe extern "C" fn(*mut *mut c_void),
}

// The engine owns its LLVM context and JIT, and holds no thread-affine state: a kernel may
// move to another thread.
unsafe impl Send for Jit {}

impl Drop for Jit {
    fn drop(&mut self) {
        // A parallel region returns after its join barrier: no OpenMP thread is still in the
        // kernel's code, so the engine may go.
        unsafe { mlirExecutionEngineDestroy(self.engine) }
    }
}

impl Jit {
    /// JIT-compiles `module` (in the LLVM dialect) at `opt_level` and looks up the C
    /// interface of function `name` (`llvm.emit_c_interface`).
    pub(crate) fn new(module: &Module, opt_level: usize, keep_object: bool, name: &str) -> Result<Jit> {
        let engine = unsafe { mlirExecutionEngineCreate(module.to_raw(), opt_level.min(3) as i32, 0, std::ptr::null(), keep_object, false) };
        if engine.ptr.is_null() {
            return Err(MlirError::Jit(format!("cannot create the execution engine for `{name}`")));
        }
        // The engine compiles lazily: the lookup makes the code now, once.
        let ciface = format!("_mlir_ciface_{name}");
        let entry = unsafe { mlir_sys::mlirExecutionEngineLookupPacked(engine, string_ref(&ciface)) };
        if entry.is_null() {
            unsafe { mlirExecutionEngineDestroy(engine) };
            return Err(MlirError::Jit(format!("no entry point for `{name}`")));
        }
        // SAFETY: the execution engine's packed wrapper has the C type `void (void **)`.
        let entry = unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut *mut c_void)>(entry) };
        Ok(Jit { engine, entry })
    }

    /// Calls the entry point.
    ///
    /// # Safety
    /// `packed` holds a pointer to each argument of the function's C interface, each valid
    /// for the call.
    pub(crate) unsafe fn call(&self, packed: &mut [*mut c_void]) {
        unsafe { (self.entry)(packed.as_mut_ptr()) }
    }
}

impl std::fmt::Debug for CpuKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuKernel").field("func", &self.func.name).field("threaded", &self.threaded).finish()
    }
}

/// One argument prepared for the call: where its data lives and how to write it back.
enum Prepared {
    /// The caller's array, passed in place.
    InPlace { ptr: *mut u8, len: usize },
    /// A converted copy (other integer width, f16/bf16 bits), written back after the call.
    Copy { name: String, data: Vec<u8>, len: usize, back: fn(&[u8], &mut Array) },
    /// A scalar.
    Scalar([u8; 8]),
}

unsafe extern "C" {
    fn dlopen(filename: *const std::ffi::c_char, flags: std::ffi::c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const std::ffi::c_char) -> *mut c_void;
}

/// Sets libomp's blocktime for the calling thread (`kmp_set_blocktime`, looked up once in
/// the loaded runtime); does nothing if the runtime does not export it.
fn set_openmp_blocktime(ms: i32) {
    static SET: std::sync::OnceLock<Option<unsafe extern "C" fn(std::ffi::c_int)>> = std::sync::OnceLock::new();
    let set = SET.get_or_init(|| {
        // RTLD_DEFAULT: the runtime was loaded with its symbols global.
        let f = unsafe { dlsym(std::ptr::null_mut(), c"kmp_set_blocktime".as_ptr()) };
        // SAFETY: libomp's `void kmp_set_blocktime(int)`.
        (!f.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn(std::ffi::c_int)>(f) })
    });
    if let Some(f) = set {
        unsafe { f(ms) }
    }
}

static OPENMP_RUNTIME: std::sync::OnceLock<std::result::Result<(), String>> = std::sync::OnceLock::new();

/// Loads the OpenMP runtime into the process once, with its symbols global, so that every
/// engine resolves `__kmpc_*` from it; it is never unloaded (its thread team outlives any
/// one kernel).
fn load_openmp_runtime(path: &str) -> Result<()> {
    let r = OPENMP_RUNTIME.get_or_init(|| {
        if !std::path::Path::new(path).exists() {
            return Err(format!("OpenMP runtime `{path}` not found (Debian package libomp-22-dev; scripts/install-deps)"));
        }
        let c = std::ffi::CString::new(path).map_err(|e| e.to_string())?;
        const RTLD_NOW: std::ffi::c_int = 2;
        const RTLD_GLOBAL: std::ffi::c_int = 0x100;
        if unsafe { dlopen(c.as_ptr(), RTLD_NOW | RTLD_GLOBAL) }.is_null() {
            return Err(format!("cannot load the OpenMP runtime `{path}`"));
        }
        Ok(())
    });
    r.clone().map_err(MlirError::Jit)
}

fn string_ref(s: &str) -> MlirStringRef {
    MlirStringRef { data: s.as_ptr() as *const _, length: s.len() }
}

#[repr(C)]
struct Descriptor {
    allocated: *mut u8,
    aligned: *mut u8,
    offset: i64,
    size: i64,
    stride: i64,
}

fn to_bytes<T: Copy>(v: &[T]) -> Vec<u8> {
    let n = std::mem::size_of_val(v);
    let mut out = vec![0u8; n];
    // Plain old data (integers and u16 bits) copied byte for byte.
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr() as *const u8, out.as_mut_ptr(), n) };
    out
}

fn from_bytes<T: Copy + Default>(b: &[u8]) -> Vec<T> {
    let n = b.len() / std::mem::size_of::<T>();
    let mut out = vec![T::default(); n];
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), out.as_mut_ptr() as *mut u8, n * std::mem::size_of::<T>()) };
    out
}

impl CpuKernel {
    /// Translates, verifies, lowers and JIT-compiles a Stage-III function.
    pub fn compile(func: &Func, opts: &CpuOptions) -> Result<CpuKernel> {
        let ctx = new_context();
        let (mut module, threaded) = cpu_module(&ctx, func, opts)?;
        let sig = signature(func)?;
        run_pipeline(&ctx, &mut module, CPU_PIPELINE)?;
        if threaded {
            load_openmp_runtime(&opts.openmp_runtime.clone().unwrap_or_else(default_openmp_runtime))?;
        }
        let jit = Jit::new(&module, opts.opt_level, opts.keep_object, &func.name)?;
        Ok(CpuKernel {
            jit,
            func: func.clone(),
            sig,
            threaded,
            object: opts.keep_object,
            blocktime: opts.openmp_blocktime_ms,
        })
    }

    /// Writes the kernel's machine code as an object file (ELF on Linux) to `path`, for a
    /// disassembler. Needs [`CpuOptions::keep_object`].
    pub fn write_object(&self, path: &std::path::Path) -> Result<()> {
        if !self.object {
            return Err(MlirError::Jit("the kernel was compiled without `keep_object`".into()));
        }
        let name = path.to_str().ok_or_else(|| MlirError::Jit(format!("path `{}` is not UTF-8", path.display())))?;
        let file = MlirStringRef { data: name.as_ptr().cast(), length: name.len() };
        unsafe { mlir_sys::mlirExecutionEngineDumpToObjectFile(self.jit.engine, file) };
        if !path.exists() {
            return Err(MlirError::Jit(format!("the engine wrote no object to `{name}`")));
        }
        Ok(())
    }

    /// Whether the kernel runs loops on the OpenMP runtime's threads.
    pub fn is_threaded(&self) -> bool {
        self.threaded
    }

    /// The function this kernel runs.
    pub fn func(&self) -> &Func {
        &self.func
    }

    /// Runs the kernel on `args`, updating the arrays in place. Arguments are checked first:
    /// every scalar present and in range, every array present, of the buffer's dtype (any
    /// integer width for integer buffers) and at least as long as each buffer bound to it.
    pub fn run(&self, args: &mut Args) -> Result<()> {
        self.run_timed(args).map(|_| ())
    }

    /// [`CpuKernel::run`], and where the time went: preparing the arguments (`upload`), the
    /// call (`kernel`) and copying converted arrays back (`download`).
    pub fn run_timed(&self, args: &mut Args) -> Result<RunTimes> {
        let start = Instant::now();
        let mut prepared = Vec::with_capacity(self.sig.len());
        for (p, abi) in self.sig.iter().enumerate() {
            prepared.push(self.prepare(p, abi, args)?);
        }
        // Packed arguments: one pointer per LLVM-level argument; a memref is five.
        let mut descs: Vec<Descriptor> = Vec::new();
        let mut scalars: Vec<[u8; 8]> = Vec::new();
        for p in &mut prepared {
            match p {
                Prepared::InPlace { ptr, len } => descs.push(Descriptor { allocated: *ptr, aligned: *ptr, offset: 0, size: *len as i64, stride: 1 }),
                Prepared::Copy { data, len, .. } => {
                    let ptr = data.as_mut_ptr();
                    descs.push(Descriptor { allocated: ptr, aligned: ptr, offset: 0, size: *len as i64, stride: 1 })
                }
                Prepared::Scalar(v) => scalars.push(*v),
            }
        }
        // Packed arguments of the C interface: a pointer to each argument, where a memref
        // argument is a pointer to its descriptor.
        let mut desc_ptrs: Vec<*mut Descriptor> = descs.iter_mut().map(|d| d as *mut Descriptor).collect();
        let mut packed: Vec<*mut c_void> = Vec::new();
        let (mut di, mut si) = (0, 0);
        for p in &prepared {
            match p {
                Prepared::Scalar(_) => {
                    packed.push(scalars[si].as_mut_ptr() as *mut c_void);
                    si += 1;
                }
                _ => {
                    packed.push(&mut desc_ptrs[di] as *mut *mut Descriptor as *mut c_void);
                    di += 1;
                }
            }
        }
        // SAFETY: `packed` holds a pointer to each argument of the entry's signature, each
        // valid for the call (the arrays were checked against the buffers bound to them).
        let called = Instant::now();
        if let (true, Some(ms)) = (self.threaded, self.blocktime) {
            set_openmp_blocktime(ms);
        }
        unsafe { self.jit.call(&mut packed) };
        let returned = Instant::now();
        for p in prepared {
            if let Prepared::Copy { name, data, back, .. } = p {
                if let Some(a) = args.arrays.get_mut(&name) {
                    back(&data, a);
                }
            }
        }
        Ok(RunTimes { upload: called - start, kernel: returned - called, download: returned.elapsed(), ..RunTimes::default() })
    }

    fn prepare(&self, p: usize, abi: &AbiParam, args: &mut Args) -> Result<Prepared> {
        let bad = |message: String| MlirError::BadArgument { param: abi.name.clone(), message };
        match abi.kind {
            ArgKind::Scalar(d) => {
                let s = *args.scalars.get(&abi.name).ok_or_else(|| bad("missing scalar".into()))?;
                let mut out = [0u8; 8];
                match (d, s) {
                    (DType::I32, Scalar::Int(x)) => {
                        let v = i32::try_from(x).map_err(|_| bad(format!("{x} does not fit in i32")))?;
                        out[..4].copy_from_slice(&v.to_ne_bytes());
                    }
                    (DType::I64, Scalar::Int(x)) => out.copy_from_slice(&x.to_ne_bytes()),
                    (DType::F32, Scalar::Int(x)) => out[..4].copy_from_slice(&(x as f32).to_ne_bytes()),
                    (DType::F32, Scalar::Float(x)) => out[..4].copy_from_slice(&(x as f32).to_ne_bytes()),
                    (DType::F64, Scalar::Int(x)) => out.copy_from_slice(&(x as f64).to_ne_bytes()),
                    (DType::F64, Scalar::Float(x)) => out.copy_from_slice(&x.to_ne_bytes()),
                    (DType::F16, Scalar::Float(x)) => out[..2].copy_from_slice(&f16::from_f64(x).to_bits().to_ne_bytes()),
                    (DType::BF16, Scalar::Float(x)) => out[..2].copy_from_slice(&bf16::from_f64(x).to_bits().to_ne_bytes()),
                    (DType::Bool, Scalar::Bool(x)) => out[0] = x as u8,
                    (d, s) => return Err(bad(format!("expected a {d} value, found {s:?}"))),
                }
                Ok(Prepared::Scalar(out))
            }
            ArgKind::Buffer(d) => {
                let mut needed = 0usize;
                let mut bound = false;
                for (h, b) in self.func.buffers.iter() {
                    if b.storage == Storage::Param(p) {
                        bound = true;
                        let n = match scalar_len(&self.func, b, args) {
                            Some(n) => n,
                            None => sparsec_ir::args::buffer_len(&self.func, h, args)
                                .map_err(|e| MlirError::Size(e.to_string()))?,
                        };
                        needed = needed.max(n);
                    }
                }
                let Some(a) = args.arrays.get_mut(&abi.name) else {
                    if bound {
                        return Err(bad("missing array".into()));
                    }
                    return Ok(Prepared::Copy { name: String::new(), data: Vec::new(), len: 0, back: |_, _| {} });
                };
                let len = a.len();
                if len < needed {
                    return Err(bad(format!("has {len} elements, the buffers bound to it need {needed}")));
                }
                let name = abi.name.clone();
                Ok(match (d, a) {
                    (DType::I32, Array::I32(v)) => Prepared::InPlace { ptr: v.as_mut_ptr() as *mut u8, len },
                    (DType::I64, Array::I64(v)) => Prepared::InPlace { ptr: v.as_mut_ptr() as *mut u8, len },
                    (DType::F32, Array::F32(v)) => Prepared::InPlace { ptr: v.as_mut_ptr() as *mut u8, len },
                    (DType::F64, Array::F64(v)) => Prepared::InPlace { ptr: v.as_mut_ptr() as *mut u8, len },
                    (DType::Bool, Array::Bool(v)) => Prepared::InPlace { ptr: v.as_mut_ptr() as *mut u8, len },
                    (DType::I32, Array::I64(v)) => {
                        let c: Vec<i32> = v.iter().map(|&x| x as i32).collect();
                        let back = |b: &[u8], a: &mut Array| {
                            if let Array::I64(v) = a {
                                *v = from_bytes::<i32>(b).into_iter().map(i64::from).collect();
                            }
                        };
                        Prepared::Copy { name, data: to_bytes(&c), len, back }
                    }
                    (DType::I64, Array::I32(v)) => {
                        let c: Vec<i64> = v.iter().map(|&x| x as i64).collect();
                        let back = |b: &[u8], a: &mut Array| {
                            if let Array::I32(v) = a {
                                *v = from_bytes::<i64>(b).into_iter().map(|x| x as i32).collect();
                            }
                        };
                        Prepared::Copy { name, data: to_bytes(&c), len, back }
                    }
                    (DType::F16, Array::F16(v)) => {
                        let c: Vec<u16> = v.iter().map(|&x| f16::from_f32(x).to_bits()).collect();
                        let back = |b: &[u8], a: &mut Array| {
                            if let Array::F16(v) = a {
                                *v = from_bytes::<u16>(b).into_iter().map(|x| f16::from_bits(x).to_f32()).collect();
                            }
                        };
                        Prepared::Copy { name, data: to_bytes(&c), len, back }
                    }
                    (DType::BF16, Array::BF16(v)) => {
                        let c: Vec<u16> = v.iter().map(|&x| bf16::from_f32(x).to_bits()).collect();
                        let back = |b: &[u8], a: &mut Array| {
                            if let Array::BF16(v) = a {
                                *v = from_bytes::<u16>(b).into_iter().map(|x| bf16::from_bits(x).to_f32()).collect();
                            }
                        };
                        Prepared::Copy { name, data: to_bytes(&c), len, back }
                    }
                    (d, a) => return Err(bad(format!("expected a {d} array, found {}", a.dtype()))),
                })
            }
        }
    }
}

/// The storage length of a dense buffer whose shape only uses integer scalars (the common
/// Stage-III case), without copying the arrays as the interpreter's sizing does; `None` when
/// the shape needs more (then the interpreter sizes it).
fn scalar_len(func: &Func, b: &sparsec_ir::Buffer, args: &Args) -> Option<usize> {
    fn eval(func: &Func, e: &Expr, args: &Args) -> Option<i64> {
        Some(match e {
            Expr::Int(v, _) => *v,
            Expr::Var(v) => {
                let name = &func.vars.try_get(*v)?.name;
                func.params.iter().find(|p| p.kind == ParamKind::Scalar(*v))?;
                match args.scalars.get(name)? {
                    Scalar::Int(x) => *x,
                    _ => return None,
                }
            }
            Expr::Cast(d, x) if d.is_int() => eval(func, x, args)?,
            Expr::Binary(op, x, y) => {
                let (a, c) = (eval(func, x, args)?, eval(func, y, args)?);
                match op {
                    BinOp::Add => a.checked_add(c)?,
                    BinOp::Sub => a.checked_sub(c)?,
                    BinOp::Mul => a.checked_mul(c)?,
                    BinOp::Div => a.checked_div(c)?,
                    BinOp::FloorDiv => a.checked_div_euclid(c).filter(|_| c > 0)?,
                    BinOp::FloorMod => a.checked_rem_euclid(c).filter(|_| c > 0)?,
                    BinOp::Min => a.min(c),
                    BinOp::Max => a.max(c),
                    _ => return None,
                }
            }
            _ => return None,
        })
    }
    let Layout::Dense(shape) = &b.layout else { return None };
    let mut n = 1i64;
    for d in shape {
        let d = eval(func, d, args)?;
        if d < 0 {
            return None;
        }
        n = n.checked_mul(d)?;
    }
    if let Some(e) = &b.extra_storage {
        n = n.checked_add(eval(func, e, args)?)?;
    }
    usize::try_from(n).ok()
}

/// Runs a Stage-III function on the CPU with the interpreter's contract: the same arguments
/// as `sparsec_interp::run`, and every array after the run (parameters in order, then any
/// extra arrays of `args`) with the scalars.
pub fn run_cpu(func: &Func, args: &Args) -> Result<Args> {
    let kernel = CpuKernel::compile(func, &CpuOptions::default())?;
    let mut work = args.clone();
    kernel.run(&mut work)?;
    let mut out = Args::new();
    for p in &func.params {
        if let Some(a) = work.arrays.shift_remove(&p.name) {
            out.arrays.insert(p.name.clone(), a);
        }
    }
    out.arrays.extend(work.arrays);
    out.scalars = work.scalars;
    Ok(out)
}
