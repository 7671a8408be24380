//! Emitted sources: golden `#[cube]` renderings, the vendored fixture kept in sync and run
//! against the run-time kernels, WGSL and CUDA output.

use super::common::{client, workload};
use sparsec_backend_cubecl::{emit_cubecl, emit_cuda, emit_wgsl};
use sparsec_ir::data::Array;
use sparsec_testkit as tk;

/// Workload `name` with the default GPU schedule (what `sparsec lower --emit cubecl` prints).
fn scheduled(name: &str) -> sparsec_ir::Func {
    sparsec_schedule::auto::gpu_schedule(&workload(name), 64).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn cubecl_snapshots() {
    for name in ["csrmm", "sddmm", "bsrmm"] {
        let text = emit_cubecl(&scheduled(name)).unwrap();
        insta::with_settings!({ snapshot_path => "../snapshots", prepend_module_to_snapshot => false }, {
            insta::assert_snapshot!(format!("emit_cubecl_{name}"), text);
        });
    }
}

/// The workloads whose rendering `backend-cubecl/fixture` vendors.
const VENDORED: [&str; 2] = ["csrmm", "rgcn_hetero_forward"];

fn fixture_path(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fixture/src/{name}.rs"))
}

/// The fixture crate's sources are `emit_cubecl` of their workloads with the default GPU
/// schedule; `SPARSEC_BLESS=1` rewrites them.
#[test]
fn fixture_is_in_sync() {
    for name in VENDORED {
        let text = emit_cubecl(&scheduled(name)).unwrap();
        let path = fixture_path(name);
        if std::env::var("SPARSEC_BLESS").is_ok_and(|v| v == "1") {
            std::fs::write(&path, &text).unwrap();
        }
        let on_disk = std::fs::read_to_string(&path).unwrap();
        assert!(on_disk == text, "{} is stale: rerun with SPARSEC_BLESS=1", path.display());
    }
}

/// Uploads the named arrays of a case: (handles, lengths).
fn upload(client: &cubecl::client::Client, c: &tk::workloads::Case, names: &[&str]) -> (Vec<cubecl::server::Handle>, Vec<usize>) {
    names
        .iter()
        .map(|name| {
            let a = &c.args.arrays[*name];
            let bytes: Vec<u8> = match a {
                Array::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                Array::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                other => panic!("unexpected {other:?}"),
            };
            (client.create_from_slice(&bytes), a.len())
        })
        .unzip()
}

/// An `i32` scalar of a case.
fn int(c: &tk::workloads::Case, n: &str) -> i32 {
    match c.args.scalars[n] {
        sparsec_ir::data::Scalar::Int(v) => v as i32,
        other => panic!("{other:?}"),
    }
}

/// The `f32` array behind a handle, `len` elements.
fn read(client: &cubecl::client::Client, h: &cubecl::server::Handle, len: usize) -> Vec<f32> {
    let bytes = client.read_one(h.clone()).unwrap();
    bytes.chunks_exact(4).take(len).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

/// The matrices the vendored kernels run on: the generated ones and two shared ones.
fn fixture_matrices() -> Vec<(String, tk::Mat)> {
    tk::generated_matrices().into_iter().chain(tk::shared_matrices().into_iter().take(2)).collect()
}

/// The vendored csrmm rendering, compiled by the `#[cube]` macro, computes what the run-time
/// kernels compute.
#[test]
fn fixture_runs_like_the_runtime_kernels() {
    let client = client();
    let prog = sparsec_backend_cubecl::compile(&scheduled("csrmm")).unwrap();
    for (mname, m) in fixture_matrices() {
        let c = tk::workloads::case("csrmm", &m, &mut tk::Rng::new(7)).unwrap();
        let want = prog.run(&client, &c.args).unwrap();
        let (hs, lens) = upload(&client, &c, &["a", "b", "c", "indptr", "indices"]);
        sparsec_cubecl_fixture::csrmm::launch(
            &client, &hs[0], &hs[1], &hs[2], &hs[3], &hs[4],
            int(&c, "m"), int(&c, "n"), int(&c, "feat_size"), int(&c, "nnz"), &lens,
        );
        let got = read(&client, &hs[2], lens[2]);
        tk::assert_close(&format!("fixture csrmm on {mname}"), &got, &tk::output_f32(&want, "c"), 1e-6);
    }
}

/// The vendored rgcn_hetero_forward rendering (relation × row over threads, the atomic loop
/// over `blockIdx.y`) gives the oracle's numbers.
#[test]
fn fixture_rgcn_hetero_matches_the_oracle() {
    let client = client();
    for (mname, m) in fixture_matrices() {
        let c = tk::workloads::case("rgcn_hetero_forward", &m, &mut tk::Rng::new(7)).unwrap();
        let names = ["a", "w", "x", "y", "indptr_i", "indices_i", "indptr_j", "indices_j"];
        let (hs, lens) = upload(&client, &c, &names);
        sparsec_cubecl_fixture::rgcn_hetero_forward::launch(
            &client, &hs[0], &hs[1], &hs[2], &hs[3], &hs[4], &hs[5], &hs[6], &hs[7],
            int(&c, "m"), int(&c, "n"), int(&c, "num_rels"), int(&c, "feat_size"), int(&c, "nnz_i"), int(&c, "nnz_j"),
            &lens,
        );
        let got = read(&client, &hs[3], lens[3]);
        tk::assert_close(&format!("fixture rgcn_hetero_forward on {mname}"), &got, &c.expected[0].1, 1e-4);
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

/// Every corpus workload, unscheduled and with the default GPU schedule, renders as
/// `#[cube]` Rust, WGSL and CUDA.
#[test]
fn every_workload_emits_every_source() {
    for name in tk::workloads::WORKLOADS {
        let f = workload(name);
        let scheduled = sparsec_schedule::auto::gpu_schedule(&f, 64).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (what, g) in [("unscheduled", &f), ("gpu schedule", &scheduled)] {
            let rust = emit_cubecl(g).unwrap_or_else(|e| panic!("{name} ({what}): {e}"));
            assert!(rust.contains("#[cube(launch)]"), "{name} ({what})");
            let wgsl = emit_wgsl(g).unwrap_or_else(|e| panic!("{name} ({what}): {e}"));
            assert!(wgsl.contains("@compute"), "{name} ({what})");
            let cuda = emit_cuda(g).unwrap_or_else(|e| panic!("{name} ({what}): {e}"));
            assert!(cuda.contains("__global__"), "{name} ({what})");
        }
    }
}

/// The CUDA C++ of every corpus workload, unscheduled and with the default GPU schedule, is
/// real CUDA: NVIDIA's NVRTC compiles each kernel for sm_80 and sm_90 and ptxas assembles the
/// result without spills (no GPU or CUDA install needed: PyPI's packages).
#[test]
fn cuda_sources_compile_with_nvrtc_and_assemble() {
    let mut kernels = 0;
    for name in tk::workloads::WORKLOADS {
        let f = workload(name);
        let scheduled = sparsec_schedule::auto::gpu_schedule(&f, 64).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (what, g) in [("plain", &f), ("auto_gpu", &scheduled)] {
            let cuda = emit_cuda(g).unwrap_or_else(|e| panic!("{name} ({what}): {e}"));
            // One translation unit per kernel: each carries its own type definitions.
            for (k, source) in cuda.split("// kernel ").filter(|s| !s.trim().is_empty()).enumerate() {
                for chip in ["sm_80", "sm_90"] {
                    let id = format!("{name}_{what}_{k}");
                    let ptx = tk::nvidia::nvrtc(&id, &format!("// kernel {source}"), chip);
                    for e in tk::nvidia::ptxas(&id, &ptx, chip) {
                        assert_eq!((e.spills, e.stack), (0, 0), "{id} on {chip}: {e:?}");
                        kernels += 1;
                    }
                }
            }
        }
    }
    assert!(kernels >= 4 * tk::workloads::WORKLOADS.len(), "only {kernels} kernels compiled");
}
