//! The fuzz runner of a CubeCL client: the interpreter's stages against the client's runs,
//! unscheduled, with the GPU default schedule and with a random schedule, through the CLI's
//! run path. Shared by the wgpu fuzz test (`fuzz.rs`) and the CUDA check
//! (`examples/cuda_check.rs`, which includes this file).

use cubecl::client::Client;
use sparsec_backend_cubecl::{compile, CompiledProgram, CubeclError};
use sparsec_ir::data::Args;
use sparsec_ir::Func;
use sparsec_testkit::fuzz::{run_as_cli_with, Runner};
use sparsec::driver::{AutoSchedule, Plan};

/// Messages of clean refusals: argument checks, launch-time refusals, constructs the backend
/// refuses (`LowerError`/`PlanError::Unsupported`). Nothing broader: any other error fails.
pub const REFUSALS: &[&str] = &[
    "invalid arguments",
    "loop iterations",
    "division by",
    "unsupported by the CubeCL backend",
    "too large",
    "WGSL does not define",
];

/// A CubeCL client as a backend of the run path, under `name` (`cubecl-wgpu`, `cubecl-cuda`).
struct ClientBackend<'a> {
    name: &'a str,
    client: Client,
}

struct ClientProgram(CompiledProgram, Client);

impl sparsec::backend::Compiled for ClientProgram {
    fn run(&self, args: &Args) -> Result<Args, String> {
        self.0.run(&self.1, args).map_err(|e| e.to_string())
    }
}

impl sparsec::backend::Backend for ClientBackend<'_> {
    fn name(&self) -> &str {
        self.name
    }
    fn gpu(&self) -> bool {
        true
    }
    fn compile(&self, f: &Func) -> Result<Box<dyn sparsec::backend::Compiled>, String> {
        Ok(Box::new(ClientProgram(compile(f).map_err(|e| e.to_string())?, self.client.clone())))
    }
}

/// Runs `f3` (lowered from `f1`) on `client` as `sparsec run` does (`fuzz::run_as_cli`); the
/// structure of the arguments is refused first, with CubeCL's message.
fn run_checked(name: &str, f3: &Func, f1: &Func, client: &Client, args: &Args) -> Result<Args, String> {
    run_planned(name, f3, &Plan::Plain, f1, client, args)
}

/// [`run_checked`] of `f3` lowered by `plan` (a sparse output's symbolic phase is lowered alike).
pub fn run_planned(name: &str, f3: &Func, plan: &Plan, f1: &Func, client: &Client, args: &Args) -> Result<Args, String> {
    sparsec_ir::args::check_structure(f1, args).map_err(|e| CubeclError::Invalid(e).to_string())?;
    run_as_cli_with(&ClientBackend { name, client: client.clone() }, f1, f3, plan, args).1
}

/// The interpreter's stages and `client` (named `name`), unscheduled and with the GPU
/// default schedule, and with a random schedule (`schedules::random_schedule_of`): where the
/// client refuses that one cleanly the interpreter's result stands in (not compared), as the
/// plain runs count such refusals.
pub fn runner<'a>(name: &'a str, f1: &'a Func, client: &'a Client) -> Runner<'a> {
    let mut runner = Runner::default();
    runner.backends.push((name.into(), Box::new(move |f3, args| run_checked(name, f3, f1, client, args))));
    runner.backends.push((
        format!("{name} (auto gpu)"),
        Box::new(move |_, args| {
            let s = sparsec_schedule::auto::gpu_schedule(f1, 32).map_err(|e| format!("gpu schedule: {e}"))?;
            run_planned(name, &s, &Plan::Auto(AutoSchedule::Gpu { threads: 32 }), f1, client, args)
        }),
    ));
    runner.backends.push((
        format!("{name} (random schedule)"),
        Box::new(move |_, args| {
            let interp = || sparsec_interp::run(f1, args).map_err(|e| e.to_string());
            let Some((s, tried)) = sparsec_testkit::schedules::random_schedule_of(f1) else { return interp() };
            match run_checked(name, &s, f1, client, args) {
                Err(e) if REFUSALS.iter().any(|r| e.contains(r)) => interp(),
                Err(e) => Err(format!("{e} (schedule: {})", tried.join("; "))),
                Ok(out) => Ok(out),
            }
        }),
    ));
    runner
}
