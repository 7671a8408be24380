//! Level formats from files (issue #17) on cubecl-wgpu: the programs of `examples/formats`
//! (DCSR and CSC SpMV, a sparse-vector dot product, TTV/TTM/MTTKRP on CSF tensors) bound
//! from the shared and generated matrices of up to 12,000 entries and from generated `.tns`
//! tensors, and the co-iterations of each file with a partner, run unscheduled, with the
//! default GPU schedule and under a random schedule: each equals the dense f64 result and
//! the interpreter at Stage I. Unscheduled, one unit walks everything: where that passes
//! lavapipe's loop limit the run is refused (`LoopLimit`), never wrong, and the scheduled
//! runs must still agree — except SpGEMM's symbolic phase, which runs in one unit under any
//! schedule: past the limit it is refused, and it must run on the smallest.

use super::common::client;
use super::runner::runner;
use sparsec_testkit::formats::file_cases;
use sparsec_testkit::fuzz::Outcome;

#[test]
fn format_programs_from_files_agree_on_wgpu() {
    let dir = std::env::temp_dir().join(format!("sparsec_wgpu_formats_{}", std::process::id()));
    let client = client();
    let cases = file_cases(&dir, 12_000);
    let (mut refused, mut refused_products, mut products) = (0, 0, 0);
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
            // A product's symbolic phase runs in one unit whatever the schedule (its mark
            // workspace is one per unit): past lavapipe's limit it is refused, never wrong.
            Outcome::Failure(why) if c.label.starts_with("spgemm ") && (why.contains("spgemm_count_kc") || why.contains("spgemm_fill_kc")) && why.contains("per-invocation limit") => {
                refused_products += 1
            }
            o => panic!("{}: {o:?}", c.label),
        }
    }
    assert!(cases.len() >= 30, "{} cases", cases.len());
    assert!(refused * 4 < cases.len(), "{refused} of {} cases refused", cases.len());
    // Serial, the phase passes the limit on all but the smallest matrices (a known limit: a
    // workspace per unit would let rows run in parallel); where it runs it must agree.
    assert!(refused_products < products, "{refused_products} of {products} products refused");
    std::fs::remove_dir_all(&dir).ok();
}
