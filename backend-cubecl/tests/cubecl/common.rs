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
        if exceeds_lavapipe_loop_limit(name, c) {
            return;
        }
        let out = prog.run(&client, &c.args).unwrap_or_else(|e| panic!("{name} ({what}) on {mname}: {e}"));
        for (param, want) in &c.expected {
            let got = tk::output_f32(&out, param);
            tk::assert_close(&format!("{name} ({what}) on {mname}: {param}"), &got, want, 1e-4);
        }
    });
}

/// Parses a workload.
pub fn workload(name: &str) -> Func {
    tk::workload(name)
}

/// Whether one unit of this run loops more than lavapipe allows. llvmpipe (behind lavapipe)
/// stops every shader invocation after 65535 loop iterations in total, silently. In
/// rgcn_hetero_forward only `feat_size` (2) units exist, each walking every nonzero of every
/// relation, so large matrices pass that limit; real GPUs have no such limit.
fn exceeds_lavapipe_loop_limit(name: &str, c: &tk::workloads::Case) -> bool {
    let nnz = |k: &str| match c.args.scalars.get(k) {
        Some(sparsec_ir::data::Scalar::Int(v)) => *v,
        _ => 0,
    };
    name == "rgcn_hetero_forward" && 3 * nnz("nnz_j") + 2 * nnz("nnz_i") > 50_000
}
