//! Emitted sources: golden `#[cube]` renderings, the vendored fixture kept in sync and run
//! against the run-time kernels, WGSL and CUDA output.

use super::common::{client, workload};
use sparsec_backend_cubecl::{compile, emit_cubecl, emit_cuda, emit_wgsl};
use sparsec_ir::data::Array;
use sparsec_testkit as tk;

#[test]
fn cubecl_snapshots() {
    for name in ["csrmm", "sddmm", "bsrmm"] {
        let text = emit_cubecl(&workload(name)).unwrap();
        insta::with_settings!({ snapshot_path => "../snapshots", prepend_module_to_snapshot => false }, {
            insta::assert_snapshot!(format!("emit_cubecl_{name}"), text);
        });
    }
}

fn fixture_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixture/src/csrmm.rs")
}

/// The fixture crate's source is `emit_cubecl(csrmm)`; `SPARSEC_BLESS=1` rewrites it.
#[test]
fn fixture_is_in_sync() {
    let text = emit_cubecl(&workload("csrmm")).unwrap();
    let path = fixture_path();
    if std::env::var("SPARSEC_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &text).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap();
    assert!(on_disk == text, "{} is stale: rerun with SPARSEC_BLESS=1", path.display());
}

/// The vendored rendering, compiled by the `#[cube]` macro, computes what the run-time
/// kernels compute.
#[test]
fn fixture_runs_like_the_runtime_kernels() {
    let client = client();
    let f = workload("csrmm");
    let prog = compile(&f).unwrap();
    for (mname, m) in tk::generated_matrices().into_iter().chain(tk::shared_matrices().into_iter().take(2)) {
        let c = tk::workloads::case("csrmm", &m, &mut tk::Rng::new(7)).unwrap();
        let want = prog.run(&client, &c.args).unwrap();
        let upload = |name: &str| -> (cubecl::server::Handle, usize) {
            let a = &c.args.arrays[name];
            let bytes: Vec<u8> = match a {
                Array::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                Array::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                other => panic!("unexpected {other:?}"),
            };
            (client.create_from_slice(&bytes), a.len())
        };
        let names = ["a", "b", "c", "indptr", "indices"];
        let hs: Vec<_> = names.iter().map(|n| upload(n)).collect();
        let lens: Vec<usize> = hs.iter().map(|h| h.1).collect();
        let int = |n: &str| match c.args.scalars[n] {
            sparsec_ir::data::Scalar::Int(v) => v as i32,
            other => panic!("{other:?}"),
        };
        sparsec_cubecl_fixture::csrmm::launch(
            &client, &hs[0].0, &hs[1].0, &hs[2].0, &hs[3].0, &hs[4].0,
            int("m"), int("n"), int("feat_size"), int("nnz"), &lens,
        );
        let bytes = client.read_one(hs[2].0.clone()).unwrap();
        let got: Vec<f32> = bytes.chunks_exact(4).take(lens[2]).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        tk::assert_close(&format!("fixture csrmm on {mname}"), &got, &tk::output_f32(&want, "c"), 1e-6);
    }
}

#[test]
fn wgsl_and_cuda_sources() {
    let f = workload("csrmm");
    let wgsl = emit_wgsl(&f).unwrap();
    assert!(wgsl.contains("@compute"), "{wgsl}");
    let cuda = emit_cuda(&f).unwrap();
    assert!(cuda.contains("__global__"), "{cuda}");
}
