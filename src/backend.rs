//! The backend contract: where a lowered program runs, and the one path every run takes.
//!
//! A [`Backend`] compiles a function once into a [`Compiled`] program that runs on
//! [`Args`] and returns every array, as the interpreter does. [`run`] is the only way the
//! CLI runs a program: before generated code runs, the arguments are checked against the
//! Stage-I function ([`sparsec_ir::args`]: the sparse structure, and every index and divisor
//! proven in range) — or, with `checked`, the code gets its own checks
//! ([`sparsec_passes::insert_checks`]) and a fault becomes an error at its statement.
//! Backends translate; they decide neither validation nor scheduling.

use crate::driver::{ArgsRefused, Loaded};
pub use sparsec_ir::data::RunTimes;
use sparsec_ir::data::{Args, Array};
use sparsec_ir::span::SourceFile;
use sparsec_ir::Func;

/// What a backend reports; the message is the backend's own error.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The function could not be compiled.
    #[error("{backend}: {message}")]
    Compile {
        /// The backend.
        backend: String,
        /// Its error.
        message: String,
    },
    /// The run failed.
    #[error("{backend}: {message}")]
    Run {
        /// The backend.
        backend: String,
        /// Its error.
        message: String,
    },
    /// The arguments were refused before anything ran, or a checked run faulted.
    #[error("{0}")]
    Refused(#[from] ArgsRefused),
    /// The checks could not be added.
    #[error("{0}")]
    Checks(#[from] sparsec_passes::PassError),
    /// A loop written parallel or bound (in a program written at Stage II or III) is not
    /// proven to be so: the message, rendered at the loop.
    #[error("{0}")]
    Unproven(String),
    /// The symbolic phase of a sparse output could not be lowered.
    #[error("{0}")]
    Lower(#[from] crate::driver::DriverError),
    /// The pattern of a sparse output could not be set up.
    #[error("{0}")]
    Assembly(#[from] crate::assembly::AssemblyError),
}

/// A program compiled by a [`Backend`].
pub trait Compiled {
    /// Runs on `args` and returns every array after the run (and the scalars).
    fn run(&self, args: &Args) -> Result<Args, String>;
    /// [`Compiled::run`], and where its time went; a backend that cannot tell counts it all
    /// as the kernel's.
    fn run_timed(&self, args: &Args) -> Result<(Args, RunTimes), String> {
        let start = std::time::Instant::now();
        let out = self.run(args)?;
        Ok((out, RunTimes { kernel: start.elapsed(), ..RunTimes::default() }))
    }
}

/// Where programs run.
pub trait Backend {
    /// The name `--backend` gives it.
    fn name(&self) -> &str;
    /// Whether its programs check every index as they run (the interpreter): then nothing
    /// needs proving beforehand.
    fn checks_indices(&self) -> bool {
        false
    }
    /// Whether it runs programs on the units of a GPU: the programs generated for it (a
    /// sparse output's symbolic phase) then spread their work over thread-bound loops.
    fn gpu(&self) -> bool {
        false
    }
    /// Compiles `f` (Stage III; any stage for the interpreter). Its axes record the sparse
    /// structure of the arguments, which [`run`] has checked before any run.
    fn compile(&self, f: &Func) -> Result<Box<dyn Compiled>, String>;
}

/// The reference interpreter as a backend: any stage, every index checked.
pub struct Interp;

struct InterpProgram(Func);

impl Compiled for InterpProgram {
    fn run(&self, args: &Args) -> Result<Args, String> {
        sparsec_interp::run(&self.0, args).map_err(|e| e.to_string())
    }
}

impl Backend for Interp {
    fn name(&self) -> &str {
        "interp"
    }
    fn checks_indices(&self) -> bool {
        true
    }
    fn compile(&self, f: &Func) -> Result<Box<dyn Compiled>, String> {
        Ok(Box::new(InterpProgram(f.clone())))
    }
}

/// Runs `lowered` (lowered from `stage1`, a function of `loaded`, by `plan`) on `backend`:
/// checks the arguments first unless the backend checks indices itself, or adds checks to
/// the code when `checked`; compiles; runs (after the symbolic phase where `stage1`
/// assembles a sparse output, [`crate::assembly`]); and turns a checked run's fault into an
/// error.
pub fn run(
    backend: &dyn Backend,
    loaded: &Loaded,
    stage1: &Func,
    lowered: &Func,
    plan: &crate::driver::Plan,
    args: &Args,
    checked: bool,
) -> Result<Args, BackendError> {
    prepare(backend, loaded, stage1, lowered, plan, args, checked)?.run()
}

/// A program ready to run any number of times on its arguments: checked and compiled by
/// [`prepare`], with the time each of those steps took (`sparsec bench` reports them).
pub struct Prepared<'a> {
    loaded: &'a Loaded,
    backend: String,
    compiled: Box<dyn Compiled>,
    /// A sparse output's symbolic phase, where the arguments lack its pattern.
    symbolic: Option<Symbolic>,
    args: Args,
    sites: Option<Vec<sparsec_passes::Site>>,
    /// Checking the arguments against the Stage-I function (zero for the interpreter).
    pub check_time: std::time::Duration,
    /// Compiling (for the interpreter, nothing to speak of).
    pub compile_time: std::time::Duration,
}

/// The first half of [`run`]: the argument checks (or the code's own, with `checked`) and
/// the compilation, of the program and of its symbolic phase where it has one.
pub fn prepare<'a>(
    backend: &dyn Backend,
    loaded: &'a Loaded,
    stage1: &Func,
    lowered: &Func,
    plan: &crate::driver::Plan,
    args: &Args,
    checked: bool,
) -> Result<Prepared<'a>, BackendError> {
    let start = std::time::Instant::now();
    let name = backend.name().to_string();
    let compile = |f: &Func| backend.compile(f).map_err(|message| BackendError::Compile { backend: name.clone(), message });
    // A sparse output whose pattern the arguments lack: its symbolic phase, lowered like the
    // program; a Stage-I program of it checked like any program (its accesses are always
    // proven), one written at Stage III (a product's, which reads through its own index
    // arrays) compiled with checks in its code.
    let mut symbolic = None;
    if !crate::assembly::missing(stage1, args).is_empty() {
        let count_args = crate::assembly::count_args(stage1, args)?;
        let mut phases = Vec::new();
        for (phase, lowered) in crate::assembly::phases(stage1, plan, lowered.stage, backend.gpu())? {
            let mut sites = None;
            let program = match (backend.checks_indices(), phase.func.stage) {
                (true, _) => lowered,
                (false, sparsec_ir::Stage::I) => {
                    crate::driver::check_compiled_args(loaded, &phase.func, &count_args, false)?;
                    lowered
                }
                (false, _) => {
                    let (g, s) = sparsec_passes::insert_checks(&lowered)?;
                    sites = Some(s);
                    g
                }
            };
            phases.push(SymbolicPhase { compiled: compile(&program)?, sites, counts: phase.counts, name: phase.func.name });
        }
        let (ptrs, coords) = crate::assembly::pattern_arrays(stage1, args);
        symbolic = Some(Symbolic { phases, stage1: stage1.clone(), count_args, ptrs, coords });
    }
    if !backend.checks_indices() {
        // Loops written parallel or bound by hand (a program written at Stage II or III) are
        // proven as the primitives prove theirs: elsewhere they run at once, not in order.
        if stage1.stage != sparsec_ir::Stage::I {
            sparsec_schedule::check_loop_kinds(lowered).map_err(|(span, why)| {
                let message = format!(
                    "`{}` cannot run on {}: {why} (the interpreter runs it one iteration after another)",
                    lowered.name,
                    backend.name()
                );
                let text = if span.is_known() {
                    SourceFile::new(&loaded.name, &loaded.text).render(span, &message)
                } else {
                    format!("{}: {message}", loaded.name)
                };
                BackendError::Unproven(text)
            })?;
        }
        crate::driver::check_compiled_args(loaded, stage1, args, checked)?;
    }
    let check_time = start.elapsed();
    let mut args = args.clone();
    let (program, sites) = if checked {
        let (g, sites) = sparsec_passes::insert_checks(lowered)?;
        args.array(sparsec_passes::FAULT_PARAM, Array::I64(vec![0; 3]));
        (g, Some(sites))
    } else {
        (lowered.clone(), None)
    };
    let start = std::time::Instant::now();
    let compiled = compile(&program)?;
    let compile_time = start.elapsed();
    Ok(Prepared { loaded, backend: name, compiled, symbolic, args, sites, check_time, compile_time })
}

/// The symbolic phase of a sparse output, ready to run before each run of the program.
struct Symbolic {
    /// Its programs, in order.
    phases: Vec<SymbolicPhase>,
    /// The function as written (whose arguments the phase completes).
    stage1: Func,
    /// The arguments of the counting programs.
    count_args: Args,
    /// The row pointers the counting programs return, and the coordinates the others do.
    ptrs: Vec<String>,
    coords: Vec<String>,
}

/// One compiled program of a symbolic phase.
struct SymbolicPhase {
    compiled: Box<dyn Compiled>,
    /// The checks in its code, where it has them.
    sites: Option<Vec<sparsec_passes::Site>>,
    /// It counts rows (else it writes coordinates).
    counts: bool,
    name: String,
}

/// Moves the arrays `names` from `from` into `into`.
fn take(into: &mut Args, mut from: Args, names: &[String]) {
    for n in names {
        if let Some(a) = from.arrays.shift_remove(n) {
            into.array(n.clone(), a);
        }
    }
}

impl Prepared<'_> {
    /// Removes the fault array from a checked run's `out` and decodes it against `sites`.
    fn fault(&self, sites: &[sparsec_passes::Site], out: &mut Args) -> Result<Option<sparsec_passes::Fault>, BackendError> {
        match out.arrays.shift_remove(sparsec_passes::FAULT_PARAM) {
            Some(Array::I64(v)) => Ok(sparsec_passes::Fault::decode(sites, &v)),
            _ => Err(ArgsRefused(format!("{}: the checked run returned no fault array", self.loaded.name)).into()),
        }
    }

    /// Runs one program of the symbolic phase on `args`; a fault of its checks is an error.
    fn run_phase(&self, ph: &SymbolicPhase, args: &Args) -> Result<Args, BackendError> {
        let failed = |message| BackendError::Run { backend: self.backend.clone(), message };
        let Some(sites) = &ph.sites else { return ph.compiled.run(args).map_err(failed) };
        let mut args = args.clone();
        args.array(sparsec_passes::FAULT_PARAM, Array::I64(vec![0; 3]));
        let mut out = ph.compiled.run(&args).map_err(failed)?;
        match self.fault(sites, &mut out)? {
            Some(f) => Err(ArgsRefused(format!("{}: the symbolic phase `{}`: {f}", self.loaded.name, ph.name)).into()),
            None => Ok(out),
        }
    }

    /// Runs the program once on its arguments (each run starts from them afresh).
    pub fn run(&self) -> Result<Args, BackendError> {
        self.run_timed().map(|(out, _)| out)
    }

    /// [`Prepared::run`], and where its time went (a symbolic phase counts as `symbolic`).
    pub fn run_timed(&self) -> Result<(Args, RunTimes), BackendError> {
        let failed = |message| BackendError::Run { backend: self.backend.clone(), message };
        let start = std::time::Instant::now();
        let assembled;
        let args = match &self.symbolic {
            None => &self.args,
            Some(sym) => {
                // Counts, prefix sums and allocation, then the coordinates.
                let mut counted = sym.count_args.clone();
                for ph in sym.phases.iter().filter(|p| p.counts) {
                    let out = self.run_phase(ph, &counted)?;
                    take(&mut counted, out, &sym.ptrs);
                }
                let mut args = self.args.clone();
                crate::assembly::complete(&sym.stage1, &mut args, &counted)?;
                for ph in sym.phases.iter().filter(|p| !p.counts) {
                    let out = self.run_phase(ph, &args)?;
                    take(&mut args, out, &sym.coords);
                }
                assembled = args;
                &assembled
            }
        };
        let symbolic = if self.symbolic.is_some() { start.elapsed() } else { std::time::Duration::ZERO };
        let (mut out, times) = self.compiled.run_timed(args).map_err(failed)?;
        if let Some(sites) = &self.sites {
            if let Some(f) = self.fault(sites, &mut out)? {
                let text = SourceFile::new(&self.loaded.name, &self.loaded.text).render(f.span(), &format!("checked run: {f}"));
                return Err(ArgsRefused(text).into());
            }
        }
        Ok((out, RunTimes { symbolic, ..times }))
    }
}
