//! Golden text of every workload at Stage II and Stage III (insta snapshots under
//! `tests/snapshots/`). Each stage also prints, parses and prints back identically.

use sparsec_testkit as common;

use sparsec::ir::text::{parse_func, print_func};
use sparsec::ir::Stage;
use sparsec_passes::PassManager;

#[test]
fn every_workload_at_stage_2_and_3() {
    for name in common::workloads::WORKLOADS {
        let f = common::workload(name);
        let stages = PassManager::lowering_to(Stage::III).run_all(&f).unwrap_or_else(|e| panic!("{name}: {e}"));
        for g in stages {
            let text = print_func(&g);
            let again = parse_func("printed", &text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
            assert_eq!(print_func(&again), text, "{name}: Stage {} text roundtrips", g.stage);
            insta::assert_snapshot!(format!("{name}_stage{}", g.stage.number()), text);
        }
    }
}

/// The level-format programs of `examples/formats` (root sparse axes, `modes`, CSF) at
/// every stage, printed, parsed back and printed identically.
#[test]
fn every_format_program_at_every_stage() {
    for name in ["dcsr_spmv", "csc_spmv", "coo_spmv", "sparse_dot", "csf_ttv", "coo_ttv", "csf_ttm", "csf_mttkrp"] {
        let f = sparsec_testkit::formats::program(name);
        let stages = PassManager::lowering_to(Stage::III).run_all(&f).unwrap_or_else(|e| panic!("{name}: {e}"));
        for g in std::iter::once(f).chain(stages) {
            let text = print_func(&g);
            let again = parse_func("printed", &text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
            assert_eq!(print_func(&again), text, "{name}: Stage {} text roundtrips", g.stage);
            insta::assert_snapshot!(format!("{name}_stage{}", g.stage.number()), text);
        }
    }
}
