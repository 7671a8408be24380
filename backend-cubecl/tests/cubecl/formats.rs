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

/// A·B on the files the formats test leaves out (above 40,000 entries) and on a generated
/// matrix whose every row of C gathers about 14,000 products from 120 rows of B: a unit
/// that walked a row's products (with a search for each) would run past lavapipe's loop
/// limit; the default GPU schedule puts each of B's rows over the lanes of a warp
/// (`auto::child_lanes`). Each equals the f64 product with scipy's pattern, or is refused
/// for the loop limit (ca-CondMat's symbolic phase: a unit's chunk of rows holds too many
/// products); the generated matrix and bcsstk13 (up to 7,311 products a row) run.
#[test]
fn spgemm_rows_of_many_products_run_under_the_default_gpu_schedule() {
    let dir = std::env::temp_dir().join(format!("sparsec_wgpu_products_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dense-rows.mtx");
    let m = sparsec::formats::gen::uniform::<i64, f64>(200, 200, 24_000, 11).unwrap();
    sparsec::formats::mtx::write_mtx_path(&path, &m).unwrap();
    let mut files = vec![("dense-rows".to_string(), path)];
    for (name, path) in sparsec::formats::shared_matrices() {
        let (_, a) = sparsec::formats::mtx::parse_mtx::<i64, f64>(&std::fs::read(&path).unwrap()).unwrap();
        if a.rows() == a.cols() && a.nnz() > 40_000 {
            files.push((name, path));
        }
    }
    let plan = sparsec::driver::Plan::Auto(sparsec::driver::AutoSchedule::Gpu { threads: sparsec::driver::GPU_THREADS });
    let mut ran = Vec::new();
    for (name, path) in &files {
        let c = sparsec_testkit::formats::pair_case(&dir, "spgemm", name, path);
        let f3 = sparsec::driver::lower_with(&c.func, &plan).unwrap().pop().unwrap();
        match super::runner::run_planned("cubecl-wgpu", &f3, &plan, &c.func, &client(), &c.args) {
            Ok(out) => {
                c.assert_matches(&out);
                ran.push(name.clone());
            }
            Err(e) if e.contains("per-invocation limit") => {}
            Err(e) => panic!("{}: {e}", c.label),
        }
    }
    assert!(ran.iter().any(|n| n == "dense-rows") && ran.len() >= 2, "ran {ran:?} of {} files", files.len());
    std::fs::remove_dir_all(&dir).ok();
}

/// A trace that puts SpGEMM's products over the lanes of a warp (rows on blocks, B's row on
/// `threadIdx.x`): a unit finds each product's position by a search, so from one of A's
/// nonzeros to the next the units meet each other's columns, and the kernel holds barriers
/// between them (`ir::threads_exchange_across_runs`); it equals the interpreter.
#[test]
fn spgemm_products_over_lanes_are_fenced_between_rows() {
    const LANES: &str = r#"{"insts":[
  {"op":"lower_sparse_iter"},
  {"op":"get_block","name":"spgemm0","outputs":[0]},
  {"op":"get_loops","block":0,"outputs":[1]},
  {"op":"bind","loop":1,"tag":"blockIdx.x"},
  {"op":"get_block","name":"spgemm2","outputs":[2]},
  {"op":"get_loops","block":2,"outputs":[3]},
  {"op":"split","loop":3,"factors":[null,32],"outputs":[4,5]},
  {"op":"bind","loop":5,"tag":"threadIdx.x"}
]}"#;
    let dir = std::env::temp_dir().join(format!("sparsec_wgpu_lanes_{}", std::process::id()));
    let client = client();
    let cases: Vec<_> = file_cases(&dir, 12_000).into_iter().filter(|c| c.label.starts_with("spgemm on cora")).collect();
    assert_eq!(cases.len(), 1);
    let c = &cases[0];
    let plan = sparsec::driver::Plan::Trace(sparsec_schedule::Trace::from_json(LANES).unwrap());
    let f3 = sparsec::driver::lower_with(&c.func, &plan).unwrap().pop().unwrap();
    let source = sparsec_backend_cubecl::emit_cubecl(&f3).unwrap();
    assert!(source.contains("sync_storage();"), "{source}");
    let out = super::runner::run_planned("cubecl-wgpu", &f3, &plan, &c.func, &client, &c.args).unwrap_or_else(|e| panic!("{e}"));
    c.assert_matches(&out);
    std::fs::remove_dir_all(&dir).ok();
}
