//! Forward results against dense Burn matmul (fp32, rtol 1e-4) on every shared and generated
//! matrix, on wgpu (CubeCL kernels) and Flex (the CPU kernels through the MLIR JIT).
//! Matrices too big to densify are compared on three windows of rows.

use crate::common::*;
use burn::tensor::{activation::relu, Device, Tensor, TensorData};
use burn_sparsec::{SparseBsr, SparseCsr, SparseError};
use sparsec_formats::Csr;
use sparsec_testkit::Mat;
use std::ops::Range;

const RTOL: f32 = 1e-4;

/// Row windows to compare: all rows of a small matrix, else three windows of 256 rows.
fn windows(m: &Mat) -> Vec<Range<usize>> {
    if small(m) {
        return vec![0..m.rows];
    }
    let w = 256.min(m.rows);
    let mid = (m.rows / 2).min(m.rows - w);
    vec![0..w, mid..mid + w, m.rows - w..m.rows]
}

/// Rows `r` of `m` as a dense tensor.
fn dense_rows(m: &Mat, r: &Range<usize>, device: &Device) -> Tensor<2> {
    let mut d = vec![0f32; r.len() * m.cols];
    for i in r.clone() {
        for (&j, &v) in m.row(i).iter().zip(m.row_vals(i)) {
            d[(i - r.start) * m.cols + j] = v;
        }
    }
    Tensor::from_data(TensorData::new(d, [r.len(), m.cols]), device)
}

fn rows_of(t: &Tensor<2>, r: &Range<usize>) -> Tensor<2> {
    let f = t.dims()[1];
    t.clone().slice([r.clone(), 0..f])
}

#[test]
fn spmm_matches_dense_matmul() {
    for dev in devices() {
        spmm_matches_dense_matmul_on(&dev);
    }
}

fn spmm_matches_dense_matmul_on(dev: &Device) {
    let dev = dev.clone();
    for (name, m) in matrices() {
        let f = feat(&m);
        let a = sparse(&m, &dev);
        let b = dense(m.cols, f, 1, &dev);
        let got = a.spmm(b.clone()).unwrap();
        assert_eq!(got.dims(), [m.rows, f], "{name}");
        for r in windows(&m) {
            let want = dense_rows(&m, &r, &dev).matmul(b.clone());
            close(&format!("spmm {name} rows {r:?}"), &host(rows_of(&got, &r)), &host(want), RTOL);
        }
    }
}

#[test]
fn spmm_bias_relu_matches_dense() {
    for dev in devices() {
        spmm_bias_relu_matches_dense_on(&dev);
    }
}

fn spmm_bias_relu_matches_dense_on(dev: &Device) {
    let dev = dev.clone();
    for (name, m) in matrices() {
        let f = feat(&m);
        let a = sparse(&m, &dev);
        let b = dense(m.cols, f, 2, &dev);
        let bias = vector(f, 3, &dev);
        let got = a.spmm_bias_relu(b.clone(), bias.clone()).unwrap();
        for r in windows(&m) {
            let want = relu(dense_rows(&m, &r, &dev).matmul(b.clone()) + bias.clone().unsqueeze::<2>());
            close(&format!("spmm+bias+relu {name} rows {r:?}"), &host(rows_of(&got, &r)), &host(want), RTOL);
        }
    }
}

#[test]
fn sddmm_matches_sampled_dense_matmul() {
    for dev in devices() {
        sddmm_matches_sampled_dense_matmul_on(&dev);
    }
}

fn sddmm_matches_sampled_dense_matmul_on(dev: &Device) {
    let dev = dev.clone();
    for (name, m) in matrices() {
        let f = feat(&m);
        let a = sparse(&m, &dev);
        let l = dense(m.rows, f, 4, &dev);
        let rt = dense(m.cols, f, 5, &dev);
        let got = a.sddmm(l.clone(), rt.clone()).unwrap();
        assert_eq!(got.nnz(), m.nnz());
        let vals = host(got.values());
        for r in windows(&m) {
            let full = host(rows_of(&l, &r).matmul(rt.clone().transpose()));
            let (mut g, mut w) = (Vec::new(), Vec::new());
            for i in r.clone() {
                for p in m.indptr[i]..m.indptr[i + 1] {
                    g.push(vals[p]);
                    w.push(full[(i - r.start) * m.cols + m.indices[p]]);
                }
            }
            close(&format!("sddmm {name} rows {r:?}"), &g, &w, RTOL);
        }
    }
}

#[test]
fn bsr_spmm_matches_dense_matmul() {
    for dev in devices() {
        bsr_spmm_matches_dense_matmul_on(&dev);
    }
}

fn bsr_spmm_matches_dense_matmul_on(dev: &Device) {
    let dev = dev.clone();
    for (name, m) in matrices() {
        let f = feat(&m).min(16);
        let idx = |v: &[usize]| v.iter().map(|&x| x as i32).collect::<Vec<_>>();
        let csr = Csr::try_new(m.rows, m.cols, idx(&m.indptr), idx(&m.indices), m.vals.clone()).unwrap();
        for blk in [2usize, 4] {
            let bsr = csr.to_bsr(blk).unwrap();
            let a = SparseBsr::from_bsr(&bsr, &dev).unwrap();
            let b = dense(m.cols, f, 6, &dev);
            let got = a.spmm(b.clone()).unwrap();
            assert_eq!(got.dims(), [m.rows, f]);
            for r in windows(&m) {
                let want = dense_rows(&m, &r, &dev).matmul(b.clone());
                close(&format!("bsr({blk}) spmm {name} rows {r:?}"), &host(rows_of(&got, &r)), &host(want), RTOL);
            }
        }
    }
}

#[test]
fn dense_roundtrips() {
    for dev in devices() {
        dense_roundtrips_on(&dev);
    }
}

fn dense_roundtrips_on(dev: &Device) {
    let dev = dev.clone();
    for (name, m) in matrices().into_iter().filter(|(_, m)| small(m) && m.rows * m.cols <= 1 << 20) {
        let d = Tensor::<2>::from_data(TensorData::new(m.to_dense(), [m.rows, m.cols]), &dev);
        let a = SparseCsr::from_dense(d.clone(), 0.0).unwrap();
        assert_eq!(a.nnz(), m.vals.iter().filter(|v| **v != 0.0).count(), "{name}");
        assert_eq!(host(a.to_dense()), m.to_dense(), "{name}: csr to_dense");
        let t = a.transpose().unwrap();
        assert_eq!(host(t.to_dense()), host(d.clone().transpose()), "{name}: transpose");
        let b = SparseBsr::from_dense(d, 3, 0.0).unwrap();
        assert_eq!(host(b.to_dense()), m.to_dense(), "{name}: bsr to_dense");
    }
}

#[test]
fn from_dense_keeps_entries_above_the_threshold() {
    for dev in devices() {
        from_dense_keeps_entries_above_the_threshold_on(&dev);
    }
}

fn from_dense_keeps_entries_above_the_threshold_on(dev: &Device) {
    let dev = dev.clone();
    let d = Tensor::<2>::from_data(TensorData::new(vec![0.5f32, -0.05, 0.0, 2.0, 0.09, -3.0], [2, 3]), &dev);
    let a = SparseCsr::from_dense(d, 0.1).unwrap();
    let csr = a.to_csr().unwrap();
    assert_eq!(csr.indptr(), &[0, 1, 3]);
    assert_eq!(csr.indices(), &[0, 0, 2]);
    assert_eq!(csr.values(), &[0.5, 2.0, -3.0]);
}

#[test]
fn element_wise_operations_and_row_reductions_match_dense() {
    for dev in devices() {
        let ad = dev.clone().autodiff();
        let cases: Vec<_> = matrices().into_iter().filter(|(_, m)| m.rows * m.cols <= 1 << 20).take(4).collect();
        assert_eq!(cases.len(), 4);
        for (name, m) in cases {
            let a = sparse(&m, &ad);
            let v = Tensor::<1>::from_data(TensorData::new(m.vals.clone(), [m.nnz()]), &ad).require_grad();
            let a = a.with_values(v.clone()).unwrap();
            let b = a.with_values(dense(1, m.nnz(), 9, &ad).reshape([m.nnz()])).unwrap();
            let (da, db) = (a.to_dense(), b.to_dense());
            let what = |op: &str| format!("{op} {name} on {dev:?}");
            close(&what("scale"), &host(a.scale(-2.5).to_dense()), &host(da.clone() * -2.5), 1e-6);
            close(&what("relu"), &host(a.relu().to_dense()), &host(relu(da.clone())), 1e-6);
            close(&what("add"), &host(a.add(&b).unwrap().to_dense()), &host(da.clone() + db.clone()), 1e-6);
            close(&what("mul"), &host(a.mul(&b).unwrap().to_dense()), &host(da.clone() * db.clone()), 1e-6);
            let sums = a.row_sum().unwrap();
            close(&what("row_sum"), &host(sums.clone()), &host(da.clone().sum_dim(1).reshape([m.rows])), 1e-4);
            let norms = a.row_norm().unwrap();
            let want = da.clone().powi_scalar(2).sum_dim(1).sqrt().reshape([m.rows]);
            close(&what("row_norm"), &host(norms), &host(want), 1e-4);
            // The row sums are differentiable in the values: d(Σ w ∘ rowsum)/dA[i, j] = w[i].
            let w = dense(m.rows, 1, 10, &ad).reshape([m.rows]);
            let grads = (sums * w.clone()).sum().backward();
            let wh = host(w);
            let want: Vec<f32> = (0..m.rows).flat_map(|i| std::iter::repeat_n(wh[i], m.row(i).len())).collect();
            close(&what("d row_sum"), &host(v.grad(&grads).unwrap()), &want, 1e-5);
        }
        // Different patterns are refused.
        let x = SparseCsr::from_parts(2, 2, vec![0, 1, 2], vec![0, 1], vec![1.0, 2.0], &dev).unwrap();
        let y = SparseCsr::from_parts(2, 2, vec![0, 1, 2], vec![1, 0], vec![1.0, 2.0], &dev).unwrap();
        assert!(x.add(&y).is_err() && x.mul(&y).is_err());
        let same = SparseCsr::from_parts(2, 2, vec![0, 1, 2], vec![0, 1], vec![3.0, 4.0], &dev).unwrap();
        assert_eq!(host(x.add(&same).unwrap().values()), vec![4.0, 6.0]);
    }
}

#[test]
fn half_precision_operands_are_computed_in_f32_and_returned_in_their_type() {
    use burn::tensor::FloatDType;
    for dev in devices() {
        let ad = dev.clone().autodiff();
        let (name, m) = half_case();
        for half in halves(&dev) {
            let what = |op: &str| format!("{op} {half:?} {name} on {dev:?}");
            let a = sparse(&m, &ad);
            let b32 = dense(m.cols, 8, 5, &ad);
            let b = b32.clone().cast(half).require_grad();
            let y = a.spmm(b.clone()).unwrap();
            assert_eq!(y.dtype(), half.into(), "{}", what("spmm dtype"));
            // The reference: the same (rounded) operands in f32, rounded to the half type.
            let want = a.spmm(b.clone().detach().cast(FloatDType::F32)).unwrap().cast(half).cast(FloatDType::F32);
            close(&what("spmm"), &host(y.clone().cast(FloatDType::F32)), &host(want), 1e-2);
            let grads = y.cast(FloatDType::F32).sum().backward();
            let db = b.grad(&grads).expect("rhs gradient");
            assert_eq!(db.dtype(), half.into(), "{}", what("gradient dtype"));
            let ones = Tensor::<2>::ones([m.rows, 8], &ad);
            let want_db = a.transpose().unwrap().spmm(ones).unwrap();
            close(&what("d rhs"), &host(db.cast(FloatDType::F32)), &host(want_db), 1e-2);
            let s = a.sddmm(dense(m.rows, 8, 6, &ad).cast(half), b.clone().detach()).unwrap();
            assert_eq!(s.values().dtype(), half.into());
            let s32 =
                a.sddmm(dense(m.rows, 8, 6, &ad).cast(half).cast(FloatDType::F32), b.detach().cast(FloatDType::F32));
            close(&what("sddmm"), &host(s.values().cast(FloatDType::F32)), &host(s32.unwrap().values()), 1e-2);
        }
        // f64 is not computed in f32 behind the caller's back: refused.
        let a = sparse(&m, &dev);
        let f64_operand = dense(m.cols, 2, 1, &dev).cast(FloatDType::F64);
        assert!(matches!(a.spmm(f64_operand), Err(burn_sparsec::SparseError::DType { .. })));
    }
}

#[test]
fn transposed_spmm_and_masking_match_dense_burn_with_gradients() {
    for dev in devices() {
        let ad = dev.clone().autodiff();
        let cases: Vec<_> = matrices().into_iter().filter(|(_, m)| m.rows * m.cols <= 1 << 20).take(5).collect();
        assert_eq!(cases.len(), 5);
        for (name, m) in cases {
            let what = |op: &str| format!("{op} {name} on {dev:?}");
            let v = Tensor::<1>::from_data(TensorData::new(m.vals.clone(), [m.nnz()]), &ad).require_grad();
            let a = sparse(&m, &ad).with_values(v.clone()).unwrap();
            // Aᵀ · B against dense Burn, with the gradients of the values and of B.
            let b = dense(m.rows, 7, 51, &ad).require_grad();
            let w = dense(m.cols, 7, 52, &ad);
            let y = a.spmm_t(b.clone()).unwrap();
            let grads = (y.clone() * w.clone()).sum().backward();
            let (dv, db) = (host(v.grad(&grads).unwrap()), host(b.grad(&grads).unwrap()));
            let d = a.to_dense().detach().require_grad();
            let b2 = b.detach().require_grad();
            let want = d.clone().transpose().matmul(b2.clone());
            close(&what("spmm_t"), &host(y), &host(want.clone()), 1e-4);
            let grads = (want * w).sum().backward();
            let dd = host(d.grad(&grads).unwrap());
            let want_dv: Vec<f32> = (0..m.rows)
                .flat_map(|i| m.row(i).iter().map(move |&c| (i, c)))
                .map(|(i, c)| dd[i * m.cols + c])
                .collect();
            close(&what("d spmm_t values"), &dv, &want_dv, 1e-3);
            close(&what("d spmm_t rhs"), &db, &host(b2.grad(&grads).unwrap()), 1e-3);

            // Masking a dense tensor by the pattern: its entries there, gradient only there.
            let x = dense(m.rows, m.cols, 53, &ad).require_grad();
            let masked = a.mask(x.clone()).unwrap();
            let xh = host(x.clone());
            let want: Vec<f32> = (0..m.rows)
                .flat_map(|i| m.row(i).iter().map(move |&c| (i, c)))
                .map(|(i, c)| xh[i * m.cols + c])
                .collect();
            assert_eq!(host(masked.values()), want, "{}", what("mask"));
            let u = host(vector(m.nnz(), 54, &dev));
            let ut = Tensor::<1>::from_data(TensorData::new(u.clone(), [m.nnz()]), &ad);
            let grads = (masked.values() * ut).sum().backward();
            let mut want = vec![0.0f32; m.rows * m.cols];
            for (p, (i, c)) in (0..m.rows).flat_map(|i| m.row(i).iter().map(move |&c| (i, c))).enumerate() {
                want[i * m.cols + c] = u[p];
            }
            assert_eq!(host(x.grad(&grads).unwrap()), want, "{}", what("d mask"));
        }
        let a = SparseCsr::from_parts(2, 3, vec![0, 1, 2], vec![0, 2], vec![1.0, 2.0], &dev).unwrap();
        assert!(matches!(a.spmm_t(dense(3, 4, 1, &dev)), Err(SparseError::Shape { .. })), "Aᵀ takes [rows, f]");
        assert!(matches!(a.mask(dense(3, 2, 1, &dev)), Err(SparseError::Shape { .. })));
    }
}

#[test]
fn half_precision_values_are_computed_in_f32_and_kept_in_their_type() {
    use burn::tensor::FloatDType;
    for dev in devices() {
        let ad = dev.clone().autodiff();
        let (name, m) = half_case();
        for half in halves(&dev) {
            let what = |op: &str| format!("{op} {half:?} {name} on {dev:?}");
            let a = sparse(&m, &ad).cast(half).unwrap();
            assert_eq!(a.values().dtype(), half.into());
            // The reference: the rounded values in f32.
            let v = a.values().detach().cast(FloatDType::F32).require_grad();
            let a32 = a.with_values(v.clone()).unwrap();
            let a = a.with_values(a.values().detach().require_grad()).unwrap();
            let b = dense(m.cols, 8, 5, &ad);
            let y = a.spmm(b.clone()).unwrap();
            assert_eq!(y.dtype(), FloatDType::F32.into(), "{}", what("an f32 operand gives f32"));
            let y32 = a32.spmm(b.clone()).unwrap();
            close(&what("spmm"), &host(y.clone()), &host(y32.clone()), 1e-5);
            let grads = (y * dense(m.rows, 8, 6, &ad)).sum().backward();
            let dv = a.values().grad(&grads).expect("value gradient");
            assert_eq!(dv.dtype(), half.into(), "{}", what("gradient dtype"));
            let grads32 = (y32 * dense(m.rows, 8, 6, &ad)).sum().backward();
            close(&what("d values"), &host(dv.cast(FloatDType::F32)), &host(v.grad(&grads32).unwrap()), 1e-2);
            // Value results keep the values' type.
            let d = a.to_dense();
            assert_eq!(d.dtype(), half.into(), "{}", what("to_dense dtype"));
            close(&what("to_dense"), &host(d.cast(FloatDType::F32)), &host(a32.to_dense()), 0.0);
            let sm = a.softmax().unwrap();
            assert_eq!(sm.values().dtype(), half.into(), "{}", what("softmax dtype"));
            close(
                &what("softmax"),
                &host(sm.values().cast(FloatDType::F32)),
                &host(a32.softmax().unwrap().values()),
                1e-2,
            );
            let mx = a.row_max().unwrap();
            assert_eq!(mx.dtype(), half.into());
            close(&what("row_max"), &host(mx.cast(FloatDType::F32)), &host(a32.row_max().unwrap()), 1e-2);
            let rs = a.row_sum().unwrap();
            close(&what("row_sum"), &host(rs.cast(FloatDType::F32)), &host(a32.row_sum().unwrap()), 1e-2);
            // Mixing value types is refused.
            assert!(matches!(a.add(&a32), Err(burn_sparsec::SparseError::DType { .. })), "{}", what("add"));
        }
        assert!(matches!(sparse(&m, &dev).cast(FloatDType::F64), Err(burn_sparsec::SparseError::DType { .. })));
    }
}

/// The matrix of the half-precision tests: the first small one with over 100 entries.
fn half_case() -> (String, Mat) {
    matrices().into_iter().find(|(_, m)| m.rows * m.cols <= 1 << 18 && m.nnz() > 100).unwrap()
}

#[test]
fn sixty_four_bit_indices_are_taken_where_they_fit_and_refused_beyond() {
    let dev = device();
    let (name, m) = half_case();
    let wide: Csr<i64, f32> = Csr::try_new(
        m.rows,
        m.cols,
        m.indptr.iter().map(|&x| x as i64).collect(),
        m.indices.iter().map(|&x| x as i64).collect(),
        m.vals.clone(),
    )
    .unwrap();
    let a = SparseCsr::from_csr(&wide, &dev).unwrap();
    let b = dense(m.cols, 4, 8, &dev);
    assert_eq!(host(a.spmm(b.clone()).unwrap()), host(sparse(&m, &dev).spmm(b).unwrap()), "{name}");
    // A column beyond i32: the kernels index in 32 bits, so the matrix is refused.
    let huge: Csr<i64, f32> = Csr::try_new(1, 3_000_000_000, vec![0, 1], vec![2_999_999_999], vec![1.0]).unwrap();
    assert!(matches!(SparseCsr::from_csr(&huge, &dev), Err(SparseError::TooLarge { .. })));
}
