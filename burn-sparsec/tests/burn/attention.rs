//! Row softmax and row maximum over the stored entries, against their definitions in f64 on
//! every shared and generated matrix (values and gradients), and sparse attention
//! (`softmax(SDDMM(Q, K) / √d) · V` on a pattern) against dense Burn's masked attention.

use crate::common::*;
use burn::tensor::{activation::softmax, Bool, Device, Tensor, TensorData};
use burn_sparsec::SparseCsr;
use sparsec_testkit::Mat;

/// Softmax of every row of `m` with `values`, in f64.
fn softmax_rows(m: &Mat, values: &[f32]) -> Vec<f64> {
    let mut out = vec![0.0; values.len()];
    for i in 0..m.rows {
        let r = m.indptr[i]..m.indptr[i + 1];
        let max = values[r.clone()].iter().map(|&v| v as f64).fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = values[r.clone()].iter().map(|&v| (v as f64 - max).exp()).sum();
        for p in r {
            out[p] = (values[p] as f64 - max).exp() / sum;
        }
    }
    out
}

fn f32s(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

#[test]
fn softmax_and_row_max_match_their_definitions_with_gradients() {
    for dev in devices() {
        softmax_and_row_max_on(&dev);
    }
}

fn softmax_and_row_max_on(dev: &Device) {
    let ad = dev.clone().autodiff();
    let cases: Vec<_> = matrices().into_iter().filter(|(_, m)| m.nnz() <= 200_000).collect();
    assert!(cases.len() >= 8, "{} matrices", cases.len());
    for (name, m) in cases {
        let what = |op: &str| format!("{op} {name} on {dev:?}");
        // Values spread wide enough that the maximum matters (exp of up to ±8).
        let vals: Vec<f32> = host(vector(m.nnz(), 21, dev)).iter().map(|v| v * 8.0).collect();
        let v = Tensor::<1>::from_data(TensorData::new(vals.clone(), [m.nnz()]), &ad).require_grad();
        let a = sparse(&m, &ad).with_values(v.clone()).unwrap();

        // softmax: values, and d(Σ w ∘ Y)/dA = Y ∘ (w − Σ_row Y ∘ w).
        let y = a.softmax().unwrap();
        let want = softmax_rows(&m, &vals);
        close(&what("softmax"), &host(y.values()), &f32s(&want), 1e-5);
        let w = host(vector(m.nnz(), 22, dev));
        let wt = Tensor::<1>::from_data(TensorData::new(w.clone(), [m.nnz()]), &ad);
        let grads = (y.values() * wt).sum().backward();
        let mut dx = vec![0.0f64; m.nnz()];
        for i in 0..m.rows {
            let r = m.indptr[i]..m.indptr[i + 1];
            let s: f64 = r.clone().map(|p| want[p] * w[p] as f64).sum();
            for p in r {
                dx[p] = want[p] * (w[p] as f64 - s);
            }
        }
        close(&what("d softmax"), &host(v.grad(&grads).unwrap()), &f32s(&dx), 1e-4);

        // row_max: values (f32::MIN on empty rows), and the gradient on the argmax.
        let v = v.detach().require_grad();
        let a = a.with_values(v.clone()).unwrap();
        let max = a.row_max().unwrap();
        let want: Vec<f32> =
            (0..m.rows).map(|i| vals[m.indptr[i]..m.indptr[i + 1]].iter().copied().fold(f32::MIN, f32::max)).collect();
        assert_eq!(host(max.clone()), want, "{}", what("row_max"));
        let u = host(vector(m.rows, 23, dev));
        let ut = Tensor::<1>::from_data(TensorData::new(u.clone(), [m.rows]), &ad);
        let grads = (max * ut).sum().backward();
        let mut dx = vec![0.0f32; m.nnz()];
        for i in 0..m.rows {
            let r = m.indptr[i]..m.indptr[i + 1];
            let ties = r.clone().filter(|&p| vals[p] == want[i]).count() as f32;
            for p in r.filter(|&p| vals[p] == want[i]) {
                dx[p] = u[i] / ties;
            }
        }
        close(&what("d row_max"), &host(v.grad(&grads).unwrap()), &dx, 1e-6);
    }
    // Ties share the gradient; an empty row gives f32::MIN and no gradient.
    let v = Tensor::<1>::from_data(TensorData::new(vec![2.0f32, 5.0, 5.0, -1.0], [4]), &ad).require_grad();
    let a = SparseCsr::from_parts(3, 4, vec![0, 3, 3, 4], vec![0, 1, 3, 2], vec![0.0; 4], &ad).unwrap();
    let max = a.with_values(v.clone()).unwrap().row_max().unwrap();
    assert_eq!(host(max.clone()), [5.0, f32::MIN, -1.0]);
    let grads = max.sum().backward();
    assert_eq!(host(v.grad(&grads).unwrap()), [0.0, 0.5, 0.5, 1.0]);
}

#[test]
fn sparse_attention_equals_dense_masked_attention() {
    for dev in devices() {
        sparse_attention_on(&dev);
    }
}

fn sparse_attention_on(dev: &Device) {
    let ad = dev.clone().autodiff();
    // A local window plus random links, the diagonal always in (no empty row).
    let (n, d) = (96, 16);
    let mut rng = sparsec_testkit::Rng::new(31);
    let (mut indptr, mut indices) = (vec![0i32], Vec::new());
    for i in 0..n {
        let mut row: Vec<i32> = (0..n as i32).filter(|&j| (j - i as i32).abs() <= 2 || rng.below(10) == 0).collect();
        row.dedup();
        indices.extend(row);
        indptr.push(indices.len() as i32);
    }
    let nnz = indices.len();
    let pattern = SparseCsr::from_parts(n, n, indptr.clone(), indices.clone(), vec![0.0; nnz], &ad).unwrap();
    let q = dense(n, d, 41, &ad).require_grad();
    let k = dense(n, d, 42, &ad).require_grad();
    let v = dense(n, d, 43, &ad).require_grad();
    let w = dense(n, d, 44, &ad);
    let scale = 1.0 / (d as f32).sqrt();

    let scores = pattern.sddmm(q.clone(), k.clone()).unwrap().scale(scale);
    let out = scores.softmax().unwrap().spmm(v.clone()).unwrap();
    let grads = (out.clone() * w.clone()).sum().backward();
    let (dq, dk, dv) = (q.grad(&grads).unwrap(), k.grad(&grads).unwrap(), v.grad(&grads).unwrap());

    let (q2, k2, v2) = (q.detach().require_grad(), k.detach().require_grad(), v.detach().require_grad());
    let mut keep = vec![false; n * n];
    for i in 0..n {
        for p in indptr[i] as usize..indptr[i + 1] as usize {
            keep[i * n + indices[p] as usize] = true;
        }
    }
    let outside =
        Tensor::<2, Bool>::from_data(TensorData::new(keep.iter().map(|&x| !x).collect::<Vec<_>>(), [n, n]), &ad);
    let dense_scores = q2.clone().matmul(k2.clone().transpose()) * scale;
    let want = softmax(dense_scores.mask_fill(outside, f32::NEG_INFINITY), 1).matmul(v2.clone());
    let grads = (want.clone() * w).sum().backward();
    let what = |x: &str| format!("attention {x} on {dev:?}");
    close(&what("output"), &host(out), &host(want), 1e-4);
    close(&what("dQ"), &host(dq), &host(q2.grad(&grads).unwrap()), 1e-3);
    close(&what("dK"), &host(dk), &host(k2.grad(&grads).unwrap()), 1e-3);
    close(&what("dV"), &host(dv), &host(v2.grad(&grads).unwrap()), 1e-3);
}
