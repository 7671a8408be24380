//! SDDMM (`C[i, j] = Σ_k A[i, k] · B[j, k]` on the sparsity of `C`) written with the Rust
//! DSL: prints the program at Stages I, II and III, runs every stage with the interpreter on
//! a generated sparsity pattern and checks the result against a dense computation.
//!
//! Run with `cargo run --example dsl_sddmm`.

#![allow(non_snake_case)]

mod common;

use sparsec::formats::{gen, Binder};
use sparsec::ir::data::Array;
use sparsec::ir::dsl::*;
use sparsec::ir::Func;

/// `tests/workloads/sddmm.sptir`, with the DSL.
fn sddmm() -> Result<Func, DslError> {
    func("sddmm", |f| {
        let (a, b, c) = (f.handle("a"), f.handle("b"), f.handle("c"));
        let (indptr, indices) = (f.handle("indptr"), f.handle("indices"));
        let (m, n) = (f.scalar("m", I32), f.scalar("n", I32));
        let (feat_size, nnz) = (f.scalar("feat_size", I32), f.scalar("nnz", I32));
        let I = f.dense_fixed("I", m);
        let J = f.sparse_variable("J", I, n, nnz, indptr, indices);
        let J_detach = f.dense_fixed("J_detach", n);
        let K = f.dense_fixed("K", feat_size);
        let A = f.match_sparse_buffer("A", a, [I, K], F32);
        let B = f.match_sparse_buffer("B", b, [J_detach, K], F32);
        let C = f.match_sparse_buffer("C", c, [I, J], F32);
        f.sp_iter("sddmm", [I, J, K], "SSR", |s, [i, j, k]| {
            s.init(|s| s.store(C.at([i, j]), 0.0));
            s.store(C.at([i, j]), C.at([i, j]) + A.at([i, k]) * B.at([j, k]));
        });
    })
}

fn main() {
    common::exit_with(run());
}

fn run() -> common::Res<bool> {
    let f = sddmm()?;
    let stages = common::stages(&f)?;

    let (rows, cols, feat) = (18, 22, 6);
    // The pattern of C; its values are overwritten by the program.
    let pattern = gen::uniform::<i32, f32>(rows, cols, 80, 7)?;
    let a: Vec<f32> = (0..rows * feat).map(|x| ((x * 5 % 11) as f32) * 0.5 - 2.0).collect();
    let b: Vec<f32> = (0..cols * feat).map(|x| ((x * 3 % 7) as f32) * 0.25 - 0.5).collect();
    let mut binder = Binder::new(&f);
    binder.csr("C", &pattern)?;
    let mut args = binder.finish();
    args.array("a", Array::F32(a.clone())).array("b", Array::F32(b.clone())).int("feat_size", feat as i64);

    // Dense reference, one value per stored (i, j) in CSR order.
    let mut want = Vec::new();
    for i in 0..rows {
        let (cols_i, _) = pattern.row(i).ok_or("row out of range")?;
        for &j in cols_i {
            let j = j as usize;
            want.push((0..feat).map(|k| a[i * feat + k] * b[j * feat + k]).sum::<f32>());
        }
    }

    common::check_stages(&stages, &args, "c", &want)
}

