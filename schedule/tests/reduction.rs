//! Reduction primitives: `decompose_reduction` and `rfactor`. Golden output on corpus
//! workloads, refusals that leave the IR unchanged, differential runs (scheduled against
//! unscheduled, also lowered to Stage III) and trace replay.

mod common;

use common::{differential, fails, sched1, sched2, workload, Agree};
use sparsec_ir::{Func, Stage, ThreadTag::*};
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

/// sddmm at Stage II with the init kept inside the reduction block (hand-written: lowering
/// hoists inits into their own nest). The reduction over `k` is never empty for the
/// feature sizes of the tests, so it computes what the workload computes.
const SDDMM_INIT: &str = "func sddmm(a: handle, b: handle, c: handle, indptr: handle, indices: handle, m: i32, n: i32, feat_size: i32, nnz: i32) stage II {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz, indptr, indices)
  axis J_detach = dense_fixed(n)
  axis K = dense_fixed(feat_size)
  axis J_dense = dense_variable(I, n, nnz, indptr)
  buffer A = match_sparse_buffer(a, [I, K], f32)
  buffer B = match_sparse_buffer(b, [J_detach, K], f32)
  buffer C = match_sparse_buffer(c, [I, J], f32)
  buffer J_indptr = match_sparse_buffer(indptr, [I], i32, extra_storage = 1)
  buffer J_indices = match_sparse_buffer(indices, [I, J_dense], i32)
  for i in serial(m) {
    block sddmm0(vi: spatial(m) = i) {
      reads(J_indptr[vi + 1], J_indptr[vi], C[vi, 0:n], A[vi, 0:feat_size], B[0:n, 0:feat_size], J_indices[vi, 0:n])
      writes(C[vi, 0:n])
      for j in serial(J_indptr[vi + 1] - J_indptr[vi]) {
        for k in serial(feat_size) {
          block sddmm1(vj: spatial(n) = j, vk: reduce(feat_size) = k) {
            reads(C[vi, vj], A[vi, vk], B[J_indices[vi, vj], vk], J_indices[vi, vj])
            writes(C[vi, vj])
            init {
              C[vi, vj] = 0.0
            }
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[J_indices[vi, vj], vk]
          }
        }
      }
    }
  }
}
";

fn sddmm_init() -> Func {
    sparsec_ir::text::parse_func("sddmm_init", SDDMM_INIT).unwrap_or_else(|e| panic!("{e}"))
}

// ---- decompose_reduction -----------------------------------------------------------------

#[test]
fn decompose_reduction_at_the_reduction_loop() {
    let f = sddmm_init();
    let mut sch = Schedule::new(f.clone()).unwrap();
    let b = sch.get_block("sddmm1").unwrap();
    let l = sch.get_loops(b).unwrap();
    let init = sch.decompose_reduction(b, l[1]).unwrap();
    assert_eq!(sch.get_loops(init).unwrap().len(), 1);
    insta::assert_snapshot!("decompose_sddmm_at_k", sch.text());
    check_replay(&f, &sch);
    differential("sddmm", &workload("sddmm"), sch.func(), Agree::Exactly);
}

#[test]
fn decompose_reduction_at_the_outer_spatial_loop() {
    let f = sddmm_init();
    let mut sch = Schedule::new(f.clone()).unwrap();
    let b = sch.get_block("sddmm1").unwrap();
    let l = sch.get_loops(b).unwrap();
    sch.decompose_reduction(b, l[0]).unwrap();
    insta::assert_snapshot!("decompose_sddmm_at_j", sch.text());
    check_replay(&f, &sch);
    differential("sddmm", &workload("sddmm"), sch.func(), Agree::Exactly);
}

#[test]
fn decompose_reduction_refusals() {
    // No init after lowering.
    let mut sch = sched2("csrmm");
    let b = sch.get_block("csrmm1").unwrap();
    let l = sch.get_loops(b).unwrap();
    let e = fails(&mut sch, |s| s.decompose_reduction(b, l[0]));
    assert!(matches!(&e, E::NoInit { block } if block == "csrmm1"), "{e:?}");
    // A loop that is not around the block.
    let mut sch = Schedule::new(sddmm_init()).unwrap();
    let b = sch.get_block("sddmm1").unwrap();
    let outer = loops(&mut sch, "sddmm0")[0];
    let e = fails(&mut sch, |s| s.decompose_reduction(b, outer));
    assert!(matches!(&e, E::NotAnEnclosingLoop { loop_var, .. } if loop_var == "i"), "{e:?}");
    // With k outside j, the init would run once per k.
    let l = sch.get_loops(b).unwrap();
    sch.reorder(&[l[1], l[0]]).unwrap();
    let e = fails(&mut sch, |s| s.decompose_reduction(b, l[0]));
    assert!(matches!(&e, E::ReductionLoopAbove { loop_var, at, .. } if loop_var == "k" && at == "j"), "{e:?}");
    // A fused spatial-and-reduction loop drives both kinds.
    sch.reorder(&[l[0], l[1]]).unwrap();
    let jk = sch.fuse(&l).unwrap();
    let e = fails(&mut sch, |s| s.decompose_reduction(b, jk));
    assert!(matches!(&e, E::MixedLoop { loop_var, .. } if loop_var == "j_k_fused"), "{e:?}");
    // Stage I.
    let mut s1 = sched1("sddmm");
    let e = fails(&mut s1, |s| s.decompose_reduction(b, jk));
    assert!(matches!(e, E::WrongStage { primitive: "decompose_reduction", stage: Stage::I }), "{e:?}");
}

// ---- rfactor --------------------------------------------------------------------------------

/// sddmm at Stage II, k split by 4 and the inner part factored.
fn sddmm_rfactor() -> Schedule {
    let mut sch = sched1("sddmm");
    sch.lower_sparse_iter().unwrap();
    let l = loops(&mut sch, "sddmm1");
    let k = sch.split(l[1], &[None, Some(4)]).unwrap();
    sch.rfactor(k[1], 0).unwrap();
    sch
}

#[test]
fn rfactor_sddmm_inner_split_loop() {
    let sch = sddmm_rfactor();
    insta::assert_snapshot!("rfactor_sddmm_ki", sch.text());
    check_replay(&workload("sddmm"), &sch);
    differential("sddmm", &workload("sddmm"), sch.func(), Agree::Within(1e-4));
}

/// The GPU schedule: fuse the sparse iteration's I and J, lower, split the fused loop over
/// blocks and threads, split the reduction k in (ko, ki) and factor ki so that threads
/// compute partial sums.
fn sddmm_fuse_split_rfactor() -> Schedule {
    let mut sch = sched1("sddmm");
    let sp = sch.get_sparse_iteration("sddmm").unwrap();
    let it = sch.get_sp_iters(sp).unwrap();
    sch.sparse_fuse(sp, &[it[0], it[1]]).unwrap();
    sch.lower_sparse_iter().unwrap();
    let ij = loops(&mut sch, "sddmm0")[0];
    let ij = sch.split(ij, &[None, Some(8)]).unwrap();
    sch.bind(ij[0], BlockIdxX).unwrap();
    sch.bind(ij[1], ThreadIdxY).unwrap();
    let k = loops(&mut sch, "sddmm1")[0];
    let k = sch.split(k, &[None, Some(4)]).unwrap();
    let rf = sch.rfactor(k[1], 0).unwrap();
    let l = sch.get_loops(rf).unwrap();
    assert_eq!(l.len(), 2);
    sch.bind(l[1], ThreadIdxX).unwrap();
    sch
}

#[test]
fn sddmm_fuse_split_rfactor_bind() {
    let sch = sddmm_fuse_split_rfactor();
    insta::assert_snapshot!("rfactor_sddmm_fused_gpu", sch.text());
    check_replay(&workload("sddmm"), &sch);
    differential("sddmm", &workload("sddmm"), sch.func(), Agree::Within(1e-4));
}

#[test]
fn rfactor_keeps_the_init_in_the_write_back() {
    let f = sddmm_init();
    let mut sch = Schedule::new(f.clone()).unwrap();
    let l = loops(&mut sch, "sddmm1");
    let k = sch.split(l[1], &[Some(2), None]).unwrap();
    sch.rfactor(k[0], 1).unwrap();
    insta::assert_snapshot!("rfactor_sddmm_init_axis1", sch.text());
    check_replay(&f, &sch);
    differential("sddmm", &workload("sddmm"), sch.func(), Agree::Within(1e-4));
}

#[test]
fn rfactor_inside_the_loop_of_a_one_element_cache() {
    // The CPU's SDDMM: C[i, j] cached in one local element over the nonzero loop j, then the
    // feature loop split and factored. The partial sums live inside j (fresh per nonzero,
    // 4 elements, not indexed by j) and so does the write-back: the cache stays in scope.
    let mut sch = sched1("sddmm");
    sch.lower_sparse_iter().unwrap();
    let b = sch.get_block("sddmm1").unwrap();
    let l = sch.get_loops(b).unwrap();
    sch.cache_write(b, "C", sparsec_ir::Scope::Local, l[l.len() - 2]).unwrap();
    let k = *loops(&mut sch, "sddmm1").last().unwrap();
    let k = sch.split(k, &[None, Some(4)]).unwrap();
    sch.rfactor(k[1], 0).unwrap();
    let text = sch.text();
    insta::assert_snapshot!("rfactor_sddmm_inside_cache_loop", text);
    assert!(text.contains("C_local_rf = alloc_buffer([4], f32, global)"), "{text}");
    check_replay(&workload("sddmm"), &sch);
    differential("sddmm", &workload("sddmm"), sch.func(), Agree::Within(1e-4));
}

#[test]
fn rfactor_csrmm_rows_at_stage_iii() {
    // csrmm's reduction is over the stored columns j; factor 2-way after splitting j.
    let mut sch = sched1("csrmm");
    sch.lower_sparse_iter().unwrap();
    sch.lower_sparse_buffer().unwrap();
    let l = loops(&mut sch, "csrmm1");
    let j = sch.split(l[0], &[None, Some(2)]).unwrap();
    sch.rfactor(j[1], 1).unwrap();
    check_replay(&workload("csrmm"), &sch);
    differential("csrmm", &workload("csrmm"), sch.func(), Agree::Within(1e-4));
}

#[test]
fn rfactor_refusals() {
    let mut sch = sched2("sddmm");
    let l = loops(&mut sch, "sddmm1");
    // j drives a spatial iterator.
    let e = fails(&mut sch, |s| s.rfactor(l[0], 0));
    assert!(matches!(&e, E::NotOneReduceIter { loop_var, spatial: 1, reduce: 0, .. } if loop_var == "j"), "{e:?}");
    // The loop of the init nest drives only a spatial iterator.
    let init = loops(&mut sch, "sddmm_init1")[0];
    let e = fails(&mut sch, |s| s.rfactor(init, 0));
    assert!(matches!(e, E::NotOneReduceIter { spatial: 1, .. }), "{e:?}");
    // Factor axis past the one spatial iterator.
    let e = fails(&mut sch, |s| s.rfactor(l[1], 2));
    assert!(matches!(e, E::FactorAxisOutOfRange { axis: 2, max: 1 }), "{e:?}");
    // A loop around a block of its own: i drives the spatial iterator of sddmm0.
    let i = loops(&mut sch, "sddmm0")[0];
    let e = fails(&mut sch, |s| s.rfactor(i, 0));
    assert!(matches!(&e, E::NotOneReduceIter { block, spatial: 1, .. } if block == "sddmm0"), "{e:?}");
    // A max reduction is not a sum; the sum next to it is.
    let mut sm = sched2("sparse_softmax");
    let j = loops(&mut sm, "computer_max0")[0];
    let e = fails(&mut sm, |s| s.rfactor(j, 0));
    assert!(matches!(&e, E::NotAReduction { block, .. } if block == "computer_max0"), "{e:?}");
    // A sum whose extent is the row length: the rf buffer is allocated inside the row's
    // block, where that length is known.
    let j = loops(&mut sm, "exp_and_sum0")[0];
    sm.rfactor(j, 0).unwrap();
    assert!(sm.text().contains("buffer TMP1_rf = alloc_buffer([J_indptr[vi + 1] - J_indptr[vi]], f32, global)"), "{}", sm.text());
}
