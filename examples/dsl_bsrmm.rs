//! BSR SpMM (`A` stored in 4 × 4 blocks) written with the Rust DSL: prints the program at
//! Stages I, II and III, runs every stage with the interpreter on a generated matrix and
//! checks the result against a dense computation.
//!
//! Run with `cargo run --example dsl_bsrmm`.

#![allow(non_snake_case)]

use sparsec::formats::{bind_bsr, gen};
use sparsec::interp;
use sparsec::ir::data::Array;
use sparsec::ir::dsl::*;
use sparsec::ir::text::print_func;
use sparsec::ir::{Func, Stage};
use sparsec::passes::PassManager;

/// `tests/workloads/bsrmm.sptir`, with the DSL:
/// `C[i, bi, f] = Σ_{j, bj} A[i, j, bi, bj] · B[j, bj, f]`.
fn bsrmm() -> Result<Func, DslError> {
    func("bsrmm", |f| {
        let (a, b, c) = (f.handle("a"), f.handle("b"), f.handle("c"));
        let (indptr, indices) = (f.handle("indptr"), f.handle("indices"));
        let (nb, mb, nnzb) = (f.scalar("nb", I32), f.scalar("mb", I32), f.scalar("nnzb", I32));
        let (blk, feat_size) = (f.scalar("blk", I32), f.scalar("feat_size", I32));
        let I = f.dense_fixed("I", nb);
        let J = f.sparse_variable("J", I, mb, nnzb, indptr, indices);
        let J_detach = f.dense_fixed("J_detach", mb);
        let BI = f.dense_fixed("BI", blk);
        let BJ = f.dense_fixed("BJ", blk);
        let F = f.dense_fixed("F", feat_size);
        let A = f.match_sparse_buffer("A", a, [I, J, BI, BJ], F32);
        let B = f.match_sparse_buffer("B", b, [J_detach, BJ, F], F32);
        let C = f.match_sparse_buffer("C", c, [I, BI, F], F32);
        f.sp_iter("bsrmm", [I, BI, BJ, F, J], "SSRSR", |s, [i, bi, bj, f, j]| {
            s.init(|s| s.store(C.at([i, bi, f]), 0.0));
            s.store(C.at([i, bi, f]), C.at([i, bi, f]) + A.at([i, j, bi, bj]) * B.at([j, bj, f]));
        });
    })
}

fn main() {
    match run() {
        Ok(true) => println!("ok"),
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

fn run() -> Result<bool, Box<dyn std::error::Error>> {
    let f = bsrmm()?;
    let lowered = PassManager::lowering_to(Stage::III).run_all(&f)?;
    let stages = [("I", &f), ("II", &lowered[0]), ("III", &lowered[1])];
    for (name, g) in stages {
        println!("// ---- Stage {name}\n{}", print_func(g));
    }

    let (blk, feat) = (4, 3);
    let (rows, cols) = (6 * blk, 5 * blk);
    let csr = gen::uniform::<i32, f32>(rows, cols, 60, 11)?;
    let bsr = csr.to_bsr(blk)?;
    let b: Vec<f32> = (0..cols * feat).map(|x| ((x * 7 % 9) as f32) * 0.5 - 2.0).collect();
    let mut args = bind_bsr(&f, "A", &bsr)?;
    args.array("b", Array::F32(b.clone())).array("c", Array::F32(vec![7.0; rows * feat])).int("feat_size", feat as i64);

    // Dense reference on the unblocked matrix: C = dense(A) · B, with C[i, bi, f] at
    // row i * blk + bi.
    let dense = csr.to_dense()?;
    let mut want = vec![0f32; rows * feat];
    for r in 0..rows {
        for k in 0..feat {
            want[r * feat + k] = (0..cols).map(|j| dense[r * cols + j] * b[j * feat + k]).sum();
        }
    }

    let mut ok = true;
    for (name, g) in stages {
        let out = interp::run(g, &args)?;
        let got = out.arrays.get("c").map(Array::to_f64_vec).unwrap_or_default();
        ok &= check(&format!("Stage {name}"), &got, &want);
    }
    Ok(ok)
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
