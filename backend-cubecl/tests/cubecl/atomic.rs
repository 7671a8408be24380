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
        let csr = sparsec::formats::Csr::<i64, f64>::try_new(
            m.rows,
            m.cols,
            m.indptr.iter().map(|&x| x as i64).collect(),
            m.indices.iter().map(|&x| x as i64).collect(),
            m.vals.iter().map(|&v| v as f64).collect(),
        )
        .unwrap();
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
