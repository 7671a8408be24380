//! Kernel caching and the convenience entry points.

use super::common::{client, workload};
use sparsec_backend_cubecl::{compile, run_wgpu};
use sparsec_testkit as tk;

fn csrmm_case() -> tk::workloads::Case {
    let (_, m) = tk::generated_matrices().into_iter().next().unwrap();
    tk::workloads::case("csrmm", &m, &mut tk::Rng::new(1)).unwrap()
}

#[test]
fn second_launch_compiles_nothing() {
    // A name of its own, so no other test has these kernels in CubeCL's cache yet.
    let mut f = workload("csrmm");
    f.name = "csrmm_cache_test".into();
    let prog = compile(&f).unwrap();
    let c = csrmm_case();
    let client = client();
    prog.run(&client, &c.args).unwrap();
    let first = prog.compilations();
    assert!(first >= 1, "the first launch compiles");
    prog.run(&client, &c.args).unwrap();
    assert_eq!(prog.compilations(), first, "a second launch compiled again");
    let shapes = prog.launch_shapes(&c.args).unwrap();
    assert_eq!(shapes.len(), prog.kernels().len());
    assert_eq!(shapes[0].units, [sparsec_backend_cubecl::DEFAULT_CUBE_DIM, 1, 1]);
    // A second compilation of the same function shares the cache.
    let again = compile(&f).unwrap();
    again.run(&client, &c.args).unwrap();
    assert_eq!(again.compilations(), 0, "the same kernels were compiled twice");
}

#[test]
fn run_wgpu_matches_the_interpreter() {
    let f = workload("csrmm");
    let c = csrmm_case();
    let got = run_wgpu(&f, &c.args).unwrap();
    let want = sparsec_interp::run(&f, &c.args).unwrap();
    for (name, a) in &want.arrays {
        let g = tk::output_f32(&got, name);
        let w = tk::output_f32(&want, name);
        assert_eq!(g.len(), a.len());
        tk::assert_close(name, &g, &w, 1e-4);
    }
}

/// Unscheduled rgcn_hetero_forward only accumulates into Y and its rows of one relation are
/// a sparse loop: one unit per (fo, r, row position), with atomic adds (relations share rows).
/// Its zeroing kernel keeps one unit per outer iteration.
#[test]
fn accumulating_nests_get_one_unit_per_sparse_point() {
    let f = workload("rgcn_hetero_forward");
    let prog = compile(&f).unwrap();
    let cuda = prog.cuda().unwrap();
    assert!(cuda.contains("rgcn_hetero_forward_k0: one unit per iteration of (i),"), "{cuda}");
    assert!(cuda.contains("rgcn_hetero_forward_k1: one unit per iteration of (fo, r, i),"), "{cuda}");
    let atomic = |src: &str| src.contains("atomicAdd") || src.contains("atom.");
    assert!(atomic(&cuda), "{cuda}");
    let (_, m) = tk::generated_matrices().into_iter().next().unwrap();
    let c = tk::workloads::case("rgcn_hetero_forward", &m, &mut tk::Rng::new(2)).unwrap();
    let shapes = prog.launch_shapes(&c.args).unwrap();
    let units = |s: &sparsec_backend_cubecl::LaunchShape| {
        s.cubes.iter().chain(&s.units).map(|&x| x as usize).product::<usize>()
    };
    let points = 2 * 3 * m.rows; // feat_size × relations × rows bound
    assert!(units(&shapes[1]) >= points && units(&shapes[1]) < points + 64, "{:?}", shapes[1]);
    // csrmm initialises C inside its nest: no atomics, one unit per row.
    let csrmm = compile(&workload("csrmm")).unwrap().cuda().unwrap();
    assert!(!atomic(&csrmm) && csrmm.contains("one unit per iteration of (i),"), "{csrmm}");
}

/// With the `cuda` feature: csrmm on CUDA matches the oracle where a device exists; without
/// a driver or a device `run_cuda` is an `Unavailable` error, never a panic.
#[cfg(feature = "cuda")]
#[test]
fn cuda_runs_or_reports_its_absence() {
    let c = csrmm_case();
    match sparsec_backend_cubecl::run_cuda(&workload("csrmm"), &c.args) {
        Ok(out) => tk::assert_close("csrmm on CUDA", &tk::output_f32(&out, "c"), &c.expected[0].1, 1e-4),
        Err(sparsec_backend_cubecl::CubeclError::Unavailable(msg)) => assert!(msg.contains("CUDA"), "{msg}"),
        Err(e) => panic!("{e}"),
    }
}
