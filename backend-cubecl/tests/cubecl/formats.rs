//! Level formats from files (issue #17) on cubecl-wgpu: the programs of `examples/formats`
//! (DCSR and CSC SpMV, a sparse-vector dot product, TTV/TTM/MTTKRP on CSF tensors) bound
//! from the shared and generated matrices of up to 40,000 entries and from generated `.tns`
//! tensors, and the co-iterations of each file with a partner, run unscheduled, with the
//! default GPU schedule and under a random schedule: each equals the dense f64 result and
//! the interpreter at Stage I. Unscheduled, one unit walks everything: where that passes
//! lavapipe's loop limit the run is refused (`LoopLimit`), never wrong, and the scheduled
//! runs must still agree. SpGEMM's symbolic phase spreads its rows over the GPU's units
//! under every schedule, so it is never the part refused.

use super::common::client;
use super::runner::runner;
use sparsec_testkit::formats::file_cases;
use sparsec_testkit::fuzz::Outcome;

#[test]
fn format_programs_from_files_agree_on_wgpu() {
    let dir = std::env::temp_dir().join(format!("sparsec_wgpu_formats_{}", std::process::id()));
    let client = client();
    let cases = file_cases(&dir, 40_000);
    let (mut refused, mut products) = (0, 0);
    for c in &cases {
        products += usize::from(c.label.starts_with("spgemm "));
        let out = sparsec_interp::run(&c.func, &c.args).unwrap_or_else(|e| panic!("{}: {e}", c.label));
        c.assert_matches(&out);
        let r = runner("cubecl-wgpu", &c.func, &client);
        match (sparsec_testkit::fuzz::Runner { max_steps: 1 << 26, ..r }).check_func(&c.func, &c.args) {
            Outcome::Agree => {}
            Outcome::Failure(why)
                if why.starts_with("cubecl-wgpu fails (") && why.contains("per-invocation limit") && why.contains("cubecl-wgpu (auto gpu)") =>
            {
                refused += 1
            }
            o => panic!("{}: {o:?}", c.label),
        }
    }
    assert!(cases.len() >= 30, "{} cases", cases.len());
    // Unscheduled runs walk everything in one unit, which lavapipe cuts short on the larger
    // files; most still run.
    assert!(refused * 2 < cases.len(), "{refused} of {} cases refused", cases.len());
    assert!(products >= 4, "{products} products");
    std::fs::remove_dir_all(&dir).ok();
}
