//! What the DSL examples share: printing the stages, running each one and checking it.

use sparsec::interp;
use sparsec::ir::data::{Args, Array};
use sparsec::ir::text::print_func;
use sparsec::ir::{Func, Stage};
use sparsec::passes::PassManager;

/// Result of an example's run: whether every stage matched.
pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Lowers `f` to Stage III and prints Stages I, II and III; returns them in order.
pub fn stages(f: &Func) -> Res<Vec<Func>> {
    let mut all = vec![f.clone()];
    all.extend(PassManager::lowering_to(Stage::III).run_all(f)?);
    for g in &all {
        println!("// ---- Stage {}\n{}", g.stage, print_func(g));
    }
    Ok(all)
}

/// Runs every stage on `args` and compares output array `param` with `want`.
pub fn check_stages(stages: &[Func], args: &Args, param: &str, want: &[f32]) -> Res<bool> {
    let mut ok = true;
    for g in stages {
        let out = interp::run(g, args)?;
        let got = out.arrays.get(param).map(Array::to_f64_vec).unwrap_or_default();
        ok &= check(&format!("Stage {}", g.stage), &got, want);
    }
    Ok(ok)
}

/// Prints `ok` or the error, and exits non-zero unless every stage matched.
pub fn exit_with(r: Res<bool>) {
    match r {
        Ok(true) => println!("ok"),
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

/// Compares element-wise with a relative tolerance; prints the first mismatch.
fn check(what: &str, got: &[f64], want: &[f32]) -> bool {
    if got.len() != want.len() {
        eprintln!("{what}: {} outputs, expected {}", got.len(), want.len());
        return false;
    }
    for (p, (g, w)) in got.iter().zip(want).enumerate() {
        let w = *w as f64;
        if (g - w).abs() > 1e-4 * (1.0 + w.abs()) {
            eprintln!("{what}: mismatch at {p}: got {g}, expected {w}");
            return false;
        }
    }
    println!("{what}: {} outputs match the dense result", got.len());
    true
}
