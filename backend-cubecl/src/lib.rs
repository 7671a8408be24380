//! # sparsec-backend-cubecl
//!
//! The CubeCL backend of sparsec: it lowers a scheduled Stage-III function into CubeCL
//! kernels built at run time (no `#[cube]` macro: the kernels are expanded from the IR),
//! launches them on a CubeCL runtime (wgpu everywhere, CUDA behind the `cuda` feature), and
//! renders them as `#[cube]` Rust, WGSL or CUDA C++.
//!
//! * [`compile`] plans and checks a function (any stage; lowered to Stage III first) and
//!   returns a [`CompiledProgram`]: one [`CompiledKernel`] per top-level loop nest.
//! * [`CompiledProgram::run`] validates named arrays and scalars ([`Args`], as the formats
//!   bindings make them) and launches the kernels in order; [`run_wgpu`] does it all on the
//!   default wgpu device with the interpreter's contract.
//! * [`emit_cubecl`], [`emit_wgsl`], [`emit_cuda`] give the sources.
//!
//! See `docs/backend-cubecl.md` for the mapping from IR to CubeCL.

#![warn(missing_docs)]

mod device;
mod emit;
mod expand;
mod lower;
mod plan;
mod runtime;


pub use device::DeviceArg;
pub use emit::EmitError;
pub use lower::LowerError;
pub use plan::{PlanError, MAX_CUBES_YZ};
#[cfg(feature = "cuda")]
pub use runtime::cuda_client;
pub use runtime::{wgpu_client, CompiledKernel, CompiledProgram, LaunchShape, RuntimeError};
pub use sparsec_ir::args::ArgsError as ValidateError;

use sparsec_ir::data::Args;
use sparsec_ir::{Func, Stage};

/// Every way the backend can fail.
#[derive(Debug, thiserror::Error)]
pub enum CubeclError {
    /// Lowering to Stage III failed.
    #[error("lowering to Stage III: {0}")]
    Lowering(#[from] sparsec_passes::PassError),
    /// The function cannot be split into kernels.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A kernel body cannot be generated.
    #[error(transparent)]
    Lower(#[from] LowerError),
    /// Source rendering failed.
    #[error(transparent)]
    Emit(#[from] EmitError),
    /// The arguments were rejected before launch.
    #[error("invalid arguments: {0}")]
    Invalid(#[from] ValidateError),
    /// The device or CubeCL failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A feature this build lacks, or a runtime this machine lacks (no CUDA driver/device).
    #[error("{0}")]
    Unavailable(String),
}

/// `func` at Stage III (lowered with the standard passes when given at Stage I or II).
pub fn to_stage3(func: &Func) -> Result<Func, CubeclError> {
    Ok(sparsec_passes::PassManager::lowering(func.stage, Stage::III).run(func)?)
}

/// Plans and checks the kernels of `func` (any stage). Nothing is compiled for a device
/// until the first launch; compiled kernels are cached by the runtime, keyed by a hash of
/// the kernel's IR and launch shape.
///
/// Every launch validates the arguments against the sparse structure that the Stage-III
/// axes record (row pointers monotone and bounded, coordinates in range); given a Stage-I
/// function, launches also prove its accesses in range (`sparsec_ir::args::check_accesses`).
/// For a program scheduled down to Stage III, run that proof on its Stage-I form yourself,
/// as `sparsec run` does.
pub fn compile(func: &Func) -> Result<CompiledProgram, CubeclError> {
    let stage3 = to_stage3(func)?;
    let accesses = (func.stage == Stage::I).then(|| func.clone());
    CompiledProgram::new(&stage3, accesses)
}

/// Runs `func` (any stage) on the default wgpu device: validates `args`, launches, and returns
/// every array after the run, like `sparsec_interp::run`.
pub fn run_wgpu(func: &Func, args: &Args) -> Result<Args, CubeclError> {
    let prog = compile(func)?;
    prog.run(&wgpu_client(), args)
}

/// Runs `func` (any stage) on the first CUDA device, like [`run_wgpu`].
#[cfg(feature = "cuda")]
pub fn run_cuda(func: &Func, args: &Args) -> Result<Args, CubeclError> {
    let prog = compile(func)?;
    prog.run(&runtime::cuda_client()?, args)
}

/// Without the `cuda` feature: always an error saying so.
#[cfg(not(feature = "cuda"))]
pub fn run_cuda(_func: &Func, _args: &Args) -> Result<Args, CubeclError> {
    Err(CubeclError::Unavailable("this build of sparsec has no CUDA support (enable feature `cuda`)".into()))
}

/// `#[cube]` Rust for every kernel of `func` (any stage) and a `launch` helper, ready to
/// vendor into a crate that depends on `cubecl`.
pub fn emit_cubecl(func: &Func) -> Result<String, CubeclError> {
    let stage3 = to_stage3(func)?;
    let plan = plan::plan(&stage3)?;
    Ok(emit::render(&plan)?)
}

/// The WGSL that CubeCL's wgpu compiler makes of every kernel of `func` (no device needed).
pub fn emit_wgsl(func: &Func) -> Result<String, CubeclError> {
    compile(func)?.wgsl()
}

/// The CUDA C++ that CubeCL's C++ compiler makes of every kernel of `func` (no device needed).
pub fn emit_cuda(func: &Func) -> Result<String, CubeclError> {
    compile(func)?.cuda()
}
