//! Level formats from files (issue #17): the programs of `examples/formats` — SpMV with A
//! in DCSR (a root sparse axis) and in CSC (`modes = [1, 0]`), a sparse-vector dot product,
//! and TTV, TTM and MTTKRP on 3-D tensors in CSF read from `.tns` files, and the
//! co-iterations (`union`/`intersect`: (A + B) x, (A .* B) x, A + B, a sparse-sparse dot
//! product) of each file with a partner, and the sparse outputs (sparse A + B, A .* B, a
//! sparse-sparse SDDMM and SpGEMM A·B, whose patterns the run assembles) — bound from the files alone as
//! `sparsec run --matrix` binds them, on every shared and generated matrix
//! and on generated tensors: Stage I equals the dense f64 result (what scipy/numpy give;
//! a sparse output's row pointer and coordinates exactly scipy's pattern), and Stages II
//! and III, run after their symbolic phase, equal Stage I on the interpreter.

use sparsec_testkit::formats::file_cases;
use sparsec_testkit::fuzz::{Outcome, Runner};

#[test]
fn format_programs_from_files_equal_the_dense_result_at_every_stage() {
    let dir = std::env::temp_dir().join(format!("sparsec_formats_{}", std::process::id()));
    let cases = file_cases(&dir, usize::MAX);
    let runner = Runner { max_steps: 1 << 26, ..Runner::default() };
    let mut seen = std::collections::BTreeSet::new();
    for c in &cases {
        let out = sparsec::interp::run(&c.func, &c.args).unwrap_or_else(|e| panic!("{}: {e}", c.label));
        c.assert_matches(&out);
        match runner.check_func(&c.func, &c.args) {
            Outcome::Agree => {}
            o => panic!("{}: {o:?}", c.label),
        }
        seen.insert(c.label.split(" on ").next().unwrap().to_string());
    }
    assert_eq!(seen.len(), 17, "{seen:?}");
    assert!(cases.len() >= 2 * 17 + 4 * 4, "{} cases", cases.len());
    std::fs::remove_dir_all(&dir).ok();
}

/// SpGEMM with a position map for C's columns (`Schedule::workspace`, what `--auto cpu`
/// chooses) on every shared and generated matrix: Stages II and III, which read each
/// column's position from the map instead of searching the row, equal Stage I and scipy's
/// product, and the lowering did read the map.
#[test]
fn spgemm_with_a_position_map_equals_the_search_at_every_stage() {
    let dir = std::env::temp_dir().join(format!("sparsec_formats_map_{}", std::process::id()));
    let cases: Vec<_> = file_cases(&dir, usize::MAX).into_iter().filter(|c| c.label.starts_with("spgemm on")).collect();
    let runner = Runner { max_steps: 1 << 26, ..Runner::default() };
    for c in &cases {
        let mut sch = sparsec::schedule::Schedule::new(c.func.clone()).unwrap();
        let sp = sch.get_sparse_iteration("spgemm").unwrap();
        sch.workspace(sp, "KC").unwrap();
        let mapped = sch.func().clone();
        let stage2 = sparsec::passes::lower_sparse_iter(&mapped).unwrap();
        assert!(sparsec::ir::text::print_func(&stage2).contains("KC_map[max(min(KC_coord"), "{}: no map read", c.label);
        let out = sparsec::interp::run(&mapped, &c.args).unwrap_or_else(|e| panic!("{}: {e}", c.label));
        c.assert_matches(&out);
        match runner.check_func(&mapped, &c.args) {
            Outcome::Agree => {}
            o => panic!("{}: {o:?}", c.label),
        }
    }
    assert!(cases.len() >= 8, "{} cases", cases.len());
    std::fs::remove_dir_all(&dir).ok();
}

/// SpGEMM's symbolic programs run their chunks of rows in a `parallel` loop, or on a GPU
/// bound to `blockIdx.x × threadIdx.x`: the loops' proof (`check_loop_kinds`, what a
/// hand-written Stage-III program must pass before it runs on a backend) holds, each chunk
/// writing its own rows and its own row of each workspace.
#[test]
fn spgemm_symbolic_programs_prove_their_chunk_loops() {
    use sparsec::passes::assemble::Units;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/formats/spgemm.sptir");
    let f = sparsec::ir::text::parse_func("spgemm.sptir", &std::fs::read_to_string(path).unwrap()).unwrap();
    for (units, lp) in [(Units::Parallel, "for sym_p in parallel(sym_chunks)"), (Units::Gpu { threads: 128 }, "for sym_t in threadIdx.x(")] {
        let phases = sparsec::passes::assemble::symbolic_phases(&f, units).unwrap();
        assert_eq!(phases.len(), 2);
        for ph in &phases {
            let text = sparsec::ir::text::print_func(&ph.func);
            assert!(text.contains(lp), "{text}");
            if let Err((_, e)) = sparsec::schedule::check_loop_kinds(&ph.func) {
                panic!("{}: {e}\n{text}", ph.func.name);
            }
        }
    }
}
