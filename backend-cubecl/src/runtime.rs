//! Compiled programs: CubeCL kernels defined from the plans, argument upload, validation,
//! launch and read-back, and source emission through CubeCL's compilers.

use crate::expand::{global_buf, scalar_arg, ExpandGen};
use crate::lower::{LowerError, Walker};
use crate::plan::{self, ArgSource, KernelPlan, LaunchPlan, ProgramPlan};
use sparsec_ir::args::{self as validate, ArgsError as ValidateError};
use crate::CubeclError;
use cubecl::prelude::*;
use cubecl::__private::Runtime as _;
use cubecl::server::Handle;
use sparsec_ir::data::{Args, Array, RunTimes, Scalar};
use sparsec_ir::{DType, Func, ParamKind, VarId};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Failures of the device or of CubeCL.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// CubeCL reported an error (compilation or execution).
    #[error("CubeCL: {0}")]
    Server(String),
    /// The launch shape does not fit the device.
    #[error("launch of kernel `{kernel}`: {message}")]
    Launch {
        /// The kernel.
        kernel: String,
        /// What is wrong.
        message: String,
    },
    /// An array too large for the device.
    #[error("array `{0}` is too large for the device")]
    TooLarge(String),
    /// The driver cut a loop short: on lavapipe a unit ran 65,535 loop iterations, its
    /// per-invocation limit. The results are not returned.
    #[error("kernel `{0}`: a unit ran 65,535 loop iterations, lavapipe's per-invocation limit; its loops were cut short, so no result is returned (schedule the work over more units)")]
    LoopLimit(String),
    /// CubeCL panicked.
    #[error("CubeCL panicked: {0}")]
    Panic(String),
    /// An integer division or remainder by zero happened (an error in the IR).
    #[error("kernel `{0}`: integer division by zero")]
    DivisionByZero(String),
    /// A float value computed on a target that assumes finite floats (WGSL) was inf or NaN,
    /// or a divisor or a `log`/`pow` operand was subnormal (which WGSL may flush to zero).
    #[error("kernel `{0}`: a value computed was inf or NaN, or a divisor or a log/pow operand was subnormal, which WGSL does not define (implementations may assume finite floats and flush subnormals), so the results are not trusted and none is returned; run it on interp, mlir-cpu or CUDA")]
    NonFinite(String),
    /// An atomic sum into an argument ended inf or NaN on a target that assumes finite floats.
    #[error("an atomic sum into `{0}` is inf or NaN, which WGSL does not define, so no result is returned; run it on interp, mlir-cpu or CUDA")]
    NonFiniteSum(String),
    /// A float scalar argument is inf or NaN (or overflows its dtype) on a WGSL target.
    #[error("scalar `{0}` is inf or NaN (in its dtype), which WGSL does not define; run it on interp, mlir-cpu or CUDA")]
    NonFiniteScalar(String),
    /// The kernel never ran and CubeCL reported nothing (a panic in its compiler thread).
    #[error("kernel `{0}` did not run: CubeCL failed without an error (see its log); no result is returned")]
    NotRun(String),
}

/// The message of a caught panic.
fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "unknown panic".into())
}

/// Runs `f`, turning a panic into [`RuntimeError::Panic`].
fn guarded<T>(f: impl FnOnce() -> Result<T, CubeclError>) -> Result<T, CubeclError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| Err(RuntimeError::Panic(panic_message(p)).into()))
}

/// What kernels on a runtime check at run time beyond the IR's own errors.
#[derive(Clone, Copy, Debug, Default, Hash, PartialEq, Eq)]
pub(crate) struct Guards {
    /// Loops report truncation (drivers such as lavapipe cut long loops short silently).
    pub(crate) loops: bool,
    /// Every float value computed is checked to be finite: WGSL lets implementations assume
    /// no inf or NaN occurs (lavapipe's shader compiler does), so where one would, results
    /// are undefined and the run is refused.
    pub(crate) finite: bool,
}

/// The guards kernels on `client` need (wgpu: both; CUDA computes IEEE floats, no loop cap).
fn guards(client: &Client) -> Guards {
    let wgsl = client.name().starts_with("wgpu");
    Guards { loops: wgsl, finite: wgsl }
}

/// The default wgpu client (Mesa's lavapipe when no GPU is present).
pub fn wgpu_client() -> Client {
    <cubecl::wgpu::WgpuRuntime>::client(&Default::default())
}

/// The first CUDA device.
///
/// Errors with [`CubeclError::Unavailable`] when no CUDA driver library or no device is
/// found (CubeCL itself panics then).
#[cfg(feature = "cuda")]
pub fn cuda_client() -> Result<Client, CubeclError> {
    // SAFETY: loads the driver library, if any, and calls nothing else.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(CubeclError::Unavailable("no CUDA driver library (libcuda.so) was found".into()));
    }
    let count = cudarc::driver::result::init().and_then(|_| cudarc::driver::result::device::get_count());
    match count {
        Ok(n) if n > 0 => Ok(cubecl::cuda::CudaRuntime::client(&Default::default())),
        Ok(_) => Err(CubeclError::Unavailable("the CUDA driver reports no device".into())),
        Err(e) => Err(CubeclError::Unavailable(format!("the CUDA driver failed to start: {e}"))),
    }
}

/// Grid and cube dimensions of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchShape {
    /// Cubes along x, y, z.
    pub cubes: [u32; 3],
    /// Units per cube along x, y, z.
    pub units: [u32; 3],
    /// Whether `blockIdx.x` spilled into y (then kernels read the linear cube position).
    pub spill_x: bool,
}

/// Words of a launch's status buffer: \[loop cut short, ran, integer division by zero, value
/// not finite, always zero\] (see `ExpandGen::set_status`).
pub(crate) const STATUS_WORDS: usize = 5;

/// Most cubes along one grid dimension that every runtime accepts.
const MAX_GRID: u64 = 65_535;

/// One kernel of a compiled program.
#[derive(Clone)]
pub struct CompiledKernel {
    program: Arc<ProgramPlan>,
    index: usize,
    hash: u64,
    compilations: Arc<AtomicUsize>,
}

impl std::fmt::Debug for CompiledKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledKernel").field("name", &self.plan().name).field("hash", &self.hash).finish()
    }
}

/// The kernels of one function, ready to launch.
#[derive(Clone, Debug)]
pub struct CompiledProgram {
    program: Arc<ProgramPlan>,
    /// The program at Stage I, when compiled from it: launches also prove its accesses.
    accesses: Option<Arc<Func>>,
    kernels: Vec<CompiledKernel>,
    compilations: Arc<AtomicUsize>,
}

/// The CubeCL kernel: a plan expanded into CubeCL IR when the runtime compiles it.
struct IrKernel {
    program: Arc<ProgramPlan>,
    index: usize,
    hash: u64,
    spill_x: bool,
    alloc_sizes: Vec<(sparsec_ir::BufferId, usize)>,
    /// Whether the kernel reports into an extra status buffer (the last argument): that it
    /// ran, and (with `guards`) whether a loop was cut short or a value was not finite.
    status: bool,
    /// The run-time checks the target needs.
    guards: Guards,
    settings: KernelSettings,
    /// `None` when compiling sources offline, with no device.
    device_properties: Option<Arc<DeviceProperties>>,
    target_properties: Arc<TargetProperties>,
    compilations: Arc<AtomicUsize>,
}

impl KernelMetadata for IrKernel {
    fn name(&self) -> &'static str {
        "sparsec_kernel"
    }

    fn id(&self) -> KernelId {
        KernelId::new::<Self>()
            .address_type(self.settings.address_type)
            .cube_dim(self.settings.cube_dim)
            .mode(self.settings.execution_mode)
            .info((self.hash, self.spill_x, self.status, self.guards, self.alloc_sizes.iter().map(|(b, n)| (b.index(), *n)).collect::<Vec<_>>()))
    }

    fn address_type(&self) -> ElemType {
        self.settings.address_type.unsigned_type()
    }
}

impl CubeKernel for IrKernel {
    fn define(&self) -> KernelDefinition {
        self.compilations.fetch_add(1, Ordering::Relaxed);
        match self.try_define() {
            Ok(d) => d,
            // Lowering was checked at `compile` time; an error here is a bug. CubeCL turns
            // the panic into a compilation error that reaches the caller on read-back.
            Err(e) => panic!("sparsec kernel expansion failed: {e}"),
        }
    }
}

impl IrKernel {
    fn try_define(&self) -> Result<KernelDefinition, LowerError> {
        let k = &self.program.kernels[self.index];
        let name = self.id().entrypoint_name(&k.name);
        let mut builder = KernelBuilder::new(self.settings.clone().kernel_name(name));
        builder.runtime_properties(self.target_properties.as_ref().clone());
        if let Some(dp) = &self.device_properties {
            builder.device_properties(dp);
        }
        let (args, scalars) = register_args(&mut builder, &self.program, k)?;
        let status = if self.status { Some(global_buf(&mut builder, DType::I32, false)?) } else { None };
        expand_body(&builder.scope, &self.program, k, self, args, scalars, status)?;
        Ok(builder.build())
    }
}

fn register_args(
    builder: &mut KernelBuilder,
    program: &ProgramPlan,
    k: &KernelPlan,
) -> Result<(Vec<Box<dyn crate::expand::DynBuf>>, Vec<(VarId, crate::expand::Val)>), LowerError> {
    let mut args = Vec::new();
    for b in &k.bufs {
        args.push(global_buf(builder, b.dtype, b.atomic)?);
    }
    let mut scalars = Vec::new();
    for (_, v) in &k.scalars {
        let d = program.func.vars[*v].dtype;
        scalars.push((*v, scalar_arg(builder, d)?));
    }
    Ok((args, scalars))
}

fn expand_body(
    scope: &Scope,
    program: &ProgramPlan,
    k: &KernelPlan,
    kernel: &IrKernel,
    args: Vec<Box<dyn crate::expand::DynBuf>>,
    scalars: Vec<(VarId, crate::expand::Val)>,
    status: Option<Box<dyn crate::expand::DynBuf>>,
) -> Result<(), LowerError> {
    let mut g = ExpandGen::new(scope, args);
    if let Some(st) = status {
        g.set_status(st, kernel.guards.loops, kernel.guards.finite)?;
    }
    let mut w = Walker::new(&program.func, k);
    w.spill_x = kernel.spill_x;
    w.alloc_sizes = kernel.alloc_sizes.iter().copied().collect();
    for (v, val) in scalars {
        w.bind_var(v, val);
    }
    w.kernel(&mut g)
}

fn settings_for(shape: &LaunchShape) -> KernelSettings {
    let [x, y, z] = shape.units;
    KernelSettings::new(CubeDim::new_3d(x, y, z).into(), ExecutionMode::Checked, AddressType::U32)
}

fn kernel_hash(program: &ProgramPlan, k: &KernelPlan) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    // The kernel's IR (with the declarations it refers to) identifies it.
    format!("{:?}", k).hash(&mut h);
    format!("{:?}|{:?}", program.func.vars, program.func.buffers).hash(&mut h);
    h.finish()
}

impl CompiledProgram {
    /// Plans a Stage-III function, whose axes describe the sparse structure that launches
    /// validate; `accesses` is the same program at Stage I, whose accesses launches prove in
    /// range too.
    pub(crate) fn new(stage3: &Func, accesses: Option<Func>) -> Result<CompiledProgram, CubeclError> {
        let program = Arc::new(plan::plan(stage3)?);
        let compilations = Arc::new(AtomicUsize::new(0));
        let mut kernels = Vec::new();
        for (index, k) in program.kernels.iter().enumerate() {
            // Dry run of the lowering so that errors come out now, not at launch.
            check_lowering(&program, k)?;
            kernels.push(CompiledKernel {
                program: program.clone(),
                index,
                hash: kernel_hash(&program, k),
                compilations: compilations.clone(),
            });
        }
        Ok(CompiledProgram { program, accesses: accesses.map(Arc::new), kernels, compilations })
    }

    /// The kernels, in launch order.
    pub fn kernels(&self) -> &[CompiledKernel] {
        &self.kernels
    }

    /// How many kernel definitions CubeCL asked for so far (one per kernel and launch shape
    /// not yet in its cache).
    pub fn compilations(&self) -> usize {
        self.compilations.load(Ordering::Relaxed)
    }

    /// The grid and cube dimensions each kernel gets for these arguments.
    pub fn launch_shapes(&self, args: &Args) -> Result<Vec<LaunchShape>, CubeclError> {
        let ints = validate::scalar_values(&self.program.func, args)?;
        Ok(self.kernels.iter().map(|k| k.shape(&ints)).collect::<Result<_, _>>()?)
    }

    /// The Stage-III function.
    pub fn func(&self) -> &Func {
        &self.program.func
    }

    /// Validates `args`, uploads them, launches every kernel in order and returns every array
    /// after the run (inputs included), like `sparsec_interp::run`.
    pub fn run(&self, client: &Client, args: &Args) -> Result<Args, CubeclError> {
        self.run_timed(client, args).map(|(out, _)| out)
    }

    /// [`CompiledProgram::run`], and where the time went: checks, conversion and upload
    /// (`upload`), the kernels until their statuses are read (`kernel`), read-back
    /// (`download`).
    pub fn run_timed(&self, client: &Client, args: &Args) -> Result<(Args, RunTimes), CubeclError> {
        let start = Instant::now();
        let prepared = self.prepare(args)?;
        let func = &self.program.func;
        // Upload.
        let mut handles: HashMap<ArgSource, (Handle, usize)> = HashMap::new();
        for (src, arr) in &prepared.arrays {
            let bytes = array_bytes(arr);
            let handle = if bytes.is_empty() { client.empty(4) } else { client.create_from_slice(&bytes) };
            handles.insert(*src, (handle, arr.len()));
        }
        let uploaded = Instant::now();
        let mut statuses = Vec::new();
        for k in &self.kernels {
            statuses.push(guarded(|| k.launch(client, &handles, &prepared.scalars))?);
        }
        for (k, st) in self.kernels.iter().zip(statuses) {
            k.check_status(client, st)?;
        }
        let finished = Instant::now();
        // Read back.
        let finite = guards(client).finite;
        let mut out = args.clone();
        for (p, param) in func.params.iter().enumerate() {
            if param.kind != ParamKind::Handle {
                continue;
            }
            let Some((h, len)) = handles.get(&ArgSource::Param(p)) else { continue };
            let bytes = guarded(|| client.read_one(h.clone()).map_err(|e| RuntimeError::Server(format!("{e:?}")).into()))?;
            let d = prepared.dtypes[&ArgSource::Param(p)];
            let arr = bytes_array(&bytes, d, *len);
            // Atomic sums are added inside the atomic, where no check sees them.
            if finite && self.kernels.iter().any(|k| k.plan().bufs.iter().any(|b| b.atomic && b.source == ArgSource::Param(p))) && !all_finite(&arr) {
                return Err(RuntimeError::NonFiniteSum(param.name.clone()).into());
            }
            // Keep the caller's integer width for index arrays that were converted.
            let arr = match (args.arrays.get(&param.name), arr) {
                (Some(Array::I64(_)), Array::I32(v)) => Array::I64(v.into_iter().map(i64::from).collect()),
                (_, a) => a,
            };
            out.arrays.insert(param.name.clone(), arr);
        }
        let times = RunTimes { upload: uploaded - start, kernel: finished - uploaded, download: finished.elapsed(), ..RunTimes::default() };
        Ok((out, times))
    }

    /// Checks `args` and converts them to the kernels' element types.
    fn prepare(&self, args: &Args) -> Result<Prepared, CubeclError> {
        let func = &self.program.func;
        validate::check_structure(func, args)?;
        if let Some(f) = &self.accesses {
            validate::check_accesses(f, args)?;
        }
        let scalars = validate::scalar_values(func, args)?;
        let mut arrays = Vec::new();
        let mut dtypes = HashMap::new();
        for (p, param) in func.params.iter().enumerate() {
            if param.kind != ParamKind::Handle {
                continue;
            }
            let Some(d) = self.program.param_dtypes[p] else { continue };
            let a = args.arrays.get(&param.name).ok_or_else(|| ValidateError::Missing(param.name.clone()))?;
            let a = convert(&param.name, a, d)?;
            let mut needed = 0usize;
            for (b, buf) in func.buffers.iter() {
                if buf.storage == sparsec_ir::Storage::Param(p) {
                    let n = sparsec_ir::args::buffer_len(func, b, args).map_err(|e| ValidateError::Structure {
                        param: param.name.clone(),
                        message: e.to_string(),
                    })?;
                    needed = needed.max(n);
                }
            }
            if a.len() < needed {
                return Err(ValidateError::Length { param: param.name.clone(), needed, found: a.len() }.into());
            }
            if a.len() > u32::MAX as usize / 8 {
                return Err(RuntimeError::TooLarge(param.name.clone()).into());
            }
            dtypes.insert(ArgSource::Param(p), d);
            arrays.push((ArgSource::Param(p), a));
        }
        for g in &self.program.globals {
            let buf = &func.buffers[*g];
            let n = sparsec_ir::args::buffer_len(func, *g, args).map_err(|e| ValidateError::Structure {
                param: buf.name.clone(),
                message: e.to_string(),
            })?;
            let fill = match &buf.default {
                None => 0.0,
                Some(e) => match e {
                    sparsec_ir::Expr::Float(x, _) => *x,
                    sparsec_ir::Expr::Int(x, _) => *x as f64,
                    other => plan::host_eval(other, &scalars).map(|x| x as f64).unwrap_or(0.0),
                },
            };
            dtypes.insert(ArgSource::Global(*g), buf.dtype);
            arrays.push((ArgSource::Global(*g), filled(buf.dtype, n, fill)));
        }
        Ok(Prepared { arrays, dtypes, scalars: ScalarValues { ints: scalars, args: args.scalars.clone() } })
    }

    /// WGSL of every kernel, compiled by CubeCL's WGSL compiler.
    pub fn wgsl(&self) -> Result<String, CubeclError> {
        self.sources(|def| {
            let mut c = cubecl::wgpu::WgslCompiler::default();
            cubecl::Compiler::compile(&mut c, def, &Default::default())
                .map(|r| r.to_string())
                .map_err(|e| format!("{e:?}"))
        }, <cubecl::wgpu::WgpuRuntime>::target_properties())
    }

    /// CUDA C++ of every kernel, compiled by CubeCL's C++ compiler.
    pub fn cuda(&self) -> Result<String, CubeclError> {
        self.sources(|def| {
            let mut c = cubecl_cpp::shared::CppCompiler::<cubecl_cpp::target::Cuda>::default();
            cubecl::Compiler::compile(&mut c, def, &Default::default())
                .map(|r| r.to_string())
                .map_err(|e| format!("{e:?}"))
        }, TargetProperties::default())
    }

    fn sources(
        &self,
        mut compile: impl FnMut(KernelDefinition) -> Result<String, String>,
        target: TargetProperties,
    ) -> Result<String, CubeclError> {
        let mut out = String::new();
        for k in &self.kernels {
            let plan = k.plan();
            // A representative launch shape (scalars unknown): the per-tag extents that are
            // literals, 1 otherwise.
            let shape = representative_shape(plan);
            let kernel = k.ir_kernel(&shape, Vec::new(), false, Guards::default(), None, Arc::new(target.clone()));
            let def = kernel.try_define()?;
            let src = guarded(|| compile(def).map_err(|e| RuntimeError::Server(e).into()))?;
            out.push_str(&format!("// kernel {}: {}\n", plan.name, describe_launch(plan)));
            out.push_str(&src);
            out.push('\n');
        }
        Ok(out)
    }
}

fn representative_shape(k: &KernelPlan) -> LaunchShape {
    let units = match &k.launch {
        LaunchPlan::Threads { extents } => {
            let f = |l: &Vec<sparsec_ir::Expr>| l.iter().filter_map(|e| e.as_int()).max().unwrap_or(1).max(1) as u32;
            [f(&extents[3]), f(&extents[4]), f(&extents[5])]
        }
        LaunchPlan::Single => [1, 1, 1],
    };
    LaunchShape { cubes: [1, 1, 1], units, spill_x: false }
}

fn describe_launch(k: &KernelPlan) -> String {
    match &k.launch {
        LaunchPlan::Threads { .. } => "thread-bound loops".into(),
        LaunchPlan::Single => "one unit".into(),
    }
}

fn check_lowering(program: &ProgramPlan, k: &KernelPlan) -> Result<(), LowerError> {
    // Render the kernel as text: the same walk as the expansion, with no device involved.
    let single = ProgramPlan { func: program.func.clone(), kernels: vec![k.clone()], param_dtypes: program.param_dtypes.clone(), globals: program.globals.clone() };
    // Allocations sized by scalars get their size at launch; any size will do here.
    let mut sizes = HashMap::new();
    for b in sized_allocs(program, k) {
        sizes.insert(b, 1);
    }
    match crate::emit::render_with(&single, &sizes) {
        Ok(_) => Ok(()),
        Err(crate::emit::EmitError::Lower(e)) => Err(e),
        Err(crate::emit::EmitError::DType(d)) => Err(LowerError::Unsupported(format!("dtype {d} is not supported"))),
    }
}

/// Allocations of a kernel whose shape depends on scalar parameters only (not literals).
fn sized_allocs(program: &ProgramPlan, k: &KernelPlan) -> Vec<sparsec_ir::BufferId> {
    let mut out = Vec::new();
    let all = [k.prelude.clone(), vec![k.stmt.clone()]].concat();
    sparsec_ir::walk_stmts(&all, &mut |s| {
        if let sparsec_ir::StmtKind::Alloc(b) = s.kind {
            if let sparsec_ir::Layout::Dense(shape) = &program.func.buffers[b].layout {
                let literal = shape.iter().all(|e| e.as_int().is_some());
                if !literal && shape.iter().all(|e| plan::host_evaluable(&program.func, e)) {
                    out.push(b);
                }
            }
        }
    });
    out
}

pub(crate) struct ScalarValues {
    pub(crate) ints: HashMap<VarId, i64>,
    pub(crate) args: indexmap::IndexMap<String, Scalar>,
}

struct Prepared {
    arrays: Vec<(ArgSource, Array)>,
    dtypes: HashMap<ArgSource, DType>,
    scalars: ScalarValues,
}

impl CompiledKernel {
    /// The kernel's plan.
    fn plan(&self) -> &KernelPlan {
        &self.program.kernels[self.index]
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.plan().name
    }

    /// Hash of the kernel's IR, part of its CubeCL `KernelId`.
    pub fn ir_hash(&self) -> u64 {
        self.hash
    }

    fn ir_kernel(
        &self,
        shape: &LaunchShape,
        alloc_sizes: Vec<(sparsec_ir::BufferId, usize)>,
        status: bool,
        guards: Guards,
        dp: Option<Arc<DeviceProperties>>,
        tp: Arc<TargetProperties>,
    ) -> IrKernel {
        IrKernel {
            program: self.program.clone(),
            index: self.index,
            hash: self.hash,
            spill_x: shape.spill_x,
            alloc_sizes,
            status,
            guards,
            settings: settings_for(shape).kernel_name(self.plan().name.clone()),
            device_properties: dp,
            target_properties: tp,
            compilations: self.compilations.clone(),
        }
    }

    /// The launch shape for the given scalar values.
    fn shape(&self, ints: &HashMap<VarId, i64>) -> Result<LaunchShape, RuntimeError> {
        let k = self.plan();
        let bad = |message: String| RuntimeError::Launch { kernel: k.name.clone(), message };
        let eval = |e: &sparsec_ir::Expr| plan::host_eval(e, ints).ok_or_else(|| bad("an extent cannot be evaluated".into()));
        let (mut cubes, units) = match &k.launch {
            LaunchPlan::Single => ([1u64, 1, 1], [1u64, 1, 1]),
            LaunchPlan::Threads { extents } => {
                let mut m = [1u64; 6];
                for (i, list) in extents.iter().enumerate() {
                    for e in list {
                        m[i] = m[i].max(eval(e)?.max(1) as u64);
                    }
                }
                // Loops bound to y or z beyond the grid stride over it (see `lower`).
                let cap = plan::MAX_CUBES_YZ as u64;
                ([m[0], m[1].min(cap), m[2].min(cap)], [m[3], m[4], m[5]])
            }
        };
        let total_units = units[0] * units[1] * units[2];
        if total_units > 1024 {
            return Err(bad(format!("{total_units} units per cube (at most 1024)")));
        }
        let mut spill_x = false;
        if cubes[0] > MAX_GRID {
            let uses_x = matches!(&k.launch, LaunchPlan::Threads { extents } if extents[1].is_empty() && extents[2].is_empty());
            if !uses_x {
                return Err(bad(format!("{} cubes along x with y or z bound", cubes[0])));
            }
            let y = cubes[0].div_ceil(MAX_GRID);
            if y > MAX_GRID {
                return Err(bad(format!("{} cubes", cubes[0])));
            }
            cubes = [MAX_GRID, y, 1];
            spill_x = true;
        }
        for c in cubes {
            if c > MAX_GRID {
                return Err(bad(format!("{c} cubes along one dimension")));
            }
        }
        Ok(LaunchShape {
            cubes: [cubes[0] as u32, cubes[1] as u32, cubes[2] as u32],
            units: [units[0] as u32, units[1] as u32, units[2] as u32],
            spill_x,
        })
    }

    pub(crate) fn launch(
        &self,
        client: &Client,
        handles: &HashMap<ArgSource, (Handle, usize)>,
        scalars: &ScalarValues,
    ) -> Result<Handle, CubeclError> {
        let k = self.plan();
        let func = &self.program.func;
        let shape = self.shape(&scalars.ints)?;
        let mut sizes = Vec::new();
        for b in sized_allocs(&self.program, k) {
            let buf = &func.buffers[b];
            let mut n: i64 = 1;
            if let sparsec_ir::Layout::Dense(shape) = &buf.layout {
                for e in shape {
                    let x = plan::host_eval(e, &scalars.ints).ok_or_else(|| RuntimeError::Launch {
                        kernel: k.name.clone(),
                        message: format!("the size of `{}` cannot be evaluated", buf.name),
                    })?;
                    n = n.saturating_mul(x.max(0));
                }
            }
            sizes.push((b, n.max(1) as usize));
        }
        let guards = guards(client);
        let kernel = self.ir_kernel(&shape, sizes, true, guards, Some(client.properties_shared()), client.target_properties_shared());
        let mut launcher = KernelLauncher::new(kernel.settings.clone());
        launcher.with_scope(|scope| scope.device_properties(client.properties()));
        for b in &k.bufs {
            let Some((h, len)) = handles.get(&b.source) else {
                return Err(ValidateError::Missing(b.name.clone()).into());
            };
            // SAFETY: `len` is the element count of the array uploaded into `h`.
            let arg = unsafe { BufferArg::from_raw_parts(h.clone(), (*len).max(1)) };
            macro_rules! reg {
                ($t:ty) => {
                    if b.atomic {
                        let _ = <[Atomic<$t>] as LaunchArg>::register(arg, &mut launcher);
                    } else {
                        let _ = <[$t] as LaunchArg>::register(arg, &mut launcher);
                    }
                };
            }
            match b.dtype {
                DType::I32 => reg!(i32),
                DType::I64 => reg!(i64),
                DType::F32 => reg!(f32),
                DType::F64 => reg!(f64),
                DType::F16 => {
                    let _ = <[half::f16] as LaunchArg>::register(arg, &mut launcher);
                }
                DType::BF16 => {
                    let _ = <[half::bf16] as LaunchArg>::register(arg, &mut launcher);
                }
                DType::Bool => {
                    launcher.discard();
                    return Err(LowerError::Unsupported("bool buffers".into()).into());
                }
            }
        }
        for (p, v) in &k.scalars {
            let d = func.vars[*v].dtype;
            let name = &func.params[*p].name;
            let s = scalars.args.get(name).copied().unwrap_or(Scalar::Int(0));
            let as_f64 = match s {
                Scalar::Int(x) => x as f64,
                Scalar::Float(x) => x,
                Scalar::Bool(b) => b as u8 as f64,
            };
            let as_i64 = match s {
                Scalar::Int(x) => x,
                Scalar::Float(x) => x as i64,
                Scalar::Bool(b) => b as i64,
            };
            let nonfinite = match d {
                DType::F32 => !(as_f64 as f32).is_finite(),
                DType::F64 => !as_f64.is_finite(),
                _ => false,
            };
            if guards.finite && nonfinite {
                launcher.discard();
                return Err(RuntimeError::NonFiniteScalar(name.clone()).into());
            }
            match d {
                DType::I32 => <i32 as LaunchArg>::register(as_i64 as i32, &mut launcher),
                DType::I64 => <i64 as LaunchArg>::register(as_i64, &mut launcher),
                DType::F32 => <f32 as LaunchArg>::register(as_f64 as f32, &mut launcher),
                DType::F64 => <f64 as LaunchArg>::register(as_f64, &mut launcher),
                d => {
                    launcher.discard();
                    return Err(LowerError::Unsupported(format!("scalar parameters of type {d}")).into());
                }
            }
        }
        let status = client.create_from_slice(&[0u8; 4 * STATUS_WORDS]);
        // SAFETY: `status` holds `STATUS_WORDS` i32s.
        let arg = unsafe { BufferArg::from_raw_parts(status.clone(), STATUS_WORDS) };
        let _ = <[i32] as LaunchArg>::register(arg, &mut launcher);
        let [x, y, z] = shape.cubes;
        launcher.launch(CubeCount::Static(x, y, z), kernel, client);
        Ok(status)
    }

    /// Reads a launch's status buffer: an error when the kernel did not run (a failure CubeCL
    /// swallowed, such as a panic in its compiler thread) or a loop was cut short.
    pub(crate) fn check_status(&self, client: &Client, status: Handle) -> Result<(), CubeclError> {
        let name = &self.plan().name;
        let bytes = guarded(|| client.read_one(status).map_err(|e| RuntimeError::Server(format!("{e}")).into()))?;
        let word = |i: usize| bytes.get(4 * i..4 * i + 4).map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        if word(1) != Some(1) {
            return Err(RuntimeError::NotRun(name.clone()).into());
        }
        if word(0) != Some(0) {
            return Err(RuntimeError::LoopLimit(name.clone()).into());
        }
        if word(2) != Some(0) {
            return Err(RuntimeError::DivisionByZero(name.clone()).into());
        }
        if word(3) != Some(0) {
            return Err(RuntimeError::NonFinite(name.clone()).into());
        }
        Ok(())
    }
}

fn convert(name: &str, a: &Array, d: DType) -> Result<Array, ValidateError> {
    let bad = || ValidateError::DType { param: name.into(), expected: d, found: a.dtype() };
    Ok(match (a, d) {
        (a, d) if a.dtype() == d => a.clone(),
        (Array::I64(v), DType::I32) => Array::I32(
            v.iter()
                .map(|x| i32::try_from(*x))
                .collect::<Result<_, _>>()
                .map_err(|_| ValidateError::Structure { param: name.into(), message: "a value does not fit in i32".into() })?,
        ),
        (Array::I32(v), DType::I64) => Array::I64(v.iter().map(|x| *x as i64).collect()),
        _ => return Err(bad()),
    })
}

/// Whether every float element is finite.
fn all_finite(a: &Array) -> bool {
    match a {
        Array::F32(v) | Array::F16(v) | Array::BF16(v) => v.iter().all(|x| x.is_finite()),
        Array::F64(v) => v.iter().all(|x| x.is_finite()),
        _ => true,
    }
}

fn filled(d: DType, n: usize, v: f64) -> Array {
    match d {
        DType::I32 => Array::I32(vec![v as i32; n]),
        DType::I64 => Array::I64(vec![v as i64; n]),
        DType::F16 => Array::F16(vec![v as f32; n]),
        DType::BF16 => Array::BF16(vec![v as f32; n]),
        DType::F32 => Array::F32(vec![v as f32; n]),
        DType::F64 => Array::F64(vec![v; n]),
        DType::Bool => Array::Bool(vec![v != 0.0; n]),
    }
}

fn array_bytes(a: &Array) -> Vec<u8> {
    match a {
        Array::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Array::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Array::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Array::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Array::F16(v) => v.iter().flat_map(|x| half::f16::from_f32(*x).to_le_bytes()).collect(),
        Array::BF16(v) => v.iter().flat_map(|x| half::bf16::from_f32(*x).to_le_bytes()).collect(),
        Array::Bool(v) => v.iter().flat_map(|x| (*x as i32).to_le_bytes()).collect(),
    }
}

fn bytes_array(b: &[u8], d: DType, len: usize) -> Array {
    fn chunks<const N: usize>(b: &[u8], len: usize) -> impl Iterator<Item = [u8; N]> + '_ {
        b.chunks_exact(N).take(len).map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            a
        })
    }
    match d {
        DType::I32 => Array::I32(chunks::<4>(b, len).map(i32::from_le_bytes).collect()),
        DType::I64 => Array::I64(chunks::<8>(b, len).map(i64::from_le_bytes).collect()),
        DType::F32 => Array::F32(chunks::<4>(b, len).map(f32::from_le_bytes).collect()),
        DType::F64 => Array::F64(chunks::<8>(b, len).map(f64::from_le_bytes).collect()),
        DType::F16 => Array::F16(chunks::<2>(b, len).map(|c| half::f16::from_le_bytes(c).to_f32()).collect()),
        DType::BF16 => Array::BF16(chunks::<2>(b, len).map(|c| half::bf16::from_le_bytes(c).to_f32()).collect()),
        DType::Bool => Array::Bool(chunks::<4>(b, len).map(|c| i32::from_le_bytes(c) != 0).collect()),
    }
}
