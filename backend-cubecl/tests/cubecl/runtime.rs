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
    // Unscheduled: the backend decides no parallelism, one unit runs the nest.
    assert_eq!((shapes[0].cubes, shapes[0].units), ([1, 1, 1], [1, 1, 1]));
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

/// Parallelism comes from the schedule only: unscheduled rgcn_hetero_forward runs each nest
/// in one unit; the GPU default binds the fused relation × row loop and spreads the serial
/// loop that only adds atomically over `blockIdx.y`, and agrees with the oracle.
#[test]
fn parallelism_comes_from_the_schedule() {
    let f = workload("rgcn_hetero_forward");
    let plain = compile(&f).unwrap().cuda().unwrap();
    assert!(plain.contains("rgcn_hetero_forward_k1: one unit"), "{plain}");
    let s = sparsec_schedule::auto::gpu_schedule(&f, 64).unwrap();
    let text = sparsec_ir::text::print_func(&s);
    assert!(text.contains("blockIdx.y"), "{text}");
    let prog = sparsec_backend_cubecl::compile(&s).unwrap();
    let cuda = prog.cuda().unwrap();
    assert!(cuda.contains("atomicAdd") || cuda.contains("atom."), "{cuda}");
    let (_, m) = tk::generated_matrices().into_iter().next().unwrap();
    let c = tk::workloads::case("rgcn_hetero_forward", &m, &mut tk::Rng::new(2)).unwrap();
    let out = prog.run(&client(), &c.args).unwrap_or_else(|e| panic!("{e}"));
    for (p, want) in &c.expected {
        tk::assert_close(p, &tk::output_f32(&out, p), want, 1e-4);
    }
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
