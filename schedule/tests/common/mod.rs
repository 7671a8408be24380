//! Helpers shared by the schedule tests: workloads, matrices, argument builders, and
//! assertions about failed primitives and differential runs.
#![allow(dead_code)]

use sparsec_ir::data::Args;
use sparsec_ir::Func;
use sparsec_schedule::{Schedule, ScheduleError};

pub use sparsec_testkit::workload;

/// The workload lowered to Stage II.
pub fn stage2(name: &str) -> Func {
    sparsec_passes::lower_sparse_iter(&workload(name)).unwrap()
}

/// A schedule of the workload at Stage I.
pub fn sched1(name: &str) -> Schedule {
    Schedule::new(workload(name)).unwrap()
}

/// A schedule of the workload at Stage II.
pub fn sched2(name: &str) -> Schedule {
    Schedule::new(stage2(name)).unwrap()
}

/// Runs a primitive that must fail; checks that neither the IR nor the trace changed.
pub fn fails<T: std::fmt::Debug>(
    sch: &mut Schedule,
    f: impl FnOnce(&mut Schedule) -> Result<T, ScheduleError>,
) -> ScheduleError {
    let before = sch.text();
    let trace = sch.trace().clone();
    let err = f(sch).expect_err("the primitive should fail");
    assert_eq!(sch.text(), before, "a failed primitive changed the IR ({err})");
    assert_eq!(*sch.trace(), trace, "a failed primitive changed the trace ({err})");
    // Every error displays a message.
    assert!(!err.to_string().is_empty());
    err
}

/// Lowers any stage to Stage III.
pub fn to_stage3(f: &Func) -> Func {
    let mut f = f.clone();
    if f.stage == sparsec_ir::Stage::I {
        f = sparsec_passes::lower_sparse_iter(&f).unwrap();
    }
    if f.stage == sparsec_ir::Stage::II {
        f = sparsec_passes::lower_sparse_buffer(&f).unwrap();
    }
    sparsec_ir::verify::verify_func(&f).unwrap();
    f
}

// ---- matrices and arguments (from the testkit) ----------------------------------------------

pub use sparsec_testkit::Mat;

/// Generated matrices, including empty rows, one full row and 1 × 1.
pub fn generated() -> Vec<(String, Mat)> {
    sparsec_testkit::generated_matrices()
}

/// The shared matrices `cora` and `dwt_992`; the test fails when the data folder lacks them
/// (they are part of the project's shared data).
pub fn shared() -> Vec<(String, Mat)> {
    let wanted = ["cora", "dwt_992"];
    let found: Vec<(String, Mat)> =
        sparsec_testkit::shared_matrices().into_iter().filter(|(n, _)| wanted.contains(&n.as_str())).collect();
    assert_eq!(found.len(), wanted.len(), "shared matrices cora and dwt_992 not found");
    found
}

/// Generated then shared matrices.
pub fn matrices() -> Vec<(String, Mat)> {
    let mut v = generated();
    v.extend(shared());
    v
}

/// Arguments of a workload on a matrix (the testkit's case; outputs start at the sentinel 7.0).
pub fn args_for(workload: &str, m: &Mat, seed: u64) -> Args {
    let case = sparsec_testkit::workloads::case(workload, m, &mut sparsec_testkit::Rng::new(seed));
    case.unwrap_or_else(|| panic!("{workload} does not apply to this matrix")).args
}

/// The array `c` after running `f`.
pub fn run_c(f: &Func, args: &Args) -> Vec<f32> {
    let out = sparsec_interp::run(f, args).unwrap_or_else(|e| panic!("{}: {e}", f.name));
    sparsec_testkit::output_f32(&out, "c")
}

/// How two runs must agree.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Agree {
    /// Bit for bit: the schedule keeps the order of every reduction.
    Exactly,
    /// Up to reassociation of a reduction (relative tolerance).
    Within(f32),
}

/// Runs `base` and `scheduled` (any stage, both lowered to Stage III; `scheduled` also at
/// its own stage) on every matrix and compares `c`.
pub fn differential(workload: &str, base: &Func, scheduled: &Func, agree: Agree) {
    let base3 = to_stage3(base);
    let sched3 = to_stage3(scheduled);
    for (k, (name, m)) in matrices().iter().enumerate() {
        let args = args_for(workload, m, 17 + k as u64);
        let want = run_c(&base3, &args);
        assert!(want.iter().all(|v| *v != 7.0) || want.is_empty(), "{workload}/{name}: baseline left the sentinel");
        let mut runs = vec![("stage III", run_c(&sched3, &args))];
        if k < 2 {
            runs.push(("own stage", run_c(scheduled, &args)));
        }
        for (stage, got) in runs {
            assert_eq!(got.len(), want.len());
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let ok = match agree {
                    Agree::Exactly => g.to_bits() == w.to_bits(),
                    Agree::Within(rtol) => (g - w).abs() <= rtol * (1.0 + w.abs()),
                };
                assert!(ok, "{workload}/{name} ({stage}): c[{i}] = {g}, want {w}");
            }
        }
    }
}
