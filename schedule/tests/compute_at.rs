//! `compute_at` and `reverse_compute_at`: golden output on corpus workloads, refusals that
//! leave the IR unchanged, differential runs and trace replay.

mod common;

use common::{differential, fails, sched1, sched2, workload, Agree};
use sparsec_ir::{Func, ThreadTag::*};
use sparsec_schedule::{LoopRv, Schedule, ScheduleError as E, Trace};

fn loops(sch: &mut Schedule, block: &str) -> Vec<LoopRv> {
    let b = sch.get_block(block).unwrap();
    sch.get_loops(b).unwrap()
}

/// Replaying the trace (also through JSON) on `original` gives the same text, and the text
/// parses back to itself.
fn check_replay(original: &Func, sch: &Schedule) {
    let reparsed = sparsec_ir::text::parse_func("reparsed", &sch.text()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sparsec_ir::text::print_func(&reparsed), sch.text());
    assert_eq!(sch.trace().replay(original).unwrap().text(), sch.text());
    let back = Trace::from_json(&sch.trace().to_json()).unwrap();
    assert_eq!(&back, sch.trace());
    assert_eq!(back.replay(original).unwrap().text(), sch.text());
}

/// bsrmm: the init nest `(i, bi, f)` is computed at `bi` of the main nest
/// `(i, bi, bj, f)`, then the block rows go to GPU blocks and the rows of a block to threads.
fn bsrmm_init_at_bi() -> Schedule {
    let mut sch = sched1("bsrmm");
    sch.lower_sparse_iter().unwrap();
    let init = sch.get_block("bsrmm_init0").unwrap();
    let main = loops(&mut sch, "bsrmm0");
    sch.compute_at(init, main[1]).unwrap();
    // The init nest keeps only its feature loop.
    assert_eq!(sch.get_loops(init).unwrap().len(), 3);
    sch.bind(main[0], BlockIdxX).unwrap();
    sch.bind(main[1], ThreadIdxY).unwrap();
    sch
}

#[test]
fn compute_at_bsrmm_init_into_the_main_nest() {
    let sch = bsrmm_init_at_bi();
    insta::assert_snapshot!("compute_at_bsrmm_init", sch.text());
    check_replay(&workload("bsrmm"), &sch);
    differential("bsrmm", &workload("bsrmm"), sch.func(), Agree::Exactly);
}

#[test]
fn reverse_compute_at_rfactor_write_back() {
    // sddmm: k split and factored, then the write-back moved under the rf nest's j loop.
    let mut sch = sched2("sddmm");
    let l = loops(&mut sch, "sddmm1");
    let k = sch.split(l[1], &[None, Some(4)]).unwrap();
    sch.rfactor(k[1], 0).unwrap();
    let wb = sch.get_block("sddmm1").unwrap();
    let rf = loops(&mut sch, "sddmm1_rf");
    sch.reverse_compute_at(wb, rf[0]).unwrap();
    insta::assert_snapshot!("reverse_compute_at_sddmm_write_back", sch.text());
    check_replay(&common::stage2("sddmm"), &sch);
    differential("sddmm", &workload("sddmm"), sch.func(), Agree::Within(1e-4));
}

#[test]
fn compute_at_bsrmm_init_at_the_outer_loop() {
    // Computed at `i`, the init of bsrmm keeps two loops of its own.
    let mut sch = sched2("bsrmm");
    let init = sch.get_block("bsrmm_init0").unwrap();
    let main = loops(&mut sch, "bsrmm0");
    sch.compute_at(init, main[0]).unwrap();
    let l = sch.get_loops(init).unwrap();
    assert_eq!(l.len(), 3);
    check_replay(&common::stage2("bsrmm"), &sch);
    differential("bsrmm", &workload("bsrmm"), sch.func(), Agree::Exactly);
}

#[test]
fn compute_at_refusals() {
    // csrmm: the init loop k does not match the column loop j.
    let mut sch = sched2("csrmm");
    let init = sch.get_block("csrmm_init1").unwrap();
    let main = loops(&mut sch, "csrmm1");
    let e = fails(&mut sch, |s| s.compute_at(init, main[0]));
    assert!(matches!(&e, E::LoopMismatch { loop_var, target, .. } if loop_var == "k" && target == "j"), "{e:?}");
    // bsrmm: the consumer cannot be computed at its producer's loop, and a loop of the
    // block's own nest is no target.
    let mut sch = sched2("bsrmm");
    let init = sch.get_block("bsrmm_init0").unwrap();
    let main = sch.get_block("bsrmm0").unwrap();
    let il = sch.get_loops(init).unwrap();
    let ml = sch.get_loops(main).unwrap();
    let e = fails(&mut sch, |s| s.compute_at(main, il[0]));
    assert!(matches!(e, E::WrongOrder { expected: "before", .. }), "{e:?}");
    let e = fails(&mut sch, |s| s.reverse_compute_at(init, ml[0]));
    assert!(matches!(e, E::WrongOrder { expected: "after", .. }), "{e:?}");
    let e = fails(&mut sch, |s| s.compute_at(init, il[1]));
    assert!(matches!(e, E::NotSiblingNests { .. }), "{e:?}");
    // Merging at f would run the init once per bj: the extents differ at bj.
    let e = fails(&mut sch, |s| s.compute_at(init, ml[3]));
    assert!(matches!(&e, E::LoopMismatch { loop_var, target, .. } if loop_var == "f" && target == "bj"), "{e:?}");
}

#[test]
fn compute_at_reads_flattened_indices() {
    // Stage III: C's flattened index `(vi * bs + vbi) * f + vf`-like sums determine the merged
    // loops, so both nests touch an element only in the same iteration of them.
    let mut sch = sched2("bsrmm");
    sch.lower_sparse_buffer().unwrap();
    let init = sch.get_block("bsrmm_init0").unwrap();
    let ml = loops(&mut sch, "bsrmm0");
    sch.compute_at(init, ml[1]).unwrap();
    differential("bsrmm", &workload("bsrmm"), sch.func(), Agree::Exactly);
}

#[test]
fn reverse_compute_at_refuses_to_cross_a_writer() {
    // sparse_softmax: div reads TMP1, which the statements between the max nest and div
    // write.
    let mut sch = sched2("sparse_softmax");
    let div = sch.get_block("div0").unwrap();
    let j = loops(&mut sch, "computer_max0")[0];
    let e = fails(&mut sch, |s| s.reverse_compute_at(div, j));
    assert!(matches!(&e, E::AccessConflict { buffer, reason, .. } if buffer == "TMP1" && reason.contains("between")), "{e:?}");
    // The nest right before div can take it: div reads TMP1 per row, the exp-sum nest
    // writes TMP1[vi] in every j, not per j.
    let j2 = loops(&mut sch, "exp_and_sum0")[0];
    let e = fails(&mut sch, |s| s.reverse_compute_at(div, j2));
    assert!(matches!(&e, E::AccessConflict { buffer, reason, .. } if buffer == "TMP1" && reason.contains("merged")), "{e:?}");
}
