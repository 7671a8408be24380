//! Stage-I primitives: golden output on corpus workloads, and refusals that leave the IR
//! unchanged.

mod common;

use common::{fails, sched1, sched2};
use sparsec_ir::{AttrValue, Stage};
use sparsec_schedule::{IterRv, Schedule, ScheduleError as E};

/// The iterators of sparse iteration `name`, by variable name.
fn iters(sch: &mut Schedule, name: &str) -> (sparsec_schedule::SpIterRv, Vec<IterRv>) {
    let sp = sch.get_sparse_iteration(name).unwrap();
    let its = sch.get_sp_iters(sp).unwrap();
    (sp, its)
}

#[test]
fn get_sp_iters_lists_iterators_in_order() {
    let mut sch = sched1("bsrmm");
    let (_, its) = iters(&mut sch, "bsrmm");
    assert_eq!(its.len(), 5);
    let insts = &sch.trace().insts;
    assert_eq!(insts.len(), 2);
    assert_eq!(insts[1].step.name(), "get_sp_iters");
    assert_eq!(insts[1].outputs, its.iter().map(|r| r.id()).collect::<Vec<_>>());
}

#[test]
fn sparse_reorder_csrmm_features_before_columns() {
    let mut sch = sched1("csrmm");
    let (sp, it) = iters(&mut sch, "csrmm");
    let (i, j, k) = (it[0], it[1], it[2]);
    sch.sparse_reorder(sp, &[i, k, j]).unwrap();
    insta::assert_snapshot!("sparse_reorder_csrmm", sch.text());
    // References follow their iterators: the same order again is the identity.
    sch.sparse_reorder(sp, &[i, k, j]).unwrap();
    // And back.
    sch.sparse_reorder(sp, &[i, j, k]).unwrap();
    assert_eq!(sch.text(), sched1("csrmm").text());
}

#[test]
fn sparse_reorder_bsrmm_block_columns_outside() {
    let mut sch = sched1("bsrmm");
    let (sp, it) = iters(&mut sch, "bsrmm");
    let (i, bi, bj, f, j) = (it[0], it[1], it[2], it[3], it[4]);
    sch.sparse_reorder(sp, &[i, j, bi, bj, f]).unwrap();
    insta::assert_snapshot!("sparse_reorder_bsrmm", sch.text());
}

#[test]
fn sparse_reorder_moves_fused_group_as_a_unit() {
    let mut sch = sched1("fused_sddmm");
    let (sp, it) = iters(&mut sch, "sddmm");
    // fuse(I, J) holds iterators 0 and 1; K has no parent so it may go first.
    sch.sparse_reorder(sp, &[it[2], it[0], it[1]]).unwrap();
    insta::assert_snapshot!("sparse_reorder_fused_group", sch.text());
}

#[test]
fn sparse_fuse_sddmm_rows_and_columns() {
    let mut sch = sched1("sddmm");
    let (sp, it) = iters(&mut sch, "sddmm");
    sch.sparse_fuse(sp, &[it[0], it[1]]).unwrap();
    insta::assert_snapshot!("sparse_fuse_sddmm", sch.text());
    // The same as the hand-written fused workload, up to the function name.
    let fused = sched1("fused_sddmm").text().replace("func fused_sddmm", "func sddmm");
    assert_eq!(sch.text().lines().skip(1).collect::<Vec<_>>(), fused.lines().skip(1).collect::<Vec<_>>());
}

#[test]
fn sparse_fuse_extends_a_fused_group() {
    // fuse(I, J) then K, in fused_reduction_4d_3d-like shapes: all iterators spatial.
    let text = "func f(indptr_j: handle, indptr_k: handle, a: handle, b: handle, n: i32, nnz_j: i32, nnz_k: i32) {
  axis I = dense_fixed(n)
  axis J = dense_variable(I, 8, nnz_j, indptr_j)
  axis K = dense_variable(J, 8, nnz_k, indptr_k)
  buffer A = match_sparse_buffer(a, [I, J, K], f32)
  buffer B = match_sparse_buffer(b, [I, J, K], f32)
  sp_iter s([fuse(I, J), K], \"SSS\") as [i, j, k] {
    B[i, j, k] = A[i, j, k] * 2.0
  }
}
";
    let f = sparsec_ir::text::parse_func("f", text).unwrap();
    let mut sch = Schedule::new(f).unwrap();
    let (sp, it) = iters(&mut sch, "s");
    sch.sparse_fuse(sp, &[it[0], it[1], it[2]]).unwrap();
    assert!(sch.text().contains("sp_iter s([fuse(I, J, K)], \"SSS\") as [i, j, k]"), "{}", sch.text());
}

#[test]
fn annotate_sparse_iteration() {
    let mut sch = sched1("csrmm");
    let sp = sch.get_sparse_iteration("csrmm").unwrap();
    sch.annotate(sp, "preprocess", AttrValue::Bool(true)).unwrap();
    sch.annotate(sp, "tile", AttrValue::Int(32)).unwrap();
    sch.annotate(sp, "tile", AttrValue::Int(16)).unwrap();
    insta::assert_snapshot!("annotate_sp_iter", sch.text());
    sch.unannotate(sp, "preprocess").unwrap();
    sch.unannotate(sp, "tile").unwrap();
    assert_eq!(sch.text(), sched1("csrmm").text());
    // Annotations survive lowering on the outermost block.
    sch.annotate(sp, "note", AttrValue::Str("x".into())).unwrap();
    sch.lower_sparse_iter().unwrap();
    assert!(sch.text().contains("block csrmm0(vi: spatial(m) = i) attrs(note = \"x\")"), "{}", sch.text());
}

// ---- refusals ------------------------------------------------------------------------------

#[test]
fn get_sparse_iteration_refusals() {
    let mut sch = sched1("csrmm");
    let e = fails(&mut sch, |s| s.get_sparse_iteration("nope"));
    assert!(matches!(&e, E::UnknownSpIter { name } if name == "nope"), "{e:?}");
    let mut sch = sched2("csrmm");
    let e = fails(&mut sch, |s| s.get_sparse_iteration("csrmm"));
    assert!(matches!(e, E::WrongStage { primitive: "get_sparse_iteration", stage: Stage::II }), "{e:?}");
}

#[test]
fn sparse_reorder_refuses_non_permutations() {
    let mut sch = sched1("csrmm");
    let (sp, it) = iters(&mut sch, "csrmm");
    let e = fails(&mut sch, |s| s.sparse_reorder(sp, &[it[0], it[1]]));
    assert!(matches!(&e, E::NotAPermutation { given, .. } if given.len() == 2), "{e:?}");
    let e = fails(&mut sch, |s| s.sparse_reorder(sp, &[it[0], it[1], it[1]]));
    assert!(matches!(e, E::NotAPermutation { .. }), "{e:?}");
}

#[test]
fn sparse_reorder_refuses_child_before_parent() {
    let mut sch = sched1("csrmm");
    let (sp, it) = iters(&mut sch, "csrmm");
    let e = fails(&mut sch, |s| s.sparse_reorder(sp, &[it[1], it[0], it[2]]));
    assert!(matches!(&e, E::ParentAfterChild { axis, parent } if axis == "J" && parent == "I"), "{e:?}");
    // An attached axis must come after its attach target.
    let mut sch = sched1("hyper_gnn");
    let (sp, it) = iters(&mut sch, "hyper_gnn");
    let e = fails(&mut sch, |s| s.sparse_reorder(sp, &[it[0], it[1], it[3], it[2]]));
    assert!(matches!(&e, E::ParentAfterChild { axis, parent } if axis == "I_T" && parent == "J"), "{e:?}");
}

#[test]
fn sparse_reorder_refuses_splitting_a_fused_group() {
    let mut sch = sched1("fused_sddmm");
    let (sp, it) = iters(&mut sch, "sddmm");
    let e = fails(&mut sch, |s| s.sparse_reorder(sp, &[it[0], it[2], it[1]]));
    assert!(matches!(&e, E::SplitsFusedGroup { group } if group == &["i", "j"]), "{e:?}");
    let e = fails(&mut sch, |s| s.sparse_reorder(sp, &[it[2], it[1], it[0]]));
    assert!(matches!(e, E::SplitsFusedGroup { .. }), "{e:?}");
}

#[test]
fn sparse_reorder_refuses_foreign_iterators_and_wrong_stage() {
    let mut sch = sched1("sparse_softmax");
    let (_, max_it) = iters(&mut sch, "computer_max");
    let sum = sch.get_sparse_iteration("exp_and_sum").unwrap();
    let e = fails(&mut sch, |s| s.sparse_reorder(sum, &max_it));
    assert!(matches!(&e, E::UnknownIter { sp_iter, iter } if sp_iter == "exp_and_sum" && iter == "j"), "{e:?}");
    // After lowering, references to sparse iterations are stale and Stage I primitives refuse.
    let mut sch = sched1("csrmm");
    let (sp, it) = iters(&mut sch, "csrmm");
    sch.lower_sparse_iter().unwrap();
    let e = fails(&mut sch, |s| s.sparse_reorder(sp, &it));
    assert!(matches!(e, E::WrongStage { primitive: "sparse_reorder", stage: Stage::II }), "{e:?}");
}

#[test]
fn sparse_reorder_refuses_child_before_sparse_parent() {
    // square_sum: K's parent is the sparse axis J.
    let mut sch = sched1("square_sum");
    let (sp, it) = iters(&mut sch, "square_sum");
    // [i, k, j]: k's parent j would come after it.
    let e = fails(&mut sch, |s| s.sparse_reorder(sp, &[it[0], it[2], it[1]]));
    assert!(matches!(&e, E::ParentAfterChild { axis, parent } if axis == "K" && parent == "J"), "{e:?}");
}

#[test]
fn sparse_fuse_refuses_non_contiguous() {
    let mut sch = sched1("bsrmm");
    let (sp, it) = iters(&mut sch, "bsrmm");
    // [I, BI, BJ, F, J]: i and j are far apart. SparseTIR would drop an iterator here.
    let e = fails(&mut sch, |s| s.sparse_fuse(sp, &[it[0], it[4]]));
    assert!(matches!(&e, E::NotContiguous { iters } if iters == &["i", "j"]), "{e:?}");
}

#[test]
fn sparse_fuse_refuses_non_chains_and_non_roots() {
    let mut sch = sched1("csrmm");
    let (sp, it) = iters(&mut sch, "csrmm");
    let e = fails(&mut sch, |s| s.sparse_fuse(sp, &[it[1], it[2]]));
    assert!(matches!(&e, E::NotAParentChain { axis, parent } if axis == "K" && parent == "J"), "{e:?}");
    let e = fails(&mut sch, |s| s.sparse_fuse(sp, &[it[1], it[0]]));
    assert!(matches!(e, E::NotAParentChain { .. }), "{e:?}");
    let mut sch = sched1("square_sum");
    let (sp, it) = iters(&mut sch, "square_sum");
    let e = fails(&mut sch, |s| s.sparse_fuse(sp, &[it[1], it[2]]));
    assert!(matches!(&e, E::NotARoot { axis } if axis == "J"), "{e:?}");
}

#[test]
fn sparse_fuse_refuses_bad_groups() {
    let mut sch = sched1("csr_reduce");
    let (sp, it) = iters(&mut sch, "csr_reduce");
    let e = fails(&mut sch, |s| s.sparse_fuse(sp, &[it[0], it[1]]));
    assert!(matches!(&e, E::MixedKinds { kinds, .. } if kinds == "SR"), "{e:?}");
    let e = fails(&mut sch, |s| s.sparse_fuse(sp, &[it[0]]));
    assert!(matches!(e, E::TooFew { primitive: "sparse_fuse", got: 1, .. }), "{e:?}");
    let e = fails(&mut sch, |s| s.sparse_fuse(sp, &[it[0], it[0]]));
    assert!(matches!(&e, E::Duplicate { name } if name == "i"), "{e:?}");
    let mut sch = sched1("fused_sddmm");
    let (sp, it) = iters(&mut sch, "sddmm");
    let e = fails(&mut sch, |s| s.sparse_fuse(sp, &[it[1], it[2]]));
    assert!(matches!(e, E::SplitsFusedGroup { .. }), "{e:?}");
    let mut sch = sched1("hyper_gnn");
    let (sp, it) = iters(&mut sch, "hyper_gnn");
    let e = fails(&mut sch, |s| s.sparse_fuse(sp, &[it[2], it[3]]));
    assert!(matches!(&e, E::CannotFuseAttach { iter } if iter == "i_t"), "{e:?}");
}

#[test]
fn annotate_refusals() {
    let mut sch = sched1("csrmm");
    let sp = sch.get_sparse_iteration("csrmm").unwrap();
    let e = fails(&mut sch, |s| s.annotate(sp, "", AttrValue::Int(1)));
    assert!(matches!(e, E::InvalidKey { .. }), "{e:?}");
    let e = fails(&mut sch, |s| s.annotate(sp, "x", AttrValue::Float(f64::NAN)));
    assert!(matches!(e, E::InvalidValue { .. }), "{e:?}");
    let e = fails(&mut sch, |s| s.unannotate(sp, "missing"));
    assert!(matches!(&e, E::NoSuchAnnotation { target, key } if target == "csrmm" && key == "missing"), "{e:?}");
    sch.lower_sparse_iter().unwrap();
    let e = fails(&mut sch, |s| s.annotate(sp, "x", AttrValue::Int(1)));
    assert!(matches!(e, E::StaleRef { .. }), "{e:?}");
}
