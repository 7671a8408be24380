//! Differential fuzzing of the CPU JIT (issue #13): generated Stage-I programs
//! (`sparsec_testkit::fuzz`) run by the interpreter and by mlir-cpu unscheduled, with the
//! default CPU schedule, and as GPU kernels (default GPU schedule) emulated on the CPU,
//! through the CLI's one run path (`sparsec::backend::run`): the sparse structure of the
//! arguments is checked first (a refusal there is clean), and a program whose accesses the
//! argument checks cannot prove in range runs as `--checked` code, with its own bounds
//! checks, so that a fault is an error at its statement. Everything else agrees with the
//! interpreter or fails in every execution. `SPARSEC_FUZZ_CASES` and `SPARSEC_FUZZ_SEED`
//! change the cases. `tests/fuzz_regressions/*.sptir` are minimised reproducers of fixed
//! disagreements.

use sparsec_backend_mlir::{CpuKernel, CpuOptions};
use sparsec_ir::data::Args;
use sparsec_ir::Func;
use sparsec_testkit::fuzz::{build_args, generate, generate_with, parse_reproducer, GenOptions, run_as_cli_with, to_reproducer, ColKind, Data, Outcome, Runner};
use sparsec::driver::{AutoSchedule, Plan};
use std::time::{Duration, Instant};

/// The check of the arguments' sparse structure that no run path skips.
fn refused(f1: &Func, args: &Args) -> Option<String> {
    sparsec_ir::args::check_structure(f1, args).err().map(|e| e.to_string())
}

/// mlir-cpu (or GPU emulation) as a backend of the run path.
struct Jit(CpuOptions);

struct JitProgram(CpuKernel);

impl sparsec::backend::Compiled for JitProgram {
    fn run(&self, args: &Args) -> Result<Args, String> {
        let mut out = args.clone();
        self.0.run(&mut out).map_err(|e| e.to_string())?;
        Ok(out)
    }
}

impl sparsec::backend::Backend for Jit {
    fn name(&self) -> &str {
        "mlir-cpu"
    }
    // Emulating a GPU, generated programs spread their work over thread-bound loops.
    fn gpu(&self) -> bool {
        self.0.emulate_gpu
    }
    fn compile(&self, f: &Func) -> Result<Box<dyn sparsec::backend::Compiled>, String> {
        Ok(Box::new(JitProgram(CpuKernel::compile(f, &self.0).map_err(|e| e.to_string())?)))
    }
}

/// Runs `f3` (Stage III, lowered from `f1`) on the JIT as `sparsec run` does
/// (`fuzz::run_as_cli`), with the interpreter's contract (every array back).
fn jit(f1: &Func, f3: &Func, args: &Args, opts: &CpuOptions) -> Result<Args, String> {
    jit_planned(f1, f3, &Plan::Plain, args, opts)
}

/// [`jit`] of `f3` lowered by `plan` (a sparse output's symbolic phase is lowered alike).
fn jit_planned(f1: &Func, f3: &Func, plan: &Plan, args: &Args, opts: &CpuOptions) -> Result<Args, String> {
    if let Some(why) = refused(f1, args) {
        return Err(format!("refused: {why}"));
    }
    match run_as_cli_with(&Jit(opts.clone()), f1, f3, plan, args) {
        // Checked nests all record into the one fault array, an exchange that needs a
        // barrier; the GPU path refuses it under non-uniform control flow
        // (`ir::sync::SyncError::NonUniformBarrier`): a clean refusal, not compared.
        (true, Err(e)) if e.contains("no barrier may order them there") => sparsec_interp::run(f1, args).map_err(|e| e.to_string()),
        (_, r) => r,
    }
}

/// `f1` under its random schedule (`sparsec_testkit::schedules::random_schedule`) on the JIT.
/// A schedule the backend refuses (`Unsupported`, a clean error) is not compared: the
/// interpreter's result stands in for it.
fn random_scheduled(f1: &Func, args: &Args, emulate_gpu: bool) -> Result<Args, String> {
    let Some((f, tried)) = sparsec_testkit::schedules::random_schedule_of(f1) else {
        return sparsec_interp::run(f1, args).map_err(|e| e.to_string());
    };
    match jit(f1, &f, args, &CpuOptions { emulate_gpu, ..CpuOptions::default() }) {
        Err(e) if e.starts_with("mlir-cpu: unsupported by the MLIR backend") => sparsec_interp::run(f1, args).map_err(|e| e.to_string()),
        Err(e) => Err(format!("{e} (schedule: {})", tried.join("; "))),
        Ok(out) => Ok(out),
    }
}

/// mlir-cpu unscheduled, with the default CPU schedule (and its every-path tuning), and
/// GPU-scheduled kernels emulated;
/// then a random schedule on CPU threads and as emulated GPU kernels.
pub(super) fn runner() -> Runner<'static> {
    let mut r = Runner::default();
    r.staged_backends.push(("mlir-cpu".into(), Box::new(|f1, f3, a| jit(f1, f3, a, &CpuOptions::default()))));
    r.staged_backends.push((
        "mlir-cpu (auto cpu)".into(),
        Box::new(|f1, _, a| {
            let f = sparsec_schedule::auto::cpu_schedule(f1).map_err(|e| format!("cpu schedule: {e}"))?;
            jit_planned(f1, &f, &Plan::Auto(AutoSchedule::Cpu), a, &CpuOptions::default())
        }),
    ));
    r.staged_backends.push((
        "mlir-cpu (auto cpu, every path)".into(),
        Box::new(|f1, _, a| {
            // Row partial sums (vector, under masks, and scalar) from one nonzero and
            // prefetching from any size: the paths the default takes only on large inputs,
            // on the fuzzer's small ones.
            let t = sparsec_schedule::auto::CpuTuning { vector_row: 1, long_row: 1, prefetch_min_bytes: 0, ..Default::default() };
            let f = sparsec_schedule::auto::cpu_schedule_tuned(f1, &t).map_err(|e| format!("cpu schedule: {e}"))?;
            jit_planned(f1, &f, &Plan::Auto(AutoSchedule::CpuTuned(t)), a, &CpuOptions::default())
        }),
    ));
    r.staged_backends.push((
        "mlir gpu emulated (auto gpu)".into(),
        Box::new(|f1, _, a| {
            let f = sparsec_schedule::auto::gpu_schedule(f1, 32).map_err(|e| format!("gpu schedule: {e}"))?;
            jit_planned(f1, &f, &Plan::Auto(AutoSchedule::Gpu { threads: 32 }), a, &CpuOptions { emulate_gpu: true, ..CpuOptions::default() })
        }),
    ));
    r.staged_backends.push(("mlir-cpu (random schedule)".into(), Box::new(|f1, _, a| random_scheduled(f1, a, false))));
    r.staged_backends
        .push(("mlir gpu emulated (random schedule)".into(), Box::new(|f1, _, a| random_scheduled(f1, a, true))));
    r
}

/// Whether the run path refuses the inputs of this program (their sparse structure; then
/// compiled code never runs), and whether it runs them as `--checked` code.
fn triage(text: &str, cols: &[ColKind], data: &Data) -> (bool, bool) {
    let Ok(f1) = sparsec_ir::text::parse_func("fuzz.sptir", text) else { return (false, false) };
    let Ok(args) = build_args(&f1, cols, data) else { return (false, false) };
    // Unproven accesses: `run_as_cli` runs them as `--checked` code.
    (refused(&f1, &args).is_some(), sparsec_ir::args::check_accesses(&f1, &args).is_err())
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap_or_else(|_| panic!("{name}={v} is not a number")))
}

#[test]
fn random_programs_agree_with_the_interpreter_on_mlir_cpu() {
    let cases = env_u64("SPARSEC_FUZZ_CASES").unwrap_or(400);
    let first = env_u64("SPARSEC_FUZZ_SEED").unwrap_or(0x3117);
    let budget = Duration::from_secs(env_u64("SPARSEC_FUZZ_SECONDS").unwrap_or(75));
    // `SPARSEC_FUZZ_ALL=1`: also the constructs with open bugs (`tests/fuzz_open/`).
    let all = std::env::var("SPARSEC_FUZZ_ALL").is_ok_and(|v| v == "1");
    let runner = runner();
    let start = Instant::now();
    let (mut ran, mut agree, mut all_failed, mut refused, mut other, mut checked) = (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let mut failures = Vec::new();
    let mut keys = std::collections::BTreeSet::new();
    std::panic::set_hook(Box::new(|_| {}));
    for seed in first..first + cases {
        if start.elapsed() >= budget {
            break;
        }
        ran += 1;
        let case = if all { generate_with(seed, GenOptions::all()) } else { generate(seed) };
        let (refuse, check) = triage(&case.prog.to_sptir(), &case.prog.cols, &case.data);
        if refuse {
            refused += 1;
            continue;
        }
        checked += check as u64;
        match runner.check(&case) {
            Outcome::Agree => agree += 1,
            Outcome::AllFailed(_) => all_failed += 1,
            Outcome::Unsupported(_) | Outcome::Rejected(_) => other += 1,
            o @ Outcome::Failure(_) => {
                let why = format!("{o:?}");
                if !keys.insert(o.key().unwrap_or_default()) {
                    failures.push(format!("seed {seed}: {why} (seen before)"));
                    continue;
                }
                let small = runner.minimise(&case, 300);
                failures.push(format!("seed {seed}: {why}\nminimised:\n{}", to_reproducer(&small)));
            }
        }
    }
    let _ = std::panic::take_hook();
    println!(
        "mlir fuzz: {ran} cases from seed {first:#x} in {:.1} s, each on {} configurations: {agree} agree, \
         {all_failed} fail everywhere, {refused} refused by the structure checks, {other} unsupported/rejected by the \
         passes ({checked} run as checked code), {} failures",
        start.elapsed().as_secs_f64(),
        runner.staged_backends.len(),
        failures.len()
    );
    for f in &failures {
        println!("FAILURE {f}");
    }
    // CI's floor; `scripts/fuzz` lowers it, since its chunks share a loaded machine.
    let floor = env_u64("SPARSEC_FUZZ_MIN_CASES").unwrap_or(cases.min(50));
    assert!(ran >= floor, "only {ran} cases ran");
    assert!(failures.is_empty(), "{} failures (see above)", failures.len());
}

/// Minimised reproducers of fixed disagreements (`tests/fuzz_regressions/*.sptir`, written
/// by `to_reproducer`): agree, fail everywhere, or have their arguments refused. The
/// hand-minimised ones are in `semantics.rs`.
#[test]
fn fuzz_regressions_agree_on_mlir_cpu() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fuzz_regressions");
    let runner = runner();
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "sptir") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let (cols, data) = parse_reproducer(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (refused, _) = triage(&text, &cols, &data);
        match runner.check_text(&text, &cols, &data) {
            Outcome::Agree | Outcome::AllFailed(_) => {}
            Outcome::Failure(why) if refused && why.contains("refused") => {}
            other => panic!("{}: {other:?}", path.display()),
        }
    }
}
