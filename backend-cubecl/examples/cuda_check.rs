//! GPU check on CUDA (CubeCL's C++ compiler and NVRTC), against the oracles and the
//! interpreter; for a machine with an NVIDIA GPU.
//!
//! ```text
//! cuda_check workloads [JSON_DIR]   every corpus workload, unscheduled and with the default
//!                                   GPU schedule, on every shared and generated matrix
//! cuda_check fuzz SEED SECONDS      random Stage-I programs (sparsec_testkit::fuzz), plain,
//!                                   `--auto gpu` and a random schedule, against the interpreter
//! ```
//!
//! With `JSON_DIR`, csrmm, sddmm and bsrmm also write their inputs and outputs as JSON for
//! `gpu_check/compare_cusparse.py` (cuSPARSE through CuPy). Exit status 1 on any failure.
//! Build offline with `scripts/build-cuda --example` (see docs/backend-cubecl.md).

#[cfg(feature = "cuda")]
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let client = match sparsec_backend_cubecl::cuda_client() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cuda_check: {e}");
            std::process::exit(2);
        }
    };
    let failures = match args.first().map(String::as_str) {
        Some("workloads") => cuda::workloads(&client, args.get(1).map(String::as_str)),
        Some("fuzz") => {
            let num = |i: usize, d: u64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
            cuda::fuzz(&client, num(1, 0xc0de), num(2, 60))
        }
        _ => {
            eprintln!("usage: cuda_check workloads [JSON_DIR] | fuzz SEED SECONDS");
            std::process::exit(2);
        }
    };
    println!("{failures} failures");
    std::process::exit(i32::from(failures > 0));
}

/// The fuzz runner the wgpu tests use, on any client.
#[cfg(feature = "cuda")]
#[path = "../tests/cubecl/runner.rs"]
mod runner;

#[cfg(feature = "cuda")]
mod cuda {
    use super::runner::{runner, REFUSALS};
    use cubecl::client::Client;
    use sparsec_backend_cubecl::{compile, CompiledProgram};
    use sparsec_ir::data::{Args, Array, Scalar};
    use sparsec_ir::Func;
    use sparsec_testkit as tk;
    use sparsec_testkit::fuzz::{generate_with, to_reproducer, GenOptions, Outcome};
    use std::fmt::Write;
    use std::time::Instant;

    /// Every workload, unscheduled and `--auto gpu`, on every matrix it applies to.
    pub fn workloads(client: &Client, json: Option<&str>) -> usize {
        let mut failures = 0;
        let matrices: Vec<_> = tk::shared_matrices().into_iter().chain(tk::generated_matrices()).collect();
        for name in tk::workloads::WORKLOADS {
            let f = tk::workload(name);
            // `compile` lowers an unscheduled Stage-I function itself (one unit per nest).
            let variants: Vec<(&str, Result<Func, String>)> = vec![
                ("plain", Ok(f.clone())),
                ("auto gpu", sparsec_schedule::auto::gpu_schedule(&f, 128).map_err(|e| e.to_string())),
            ];
            for (what, f3) in variants {
                let t = Instant::now();
                let prog: CompiledProgram = match f3.and_then(|f3| compile(&f3).map_err(|e| e.to_string())) {
                    Ok(p) => p,
                    Err(e) => {
                        println!("{name} ({what}): does not compile: {e}");
                        failures += 1;
                        continue;
                    }
                };
                let (mut ran, mut worst, mut first_ms, mut warm_ms) = (0, 0f32, 0f64, 0f64);
                for (mname, m) in &matrices {
                    let Some(case) = tk::workloads::case(name, m, &mut tk::Rng::new(1)) else { continue };
                    let run = |c: &Args| prog.run(client, c);
                    let t0 = Instant::now();
                    let got = match run(&case.args) {
                        Ok(g) => g,
                        Err(e) => {
                            println!("{name} ({what}) on {mname}: FAILED: {e}");
                            failures += 1;
                            continue;
                        }
                    };
                    first_ms += t0.elapsed().as_secs_f64() * 1e3;
                    let t1 = Instant::now();
                    let again = run(&case.args);
                    warm_ms += t1.elapsed().as_secs_f64() * 1e3;
                    ran += 1;
                    for (param, want) in &case.expected {
                        let g = tk::output_f32(&got, param);
                        let err = g.iter().zip(want).map(|(a, b)| (a - b).abs() / (1.0 + b.abs())).fold(0f32, f32::max);
                        worst = worst.max(err);
                        if let Err(e) = tk::check_close(&g, want, 1e-4) {
                            println!("{name} ({what}) on {mname}: {param}{e}");
                            failures += 1;
                        }
                        // A second run agrees too (not bitwise: atomic float sums vary in order).
                        match again.as_ref().map(|a| tk::check_close(&tk::output_f32(a, param), want, 1e-4)) {
                            Ok(Ok(())) => {}
                            Ok(Err(e)) => {
                                println!("{name} ({what}) on {mname}: second run: {param}{e}");
                                failures += 1;
                            }
                            Err(e) => {
                                println!("{name} ({what}) on {mname}: second run failed: {e}");
                                failures += 1;
                            }
                        }
                    }
                    if let (Some(dir), "auto gpu", "csrmm" | "sddmm" | "bsrmm") = (json, what, name) {
                        write_json(dir, name, mname, &case, &got);
                    }
                }
                println!(
                    "{name:22} {what:9} {ran:2} matrices, max rel err {worst:.1e}, compile+first runs {first_ms:8.1} ms, warm runs {warm_ms:7.1} ms (host time, transfers included; {:.0} ms in all)",
                    t.elapsed().as_secs_f64() * 1e3
                );
            }
        }
        failures
    }

    fn write_json(dir: &str, name: &str, mname: &str, case: &tk::workloads::Case, got: &Args) {
        let arr = |a: &Array| -> String {
            match a {
                Array::F32(v) => format!("{v:?}"),
                Array::I32(v) => format!("{v:?}"),
                Array::I64(v) => format!("{v:?}"),
                other => format!("{:?}", other.to_f64_vec()),
            }
        };
        let (param, _) = &case.expected[0];
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
        let _ = write!(json, "}}, \"cubecl\": {:?}}}", tk::output_f32(got, param));
        let _ = std::fs::create_dir_all(dir);
        if let Err(e) = std::fs::write(format!("{dir}/{name}-{mname}.json"), json) {
            println!("{dir}: {e}");
        }
    }

    /// Random programs from `seed` on for `seconds`; prints each failure's reproducer.
    pub fn fuzz(client: &Client, seed: u64, seconds: u64) -> usize {
        let start = Instant::now();
        let (mut ran, mut agree, mut refused, mut other, mut failures) = (0u64, 0u64, 0u64, 0u64, 0usize);
        let mut reasons = std::collections::BTreeMap::new();
        for s in seed.. {
            if start.elapsed().as_secs() >= seconds {
                break;
            }
            ran += 1;
            let opts = GenOptions { non_finite: s % 4 == 0, ..GenOptions::default() };
            let case = generate_with(s, opts);
            let Ok(f1) = sparsec_ir::text::parse_func("fuzz.sptir", &case.prog.to_sptir()) else {
                other += 1;
                continue;
            };
            let outcome = runner("cubecl-cuda", &f1, client).check(&case);
            match outcome {
                Outcome::Agree => agree += 1,
                Outcome::Failure(why) if why.starts_with("cubecl-cuda") && why.contains(" fails") && REFUSALS.iter().any(|r| why.contains(r)) => {
                    refused += 1;
                    *reasons.entry(REFUSALS.iter().find(|r| why.contains(*r)).copied().unwrap_or("?")).or_insert(0usize) += 1;
                }
                Outcome::Failure(why) => {
                    failures += 1;
                    println!("FAILURE seed {s} (non_finite: {}): {why}\n{}", opts.non_finite, to_reproducer(&case));
                }
                _ => other += 1,
            }
        }
        println!(
            "cubecl-cuda fuzz: {ran} cases from seed {seed} in {:.0} s: {agree} agree, {refused} refused ({reasons:?}), {other} not run by every stage, {failures} failures",
            start.elapsed().as_secs_f64()
        );
        failures
    }
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("build with --features cuda (scripts/build-cuda)");
    std::process::exit(2);
}
