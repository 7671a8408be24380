//! The bridge from the CLI to the code generators and runners, each behind a cargo feature.

use crate::Emit;
use clap::ValueEnum;
use sparsec::backend::Backend as Runner;
#[cfg(any(feature = "mlir", feature = "cubecl", feature = "cuda"))]
use sparsec::backend::{Compiled, RunTimes};
use sparsec::driver::{self, AutoSchedule, DriverError, Plan};
#[cfg(any(feature = "mlir", feature = "cubecl", feature = "cuda"))]
use sparsec::ir::data::Args;
use sparsec::ir::{Func, Stage};
use sparsec_schedule::Trace;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// `--auto` values: the default schedules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Auto {
    /// Parallel outer loops, vectorized inner spatial loops.
    Cpu,
    /// Outer loops over blockIdx.x × threadIdx.x (128 units per block).
    Gpu,
}

impl Auto {
    fn schedule(self) -> AutoSchedule {
        match self {
            Auto::Cpu => AutoSchedule::Cpu,
            Auto::Gpu => AutoSchedule::Gpu { threads: driver::GPU_THREADS },
        }
    }
}

/// The plan a trace or `--auto` asks for (the trace wins), else plain lowering.
pub fn plan(trace: Option<Trace>, auto: Option<Auto>) -> Plan {
    match (trace, auto) {
        (Some(t), _) => Plan::Trace(t),
        (None, Some(a)) => Plan::Auto(a.schedule()),
        (None, None) => Plan::Plain,
    }
}

/// `f` at Stage III, lowered by `plan`.
pub fn stage_iii(f: &Func, plan: &Plan) -> Result<Func> {
    let last = driver::lower_with(f, plan)?.into_iter().last().filter(|g| g.stage == Stage::III);
    Ok(last.ok_or_else(|| DriverError::CannotRaise { func: f.name.clone(), at: f.stage, want: Stage::III })?)
}

/// A feature this binary was built without.
#[cfg(not(all(feature = "mlir", feature = "cubecl", feature = "cuda")))]
fn missing(feature: &str) -> Box<dyn std::error::Error> {
    let how = match feature {
        "cuda" => "; build one with `scripts/build-cuda`",
        _ => "; `scripts/sparsec` builds it with every default feature",
    };
    format!("this sparsec was built without the `{feature}` feature{how}").into()
}

/// The text of `f` (Stage III) in the form `emit` names; MLIR carries the locations of
/// `source`'s statements where given.
pub fn emit(f: &Func, emit: Emit, chip: &str, source: Option<&driver::Loaded>) -> Result<String> {
    let _ = (chip, source);
    match emit {
        Emit::Sptir => Ok(sparsec::ir::text::print_func(f)),
        #[cfg(feature = "mlir")]
        Emit::Mlir => Ok(match source {
            Some(l) => sparsec_backend_mlir::emit_mlir_located(f, &sparsec_backend_mlir::Source { name: l.name.clone(), text: l.text.clone() })?,
            None => sparsec_backend_mlir::emit_mlir(f)?,
        }),
        #[cfg(feature = "mlir")]
        Emit::Ptx => Ok(sparsec_backend_mlir::emit_ptx(f, chip)?),
        #[cfg(not(feature = "mlir"))]
        Emit::Mlir | Emit::Ptx => Err(missing("mlir")),
        #[cfg(feature = "cubecl")]
        Emit::Cubecl => Ok(sparsec_backend_cubecl::emit_cubecl(f)?),
        #[cfg(feature = "cubecl")]
        Emit::Wgsl => Ok(sparsec_backend_cubecl::emit_wgsl(f)?),
        #[cfg(feature = "cubecl")]
        Emit::Cuda => Ok(sparsec_backend_cubecl::emit_cuda(f)?),
        #[cfg(not(feature = "cubecl"))]
        Emit::Cubecl | Emit::Wgsl | Emit::Cuda => Err(missing("cubecl")),
    }
}

/// `--backend` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// The reference interpreter.
    Interp,
    /// MLIR, lowered to LLVM and run in-process by the MLIR execution engine.
    MlirCpu,
    /// CubeCL on wgpu (Vulkan, Metal or DX12; Mesa's lavapipe without a GPU).
    CubeclWgpu,
    /// CubeCL on CUDA.
    CubeclCuda,
    /// Runs nothing: `tune` ranks GPU schedules by `gpu-report`'s estimate of an H100.
    GpuReport,
}

/// The runner behind a `--backend` value.
pub fn runner(backend: Backend) -> Result<Box<dyn Runner>> {
    match backend {
        Backend::Interp => Ok(Box::new(sparsec::backend::Interp)),
        #[cfg(feature = "mlir")]
        Backend::MlirCpu => Ok(Box::new(MlirCpu)),
        #[cfg(not(feature = "mlir"))]
        Backend::MlirCpu => Err(missing("mlir")),
        #[cfg(feature = "cubecl")]
        Backend::CubeclWgpu => Ok(Box::new(CubeclWgpu)),
        #[cfg(not(feature = "cubecl"))]
        Backend::CubeclWgpu => Err(missing("cubecl")),
        #[cfg(feature = "cuda")]
        Backend::CubeclCuda => Ok(Box::new(CubeclCuda)),
        #[cfg(not(feature = "cuda"))]
        Backend::CubeclCuda => Err(missing("cuda")),
        Backend::GpuReport => Err("`--backend gpu-report` runs nothing: it is `sparsec tune`'s ranking of GPU schedules by the estimate of `sparsec gpu-report`".into()),
    }
}

/// MLIR lowered to LLVM and JIT-compiled in this process.
#[cfg(feature = "mlir")]
struct MlirCpu;

#[cfg(feature = "mlir")]
impl Runner for MlirCpu {
    fn name(&self) -> &str {
        "mlir-cpu"
    }
    fn compile(&self, f: &Func) -> std::result::Result<Box<dyn Compiled>, String> {
        let opts = sparsec_backend_mlir::CpuOptions::default();
        let kernel = sparsec_backend_mlir::CpuKernel::compile(f, &opts).map_err(|e| e.to_string())?;
        Ok(Box::new(MlirProgram(kernel)))
    }
}

/// A JIT-compiled CPU kernel.
#[cfg(feature = "mlir")]
struct MlirProgram(sparsec_backend_mlir::CpuKernel);

#[cfg(feature = "mlir")]
impl Compiled for MlirProgram {
    fn run(&self, args: &Args) -> std::result::Result<Args, String> {
        self.run_timed(args).map(|(out, _)| out)
    }
    fn run_timed(&self, args: &Args) -> std::result::Result<(Args, RunTimes), String> {
        let start = std::time::Instant::now();
        let mut work = args.clone();
        let copied = start.elapsed();
        let times = self.0.run_timed(&mut work).map_err(|e| e.to_string())?;
        Ok((work, RunTimes { upload: copied + times.upload, ..times }))
    }
}

/// CubeCL kernels on wgpu; the program checks the matrices against the Stage-III axes too.
#[cfg(feature = "cubecl")]
struct CubeclWgpu;

#[cfg(feature = "cubecl")]
impl Runner for CubeclWgpu {
    fn name(&self) -> &str {
        "cubecl-wgpu"
    }
    fn gpu(&self) -> bool {
        true
    }
    fn compile(&self, f: &Func) -> std::result::Result<Box<dyn Compiled>, String> {
        let program = sparsec_backend_cubecl::compile(f).map_err(|e| e.to_string())?;
        Ok(Box::new(CubeclProgram(program)))
    }
}

/// CubeCL kernels compiled for wgpu.
#[cfg(feature = "cubecl")]
struct CubeclProgram(sparsec_backend_cubecl::CompiledProgram);

#[cfg(feature = "cubecl")]
impl Compiled for CubeclProgram {
    fn run(&self, args: &Args) -> std::result::Result<Args, String> {
        self.run_timed(args).map(|(out, _)| out)
    }
    fn run_timed(&self, args: &Args) -> std::result::Result<(Args, RunTimes), String> {
        self.0.run_timed(&sparsec_backend_cubecl::wgpu_client(), args).map_err(|e| e.to_string())
    }
}

/// CubeCL kernels on CUDA (compiled at the first run).
#[cfg(feature = "cuda")]
struct CubeclCuda;

#[cfg(feature = "cuda")]
struct CudaProgram(Func);

#[cfg(feature = "cuda")]
impl Runner for CubeclCuda {
    fn name(&self) -> &str {
        "cubecl-cuda"
    }
    fn gpu(&self) -> bool {
        true
    }
    fn compile(&self, f: &Func) -> std::result::Result<Box<dyn Compiled>, String> {
        Ok(Box::new(CudaProgram(f.clone())))
    }
}

#[cfg(feature = "cuda")]
impl Compiled for CudaProgram {
    fn run(&self, args: &Args) -> std::result::Result<Args, String> {
        sparsec_backend_cubecl::run_cuda(&self.0, args).map_err(|e| e.to_string())
    }
}
