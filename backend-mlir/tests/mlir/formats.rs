//! Level formats from files (issue #17) on mlir-cpu: the programs of `examples/formats`
//! (DCSR and CSC SpMV, a sparse-vector dot product, TTV/TTM/MTTKRP on CSF tensors) bound
//! from every shared and generated matrix and from generated `.tns` tensors as `sparsec run
//! --matrix` binds them, run unscheduled, with the default CPU schedule (and its every-path
//! tuning), as emulated GPU kernels and under a random schedule: each equals the dense f64
//! result and the interpreter at Stage I.

use sparsec_testkit::formats::file_cases;
use sparsec_testkit::fuzz::Outcome;

#[test]
fn format_programs_from_files_agree_on_mlir_cpu() {
    let dir = std::env::temp_dir().join(format!("sparsec_mlir_formats_{}", std::process::id()));
    let runner = super::fuzz::runner();
    let runner = sparsec_testkit::fuzz::Runner { max_steps: 1 << 26, ..runner };
    let cases = file_cases(&dir, usize::MAX);
    for c in &cases {
        let out = sparsec_interp::run(&c.func, &c.args).unwrap_or_else(|e| panic!("{}: {e}", c.label));
        c.assert_matches(&out);
        match runner.check_func(&c.func, &c.args) {
            Outcome::Agree => {}
            o => panic!("{}: {o:?}", c.label),
        }
    }
    assert!(cases.len() >= 44, "{} cases", cases.len());
    std::fs::remove_dir_all(&dir).ok();
}
