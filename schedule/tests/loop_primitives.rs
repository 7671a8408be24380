//! Loop primitives at Stage II/III: golden output on lowered corpus workloads, and refusals
//! that leave the IR unchanged. Whether `parallel`, `bind` and `vectorize` accept small loop
//! bodies (their race checks) is in the filetests, `tests/filetests/schedule/`.

mod common;

use common::{fails, sched1, sched2};
use sparsec_ir::{AttrValue, Stage, ThreadTag};
use sparsec_schedule::{LoopRv, Schedule, ScheduleError as E};

/// A triangular nest (inner extent uses the outer loop variable) and a constant nest.
const SMALL: &str = "func small(a: handle, b: handle, n: i32) stage III {
  buffer A = match_buffer(a, [n * n], f32)
  buffer B = match_buffer(b, [n * n], f32)
  for i in serial(n) {
    for j in serial(i) {
      block tri(vi: spatial(n) = i, vj: spatial(n) = j) {
        B[vi * n + vj] = A[vi * n + vj]
      }
    }
  }
  for x in serial(12) {
    for y in serial(8) {
      block cst(vx: spatial(12) = x, vy: spatial(8) = y) {
        B[vx * 8 + vy] = A[vx * 8 + vy] * 2.0
      }
    }
  }
}
";

fn small() -> Schedule {
    Schedule::new(sparsec_ir::text::parse_func("small", SMALL).unwrap()).unwrap()
}

fn loops(sch: &mut Schedule, block: &str) -> Vec<LoopRv> {
    let b = sch.get_block(block).unwrap();
    sch.get_loops(b).unwrap()
}

#[test]
fn get_loops_stops_at_the_enclosing_block() {
    let mut sch = sched2("csrmm");
    assert_eq!(loops(&mut sch, "csrmm0").len(), 1);
    assert_eq!(loops(&mut sch, "csrmm_init1").len(), 1);
    assert_eq!(loops(&mut sch, "csrmm1").len(), 2);
    // Loops around other statements (the guard of a split) are still found.
    let k = loops(&mut sch, "csrmm1")[1];
    sch.split(k, &[None, Some(4)]).unwrap();
    assert_eq!(loops(&mut sch, "csrmm1").len(), 3);
}

#[test]
fn split_symbolic_extent_adds_a_guard() {
    let mut sch = sched2("csrmm");
    let l = loops(&mut sch, "csrmm1");
    let out = sch.split(l[1], &[None, Some(4)]).unwrap();
    assert_eq!(out.len(), 2);
    insta::assert_snapshot!("split_csrmm_k", sch.text());
}

/// A split by 1 leaves a loop of one iteration whose variable the binding adds at
/// coefficient 1 beside the lane (`k_0 * 32 + k_1 + k_2`): still one-to-one, so accepted.
#[test]
fn split_by_one_keeps_the_binding_provable() {
    let mut sch = sched2("csrmm");
    let l = loops(&mut sch, "csrmm1");
    sch.split(l[1], &[None, Some(32), Some(1)]).unwrap();
    assert!(sch.text().contains("(k_0 * 32 + k_1) * 1 + k_2") || sch.text().contains("k_0 * 32 + k_1 + k_2"), "{}", sch.text());
}

#[test]
fn split_sparse_loop_three_ways() {
    let mut sch = sched2("sddmm");
    let l = loops(&mut sch, "sddmm1");
    sch.split(l[0], &[Some(2), None, Some(8)]).unwrap();
    insta::assert_snapshot!("split_sddmm_j_three", sch.text());
}

#[test]
fn split_constant_extent() {
    let mut sch = small();
    let l = loops(&mut sch, "cst");
    // 12 = 3 × 4: no guard.
    sch.split(l[0], &[None, Some(4)]).unwrap();
    // 8 does not divide by 3: inferred 3, guarded.
    sch.split(l[1], &[Some(3), None]).unwrap();
    insta::assert_snapshot!("split_constant", sch.text());
}

#[test]
fn fuse_csrmm_columns_and_features() {
    let mut sch = sched2("csrmm");
    let l = loops(&mut sch, "csrmm1");
    sch.fuse(&l).unwrap();
    insta::assert_snapshot!("fuse_csrmm_jk", sch.text());
}

#[test]
fn fuse_bsrmm_init_nest_of_three() {
    let mut sch = sched2("bsrmm");
    let l = loops(&mut sch, "bsrmm_init0");
    let f = sch.fuse(&l).unwrap();
    // The fused loop can be split again.
    sch.split(f, &[None, Some(32)]).unwrap();
    insta::assert_snapshot!("fuse_bsrmm_init", sch.text());
}

#[test]
fn reorder_csrmm_features_outside() {
    let mut sch = sched2("csrmm");
    let l = loops(&mut sch, "csrmm1");
    sch.reorder(&[l[1], l[0]]).unwrap();
    insta::assert_snapshot!("reorder_csrmm_kj", sch.text());
}

#[test]
fn reorder_ellmm_four_loops() {
    let mut sch = sched2("ellmm");
    let l = loops(&mut sch, "ellmm1");
    let (j, bi, bj, f) = (l[0], l[1], l[2], l[3]);
    sch.reorder(&[bi, f, j, bj]).unwrap();
    insta::assert_snapshot!("reorder_ellmm", sch.text());
    // The same loops in the original order restore the program.
    sch.reorder(&[j, bi, bj, f]).unwrap();
    assert_eq!(sch.text(), sched2("ellmm").text());
}

#[test]
fn loop_kinds_on_ellmm() {
    let mut sch = sched2("ellmm");
    let i = loops(&mut sch, "ellmm0")[0];
    sch.bind(i, ThreadTag::BlockIdxX).unwrap();
    let init = loops(&mut sch, "ellmm_init1");
    sch.bind(init[0], ThreadTag::ThreadIdxY).unwrap();
    sch.vectorize(init[1]).unwrap();
    let l = loops(&mut sch, "ellmm1");
    sch.bind(l[1], ThreadTag::ThreadIdxY).unwrap();
    sch.unroll(l[2]).unwrap();
    sch.parallel(l[3]).unwrap();
    insta::assert_snapshot!("kinds_ellmm", sch.text());
}

#[test]
fn annotate_blocks_and_loops() {
    let mut sch = sched2("csrmm");
    let b = sch.get_block("csrmm1").unwrap();
    let l = sch.get_loops(b).unwrap();
    sch.annotate(b, "sparse_kind", AttrValue::Str("csr".into())).unwrap();
    sch.annotate(l[0], "pragma_unroll_explicit", AttrValue::Int(0)).unwrap();
    sch.annotate(l[1], "ratio", AttrValue::Float(0.5)).unwrap();
    insta::assert_snapshot!("annotate_loops", sch.text());
    // Loop annotations move with the loop through reorder, and to the outer loop of a split.
    sch.reorder(&[l[1], l[0]]).unwrap();
    let out = sch.split(l[1], &[None, Some(2)]).unwrap();
    assert!(sch.text().contains("for k_0 in serial((feat_size + 1) // 2) attrs(ratio = 0.5)"), "{}", sch.text());
    sch.unannotate(out[0], "ratio").unwrap();
    sch.unannotate(l[0], "pragma_unroll_explicit").unwrap();
    sch.unannotate(b, "sparse_kind").unwrap();
    assert!(!sch.text().contains("attrs"));
}

#[test]
fn primitives_work_at_stage_iii() {
    let mut sch = sched2("csrmm");
    let l = loops(&mut sch, "csrmm1");
    sch.lower_sparse_buffer().unwrap();
    // References made at Stage II still resolve.
    let k = sch.split(l[1], &[None, Some(2)]).unwrap();
    sch.bind(k[1], ThreadTag::ThreadIdxX).unwrap();
    assert_eq!(sch.func().stage, Stage::III);
    insta::assert_snapshot!("stage3_split_bind", sch.text());
}

// ---- refusals ------------------------------------------------------------------------------

#[test]
fn get_block_and_get_loops_refusals() {
    let mut sch = sched2("csrmm");
    let e = fails(&mut sch, |s| s.get_block("nope"));
    assert!(matches!(&e, E::UnknownBlock { name } if name == "nope"), "{e:?}");
    let mut s1 = sched1("csrmm");
    let e = fails(&mut s1, |s| s.get_block("csrmm0"));
    assert!(matches!(e, E::WrongStage { primitive: "get_block", stage: Stage::I }), "{e:?}");
    // A block reference of another schedule: unknown here, or of another kind here.
    let mut other = sched2("csrmm");
    let _ = loops(&mut other, "csrmm1"); // ids 0 (block), 1 and 2 (loops)
    let b = other.get_block("csrmm0").unwrap(); // id 3
    let e = fails(&mut sch, |s| s.get_loops(b));
    assert!(matches!(e, E::StaleRef { rv: 3, .. }), "{e:?}");
    let _ = loops(&mut sch, "csrmm1"); // ids 0, 1, 2
    let _ = loops(&mut sch, "csrmm_init1"); // ids 3 (block), 4 (loop)
    let e = fails(&mut sch, |s| s.split(LoopRvProbe::id3(), &[None, Some(2)]));
    assert!(matches!(e, E::WrongRefKind { rv: 3, expected: "loop" }), "{e:?}");
}

#[test]
fn split_refuses_bad_factors() {
    let mut sch = sched2("csrmm");
    let l = loops(&mut sch, "csrmm1");
    let e = fails(&mut sch, |s| s.split(l[1], &[None, Some(0)]));
    assert!(matches!(e, E::NonPositiveFactor { factor: 0 }), "{e:?}");
    let e = fails(&mut sch, |s| s.split(l[1], &[Some(-2), None]));
    assert!(matches!(e, E::NonPositiveFactor { factor: -2 }), "{e:?}");
    let e = fails(&mut sch, |s| s.split(l[1], &[None, None]));
    assert!(matches!(e, E::MoreThanOneInferred { count: 2 }), "{e:?}");
    let e = fails(&mut sch, |s| s.split(l[1], &[Some(4)]));
    assert!(matches!(e, E::TooFew { primitive: "split", .. }), "{e:?}");
    // A symbolic extent is only covered with an inferred factor.
    let e = fails(&mut sch, |s| s.split(l[1], &[Some(64), Some(64)]));
    assert!(matches!(&e, E::FactorsMismatch { extent, product: 4096, .. } if extent == "feat_size"), "{e:?}");
    let mut sch = small();
    let l = loops(&mut sch, "cst");
    let e = fails(&mut sch, |s| s.split(l[0], &[Some(5), Some(2)]));
    assert!(matches!(&e, E::FactorsMismatch { extent, product: 10, .. } if extent == "12"), "{e:?}");
}

#[test]
fn split_refuses_bound_and_stale_loops() {
    let mut sch = sched2("csrmm");
    let l = loops(&mut sch, "csrmm1");
    sch.split(l[1], &[None, Some(4)]).unwrap();
    let e = fails(&mut sch, |s| s.split(l[1], &[None, Some(4)]));
    assert!(matches!(&e, E::StaleRef { what, .. } if what == "loop `k`"), "{e:?}");
    sch.unroll(l[0]).unwrap();
    let e = fails(&mut sch, |s| s.split(l[0], &[None, Some(4)]));
    assert!(matches!(&e, E::AlreadyBound { kind, .. } if kind == "unrolled"), "{e:?}");
}

#[test]
fn fuse_refusals() {
    let mut sch = sched2("csrmm");
    let init = loops(&mut sch, "csrmm_init1");
    let main = loops(&mut sch, "csrmm1");
    let e = fails(&mut sch, |s| s.fuse(&[init[0], main[1]]));
    assert!(matches!(e, E::LoopsNotNested { .. }), "{e:?}");
    // Inner first is not a nest either.
    let e = fails(&mut sch, |s| s.fuse(&[main[1], main[0]]));
    assert!(matches!(&e, E::LoopsNotNested { outer, inner } if outer == "k" && inner == "j"), "{e:?}");
    let e = fails(&mut sch, |s| s.fuse(&[main[0]]));
    assert!(matches!(e, E::TooFew { primitive: "fuse", .. }), "{e:?}");
    let e = fails(&mut sch, |s| s.fuse(&[main[0], main[0]]));
    assert!(matches!(e, E::Duplicate { .. }), "{e:?}");
    let mut sch = small();
    let l = loops(&mut sch, "tri");
    let e = fails(&mut sch, |s| s.fuse(&l));
    assert!(matches!(&e, E::DependentExtent { loop_var, depends_on } if loop_var == "j" && depends_on == "i"), "{e:?}");
    let l = loops(&mut sch, "cst");
    sch.parallel(l[0]).unwrap();
    let e = fails(&mut sch, |s| s.fuse(&l));
    assert!(matches!(e, E::AlreadyBound { .. }), "{e:?}");
}

#[test]
fn reorder_refusals() {
    let mut sch = small();
    let l = loops(&mut sch, "tri");
    let e = fails(&mut sch, |s| s.reorder(&[l[1], l[0]]));
    assert!(matches!(&e, E::DependentExtent { loop_var, depends_on } if loop_var == "j" && depends_on == "i"), "{e:?}");
    let c = loops(&mut sch, "cst");
    let e = fails(&mut sch, |s| s.reorder(&[c[0], l[0]]));
    assert!(matches!(e, E::LoopsNotNested { .. }), "{e:?}");
    let e = fails(&mut sch, |s| s.reorder(&[c[0], c[0]]));
    assert!(matches!(e, E::Duplicate { .. }), "{e:?}");
    let e = fails(&mut sch, |s| s.reorder(&[c[0]]));
    assert!(matches!(e, E::TooFew { .. }), "{e:?}");
    // Not perfectly nested: the block csrmm0 sits between i and j.
    let mut sch = sched2("csrmm");
    let i = loops(&mut sch, "csrmm0")[0];
    let j = loops(&mut sch, "csrmm1")[0];
    let e = fails(&mut sch, |s| s.reorder(&[j, i]));
    assert!(matches!(&e, E::LoopsNotNested { outer, inner } if outer == "i" && inner == "j"), "{e:?}");
}

#[test]
fn bind_refusals() {
    let mut sch = sched2("csrmm");
    let i = loops(&mut sch, "csrmm0")[0];
    let l = loops(&mut sch, "csrmm1");
    sch.bind(i, ThreadTag::BlockIdxX).unwrap();
    let e = fails(&mut sch, |s| s.bind(i, ThreadTag::BlockIdxY));
    assert!(matches!(&e, E::AlreadyBound { kind, .. } if kind == "blockIdx.x"), "{e:?}");
    let e = fails(&mut sch, |s| s.bind(l[1], ThreadTag::BlockIdxX));
    assert!(matches!(&e, E::ThreadTagInUse { other, tag, .. } if other == "i" && tag == "blockIdx.x"), "{e:?}");
    // j drives the reduction iterator vj.
    let e = fails(&mut sch, |s| s.bind(l[0], ThreadTag::ThreadIdxX));
    assert!(matches!(&e, E::ReductionLoop { block, iter, .. } if block == "csrmm1" && iter == "vj"), "{e:?}");
    // A tag used inside the loop.
    let mut sch = sched2("ellmm");
    let l = loops(&mut sch, "ellmm_init1");
    sch.bind(l[1], ThreadTag::ThreadIdxX).unwrap();
    let e = fails(&mut sch, |s| s.bind(l[0], ThreadTag::ThreadIdxX));
    assert!(matches!(&e, E::ThreadTagInUse { other, .. } if other == "f"), "{e:?}");
}

/// Every block of a nested blockIdx.y loop would re-run the kernel's other statements: C's
/// zeroing beside the rows' atomic sums would race with them.
#[test]
fn bind_refuses_block_loops_beside_global_writes() {
    // csrmm with atomic sums: the row loop `i` and the nonzero loop `j`.
    let atomic = || {
        let mut sch = sched2("csrmm");
        let b = sch.get_block("csrmm1").unwrap();
        sch.annotate(b, "atomic", AttrValue::Bool(true)).unwrap();
        sch.lower_atomic().unwrap();
        let (i, j) = (loops(&mut sch, "csrmm0")[0], loops(&mut sch, "csrmm1")[0]);
        (sch, i, j)
    };
    let (mut sch, i, j) = atomic();
    sch.bind(i, ThreadTag::BlockIdxX).unwrap();
    let e = fails(&mut sch, |s| s.bind(j, ThreadTag::BlockIdxY));
    assert!(matches!(&e, E::RepeatedByBlocks { loop_var, buffer, .. } if loop_var == "j" && buffer == "C"), "{e:?}");
    // Inside a serial nest the kernel is the whole nest (one per top-level statement): the
    // zeroing would run in every block too.
    let (mut sch, i, j) = atomic();
    let e = fails(&mut sch, |s| s.bind(j, ThreadTag::BlockIdxX));
    assert!(matches!(&e, E::RepeatedByBlocks { tag, .. } if tag == "blockIdx.x"), "{e:?}");
    sch.bind(i, ThreadTag::BlockIdxX).unwrap();
}

#[test]
fn parallel_refusals() {
    let mut sch = sched2("csrmm");
    let l = loops(&mut sch, "csrmm1");
    let e = fails(&mut sch, |s| s.parallel(l[0]));
    assert!(matches!(e, E::ReductionLoop { action: "parallelized", .. }), "{e:?}");
    sch.parallel(l[1]).unwrap();
    let e = fails(&mut sch, |s| s.parallel(l[1]));
    assert!(matches!(&e, E::AlreadyBound { kind, .. } if kind == "parallel"), "{e:?}");
}

#[test]
fn vectorize_refusals() {
    let mut sch = sched2("csrmm");
    let i = loops(&mut sch, "csrmm0")[0];
    let e = fails(&mut sch, |s| s.vectorize(i));
    assert!(matches!(&e, E::NotInnermost { loop_var, inner } if loop_var == "i" && inner == "k"), "{e:?}");
    let mut sch = sched2("sddmm");
    let l = loops(&mut sch, "sddmm1");
    let e = fails(&mut sch, |s| s.vectorize(l[1]));
    assert!(matches!(e, E::ReductionLoop { action: "vectorized", .. }), "{e:?}");
}

#[test]
fn unroll_refusals() {
    let mut sch = sched2("csrmm");
    let l = loops(&mut sch, "csrmm1");
    sch.unroll(l[0]).unwrap();
    let e = fails(&mut sch, |s| s.unroll(l[0]));
    assert!(matches!(e, E::AlreadyBound { .. }), "{e:?}");
    let split = sch.split(l[1], &[None, Some(2)]).unwrap();
    let e = fails(&mut sch, |s| s.unroll(l[1]));
    assert!(matches!(e, E::StaleRef { .. }), "{e:?}");
    sch.unroll(split[1]).unwrap();
}

#[test]
fn loop_primitives_refuse_stage_i() {
    let mut sch = sched1("csrmm");
    let e = fails(&mut sch, |s| s.split(LoopRvProbe::get(), &[None, Some(2)]));
    assert!(matches!(e, E::WrongStage { primitive: "split", stage: Stage::I }), "{e:?}");
}

/// A loop reference from another schedule, to probe stage checks.
struct LoopRvProbe;

impl LoopRvProbe {
    /// A loop reference with id 3 (from a fresh schedule of csrmm's Stage II).
    fn id3() -> LoopRv {
        let mut sch = sched2("csrmm");
        let _ = loops(&mut sch, "csrmm0"); // ids 0 (block), 1 (loop)
        let l = loops(&mut sch, "csrmm1"); // ids 2 (block), 3, 4 (loops)
        assert_eq!(l[0].id(), 3);
        l[0]
    }

    fn get() -> LoopRv {
        let mut sch = sched2("csrmm");
        loops(&mut sch, "csrmm0")[0]
    }
}

/// Every row of `y` counted once: `Y[i] = Y[i] + 1` under a loop that `partition` splits by
/// the weights `L`.
const COUNT_ROWS: &str = "func count(y: handle, l: handle, m: i32) stage III {
  buffer Y = match_buffer(y, [m], f32)
  buffer L = match_buffer(l, [m + 1], i32)
  for i in serial(m) {
    block b(vi: spatial(m) = i) {
      Y[vi] = Y[vi] + 1.0
    }
  }
}
";

#[test]
fn partition_runs_every_iteration_once_whatever_the_weights() {
    // Monotone weights (a row pointer), and hostile ones (decreasing, negative, huge, equal):
    // the chunks are disjoint and cover the loop in every case.
    let f = sparsec_ir::text::parse_func("count", COUNT_ROWS).unwrap();
    let mut sch = Schedule::new(f).unwrap();
    let i = loops(&mut sch, "b")[0];
    sch.parallel(i).unwrap();
    sch.partition(i, 7, "L", 3).unwrap();
    let g = sch.func().clone();
    let mut rng = sparsec_testkit::Rng::new(5);
    for m in [0usize, 1, 2, 5, 31, 100] {
        let mut cases: Vec<Vec<i32>> = vec![
            (0..=m as i32).map(|x| x * 3).collect(),
            (0..=m as i32).map(|x| x * x).collect(),
            vec![0; m + 1],
            (0..=m as i32).rev().collect(),
            (0..=m).map(|x| if x % 2 == 0 { i32::MAX - x as i32 } else { i32::MIN + x as i32 }).collect(),
        ];
        cases.push((0..=m).map(|_| (rng.vec(1)[0] * 2000.0 - 1000.0) as i32).collect());
        for l in cases {
            let mut args = sparsec_ir::data::Args::new();
            args.array("y", sparsec_ir::data::Array::F32(vec![0.0; m])).array("l", sparsec_ir::data::Array::I32(l.clone()));
            args.int("m", m as i64);
            let out = sparsec_interp::run(&g, &args).unwrap_or_else(|e| panic!("m = {m}, L = {l:?}: {e}"));
            let y = sparsec_testkit::output_f32(&out, "y");
            assert!(y.iter().all(|v| *v == 1.0), "m = {m}, L = {l:?}: {y:?}");
        }
    }
}

#[test]
fn partition_keeps_spmm_exact_on_every_matrix() {
    let f = common::workload("csrmm");
    let mut sch = sched1("csrmm");
    sch.lower_sparse_iter().unwrap();
    let i = loops(&mut sch, "csrmm0")[0];
    sch.parallel(i).unwrap();
    let c = sch.partition(i, 8, "J_indptr", 16).unwrap();
    assert!(sch.text().contains("for i_p in parallel(i_chunks)"), "{}", sch.text());
    assert_eq!(sch.trace().replay(&f).unwrap().text(), sch.text());
    common::differential("csrmm", &f, sch.func(), common::Agree::Exactly);
    // Refusals leave the schedule as it was.
    let e = fails(&mut sch, |s| s.partition(c, 0, "J_indptr", 16));
    assert!(matches!(e, E::NonPositiveFactor { factor: 0 }), "{e:?}");
    let e = fails(&mut sch, |s| s.partition(c, 4, "nothing", 16));
    assert!(matches!(e, E::UnknownBuffer { .. }), "{e:?}");
}
