//! Format decompositions for the GPU, end to end. Row segments: csrmm decomposed with
//! `passes::row_segments_rule`, bound with `formats::bind_row_segments`, under `--auto gpu`
//! (a warp per segment, register sums added atomically), computes csrmm; the selector
//! (`auto::gpu_row_segments`) picks segments where rows vary. The hyb example end to end: csrmm decomposed into hyb (`examples/hyb.sptir`), scheduled for
//! a GPU (`examples/hyb.trace.json`: one ELL row per block, features across threads, atomic
//! accumulation, the bucket kernels fused into one launch) and lowered — the numbers stay
//! those of plain csrmm. The committed example files are golden: regenerate them with
//! `SPARSEC_BLESS=1 cargo test --test hyb_pipeline`.

use sparsec_testkit as common;

use sparsec::formats::compose::Hyb;
use sparsec::ir::text::{parse_func, print_func};
use sparsec::schedule::Trace;

use common::schedules::{hyb_atomic as schedule, hyb_decomposed as decomposed};

const WIDTHS: [i64; 4] = [1, 2, 4, 8];

fn path(name: &str) -> String {
    format!("{}/examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn golden(name: &str, text: &str) {
    if std::env::var_os("SPARSEC_BLESS").is_some() {
        std::fs::write(path(name), text).unwrap();
    }
    let committed = std::fs::read_to_string(path(name)).unwrap_or_default();
    assert_eq!(committed, text, "examples/{name} is out of date: rerun with SPARSEC_BLESS=1");
}

#[test]
fn the_example_files_are_current_and_replay() {
    let g = decomposed(&WIDTHS);
    golden("hyb.sptir", &print_func(&g));
    let sch = schedule(g.clone(), WIDTHS.len());
    golden("hyb.trace.json", &sch.trace().to_json());
    // What `sparsec lower examples/hyb.sptir --schedule examples/hyb.trace.json` does.
    let parsed = parse_func("hyb", &std::fs::read_to_string(path("hyb.sptir")).unwrap()).unwrap();
    let trace = Trace::from_json(&std::fs::read_to_string(path("hyb.trace.json")).unwrap()).unwrap();
    let replayed = trace.replay(&parsed).unwrap();
    assert_eq!(replayed.text(), sch.text());
    let text = sch.text();
    // The bucket rewrites with the zeroing of C are one launch, the four bucket kernels another.
    assert_eq!(text.matches("blockIdx.x(").count(), 2, "two launches:\n{text}");
    assert_eq!(text.matches("atomic_add(C[").count(), 4, "{text}");
}

/// On every shared and generated matrix, with the buckets its rows need (long rows split
/// into chunks of 8).
#[test]
fn the_scheduled_hyb_program_computes_csrmm() {
    let csrmm = common::workload("csrmm");
    let mut ran = 0;
    for (name, m) in common::all_matrices() {
        let csr = m.to_csr();
        let hyb = Hyb::from_csr(&csr, 1, 3).unwrap();
        let widths: Vec<i64> = hyb.bucket_widths().iter().map(|&w| w as i64).collect();
        let sch = schedule(decomposed(&widths), widths.len());
        let mut rng = common::Rng::new(11);
        let Some(case) = common::workloads::case("csrmm", &m, &mut rng) else { continue };
        let want = sparsec::interp::run(&csrmm, &case.args).unwrap();
        let mut args = case.args.clone();
        sparsec::formats::bind_hyb(&mut args, &hyb).unwrap();
        // The shipped schedule, and the GPU default (bucket nonzeros over cubes, features
        // over the lanes of a warp).
        let auto = sparsec::schedule::auto::gpu_schedule(&decomposed(&widths), 128).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (what, f) in [("trace", sch.func()), ("auto gpu", &auto)] {
            let got = sparsec::interp::run(f, &args).unwrap_or_else(|e| panic!("{name} ({what}): {e}"));
            let (g, w) = (common::output_f32(&got, "c"), common::output_f32(&want, "c"));
            common::assert_close(&format!("hyb ({what}) on {name}"), &g, &w, 1e-5);
        }
        ran += 1;
    }
    assert!(ran >= 14, "ran on {ran} matrices");
}

/// A matrix whose columns do not fit the program's `i32` coordinates is refused, not wrapped.
#[test]
fn hyb_binding_refuses_coordinates_beyond_i32() {
    let wide = 3_000_000_000i64;
    let csr = sparsec::formats::Csr::<i64, f64>::try_new(1, wide as usize, vec![0, 1], vec![wide - 1], vec![1.0]).unwrap();
    let hyb = Hyb::from_csr(&csr, 1, 3).unwrap();
    let mut args = sparsec::ir::data::Args::new();
    let e = sparsec::formats::bind_hyb(&mut args, &hyb).expect_err("wrapped to i32");
    assert!(e.to_string().contains("i32"), "{e}");
}

/// csrmm decomposed into row segments of 1, 7 and 32 entries computes csrmm at Stage I and
/// under the GPU default (segments over warps, register sums added to C atomically), on
/// every shared and generated matrix.
#[test]
fn row_segments_compute_csrmm() {
    let csrmm = common::workload("csrmm");
    let g = sparsec::passes::decompose_format(&csrmm, &[sparsec::passes::row_segments_rule().unwrap()]).unwrap();
    let auto = sparsec::schedule::auto::gpu_schedule(&g, 128).unwrap();
    let printed = print_func(&auto);
    assert!(printed.contains("C_local_add") && printed.contains("atomic_add(C[") && printed.contains("threadIdx.y(4)"), "{printed}");
    let mut ran = 0;
    for (name, m) in common::all_matrices() {
        let csr = m.to_csr();
        let Some(case) = common::workloads::case("csrmm", &m, &mut common::Rng::new(11)) else { continue };
        let want = common::output_f32(&sparsec::interp::run(&csrmm, &case.args).unwrap(), "c");
        for max_len in [1, 7, 32] {
            let segs = sparsec::formats::compose::RowSegments::from_csr(&csr, max_len).unwrap();
            let mut args = case.args.clone();
            sparsec::formats::bind_row_segments(&mut args, &csr, &segs).unwrap();
            for (what, f) in [("stage I", &g), ("auto gpu", &auto)] {
                let got = sparsec::interp::run(f, &args).unwrap_or_else(|e| panic!("{name} ({what}, {max_len}): {e}"));
                common::assert_close(&format!("segments of {max_len} ({what}) on {name}"), &common::output_f32(&got, "c"), &want, 1e-5);
            }
        }
        ran += 1;
    }
    assert!(ran >= 14, "ran on {ran} matrices");
}

/// The selector picks segments exactly for the shared matrices whose rows vary (those where
/// they won on an H100: bcsstk13, ca-CondMat, citeseer, cora) and one warp per row for the
/// regular ones (cryg2500, dnn-n1024-l1, dwt_992).
#[test]
fn the_selector_picks_segments_where_rows_vary() {
    let mut picked = Vec::new();
    for (name, m) in common::shared_matrices() {
        let lens = (0..m.rows).map(|i| m.indptr[i + 1] - m.indptr[i]);
        if let Some(len) = sparsec::schedule::auto::gpu_row_segments(lens) {
            assert_eq!(len, sparsec::schedule::auto::SEGMENT_LEN);
            picked.push(name);
        }
    }
    picked.sort();
    assert_eq!(picked, ["bcsstk13", "ca-CondMat", "citeseer", "cora"]);
    assert_eq!(sparsec::schedule::auto::gpu_row_segments([]), None);
    assert_eq!(sparsec::schedule::auto::gpu_row_segments([5, 5, 5]), None);
    assert_eq!(sparsec::schedule::auto::gpu_row_segments([1, 1, 1, 100]), Some(32));
}

/// `sparsec run examples/hyb.sptir --matrix A=FILE --input B=FILE` binds the hyb pieces from
/// the matrix alone (`driver::bind_hyb_pieces`): on every shared matrix and on generated ones
/// (written as Matrix Market files), C equals plain csrmm's on the same inputs.
#[test]
fn run_binds_the_decomposed_program_from_the_matrix_alone() {
    use sparsec::driver::{bind_run, RunSpec};
    let dir = std::env::temp_dir().join(format!("sparsec_hyb_run_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hyb = parse_func("hyb.sptir", &std::fs::read_to_string(path("hyb.sptir")).unwrap()).unwrap();
    let csrmm = common::workload("csrmm");
    let files = common::formats::matrix_files(&dir);
    let feat = 5;
    let mut ran = 0;
    for (name, file) in &files {
        let cols = sparsec::formats::mtx::read_mtx_path::<i64, f32>(file).unwrap().shape().1;
        let b = dir.join(format!("{name}_b.npy"));
        let values: Vec<f32> = (0..cols * feat).map(|x| (x % 11) as f32 / 8.0 - 0.5).collect();
        sparsec::npy::write(&b, &sparsec::ir::data::Array::F32(values), &[cols as u64, feat as u64]).unwrap();
        let spec = RunSpec { matrices: vec![("A".into(), file.clone())], inputs: vec![("B".into(), b)], block: 4, ..RunSpec::default() };
        let (hyb_args, plain_args) = (bind_run(&hyb, &spec).unwrap_or_else(|e| panic!("{name}: {e}")), bind_run(&csrmm, &spec).unwrap());
        let got = sparsec::interp::run(&hyb, &hyb_args).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = sparsec::interp::run(&csrmm, &plain_args).unwrap();
        common::assert_close(&format!("hyb run on {name}"), &common::output_f32(&got, "c"), &common::output_f32(&want, "c"), 1e-5);
        ran += 1;
    }
    assert!(ran >= 7, "ran on {ran} matrices");
    std::fs::remove_dir_all(&dir).ok();
}

/// Every decomposition rule's example of csrmm (`examples/{bsr,ell,group_coo,block_group_coo,
/// sr_bcrs,nm_2_4}.sptir`: what `passes::bsr_rule(4)`, `ell_rule(32)`, `group_coo_rule(4)`,
/// `block_group_coo_rule(4, 2)`, `sr_bcrs_rule(4, 8)` and `nm_2_4_rule()` make of it;
/// `SPARSEC_BLESS=1` rewrites them) runs from `--matrix A=FILE` alone
/// (`driver::bind_rule_pieces` lays the pieces out): on every shared and generated matrix C
/// equals plain csrmm's (and Stages II and III agree up to 20,000 entries), or the matrix is
/// refused with the reason — ELL: a row longer than the slots; 2:4: more than 2 entries in 4
/// columns, so 2:4 also runs on the generated matrices pruned to 2:4.
#[test]
fn rule_examples_run_from_the_matrix_alone() {
    use sparsec::driver::{bind_run, RunSpec};
    use sparsec::passes as p;
    let dir = std::env::temp_dir().join(format!("sparsec_rule_run_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csrmm = common::workload("csrmm");
    let mut files = common::formats::matrix_files(&dir);
    // 2:4 copies of the generated matrices.
    for (name, m) in common::generated_matrices() {
        let pruned = sparsec::formats::compose::prune_to_nm(&m.to_csr(), 2, 4).unwrap();
        let f = dir.join(format!("{name}_2of4.mtx"));
        sparsec::formats::mtx::write_mtx_path(&f, &pruned).unwrap();
        files.push((format!("{name} pruned to 2:4"), f));
    }
    let runner = common::fuzz::Runner { max_steps: 1 << 27, ..Default::default() };
    // (file, rule, what it says of the matrices it refuses, and the rule in words)
    let examples = [
        ("bsr.sptir", p::bsr_rule(4), None, "into BSR with 4 x 4 blocks (passes::bsr_rule(4))"),
        ("ell.sptir", p::ell_rule(32), Some("more than the 32 slots of a row"), "into ELL with 32 slots a row (passes::ell_rule(32))"),
        ("group_coo.sptir", p::group_coo_rule(4), None, "into GroupCOO, groups of 4 entries of a row (passes::group_coo_rule(4))"),
        ("block_group_coo.sptir", p::block_group_coo_rule(4, 2), None, "into BlockGroupCOO, groups of 2 blocks of 4 x 4 (passes::block_group_coo_rule(4, 2))"),
        ("sr_bcrs.sptir", p::sr_bcrs_rule(4, 8), None, "into SR-BCRS, tiles of 4 rows and column groups of 8 (passes::sr_bcrs_rule(4, 8))"),
        ("nm_2_4.sptir", p::nm_2_4_rule(), Some("at most 2 entries in every 4 columns of a row"), "into 2:4 structured sparsity (passes::nm_2_4_rule())"),
        ("rcm.sptir", p::rcm_rule(), None, "into CSR with its rows in reverse Cuthill-McKee order (passes::rcm_rule())"),
    ];
    for (file, rule, refusal, words) in examples {
        let made = sparsec::passes::decompose_format(&csrmm, &[rule.unwrap()]).unwrap();
        if std::env::var_os("SPARSEC_BLESS").is_some() && !matches!(file, "bsr.sptir" | "ell.sptir") {
            let text = format!(
                "# csrmm (tests/workloads/csrmm.sptir) decomposed {words}.\n# `sparsec run examples/{file} --matrix A=m.mtx` binds the pieces from A (driver::bind_rule_pieces);\n# the preprocess copies A's values into them.\n{}",
                print_func(&made)
            );
            std::fs::write(path(file), text).unwrap();
        }
        let g = parse_func(file, &std::fs::read_to_string(path(file)).unwrap()).unwrap();
        assert_eq!(print_func(&g), print_func(&made), "examples/{file} is not what the rule makes of csrmm");
        let (mut ran, mut refused) = (0, 0);
        for (name, mtx) in &files {
            let m = sparsec::formats::mtx::read_mtx_path::<i64, f32>(mtx).unwrap();
            // SR-BCRS and 2:4 store dense tiles: keep the interpreter's work small.
            if matches!(file, "sr_bcrs.sptir" | "nm_2_4.sptir") && m.nnz() > 50_000 {
                continue;
            }
            let b = dir.join(format!("{name}_b.npy"));
            let values: Vec<f32> = (0..m.shape().1 * 3).map(|x| (x % 7) as f32 / 4.0 - 0.75).collect();
            sparsec::npy::write(&b, &sparsec::ir::data::Array::F32(values), &[m.shape().1 as u64, 3]).unwrap();
            let spec = RunSpec { matrices: vec![("A".into(), mtx.clone())], inputs: vec![("B".into(), b)], ..RunSpec::default() };
            match (bind_run(&g, &spec), refusal) {
                (Err(e), Some(why)) if e.to_string().contains(why) => {
                    refused += 1;
                    continue;
                }
                (Err(e), _) => panic!("{file} on {name}: {e}"),
                (Ok(args), _) => {
                    let got = sparsec::interp::run(&g, &args).unwrap_or_else(|e| panic!("{file} on {name}: {e}"));
                    let want = sparsec::interp::run(&csrmm, &bind_run(&csrmm, &spec).unwrap()).unwrap();
                    common::assert_close(&format!("{file} on {name}"), &common::output_f32(&got, "c"), &common::output_f32(&want, "c"), 1e-5);
                    // Stages II and III too, where the interpreter is quick about it.
                    if m.nnz() <= 20_000 {
                        match runner.check_func(&g, &args) {
                            common::fuzz::Outcome::Agree => {}
                            o => panic!("{file} on {name}: {o:?}"),
                        }
                    }
                    ran += 1;
                }
            }
        }
        assert!(ran >= 6 && (refusal.is_none() || refused >= 1), "{file}: ran on {ran}, refused {refused}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
