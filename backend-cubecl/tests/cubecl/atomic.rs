//! The hyb example (csrmm decomposed into hyb buckets, one ELL row per block, features across
//! threads, atomic accumulation into C, the buckets fused into one launch) on wgpu.

use super::common::client;
use sparsec::formats::compose::Hyb;
use sparsec_backend_cubecl::compile;
use sparsec_testkit as tk;
use sparsec_testkit::schedules::{hyb_atomic as schedule, hyb_decomposed as decomposed};

#[test]
fn hyb_with_atomic_adds_computes_csrmm() {
    let client = client();
    let mut ran = 0;
    for (name, m) in tk::all_matrices() {
        let csr = m.to_csr();
        let hyb = Hyb::from_csr(&csr, 1, 3).unwrap();
        let widths: Vec<i64> = hyb.bucket_widths().iter().map(|&w| w as i64).collect();
        let g = decomposed(&widths);
        let f = schedule(g.clone(), widths.len()).into_func();
        let Some(case) = tk::workloads::case("csrmm", &m, &mut tk::Rng::new(11)) else { continue };
        let mut args = case.args.clone();
        sparsec::formats::bind_hyb(&mut args, &hyb).unwrap();
        let prog = compile(&f).unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = prog.run(&client, &args).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (g, w) = (tk::output_f32(&got, "c"), &case.expected[0].1);
        tk::assert_close(&format!("hyb on {name}"), &g, w, 1e-4);
        ran += 1;
    }
    assert!(ran >= 14, "ran on {ran} matrices");
}

/// `examples/csrmm_segments.sptir` (rows cut into segments) under the default GPU schedule
/// on wgpu: each segment sums in registers and adds to C atomically; equals the product on
/// every matrix with segments of one entry, of a few, and whole rows.
#[test]
fn row_segments_add_their_sums_atomically() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/csrmm_segments.sptir");
    let f = sparsec_ir::text::parse_func(path, &std::fs::read_to_string(path).unwrap()).unwrap_or_else(|e| panic!("{e}"));
    let g = sparsec_schedule::auto::gpu_schedule(&f, 128).unwrap_or_else(|e| panic!("{e}"));
    let prog = compile(&g).unwrap_or_else(|e| panic!("{e}"));
    let client = client();
    let mut ran = 0;
    for (name, m) in tk::all_matrices() {
        for (max_len, feat) in [(1, 4), (7, 32), (1 << 20, 130)] {
            if m.nnz() * feat > 4_000_000 && max_len != 7 {
                continue;
            }
            let case = tk::workloads::segments_case(&m, &mut tk::Rng::new(3), feat, max_len);
            let got = prog.run(&client, &case.args).unwrap_or_else(|e| panic!("segments of {max_len} on {name}: {e}"));
            tk::assert_close(&format!("segments of {max_len}, feat {feat}, on {name}"), &tk::output_f32(&got, "c"), &case.expected[0].1, 1e-4);
            ran += 1;
        }
    }
    assert!(ran >= 30, "ran {ran} cases");
}
