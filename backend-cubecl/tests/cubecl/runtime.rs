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

#[test]
#[ignore]
fn debug_workload() {
    let name = std::env::var("SPARSEC_SHOW").unwrap_or_else(|_| "csrmm".into());
    let f = workload(&name);
    for (mname, m) in tk::all_matrices() {
        let Some(c) = tk::workloads::case(&name, &m, &mut tk::Rng::new(3)) else { continue };
        let got = run_wgpu(&f, &c.args).unwrap();
        let interp = sparsec_interp::run(&f, &c.args).unwrap();
        for (p, _) in &c.expected {
            let want = &tk::output_f32(&interp, p);
            let g = tk::output_f32(&got, p);
            let bad: Vec<usize> = (0..g.len()).filter(|&i| (g[i] - want[i]).abs() > 1e-3 * (1.0 + want[i].abs())).collect();
            println!("{mname}: {p}: {} of {} differ; first {:?}", bad.len(), g.len(), bad.iter().take(5).map(|&i| (i, g[i], want[i])).collect::<Vec<_>>());
        }
    }
}

/// Shows lavapipe's limit of 65535 loop iterations per invocation (debugging aid).
#[test]
#[ignore]
fn debug_long_loop() {
    let text = "func longsum(a: handle, out: handle, n: i32) stage III {
  buffer A = match_buffer(a, [n], f32)
  buffer O = match_buffer(out, [2], f32)
  for i in serial(n) {
    block s(vi: reduce(n) = i) {
      O[0] = O[0] + A[vi]
      O[1] = O[1] + 1.0
    }
  }
}
";
    let f = sparsec_ir::text::parse_func("longsum", text).unwrap();
    for n in [1000usize, 10_000, 50_000, 200_000, 1_000_000] {
        let mut args = sparsec_ir::data::Args::new();
        args.array("a", sparsec_ir::data::Array::F32(vec![1.0; n])).array("out", sparsec_ir::data::Array::F32(vec![0.0; 2])).int("n", n as i64);
        let got = run_wgpu(&f, &args).unwrap();
        println!("n = {n}: {:?}", tk::output_f32(&got, "out"));
    }
}
