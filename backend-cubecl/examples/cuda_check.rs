//! GPU check on CUDA: runs csrmm, sddmm and bsrmm (default GPU schedule, 128 units per cube)
//! on every shared matrix with `run` on the CUDA client, compares with the interpreter, and
//! writes inputs and outputs as JSON for `gpu_check/compare_cusparse.py`, which recomputes
//! them with cuSPARSE through CuPy.
//!
//! ```text
//! cargo run --release -p sparsec-backend-cubecl --features cuda --example cuda_check -- OUT_DIR
//! python3 backend-cubecl/gpu_check/compare_cusparse.py OUT_DIR
//! ```

#[cfg(feature = "cuda")]
fn main() {
    use sparsec_backend_cubecl::{compile, CompiledProgram};
    use sparsec_ir::data::{Array, Scalar};
    use sparsec_testkit as tk;
    use std::fmt::Write;

    let out_dir = std::env::args().nth(1).unwrap_or_else(|| "cuda_check_out".into());
    std::fs::create_dir_all(&out_dir).expect("create the output folder");
    let client = match sparsec_backend_cubecl::cuda_client() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cuda_check: {e}");
            std::process::exit(2);
        }
    };
    let arr = |a: &Array| -> String {
        match a {
            Array::F32(v) => format!("{v:?}"),
            Array::I32(v) => format!("{v:?}"),
            Array::I64(v) => format!("{v:?}"),
            other => format!("{:?}", other.to_f64_vec()),
        }
    };
    let mut failures = 0;
    for name in ["csrmm", "sddmm", "bsrmm"] {
        let f = tk::workload(name);
        let s = sparsec_schedule::auto::gpu_schedule(&f, 128).expect("schedule");
        let prog: CompiledProgram = compile(&s).expect("compile");
        for (mname, m) in tk::shared_matrices() {
            let Some(case) = tk::workloads::case(name, &m, &mut tk::Rng::new(1)) else { continue };
            let t = std::time::Instant::now();
            let got = match prog.run(&client, &case.args) {
                Ok(g) => g,
                Err(e) => {
                    println!("{name} on {mname}: FAILED: {e}");
                    failures += 1;
                    continue;
                }
            };
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let (param, want) = &case.expected[0];
            let g = tk::output_f32(&got, param);
            let err = g.iter().zip(want).map(|(a, b)| (a - b).abs() / (1.0 + b.abs())).fold(0f32, f32::max);
            println!("{name} on {mname}: max rel err vs oracle {err:.2e}, run {ms:.2} ms");
            if err > 1e-4 {
                failures += 1;
            }
            let mut json = String::from("{");
            let _ = write!(json, "\"workload\": \"{name}\", \"matrix\": \"{mname}\", \"output\": \"{param}\", \"scalars\": {{");
            let scalars: Vec<String> = case
                .args
                .scalars
                .iter()
                .map(|(k, v)| match v {
                    Scalar::Int(x) => format!("\"{k}\": {x}"),
                    Scalar::Float(x) => format!("\"{k}\": {x}"),
                    Scalar::Bool(x) => format!("\"{k}\": {x}"),
                })
                .collect();
            json.push_str(&scalars.join(", "));
            json.push_str("}, \"inputs\": {");
            let inputs: Vec<String> = case.args.arrays.iter().map(|(k, v)| format!("\"{k}\": {}", arr(v))).collect();
            json.push_str(&inputs.join(", "));
            let _ = write!(json, "}}, \"cubecl\": {:?}}}", g);
            std::fs::write(format!("{out_dir}/{name}-{mname}.json"), json).expect("write");
        }
    }
    println!("{failures} failures");
    std::process::exit(i32::from(failures > 0));
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("build with --features cuda");
    std::process::exit(2);
}
