//! Scheduled programs compute what the unscheduled ones compute: each schedule is lowered to
//! Stage III and run by the interpreter next to the plain lowering, on generated matrices
//! (with empty rows, a full row and 1 × 1) and the shared matrices cora and dwt_992.
//! Schedules that keep the order of every reduction must agree bit for bit.

mod common;

use common::{differential, sched1, workload, Agree};
use sparsec_ir::ThreadTag::*;
use sparsec_schedule::{LoopRv, Schedule};

fn loops(sch: &mut Schedule, block: &str) -> Vec<LoopRv> {
    let b = sch.get_block(block).unwrap();
    sch.get_loops(b).unwrap()
}

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

/// csrmm, one row per GPU block and the features across threads.
pub fn csrmm_row_per_block() -> Schedule {
    let mut sch = sched1("csrmm");
    sch.lower_sparse_iter().unwrap();
    let i = loops(&mut sch, "csrmm0")[0];
    sch.bind(i, BlockIdxX).unwrap();
    let k = loops(&mut sch, "csrmm1")[1];
    let k = sch.split(k, &[None, Some(4)]).unwrap();
    sch.bind(k[1], ThreadIdxX).unwrap();
    let k = loops(&mut sch, "csrmm_init1")[0];
    let k = sch.split(k, &[None, Some(4)]).unwrap();
    sch.bind(k[1], ThreadIdxX).unwrap();
    sch
}

#[test]
fn csrmm_row_per_block_features_across_threads() {
    let sch = csrmm_row_per_block();
    insta::assert_snapshot!("csrmm_row_per_block", sch.text());
    check_replay("csrmm", &sch);
    differential("csrmm", &workload("csrmm"), sch.func(), Agree::Exactly);
}

#[test]
fn sddmm_fused_nonzeros_split_over_threads() {
    let mut sch = sched1("sddmm");
    let sp = sch.get_sparse_iteration("sddmm").unwrap();
    let it = sch.get_sp_iters(sp).unwrap();
    sch.sparse_fuse(sp, &[it[0], it[1]]).unwrap();
    // Stage I alone keeps the meaning.
    differential("sddmm", &workload("sddmm"), sch.func(), Agree::Exactly);
    sch.lower_sparse_iter().unwrap();
    let ij = loops(&mut sch, "sddmm0")[0];
    let ij = sch.split(ij, &[None, Some(32)]).unwrap();
    sch.bind(ij[0], BlockIdxX).unwrap();
    sch.bind(ij[1], ThreadIdxX).unwrap();
    let k = loops(&mut sch, "sddmm1")[0];
    sch.unroll(k).unwrap();
    insta::assert_snapshot!("sddmm_fuse_split", sch.text());
    check_replay("sddmm", &sch);
    differential("sddmm", &workload("sddmm"), sch.func(), Agree::Exactly);
}

#[test]
fn bsrmm_block_columns_outside_then_bound() {
    let mut sch = sched1("bsrmm");
    let sp = sch.get_sparse_iteration("bsrmm").unwrap();
    let it = sch.get_sp_iters(sp).unwrap();
    let (i, bi, bj, f, j) = (it[0], it[1], it[2], it[3], it[4]);
    sch.sparse_reorder(sp, &[i, j, bi, bj, f]).unwrap();
    sch.lower_sparse_iter().unwrap();
    let i = loops(&mut sch, "bsrmm0")[0];
    sch.bind(i, BlockIdxX).unwrap();
    let init = loops(&mut sch, "bsrmm_init1");
    sch.bind(init[0], ThreadIdxY).unwrap();
    sch.bind(init[1], ThreadIdxX).unwrap();
    let l = loops(&mut sch, "bsrmm1");
    // [j, bi, bj, f]: the block's rows and features go to threads, j and bj stay serial.
    sch.reorder(&[l[1], l[3], l[0], l[2]]).unwrap();
    sch.bind(l[1], ThreadIdxY).unwrap();
    sch.bind(l[3], ThreadIdxX).unwrap();
    insta::assert_snapshot!("bsrmm_reorder_bind", sch.text());
    check_replay("bsrmm", &sch);
    // j now runs outside bj: the sum is reassociated.
    differential("bsrmm", &workload("bsrmm"), sch.func(), Agree::Within(1e-4));
}

#[test]
fn ellmm_threads_over_block_rows_and_features() {
    let mut sch = sched1("ellmm");
    sch.lower_sparse_iter().unwrap();
    let i = loops(&mut sch, "ellmm0")[0];
    sch.bind(i, BlockIdxX).unwrap();
    let init = loops(&mut sch, "ellmm_init1");
    sch.bind(init[0], ThreadIdxY).unwrap();
    sch.bind(init[1], ThreadIdxX).unwrap();
    let l = loops(&mut sch, "ellmm1");
    let (j, bi, bj, f) = (l[0], l[1], l[2], l[3]);
    sch.reorder(&[bi, f, j, bj]).unwrap();
    sch.bind(bi, ThreadIdxY).unwrap();
    sch.bind(f, ThreadIdxX).unwrap();
    sch.unroll(bj).unwrap();
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
