//! Shared helpers: the wgpu client and a check of one run against a case's oracle.

use sparsec_backend_cubecl::CompiledProgram;
use sparsec_ir::Func;
use sparsec_testkit as tk;

/// The wgpu client (lavapipe in CI).
pub fn client() -> cubecl::client::Client {
    sparsec_backend_cubecl::wgpu_client()
}

/// Runs `prog` on every matrix of workload `name` and compares with the oracle (rtol 1e-4).
pub fn check_all(name: &str, what: &str, prog: &CompiledProgram) {
    let client = client();
    tk::for_each_case(name, |mname, c| {
        let out = prog.run(&client, &c.args).unwrap_or_else(|e| panic!("{name} ({what}) on {mname}: {e}"));
        for (param, want) in &c.expected {
            let got = tk::output_f32(&out, param);
            tk::assert_close(&format!("{name} ({what}) on {mname}: {param}"), &got, want, 1e-4);
        }
    });
}

/// Runs `prog` (unscheduled: one unit runs each nest) on the generated matrices of workload
/// `name`: each run equals the oracle or is refused for lavapipe's loop limit; the smallest
/// matrices must run.
pub fn check_generated(name: &str, what: &str, prog: &CompiledProgram) {
    let client = client();
    let mut ran = 0;
    for (mname, m) in tk::generated_matrices() {
        let Some(c) = tk::workloads::case(name, &m, &mut tk::Rng::new(11)) else { continue };
        match prog.run(&client, &c.args) {
            Ok(out) => {
                ran += 1;
                for (param, want) in &c.expected {
                    let got = tk::output_f32(&out, param);
                    tk::assert_close(&format!("{name} ({what}) on {mname}: {param}"), &got, want, 1e-4);
                }
            }
            Err(sparsec_backend_cubecl::CubeclError::Runtime(sparsec_backend_cubecl::RuntimeError::LoopLimit(_))) => {}
            Err(e) => panic!("{name} ({what}) on {mname}: {e}"),
        }
    }
    assert!(ran > 0, "{name} ({what}): no generated matrix ran");
}

/// Parses a workload.
pub fn workload(name: &str) -> Func {
    tk::workload(name)
}
