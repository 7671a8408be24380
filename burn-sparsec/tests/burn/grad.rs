//! Gradients against Burn autodiff on the densified matrix (rtol 1e-3): the sparse value
//! gradients must equal the dense gradient at the pattern's positions, and the dense operand
//! gradients must agree; on wgpu and on Flex.

use crate::common::*;
use burn::tensor::{activation::relu, Device, Tensor, TensorData};
use burn_sparsec::{SparseBsr, SparseCsr};
use sparsec_formats::Csr;
use sparsec_testkit::Mat;

const RTOL: f32 = 1e-3;

/// The generated matrices, the shared ones up to about 1 M dense entries, and cora (the GCN
/// graph): small enough for a dense autodiff reference.
fn grad_matrices() -> Vec<(String, Mat)> {
    matrices().into_iter().filter(|(n, m)| m.rows * m.cols <= 1100 * 1100 || n == "cora").collect()
}

/// `A` on the autodiff device with tracked values, and those values.
fn tracked(m: &Mat, dev: &Device) -> (SparseCsr, Tensor<1>) {
    let a = sparse(m, dev);
    let v = Tensor::<1>::from_data(TensorData::new(m.vals.clone(), [m.nnz()]), dev).require_grad();
    (a.with_values(v.clone()).unwrap(), v)
}

/// The dense matrix of `m` as a tracked leaf.
fn dense_leaf(m: &Mat, dev: &Device) -> Tensor<2> {
    Tensor::<2>::from_data(TensorData::new(m.to_dense(), [m.rows, m.cols]), dev).require_grad()
}

/// The entries of a dense `[rows, cols]` gradient at the pattern of `m`.
fn at_pattern(m: &Mat, d: &[f32]) -> Vec<f32> {
    (0..m.rows).flat_map(|i| m.row(i).iter().map(move |&j| d[i * m.cols + j])).collect()
}

#[test]
fn spmm_gradients_match_dense_autodiff() {
    for dev in devices() {
        spmm_gradients_match_dense_autodiff_on(&dev);
    }
}

fn spmm_gradients_match_dense_autodiff_on(dev: &Device) {
    let dev = dev.clone().autodiff();
    for (name, m) in grad_matrices() {
        let f = 7;
        let w = dense(m.rows, f, 11, &dev);
        let (a, v) = tracked(&m, &dev);
        let b = dense(m.cols, f, 12, &dev).require_grad();
        let grads = (a.spmm(b.clone()).unwrap() * w.clone()).sum().backward();
        let dv = v.grad(&grads).expect("value gradient");
        assert_eq!(dv.dims(), [m.nnz()], "{name}: dA keeps A's pattern");
        let db = b.grad(&grads).expect("rhs gradient");

        let d = dense_leaf(&m, &dev);
        let b2 = dense(m.cols, f, 12, &dev).require_grad();
        let grads = (d.clone().matmul(b2.clone()) * w).sum().backward();
        let dd = host(d.grad(&grads).unwrap());
        close(&format!("spmm dA {name}"), &host(dv), &at_pattern(&m, &dd), RTOL);
        close(&format!("spmm dB {name}"), &host(db), &host(b2.grad(&grads).unwrap()), RTOL);
    }
}

#[test]
fn spmm_bias_relu_gradients_match_dense_autodiff() {
    for dev in devices() {
        spmm_bias_relu_gradients_match_dense_autodiff_on(&dev);
    }
}

fn spmm_bias_relu_gradients_match_dense_autodiff_on(dev: &Device) {
    let dev = dev.clone().autodiff();
    for (name, m) in grad_matrices() {
        let f = 5;
        let w = dense(m.rows, f, 21, &dev);
        let (a, v) = tracked(&m, &dev);
        let b = dense(m.cols, f, 22, &dev).require_grad();
        let bias = vector(f, 23, &dev).require_grad();
        let grads = (a.spmm_bias_relu(b.clone(), bias.clone()).unwrap() * w.clone()).sum().backward();
        let (dv, db, dbias) = (v.grad(&grads).unwrap(), b.grad(&grads).unwrap(), bias.grad(&grads).unwrap());

        let d = dense_leaf(&m, &dev);
        let b2 = dense(m.cols, f, 22, &dev).require_grad();
        let bias2 = vector(f, 23, &dev).require_grad();
        let y = relu(d.clone().matmul(b2.clone()) + bias2.clone().unsqueeze::<2>());
        let grads = (y * w).sum().backward();
        let dd = host(d.grad(&grads).unwrap());
        close(&format!("fused dA {name}"), &host(dv), &at_pattern(&m, &dd), RTOL);
        close(&format!("fused dB {name}"), &host(db), &host(b2.grad(&grads).unwrap()), RTOL);
        close(&format!("fused dbias {name}"), &host(dbias), &host(bias2.grad(&grads).unwrap()), RTOL);
    }
}

#[test]
fn sddmm_gradients_match_dense_autodiff() {
    for dev in devices() {
        sddmm_gradients_match_dense_autodiff_on(&dev);
    }
}

fn sddmm_gradients_match_dense_autodiff_on(dev: &Device) {
    let dev = dev.clone().autodiff();
    for (name, m) in grad_matrices() {
        let f = 6;
        let a = sparse(&m, &dev);
        let l = dense(m.rows, f, 31, &dev).require_grad();
        let r = dense(m.cols, f, 32, &dev).require_grad();
        let wv = vector(m.nnz(), 33, &dev);
        let grads = (a.sddmm(l.clone(), r.clone()).unwrap().values() * wv.clone()).sum().backward();
        let (dl, dr) = (l.grad(&grads).unwrap(), r.grad(&grads).unwrap());

        // Dense: (L · Rᵀ) ∘ M with M the weights scattered onto the pattern.
        let mask = a.with_values(wv).unwrap().to_dense();
        let l2 = dense(m.rows, f, 31, &dev).require_grad();
        let r2 = dense(m.cols, f, 32, &dev).require_grad();
        let grads = (l2.clone().matmul(r2.clone().transpose()) * mask).sum().backward();
        close(&format!("sddmm dL {name}"), &host(dl), &host(l2.grad(&grads).unwrap()), RTOL);
        close(&format!("sddmm dR {name}"), &host(dr), &host(r2.grad(&grads).unwrap()), RTOL);
    }
}

#[test]
fn bsr_gradients_match_dense_autodiff() {
    for dev in devices() {
        bsr_gradients_match_dense_autodiff_on(&dev);
    }
}

fn bsr_gradients_match_dense_autodiff_on(dev: &Device) {
    let dev = dev.clone().autodiff();
    for (name, m) in grad_matrices().into_iter().filter(|(_, m)| m.rows * m.cols <= 1 << 20) {
        let f = 4;
        let idx = |v: &[usize]| v.iter().map(|&x| x as i32).collect::<Vec<_>>();
        let csr = Csr::try_new(m.rows, m.cols, idx(&m.indptr), idx(&m.indices), m.vals.clone()).unwrap();
        let bsr = csr.to_bsr(3).unwrap();
        let a = SparseBsr::from_bsr(&bsr, &dev).unwrap();
        let v = a.values().require_grad();
        let a = a.with_values(v.clone()).unwrap();
        let w = dense(m.rows, f, 41, &dev);
        let b = dense(m.cols, f, 42, &dev).require_grad();
        let grads = (a.spmm(b.clone()).unwrap() * w.clone()).sum().backward();
        let (dv, db) = (v.grad(&grads).unwrap(), b.grad(&grads).unwrap());
        // Reference: the same blocks densified (differentiably) then matmul.
        let v2 = a.values().detach().require_grad();
        let a2 = a.with_values(v2.clone()).unwrap();
        let b2 = dense(m.cols, f, 42, &dev).require_grad();
        let grads = (a2.to_dense().matmul(b2.clone()) * w).sum().backward();
        close(&format!("bsr dA {name}"), &host(dv), &host(v2.grad(&grads).unwrap()), RTOL);
        close(&format!("bsr dB {name}"), &host(db), &host(b2.grad(&grads).unwrap()), RTOL);
    }
}

#[test]
fn constant_matrix_and_tracked_operand() {
    // A built on the plain device acts as a constant; the gradient reaches B.
    let m = Mat::from_triplets(3, 2, vec![(0, 0, 2.0), (1, 1, -1.0), (2, 0, 0.5), (2, 1, 4.0)]);
    let a = sparse(&m, &device());
    let b = dense(2, 3, 51, &ad_device()).require_grad();
    let grads = a.spmm(b.clone()).unwrap().sum().backward();
    let db = host(b.grad(&grads).expect("rhs gradient"));
    // d/dB sum(A·B) = Aᵀ · 1: column sums of A repeated over the features.
    close("constant A: dB", &db, &[2.5, 2.5, 2.5, 3.0, 3.0, 3.0], 1e-6);
}
