//! BSR SpMM (`A` stored in 4 × 4 blocks) written with the Rust DSL: prints the program at
//! Stages I, II and III, runs every stage with the interpreter on a generated matrix and
//! checks the result against a dense computation.
//!
//! Run with `cargo run --example dsl_bsrmm`.

#![allow(non_snake_case)]

mod common;

use sparsec::formats::{bind_bsr, gen};
use sparsec::ir::data::Array;
use sparsec::ir::dsl::*;
use sparsec::ir::Func;

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
    common::exit_with(run());
}

fn run() -> common::Res<bool> {
    let f = bsrmm()?;
    let stages = common::stages(&f)?;

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

    common::check_stages(&stages, &args, "c", &want)
}

