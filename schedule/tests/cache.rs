//! `cache_read`, `cache_write` and `set_scope`: golden text, refusals that leave the IR
//! unchanged, numbers that stay the same, and traces that replay.

mod common;

use common::{differential, fails, sched2, workload, Agree};
use sparsec_ir::{Scope, ThreadTag::*};
use sparsec_schedule::{LoopRv, Schedule, ScheduleError};

fn loops(sch: &mut Schedule, block: &str) -> Vec<LoopRv> {
    let b = sch.get_block(block).unwrap();
    sch.get_loops(b).unwrap()
}

fn replays(name: &str, sch: &Schedule) {
    let original = common::stage2(name);
    let json = sch.trace().to_json();
    let back = sparsec_schedule::Trace::from_json(&json).unwrap();
    assert_eq!(back.replay(&original).unwrap().text(), sch.text());
    let reparsed = sparsec_ir::text::parse_func(name, &sch.text()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sparsec_ir::text::print_func(&reparsed), sch.text());
}

/// sddmm, one row per GPU block: the row of A that every nonzero of the row multiplies is
/// staged in shared memory by the block's threads, then each thread takes one nonzero.
#[test]
fn sddmm_row_of_a_in_shared_memory() {
    let mut sch = sched2("sddmm");
    let row = sch.get_block("sddmm0").unwrap();
    let inner = sch.get_block("sddmm1").unwrap();
    let copy = sch.cache_read(inner, "A", Scope::Shared, row).unwrap();
    let i = loops(&mut sch, "sddmm0")[0];
    sch.bind(i, BlockIdxX).unwrap();
    let ax = sch.get_loops(copy).unwrap()[0];
    sch.bind(ax, ThreadIdxX).unwrap();
    let j = loops(&mut sch, "sddmm1")[0];
    sch.bind(j, ThreadIdxY).unwrap();
    insta::assert_snapshot!("sddmm_cache_read_shared", sch.text());
    replays("sddmm", &sch);
    differential("sddmm", &workload("sddmm"), sch.func(), Agree::Exactly);
}

/// csrmm: each output row is accumulated in a per-block local cache and written back once.
#[test]
fn csrmm_output_row_in_a_local_cache() {
    let mut sch = sched2("csrmm");
    let row = sch.get_block("csrmm0").unwrap();
    let inner = sch.get_block("csrmm1").unwrap();
    sch.cache_write(inner, "C", Scope::Local, row).unwrap();
    insta::assert_snapshot!("csrmm_cache_write_local", sch.text());
    replays("csrmm", &sch);
    differential("csrmm", &workload("csrmm"), sch.func(), Agree::Exactly);
}

/// A cache placed in a loop body refills at every iteration; a point region gives a
/// one-element cache. (Checked on the generated matrices only: a fresh cache per nonzero and
/// feature is slow in the interpreter.)
#[test]
fn cache_read_in_a_loop_body_with_a_point_region() {
    let mut sch = sched2("csrmm");
    let inner = sch.get_block("csrmm1").unwrap();
    let k = loops(&mut sch, "csrmm1")[1];
    sch.cache_read(inner, "B", Scope::Local, k).unwrap();
    insta::assert_snapshot!("csrmm_cache_read_point", sch.text());
    replays("csrmm", &sch);
    let base = common::to_stage3(&workload("csrmm"));
    let sched = common::to_stage3(sch.func());
    for (k, (name, m)) in common::generated().iter().enumerate() {
        let args = common::args_for("csrmm", m, 3 + k as u64);
        assert_eq!(common::run_c(&sched, &args), common::run_c(&base, &args), "{name}");
    }
}

#[test]
fn set_scope_moves_an_allocation() {
    let mut sch = Schedule::new(sparsec_passes::lower_sparse_iter(&workload("sparse_softmax")).unwrap()).unwrap();
    sch.set_scope("TMP", Scope::Shared).unwrap();
    assert!(sch.text().contains("buffer TMP = alloc_sparse_buffer([I], f32, shared)"), "{}", sch.text());
    insta::assert_snapshot!("sparse_softmax_set_scope", sch.text());
    replays_from(&workload("sparse_softmax"), &sch);
    let e = fails(&mut sch, |s| s.set_scope("A", Scope::Shared));
    assert!(matches!(e, ScheduleError::NotAllocated { .. }), "{e}");
    let e = fails(&mut sch, |s| s.set_scope("nope", Scope::Shared));
    assert!(matches!(e, ScheduleError::UnknownBuffer { .. }), "{e}");
}

fn replays_from(stage1: &sparsec_ir::Func, sch: &Schedule) {
    let original = sparsec_passes::lower_sparse_iter(stage1).unwrap();
    assert_eq!(sch.trace().replay(&original).unwrap().text(), sch.text());
}

#[test]
fn cache_read_refusals_leave_the_ir_unchanged() {
    let mut sch = sched2("sddmm");
    let row = sch.get_block("sddmm0").unwrap();
    let inner = sch.get_block("sddmm1").unwrap();
    // C is written in the body.
    let e = fails(&mut sch, |s| s.cache_read(inner, "C", Scope::Shared, row));
    assert!(matches!(e, ScheduleError::CacheReadOfWrittenBuffer { .. }), "{e}");
    // The location must be around the block.
    let e = fails(&mut sch, |s| s.cache_read(row, "A", Scope::Shared, inner));
    assert!(matches!(e, ScheduleError::CacheSiteNotAround { .. }), "{e}");
    // J_indices is read along a variable-length row.
    let mut csr = sched2("csrmm");
    let row = csr.get_block("csrmm0").unwrap();
    let inner = csr.get_block("csrmm1").unwrap();
    let e = fails(&mut csr, |s| s.cache_read(inner, "A", Scope::Shared, row));
    assert!(matches!(e, ScheduleError::UncacheableRegion { .. }), "{e}");
    let e = fails(&mut csr, |s| s.cache_read(inner, "missing", Scope::Shared, row));
    assert!(matches!(e, ScheduleError::UnknownBuffer { .. }), "{e}");
}

#[test]
fn cache_write_refusals_leave_the_ir_unchanged() {
    let mut sch = sched2("csrmm");
    let row = sch.get_block("csrmm0").unwrap();
    let inner = sch.get_block("csrmm1").unwrap();
    // B is only read by the block.
    let e = fails(&mut sch, |s| s.cache_write(inner, "B", Scope::Local, row));
    assert!(matches!(e, ScheduleError::BufferNotAccessed { .. }), "{e}");
    // At Stage I there are no blocks to cache.
    let mut s1 = common::sched1("csrmm");
    let e = fails(&mut s1, |s| s.set_scope("C", Scope::Local));
    assert!(matches!(e, ScheduleError::NotAllocated { .. }), "{e}");
    // Unfused sddmm cached at the row block: C's region there is the whole row, whose
    // length differs from row to row.
    let mut s = sched2("sddmm");
    let b0 = s.get_block("sddmm0").unwrap();
    let b1 = s.get_block("sddmm1").unwrap();
    let e = fails(&mut s, |s| s.cache_write(b1, "C", Scope::Local, b0));
    assert!(matches!(e, ScheduleError::UncacheableRegion { .. }), "{e}");
    // rgcn under the GPU default: relations and rows fused on blockIdx.y accumulate
    // atomically into shared rows of Y; a per-unit register written back would lose sums.
    let mut g1 = Schedule::new(workload("rgcn_hetero_forward")).unwrap();
    assert!(sparsec_schedule::auto::gpu_sparse(&mut g1).unwrap());
    g1.lower_sparse_iter().unwrap();
    let outer = g1.get_block("rgcn-hetero-forward0").unwrap();
    let inner = g1.get_block("rgcn-hetero-forward1").unwrap();
    let e = fails(&mut g1, |s| s.cache_write(inner, "Y", Scope::Local, outer));
    assert!(matches!(e, ScheduleError::SharedAccumulator { .. }), "{e}");
}

/// Fused sddmm (one unit per nonzero): the row of each nonzero comes from a search and `let`s
/// at the start of the block, so the cache starts after them; C's nonzero is then a point,
/// its init stores it whole (no copy in), and the sum stays in a one-element local buffer.
#[test]
fn fused_sddmm_accumulates_in_a_register_after_the_lets() {
    let mut f = Schedule::new(sparsec_passes::lower_sparse_iter(&workload("fused_sddmm")).unwrap()).unwrap();
    let b0 = f.get_block("sddmm0").unwrap();
    let b1 = f.get_block("sddmm1").unwrap();
    f.cache_write(b1, "C", Scope::Local, b0).unwrap();
    let text = f.text();
    assert!(text.contains("buffer C_local = alloc_buffer([1], f32, local)"), "{text}");
    let alloc = text.find("buffer C_local").unwrap();
    assert!(text.find("let vj").is_some_and(|l| l < alloc), "the cache must follow the lets: {text}");
    assert!(!text.contains("C_local[0] = C["), "no copy in before the init: {text}");
    insta::assert_snapshot!("fused_sddmm_cache_write_local", text);
    let original = sparsec_passes::lower_sparse_iter(&workload("fused_sddmm")).unwrap();
    let back = sparsec_schedule::Trace::from_json(&f.trace().to_json()).unwrap();
    assert_eq!(back.replay(&original).unwrap().text(), f.text());
    differential("fused_sddmm", &workload("fused_sddmm"), f.func(), Agree::Exactly);
}

/// csrmm coarsened as GE-SpMM: features split into walks of 4 × 32, the lanes outside the
/// nonzeros and the 4 inside; C's elements of one lane over the 4 are a strided region, kept
/// in a 4-element local cache indexed by the inner loop (registers once it is unrolled), with
/// the copies guarded per element where the feature count is not a multiple of 128.
#[test]
fn csrmm_coarsened_lanes_accumulate_in_a_strided_register_cache() {
    let mut sch = sched2("csrmm");
    let l = loops(&mut sch, "csrmm1");
    let (j, k) = (l[0], l[1]);
    let parts = sch.split(k, &[None, Some(4), Some(32)]).unwrap();
    sch.reorder(&[parts[0], parts[2], j, parts[1]]).unwrap();
    sch.bind(parts[2], ThreadIdxX).unwrap();
    let inner = sch.get_block("csrmm1").unwrap();
    let back = sch.cache_write(inner, "C", Scope::Local, parts[2]).unwrap_or_else(|e| panic!("{e}"));
    sch.unroll(parts[1]).unwrap();
    let ax = *sch.get_loops(back).unwrap().last().unwrap();
    sch.unroll(ax).unwrap();
    // The value and the column of a nonzero, read once for the 4 features: the split's
    // predicate on the features does not decide which element they read.
    for buf in ["A", "J_indices"] {
        let inner = sch.get_block("csrmm1").unwrap();
        sch.cache_read(inner, buf, Scope::Local, j).unwrap_or_else(|e| panic!("{buf}: {e}"));
    }
    insta::assert_snapshot!("csrmm_cache_write_strided", sch.text());
    replays("csrmm", &sch);
    differential("csrmm", &workload("csrmm"), sch.func(), Agree::Exactly);
}

#[test]
fn csrmm_init_joined_to_the_lanes_starts_the_register_cache() {
    // The init split as the accumulation and computed at its lane loop: the strided cache's
    // first statement stores every element it holds, so nothing is copied in, and C is
    // only written back.
    let mut sch = sched2("csrmm");
    let l = loops(&mut sch, "csrmm1");
    let (j, k) = (l[0], l[1]);
    let parts = sch.split(k, &[None, Some(4), Some(32)]).unwrap();
    sch.reorder(&[parts[0], parts[2], j, parts[1]]).unwrap();
    let init = sch.get_block("csrmm_init1").unwrap();
    let ik = *sch.get_loops(init).unwrap().last().unwrap();
    let ip = sch.split(ik, &[None, Some(4), Some(32)]).unwrap();
    sch.reorder(&[ip[0], ip[2], ip[1]]).unwrap();
    sch.compute_at(init, parts[2]).unwrap_or_else(|e| panic!("{e}"));
    sch.bind(parts[2], ThreadIdxX).unwrap();
    let inner = sch.get_block("csrmm1").unwrap();
    sch.cache_write(inner, "C", Scope::Local, parts[2]).unwrap_or_else(|e| panic!("{e}"));
    let mut reads_of_c = 0;
    sparsec_ir::walk_stmts(&sch.func().body, &mut |s| {
        // The row block's regions summarise its body (a superset).
        if let sparsec_ir::StmtKind::Block(b) = &s.kind {
            reads_of_c += usize::from(b.name != "csrmm0") * b.reads.iter().filter(|r| sch.func().buffers[r.buffer].name == "C").count();
        }
    });
    assert_eq!(reads_of_c, 0, "{}", sch.text());
    replays("csrmm", &sch);
    differential("csrmm", &workload("csrmm"), sch.func(), Agree::Exactly);
}

/// The copies of a register cache at a row's nonzero loop need no `j < n` guard where every
/// row holds at most `n` entries (a sorted sparse-variable axis: `Func::row_length_bound`),
/// and keep it where coordinates may repeat (`sorted = false`); both compute csrmm (with
/// fused multiply-adds, so within rounding).
#[test]
fn copies_over_a_row_are_guarded_only_where_rows_may_exceed_the_axis() {
    let sorted = workload("csrmm");
    let text = sparsec_ir::text::print_func(&sorted).replace("indptr, indices)", "indptr, indices, sorted = false)");
    let unsorted = sparsec_ir::text::parse_func("csrmm_unsorted.sptir", &text).unwrap();
    assert!(!unsorted.axes.iter().any(|(_, a)| a.kind == sparsec_ir::AxisKind::SparseVariable && a.sorted));
    for (f, guarded) in [(&sorted, false), (&unsorted, true)] {
        let g = sparsec_schedule::auto::gpu_schedule(f, 128).unwrap();
        let text = sparsec_ir::text::print_func(&g);
        assert_eq!(text.contains("if j < n {"), guarded, "{text}");
        for (k, (name, m)) in common::generated().iter().enumerate() {
            let args = common::args_for("csrmm", m, 11 + k as u64);
            let want = common::run_c(&common::to_stage3(&sorted), &args);
            sparsec_testkit::assert_close(&format!("{name} (guarded: {guarded})"), &common::run_c(&g, &args), &want, 1e-5);
        }
    }
}
