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
    let prog = compile(&workload("csrmm")).unwrap();
    let c = csrmm_case();
    let client = client();
    prog.run(&client, &c.args).unwrap();
    let first = prog.compilations();
    assert!(first >= 1, "the first launch compiles");
    prog.run(&client, &c.args).unwrap();
    assert_eq!(prog.compilations(), first, "a second launch compiled again");
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
