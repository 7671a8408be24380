//! Differential program fuzzer (issue #13): random valid Stage-I programs with random inputs run
//! by the interpreter at Stage I, II, III and checked Stage III (`passes::insert_checks`); every stage gives the same arrays or every stage
//! fails. `SPARSEC_FUZZ_CASES` sets the number of cases, `SPARSEC_FUZZ_SEED` the first seed and
//! `SPARSEC_FUZZ_SECONDS` a time budget instead (used by `scripts/fuzz`); `SPARSEC_FUZZ_ALL=1`
//! also generates the constructs with open bugs (see `GenOptions`). A failure prints its
//! seed and the minimised program. The generator must produce programs that verify.
//!
//! `tests/fuzz_regressions/*.sptir` are minimised reproducers of fixed bugs, run through all
//! stages here; `tests/fuzz_open/` holds reproducers of open bugs (not run).

use sparsec_testkit::fuzz::{generate_with, parse_reproducer, to_reproducer, GenOptions, Outcome, Runner};
use std::time::{Duration, Instant};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap_or_else(|_| panic!("{name}={v} is not a number")))
}

#[test]
fn random_programs_agree_across_stages() {
    let cases = env_u64("SPARSEC_FUZZ_CASES").unwrap_or(5000);
    let first = env_u64("SPARSEC_FUZZ_SEED").unwrap_or(0xf022);
    let budget = env_u64("SPARSEC_FUZZ_SECONDS").map(Duration::from_secs);
    let start = Instant::now();
    let mut runner = Runner::default();
    runner.backends.push(("checked Stage III".into(), Box::new(checked_stage3)));
    runner.staged_backends.push(("interp (random schedule)".into(), Box::new(random_scheduled)));
    let all = std::env::var("SPARSEC_FUZZ_ALL").is_ok_and(|v| v == "1");
    let opts = if all { GenOptions::all() } else { GenOptions::default() };
    // Panics are caught and reported per case; keep the default hook from flooding the log.
    std::panic::set_hook(Box::new(|_| {}));
    let (mut ran, mut agree, mut all_failed, mut unsupported) = (0u64, 0u64, 0u64, 0u64);
    let mut failures = Vec::new();
    let mut keys = std::collections::BTreeSet::new();
    let mut rejected = Vec::new();
    for seed in first.. {
        match budget {
            Some(b) if start.elapsed() >= b => break,
            None if ran >= cases => break,
            _ => {}
        }
        ran += 1;
        let case = generate_with(seed, opts);
        match runner.check(&case) {
            Outcome::Agree => agree += 1,
            Outcome::AllFailed(_) => all_failed += 1,
            Outcome::Unsupported(_) => unsupported += 1,
            Outcome::Rejected(why) => rejected.push(format!("seed {seed}: {why}\n{}", case.prog.to_sptir())),
            o @ Outcome::Failure(_) => {
                let Outcome::Failure(why) = &o else { unreachable!() };
                // One minimised reproducer per distinct failure.
                if !keys.insert(o.key().unwrap_or_default()) {
                    failures.push(format!("seed {seed}: {why} (seen before)\n"));
                    continue;
                }
                let small = runner.minimise(&case, 2000);
                let again = runner.check(&small);
                failures.push(format!(
                    "seed {seed}: {why}\nminimised ({again:?}), inputs: {}\n{}",
                    small.data.describe(&small.prog),
                    to_reproducer(&small)
                ));
            }
        }
    }
    let _ = std::panic::take_hook();
    println!(
        "fuzz: {ran} cases from seed {first:#x} in {:.1} s: {agree} agree, {all_failed} fail at every stage, {unsupported} unsupported, {} rejected, {} failures",
        start.elapsed().as_secs_f64(),
        rejected.len(),
        failures.len()
    );
    for r in rejected.iter().take(3) {
        println!("REJECTED {r}");
    }
    for f in &failures {
        println!("FAILURE {f}");
    }
    assert!(agree * 2 >= ran, "fewer than half of the cases ran to completion at every stage");
    assert!(rejected.is_empty() && failures.is_empty(), "{} rejected, {} failures (see above)", rejected.len(), failures.len());
}

/// Stage III with `passes::insert_checks` (`sparsec run --checked`), on the interpreter: a
/// reported fault is an error, like the interpreter's own bounds and division checks.
fn checked_stage3(f: &sparsec::ir::Func, args: &sparsec::ir::data::Args) -> Result<sparsec::ir::data::Args, String> {
    use sparsec::ir::data::Array;
    use sparsec_passes::{insert_checks, Fault, FAULT_PARAM};
    let (g, sites) = insert_checks(f).map_err(|e| e.to_string())?;
    let mut args = args.clone();
    args.array(FAULT_PARAM, Array::I64(vec![0; 3]));
    let mut out = sparsec::interp::run(&g, &args).map_err(|e| format!("checked run: {e}"))?;
    let Some(Array::I64(fault)) = out.arrays.shift_remove(FAULT_PARAM) else { return Err("no fault array".into()) };
    match Fault::decode(&sites, &fault) {
        Some(fault) => Err(fault.to_string()),
        None => Ok(out),
    }
}

/// The interpreter on a random schedule of the program (`schedules::random_schedule_of`):
/// every primitive the schedule applied must have kept the meaning.
fn random_scheduled(f1: &sparsec::ir::Func, _: &sparsec::ir::Func, args: &sparsec::ir::data::Args) -> Result<sparsec::ir::data::Args, String> {
    match sparsec_testkit::schedules::random_schedule_of(f1) {
        Some((f, tried)) => {
            // `SPARSEC_FUZZ_SHOW_SCHEDULE=1` with one seed shows what the schedule did.
            if std::env::var_os("SPARSEC_FUZZ_SHOW_SCHEDULE").is_some() {
                eprintln!("schedule: {}\n{}", tried.join("; "), sparsec::ir::text::print_func(&f));
            }
            sparsec::interp::run(&f, args).map_err(|e| format!("{e} (schedule: {})", tried.join("; ")))
        }
        None => sparsec::interp::run(f1, args).map_err(|e| e.to_string()),
    }
}

/// Minimised reproducers of fixed bugs: every stage, the checked Stage III and the random
/// schedule agree (or every one fails).
#[test]
fn fuzz_regressions_agree_across_stages() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fuzz_regressions");
    let mut runner = Runner::default();
    runner.backends.push(("checked Stage III".into(), Box::new(checked_stage3)));
    runner.staged_backends.push(("interp (random schedule)".into(), Box::new(random_scheduled)));
    let mut ran = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "sptir") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let (cols, data) = parse_reproducer(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        match runner.check_text(&text, &cols, &data) {
            Outcome::Agree | Outcome::AllFailed(_) => ran += 1,
            other => panic!("{}: {other:?}", path.display()),
        }
    }
    assert!(ran >= 1, "no reproducer in {dir}");
}

/// The generator makes COO programs (a root `I` with `unique = false` and repeated stored
/// rows) often enough to matter, and each verifies with the rows it is given.
#[test]
fn the_generator_makes_coo_programs() {
    let mut coo = 0;
    for seed in 0..2000u64 {
        let case = generate_with(seed, GenOptions::default());
        if !case.prog.coo_rows {
            continue;
        }
        coo += 1;
        let text = case.prog.to_sptir();
        assert!(text.contains("unique = false"), "seed {seed}:\n{text}");
        let f = sparsec::ir::text::parse_func("coo.sptir", &text).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        sparsec::ir::verify::verify_func(&f).unwrap_or_else(|e| panic!("seed {seed}: {e:?}\n{text}"));
        let rows = case.data.stored_rows.as_ref().expect("COO rows are stored rows");
        assert!(rows.windows(2).all(|w| w[0] <= w[1]), "seed {seed}: {rows:?}");
    }
    assert!(coo >= 20, "only {coo} COO programs in 2000 seeds");
}
