//! Random Stage-I programs (`sparsec_testkit::fuzz`) run on wgpu, unscheduled (one unit per
//! nest), with the GPU default schedule and with a random schedule, against the interpreter,
//! through the CLI's run path (`sparsec::backend::run`): a program whose accesses the
//! argument checks cannot prove in range runs as `--checked` code. Runs refused at launch
//! (lavapipe's loop limit, division by zero) are clean refusals; anything else that differs
//! fails.
//! `SPARSEC_FUZZ_CASES` sets the number of cases, `SPARSEC_FUZZ_SEED` the first seed.

use super::common::client;
use super::runner::{runner, REFUSALS};
use sparsec_ir::Func;
use sparsec_testkit::fuzz::{generate_with, parse_reproducer, to_reproducer, GenOptions, Outcome, Runner};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Seeds of fixed failures, run every time: 200676 divided by an `i - i` that CubeCL folded
/// to a constant 0, which naga refuses to compile (never reached: no rows); 49468, 200123,
/// 200136 and 200192 met inf or NaN intermediates, which lavapipe's finite-math compiler
/// turned into wrong finite results (now refused by the finiteness checks); 202138 computed
/// `x // MIN` as `(x - x % MIN) / MIN`, which overflows; 202628 made CubeCL fold `abs(MIN)`
/// and panic; 7302925, 7304123 and 7306666 drew random schedules in which units along an
/// unbound thread index repeated an accumulation (now refused, `sparsec_ir::repeated_update`);
/// 1795782298646 cast a `pow` result near 1 to an integer, which WGSL's `pow` left below 1
/// (the oracle now admits integers between its perturbed runs).
/// Each with whether it was generated with non-finite values.
const REGRESSIONS: &[(u64, bool)] = &[
    (200676, true),
    (49468, true),
    (200123, true),
    (200136, true),
    (200192, true),
    (202138, true),
    (202628, true),
    (7302925, false),
    (7304123, false),
    (7306666, false),
    (49618, false),
    (49589, false),
    (1795782298646, false),
    (1795782298901, false),
];

/// The interpreter's stages and wgpu, unscheduled, with the GPU default schedule and with a
/// random schedule.
fn wgpu_runner<'a>(f1: &'a Func, client: &'a cubecl::client::Client) -> Runner<'a> {
    runner("cubecl-wgpu", f1, client)
}

/// Reproducers of fixed disagreements (`tests/fuzz_regressions/*.sptir`, written by
/// `to_reproducer`): agree, fail everywhere, or are refused on wgpu with a clean message.
#[test]
fn fuzz_regressions_agree_on_wgpu() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fuzz_regressions");
    let client = client();
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).expect("the regression directory") {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "sptir") {
            continue;
        }
        seen += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        let (cols, data) = parse_reproducer(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let f1 = sparsec_ir::text::parse_func("fuzz.sptir", &text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let outcome = wgpu_runner(&f1, &client).check_text(&text, &cols, &data);
        match outcome {
            Outcome::Agree | Outcome::AllFailed(_) => {}
            Outcome::Failure(why) if why.contains(" fails") && REFUSALS.iter().any(|r| why.contains(r)) => {}
            other => panic!("{}: {other:?}", path.display()),
        }
    }
    assert!(seen > 0, "no reproducers in {dir}");
}

#[test]
fn random_programs_agree_with_the_interpreter() {
    let cases = env_u64("SPARSEC_FUZZ_CASES").unwrap_or(400);
    // `SPARSEC_FUZZ_SECONDS` stops the random cases early (long runs).
    let budget = env_u64("SPARSEC_FUZZ_SECONDS").map(std::time::Duration::from_secs);
    let start = std::time::Instant::now();
    let mut ran = 0u64;
    let first = env_u64("SPARSEC_FUZZ_SEED").unwrap_or(0xc0be);
    let client = client();
    let (mut agree, mut refused, mut other) = (0, 0, 0);
    let mut failures = Vec::new();
    let mut reasons = std::collections::BTreeMap::new();
    // `SPARSEC_FUZZ_ALL=1`: also the constructs with open bugs (`tests/fuzz_open/`).
    let base = if std::env::var("SPARSEC_FUZZ_ALL").is_ok_and(|v| v == "1") { GenOptions::all() } else { GenOptions::default() };
    let random = (first..first + cases).map(|s| (s, GenOptions { non_finite: s % 4 == 0, ..base }));
    // Regressions replay the cases their seeds gave when they were found (no sparse or padded rows then).
    let regressions =
        REGRESSIONS.iter().map(|&(s, nf)| (s, GenOptions { non_finite: nf, sparse_rows: false, padded_rows: false, products: false, ..GenOptions::default() }));
    for (seed, opts) in random.take_while(|_| budget.is_none_or(|b| start.elapsed() < b)).chain(regressions) {
        ran += 1;
        // Every non-finite value is refused on wgpu: three cases in four are finite programs.
        let case = generate_with(seed, opts);
        let Ok(f1) = sparsec_ir::text::parse_func("fuzz.sptir", &case.prog.to_sptir()) else {
            other += 1;
            continue;
        };
        let runner = wgpu_runner(&f1, &client);
        match runner.check(&case) {
            Outcome::Agree => agree += 1,
            Outcome::Failure(why) if why.starts_with("cubecl-wgpu") && why.contains(" fails") && REFUSALS.iter().any(|r| why.contains(r)) => {
                refused += 1;
                let r = REFUSALS.iter().find(|r| why.contains(*r)).copied().unwrap_or("?");
                *reasons.entry(r).or_insert(0usize) += 1;
            }
            Outcome::Failure(why) => {
                let schedule = sparsec_testkit::schedules::random_schedule_of(&f1).map(|(_, t)| t.join("; ")).unwrap_or_default();
                failures.push(format!("seed {seed} (non_finite: {}): {why}\n# random schedule: {schedule}\n{}", opts.non_finite, to_reproducer(&case)))
            }
            _ => other += 1,
        }
    }
    let random = ran - REGRESSIONS.len() as u64;
    println!(
        "cubecl fuzz: {random} cases from seed {first} and {} regressions in {:.0} s: {agree} agree, {refused} refused ({reasons:?}), {other} not run by every stage",
        REGRESSIONS.len(),
        start.elapsed().as_secs_f64()
    );
    for f in &failures {
        println!("FAILURE {f}");
    }
    assert!(failures.is_empty(), "{} failures (see above)", failures.len());
    // Non-finite values (a quarter of the cases), overflows and divisions by zero refuse about
    // a third of the runs on wgpu; at least three cases in ten must still compare numbers.
    assert!(agree * 10 >= ran * 3, "only {agree} of {ran} agree");
}
