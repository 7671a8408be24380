//! Scheduled programs compute what the unscheduled ones compute: each schedule is lowered to
//! Stage III and run by the interpreter next to the plain lowering, on generated matrices
//! (with empty rows, a full row and 1 × 1) and the shared matrices cora and dwt_992.
//! Schedules that keep the order of every reduction must agree bit for bit.

mod common;

use common::{differential, sched1, workload, Agree};
use sparsec_ir::ThreadTag::*;
use sparsec_schedule::Schedule;
use sparsec_testkit::schedules::{self as hand, loops};

/// Replaying the trace (also through JSON) on the original program gives the same text.
fn check_replay(name: &str, sch: &Schedule) {
    let original = workload(name);
    // The printed schedule parses back to the same text.
    let reparsed = sparsec_ir::text::parse_func(name, &sch.text()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sparsec_ir::text::print_func(&reparsed), sch.text());
    let again = sch.trace().replay(&original).unwrap();
    assert_eq!(again.text(), sch.text());
    let json = sch.trace().to_json();
    let back = sparsec_schedule::Trace::from_json(&json).unwrap();
    assert_eq!(&back, sch.trace());
    assert_eq!(back.replay(&original).unwrap().text(), sch.text());
}

#[test]
fn csrmm_row_per_block_features_across_threads() {
    let sch = hand::csrmm_row_per_block(4);
    insta::assert_snapshot!("csrmm_row_per_block", sch.text());
    check_replay("csrmm", &sch);
    differential("csrmm", &workload("csrmm"), sch.func(), Agree::Exactly);
}

#[test]
fn sddmm_fused_nonzeros_split_over_threads() {
    // Stage I alone keeps the meaning.
    let mut fused = sched1("sddmm");
    let sp = fused.get_sparse_iteration("sddmm").unwrap();
    let it = fused.get_sp_iters(sp).unwrap();
    fused.sparse_fuse(sp, &[it[0], it[1]]).unwrap();
    differential("sddmm", &workload("sddmm"), fused.func(), Agree::Exactly);
    let mut sch = hand::sddmm_fused_nonzeros(32);
    let k = loops(&mut sch, "sddmm1")[0];
    sch.unroll(k).unwrap();
    insta::assert_snapshot!("sddmm_fuse_split", sch.text());
    check_replay("sddmm", &sch);
    differential("sddmm", &workload("sddmm"), sch.func(), Agree::Exactly);
}

#[test]
fn bsrmm_block_columns_outside_then_bound() {
    let sch = hand::bsrmm_block_rows();
    insta::assert_snapshot!("bsrmm_reorder_bind", sch.text());
    check_replay("bsrmm", &sch);
    // j now runs outside bj: the sum is reassociated.
    differential("bsrmm", &workload("bsrmm"), sch.func(), Agree::Within(1e-4));
}

#[test]
fn ellmm_threads_over_block_rows_and_features() {
    let sch = hand::ellmm_threads();
    insta::assert_snapshot!("ellmm_binds", sch.text());
    check_replay("ellmm", &sch);
    differential("ellmm", &workload("ellmm"), sch.func(), Agree::Exactly);
}

#[test]
fn csrmm_sparse_reorder_features_before_columns() {
    let mut sch = sched1("csrmm");
    let sp = sch.get_sparse_iteration("csrmm").unwrap();
    let it = sch.get_sp_iters(sp).unwrap();
    sch.sparse_reorder(sp, &[it[0], it[2], it[1]]).unwrap();
    check_replay("csrmm", &sch);
    differential("csrmm", &workload("csrmm"), sch.func(), Agree::Exactly);
}

#[test]
fn csrmm_fuse_and_reorder_at_stage_ii() {
    let mut sch = sched1("csrmm");
    sch.lower_sparse_iter().unwrap();
    let l = loops(&mut sch, "csrmm1");
    sch.reorder(&[l[1], l[0]]).unwrap();
    sch.reorder(&[l[0], l[1]]).unwrap();
    let jk = sch.fuse(&l).unwrap();
    sch.split(jk, &[Some(3), None, Some(2)]).unwrap();
    check_replay("csrmm", &sch);
    differential("csrmm", &workload("csrmm"), sch.func(), Agree::Exactly);
}

#[test]
fn bsrmm_fused_init_and_split_columns() {
    let mut sch = sched1("bsrmm");
    sch.lower_sparse_iter().unwrap();
    let init = loops(&mut sch, "bsrmm_init0");
    let fused = sch.fuse(&init).unwrap();
    let parts = sch.split(fused, &[None, Some(8)]).unwrap();
    sch.bind(parts[0], BlockIdxX).unwrap();
    sch.bind(parts[1], ThreadIdxX).unwrap();
    let j = loops(&mut sch, "bsrmm1")[0];
    sch.split(j, &[None, Some(3)]).unwrap();
    check_replay("bsrmm", &sch);
    differential("bsrmm", &workload("bsrmm"), sch.func(), Agree::Exactly);
}

#[test]
fn sddmm_three_way_split_and_stage_iii_schedule() {
    let mut sch = sched1("sddmm");
    sch.lower_sparse_iter().unwrap();
    let j = loops(&mut sch, "sddmm1")[0];
    sch.split(j, &[Some(2), None, Some(3)]).unwrap();
    sch.lower_sparse_buffer().unwrap();
    // Loops of Stage III are scheduled the same way.
    let init = loops(&mut sch, "sddmm_init1")[0];
    let parts = sch.split(init, &[None, Some(5)]).unwrap();
    sch.vectorize(parts[1]).unwrap();
    check_replay("sddmm", &sch);
    differential("sddmm", &workload("sddmm"), sch.func(), Agree::Exactly);
}

#[test]
fn csrmm_rows_specialized_by_length_keep_every_sum_in_order() {
    // A copy of the nonzero loop for rows of at least 3 nonzeros, its features split: both
    // branches sum in the written order, so the results agree bit for bit.
    let mut sch = sched1("csrmm");
    sch.lower_sparse_iter().unwrap();
    let l = loops(&mut sch, "csrmm1");
    let [long, short] = sch.specialize(l[0], 3).unwrap();
    assert_ne!(long, short);
    let b = sch.get_block("csrmm1_long").unwrap();
    let k = *sch.get_loops(b).unwrap().last().unwrap();
    sch.split(k, &[None, Some(4)]).unwrap();
    assert!(sch.text().contains("if J_indptr[vi + 1] - J_indptr[vi] >= 3 {"), "{}", sch.text());
    check_replay("csrmm", &sch);
    differential("csrmm", &workload("csrmm"), sch.func(), Agree::Exactly);
}
