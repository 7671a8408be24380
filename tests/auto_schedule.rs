//! The default CPU and GPU schedules (`sparsec_schedule::auto`) on every corpus workload:
//! they apply, replay from their trace, and the scheduled Stage-III program gives the oracle's
//! numbers in the interpreter on the shared matrices up to 100k nonzeros and the generated ones
//! (fp32 rtol 1e-5).

use sparsec_testkit as common;

use common::workloads::WORKLOADS;
use sparsec::ir::{ForKind, Func, Stage, StmtKind, ThreadTag};
use sparsec_schedule::auto;

/// The loop kinds of `f`, in pre-order.
fn loop_kinds(f: &Func) -> Vec<ForKind> {
    let mut out = Vec::new();
    sparsec::ir::func::walk_stmts(&f.body, &mut |s| {
        if let StmtKind::For(l) = &s.kind {
            out.push(l.kind);
        }
    });
    out
}

/// The program of `examples/<rel>`.
fn example(rel: &str) -> Func {
    let path = format!("{}/examples/{rel}", env!("CARGO_MANIFEST_DIR"));
    sparsec::ir::text::parse_func(rel, &std::fs::read_to_string(&path).unwrap()).unwrap_or_else(|e| panic!("{e}"))
}

fn check(name: &str) {
    let func = common::workload(name);
    let cpu = auto::cpu_schedule(&func).unwrap_or_else(|e| panic!("{name}, cpu: {e}"));
    let gpu = auto::gpu_schedule(&func, 32).unwrap_or_else(|e| panic!("{name}, gpu: {e}"));
    assert_eq!((cpu.stage, gpu.stage), (Stage::III, Stage::III));
    // The largest shared matrix is left to the lowering tests: the interpreter is slow.
    common::for_each_case_upto(name, 100_000, |mname, c| {
        for (what, f) in [("cpu", &cpu), ("gpu", &gpu)] {
            let out = sparsec::interp::run(f, &c.args).unwrap_or_else(|e| panic!("{name} ({what}) on {mname}: {e}"));
            for (param, want) in &c.expected {
                let got = common::output_f32(&out, param);
                common::assert_close(&format!("{name} ({what}) on {mname}: {param}"), &got, want, 1e-5);
            }
        }
    });
}

macro_rules! auto_tests {
    ($($name:ident),* $(,)?) => {
        $(#[test]
        fn $name() {
            check(stringify!($name));
        })*
    };
}

sparsec_testkit::with_workloads!(auto_tests);

#[test]
fn square_sum_two_k() {
    check("square_sum_two_K");
}

#[test]
fn every_workload_gets_parallel_loops() {
    // Each corpus program has at least one independent outer loop.
    for name in WORKLOADS {
        let func = common::workload(name);
        let cpu = auto::cpu_schedule(&func).unwrap();
        let gpu = auto::gpu_schedule(&func, 64).unwrap();
        assert!(loop_kinds(&cpu).contains(&ForKind::Parallel), "{name}: no parallel loop");
        let g = loop_kinds(&gpu);
        assert!(g.contains(&ForKind::Thread(ThreadTag::BlockIdxX)), "{name}: no blockIdx.x");
        assert!(g.contains(&ForKind::Thread(ThreadTag::ThreadIdxX)), "{name}: no threadIdx.x");
    }
}

#[test]
fn golden_csrmm_schedules() {
    let func = common::workload("csrmm");
    let cpu = auto::cpu_schedule(&func).unwrap();
    let gpu = auto::gpu_schedule(&func, 32).unwrap();
    insta::assert_snapshot!("auto_cpu_csrmm", sparsec::ir::text::print_func(&cpu));
    insta::assert_snapshot!("auto_gpu_csrmm", sparsec::ir::text::print_func(&gpu));
}

/// bsrmm's nest `i, bi, bj, f` has a reduction loop between spatial ones: the GPU default
/// moves `f` above `bj` and fuses `i, bi, f` over the units, so every output element gets a
/// unit and only `bj` and the nonzero blocks stay serial in it.
#[test]
fn gpu_units_cover_every_output_element_of_bsrmm() {
    let gpu = auto::gpu_schedule(&common::workload("bsrmm"), 32).unwrap();
    let text = sparsec::ir::text::print_func(&gpu);
    let bound: Vec<String> = text.lines().filter(|l| l.contains("threadIdx.x(")).map(|l| l.trim().to_string()).collect();
    assert!(bound.iter().any(|l| l.starts_with("for i_bi_f_fused_1 in threadIdx.x")), "{text}");
    let under = &text[text.find("for i_bi_f_fused_1").unwrap()..];
    assert!(!under.contains("for f in serial"), "{text}");
}

#[test]
fn reduction_outer_loops_stay_serial() {
    // The row loop of a reduction over rows drives a reduce iterator: it must not be bound.
    let text = "func total(a: handle, out: handle, indptr: handle, indices: handle, m: i32, n: i32, nnz: i32) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz, indptr, indices)
  buffer A = match_sparse_buffer(a, [I, J], f32)
  buffer O = match_buffer(out, [1], f32)
  sp_iter total([I, J], \"RR\") as [i, j] {
    init { O[0] = 0.0 }
    O[0] = O[0] + A[i, j]
  }
}";
    let func = sparsec::ir::text::parse_func("total", text).unwrap();
    let gpu = auto::gpu_schedule(&func, 32).unwrap();
    let kinds = loop_kinds(&gpu);
    assert!(!kinds.iter().any(|k| matches!(k, ForKind::Thread(_))), "{kinds:?}");
    let cpu = auto::cpu_schedule(&func).unwrap();
    assert!(!loop_kinds(&cpu).contains(&ForKind::Parallel));
}

/// Row segments (`examples/csrmm_segments.sptir`): `gpu_sparse` keeps the segments and their
/// entries apart (the entry does not pick the row written) and only asks for atomics; the
/// default then sums each segment in registers and adds it to C once per feature.
#[test]
fn gpu_sparse_keeps_row_segments_for_register_sums() {
    use sparsec_schedule::Schedule;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/csrmm_segments.sptir");
    let func = sparsec::ir::text::parse_func(path, &std::fs::read_to_string(path).unwrap()).unwrap();
    let mut sch = Schedule::new(func.clone()).unwrap();
    assert!(auto::gpu_sparse(&mut sch).unwrap());
    let text = sch.text();
    assert!(!text.contains("fuse(") && text.contains("atomic = true"), "{text}");
    let printed = sparsec::ir::text::print_func(&auto::gpu_schedule(&func, 128).unwrap());
    assert!(printed.contains("cache_accumulate") || printed.contains("C_local_add"), "{printed}");
    assert!(printed.contains("atomic_add(C[Row[vs] * feat_size") && printed.contains("threadIdx.y(4)"), "{printed}");
}

#[test]
fn zero_threads_is_an_error() {
    let func = common::workload("csrmm");
    assert!(auto::gpu_schedule(&func, 0).is_err());
}

/// The Stage-I part of the GPU default fuses rgcn's relations with their rows (the only
/// init-free accumulating iteration of the corpus) and asks for atomics; it fuses the rows
/// and nonzeros of iterations that write their own point (sddmm, csr_element_wise) without
/// atomics; other iterations are left alone.
#[test]
fn gpu_sparse_fuses_accumulating_and_pointwise_iterations() {
    use sparsec_schedule::Schedule;
    let mut sch = Schedule::new(common::workload("rgcn_hetero_forward")).unwrap();
    assert!(auto::gpu_sparse(&mut sch).unwrap());
    let text = sch.text();
    assert!(text.contains("fuse(R, I)") && text.contains("atomic = true"), "{text}");
    let g = auto::gpu_schedule(&common::workload("rgcn_hetero_forward"), 32).unwrap();
    let printed = sparsec::ir::text::print_func(&g);
    assert!(printed.contains("atomic_add(Y["), "{printed}");
    for name in ["sddmm", "csr_element_wise"] {
        let mut sch = Schedule::new(common::workload(name)).unwrap();
        assert!(!auto::gpu_sparse(&mut sch).unwrap(), "{name}");
        let text = sch.text();
        assert!(text.contains("fuse(I, J)") && !text.contains("atomic"), "{name}: {text}");
    }
    for name in ["csrmm", "bsrmm", "csr2bsr", "sparse_softmax"] {
        let f = common::workload(name);
        let mut sch = Schedule::new(f.clone()).unwrap();
        assert!(!auto::gpu_sparse(&mut sch).unwrap(), "{name}");
        assert_eq!(sch.func(), &f, "{name}");
    }
}

/// Vector partial sums are made only where the default GPU schedule still lowers: over a
/// row's nonzeros (`auto_gpu_partial_sums_over_nonzeros`, CubeCL fuzz seed 49618) and over a
/// dense axis whose split position lowering cannot prove to stay in the row
/// (`auto_gpu_partial_sums_unproven_row`, seed 49589), the whole default schedule was refused.
/// Both now schedule, without partial sums.
#[test]
fn partial_sums_only_where_the_schedule_lowers() {
    for text in [
        include_str!("fuzz_regressions/auto_gpu_partial_sums_over_nonzeros.sptir"),
        include_str!("fuzz_regressions/auto_gpu_partial_sums_unproven_row.sptir"),
    ] {
        let f = sparsec::ir::text::parse_func("r.sptir", text).unwrap();
        let gpu = auto::gpu_schedule(&f, 32).unwrap_or_else(|e| panic!("{e}"));
        let mut partial = false;
        sparsec::ir::func::walk_stmts(&gpu.body, &mut |s| partial |= matches!(&s.kind, StmtKind::Block(b) if b.name.ends_with("_rf")));
        assert!(!partial, "{}", sparsec::ir::text::print_func(&gpu));
    }
}

#[test]
fn cpu_moves_a_row_of_the_output_innermost() {
    // bsrmm is written `[I, BI, BJ, F, J]`: each output element would walk the block row.
    // The CPU default moves `f` innermost, so the blocks stream around a vectorised row of C.
    let cpu = auto::cpu_schedule(&common::workload("bsrmm")).unwrap();
    let text = sparsec::ir::text::print_func(&cpu);
    let j = text.find("for j in serial").expect("a loop over the block row");
    assert!(text[j..].contains("for f in vectorized"), "f is not a vectorised loop inside j:\n{text}");
    let reorders = |name: &str| {
        let mut sch = sparsec_schedule::Schedule::new(common::workload(name)).unwrap();
        auto::cpu_full(&mut sch).unwrap();
        sch.trace().to_json().contains("sparse_reorder")
    };
    assert!(reorders("bsrmm"));
    // Programs already ending in their output's row (csrmm), whose stores end in a sparse
    // coordinate (sddmm), or whose operand is strided along the output row (rgcn's
    // `W[e, fo, fi]`) keep their order.
    for name in ["csrmm", "sddmm", "csrmm_dense_iter", "rgcn_homo_forward", "rgcn_hetero_forward"] {
        assert!(!reorders(name), "{name}");
    }
}

/// `--auto cpu` gives SpGEMM's lookups of C's columns a position map (`workspace`), whose fill
/// keeps the row loop serial; `--auto gpu` keeps the search. (Both compute scipy's product:
/// the backends' `formats.rs` tests.)
#[test]
fn cpu_gives_a_product_a_position_map() {
    let func = example("formats/spgemm.sptir");
    let cpu = auto::cpu_schedule(&func).unwrap();
    let text = sparsec::ir::text::print_func(&cpu);
    assert!(text.contains("buffer KC_map = alloc_buffer([p + 1], i32, global)") && text.contains("KC_map[max(min(KC_coord"), "{text}");
    assert!(!loop_kinds(&cpu).contains(&ForKind::Parallel), "{text}");
    let gpu = sparsec::ir::text::print_func(&auto::gpu_schedule(&func, 32).unwrap());
    assert!(!gpu.contains("KC_map") && gpu.contains("KC_low"), "{gpu}");
}

/// A padded format's feature loop (hyb's buckets: `if RowIndices[io] < m && .. { C[..] += .. }`
/// in every bucket) is split by one CPU vector under `--auto cpu`, and the 16-lane loop has
/// a vector form that tests the bucket's bound once per vector (`ir::vector`): as written,
/// `vectorized(feat_size)` had none and ran a feature at a time (tune's `hyb_1_32` on
/// ca-CondMat went from 29.8× to 5.0× the CSR kernel).
#[test]
fn cpu_splits_a_padded_formats_feature_loop_by_a_vector() {
    let func = example("hyb.sptir");
    let cpu = auto::cpu_schedule(&func).unwrap();
    let text = sparsec::ir::text::print_func(&cpu);
    let mut planned = 0;
    sparsec::ir::func::walk_stmts(&cpu.body, &mut |s| {
        if let StmtKind::For(l) = &s.kind {
            if l.kind == ForKind::Vectorized && l.extent.as_int() == Some(16) {
                assert!(sparsec::ir::vector::plan(&cpu, l).is_some(), "no vector form:\n{text}");
                planned += 1;
            }
        }
    });
    // The four buckets' loops (the init of C is a plain feature loop).
    assert!(planned >= 4, "{planned} split loops:\n{text}");
    assert!(!text.contains("vectorized(feat_size)) {\n          block csrmm_hyb"), "{text}");
}
