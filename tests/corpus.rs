//! The workload corpus against independent dense oracles.
//!
//! Every program in `tests/workloads/` runs in the reference interpreter at Stage I on every
//! matrix in `$SPARSEC_DATA` and on generated ones, and must match a dense computation written
//! in plain Rust (`common/workloads.rs`), fp32 rtol 1e-5; before that, `ir::args` must prove
//! every run's indices in range (what compiled backends require) and size every buffer as the
//! interpreter does (`ir::args::buffer_len`, which the backends use). Stage III keeps the
//! sparse structure in its axes: it validates the same arguments as Stage I, and refuses the
//! same corrupted row pointers.

use sparsec_testkit as common;

use common::workloads::WORKLOADS;

fn check(name: &str) {
    let func = common::workload(name);
    let flat = sparsec::passes::PassManager::lowering(sparsec::ir::Stage::I, sparsec::ir::Stage::III).run(&func).unwrap();
    common::for_each_case(name, |mname, c| {
        // Every corpus run is proven in range, so compiled backends take it unchecked.
        sparsec::ir::args::check_structure(&func, &c.args)
            .and_then(|()| sparsec::ir::args::check_accesses(&func, &c.args))
            .unwrap_or_else(|e| panic!("{name} on {mname}: arguments refused: {e}"));
        sparsec::ir::args::check_structure(&flat, &c.args).unwrap_or_else(|e| panic!("{name} on {mname}: Stage III: {e}"));
        for (_, axis) in func.axes.iter() {
            let Some(p) = axis.indptr else { continue };
            let mut bad = c.args.clone();
            if let Some(sparsec::ir::data::Array::I32(v)) = bad.arrays.get_mut(&func.params[p].name) {
                if v.len() < 2 {
                    continue;
                }
                v[1] = v[0] - 1;
            }
            let stage1 = sparsec::ir::args::check_structure(&func, &bad).map_err(|e| e.to_string());
            let stage3 = sparsec::ir::args::check_structure(&flat, &bad).map_err(|e| e.to_string());
            assert!(stage1.is_err(), "{name} on {mname}: a decreasing `{}` passes", func.params[p].name);
            assert_eq!(stage3, stage1, "{name} on {mname}: Stage III checks `{}` otherwise", func.params[p].name);
        }
        // The storage rule the backends size arrays by is the interpreter's, at both ends.
        for f in [&func, &flat] {
            for (b, buf) in f.buffers.iter() {
                if matches!(buf.storage, sparsec::ir::Storage::Alloc(s) if s != sparsec::ir::Scope::Global) {
                    continue;
                }
                let ir = sparsec::ir::args::buffer_len(f, b, &c.args).unwrap_or_else(|e| panic!("{name} on {mname}: {e}"));
                let interp = sparsec::interp::buffer_len(f, b, &c.args).unwrap_or_else(|e| panic!("{name} on {mname}: {e}"));
                assert_eq!(ir, interp, "{name} on {mname}: storage of `{}` at Stage {}", buf.name, f.stage);
            }
        }
        let out = sparsec::interp::run(&func, &c.args).unwrap_or_else(|e| panic!("{name} on {mname}: {e}"));
        for (param, want) in &c.expected {
            let got = common::output_f32(&out, param);
            common::assert_close(&format!("{name} on {mname}: {param}"), &got, want, 1e-5);
        }
    });
}

#[test]
fn corpus_lists_every_workload_file() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/workloads");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path().file_stem().unwrap().to_string_lossy().to_string())
        .collect();
    files.sort();
    let mut names: Vec<String> = WORKLOADS.iter().map(|s| s.to_string()).collect();
    names.sort();
    assert_eq!(files, names);
}

macro_rules! oracle_tests {
    ($($name:ident),* $(,)?) => {
        $(#[test]
        fn $name() {
            check(stringify!($name));
        })*
    };
}

sparsec_testkit::with_workloads!(oracle_tests);

#[test]
fn square_sum_two_k() {
    check("square_sum_two_K");
}
