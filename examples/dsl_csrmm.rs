//! CSR SpMM (`C = A · B`, `A` sparse) written with the Rust DSL: prints the program at
//! Stages I, II and III, runs every stage with the interpreter on a generated matrix and
//! checks the result against a dense computation.
//!
//! Run with `cargo run --example dsl_csrmm`.

#![allow(non_snake_case)]

mod common;

use sparsec::formats::{bind_csr, gen};
use sparsec::ir::data::Array;
use sparsec::ir::dsl::*;
use sparsec::ir::Func;

/// `tests/workloads/csrmm.sptir`, with the DSL.
fn csrmm() -> Result<Func, DslError> {
    func("csrmm", |f| {
        let (a, b, c) = (f.handle("a"), f.handle("b"), f.handle("c"));
        let (indptr, indices) = (f.handle("indptr"), f.handle("indices"));
        let (m, n) = (f.scalar("m", I32), f.scalar("n", I32));
        let (feat_size, nnz) = (f.scalar("feat_size", I32), f.scalar("nnz", I32));
        let I = f.dense_fixed("I", m);
        let J = f.sparse_variable("J", I, n, nnz, indptr, indices);
        let J_detach = f.dense_fixed("J_detach", n);
        let K = f.dense_fixed("K", feat_size);
        let A = f.match_sparse_buffer("A", a, [I, J], F32);
        let B = f.match_sparse_buffer("B", b, [J_detach, K], F32);
        let C = f.match_sparse_buffer("C", c, [I, K], F32);
        f.sp_iter("csrmm", [I, J, K], "SRS", |s, [i, j, k]| {
            s.init(|s| s.store(C.at([i, k]), 0.0));
            s.store(C.at([i, k]), C.at([i, k]) + A.at([i, j]) * B.at([j, k]));
        });
    })
}

fn main() {
    common::exit_with(run());
}

fn run() -> common::Res<bool> {
    let f = csrmm()?;
    let stages = common::stages(&f)?;

    let (rows, cols, feat) = (24, 20, 5);
    let a = gen::uniform::<i32, f32>(rows, cols, 90, 42)?;
    let b: Vec<f32> = (0..cols * feat).map(|x| ((x * 7 % 13) as f32) * 0.25 - 1.5).collect();
    let mut args = bind_csr(&f, "A", &a)?;
    args.array("b", Array::F32(b.clone())).array("c", Array::F32(vec![7.0; rows * feat])).int("feat_size", feat as i64);

    // Dense reference: C = dense(A) · B.
    let dense = a.to_dense()?;
    let mut want = vec![0f32; rows * feat];
    for i in 0..rows {
        for k in 0..feat {
            want[i * feat + k] = (0..cols).map(|j| dense[i * cols + j] * b[j * feat + k]).sum();
        }
    }

    common::check_stages(&stages, &args, "c", &want)
}

