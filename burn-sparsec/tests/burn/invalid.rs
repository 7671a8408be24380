//! Invalid sparse input is an error, never a launch.

use crate::common::*;
use burn::tensor::{DType, Tensor, TensorData};
use burn_sparsec::{SparseBsr, SparseCsr, SparseError};

fn csr(rows: usize, cols: usize, indptr: Vec<i32>, indices: Vec<i32>, values: Vec<f32>) -> Result<SparseCsr, SparseError> {
    SparseCsr::from_parts(rows, cols, indptr, indices, values, &device())
}

#[test]
fn malformed_csr_is_refused() {
    let cases: Vec<(&str, Result<SparseCsr, SparseError>)> = vec![
        ("short indptr", csr(2, 2, vec![0, 1], vec![0], vec![1.0])),
        ("indptr not from 0", csr(2, 2, vec![1, 1, 2], vec![0, 1], vec![1.0, 2.0])),
        ("decreasing indptr", csr(2, 2, vec![0, 2, 1], vec![0, 1], vec![1.0, 2.0])),
        ("column out of range", csr(2, 2, vec![0, 1, 2], vec![0, 2], vec![1.0, 2.0])),
        ("negative column", csr(2, 2, vec![0, 1, 2], vec![0, -1], vec![1.0, 2.0])),
        ("unsorted row", csr(1, 3, vec![0, 2], vec![2, 0], vec![1.0, 2.0])),
        ("duplicate column", csr(1, 3, vec![0, 2], vec![1, 1], vec![1.0, 2.0])),
        ("values length", csr(2, 2, vec![0, 1, 2], vec![0, 1], vec![1.0])),
        ("indptr past nnz", csr(2, 2, vec![0, 1, 3], vec![0, 1], vec![1.0, 2.0])),
    ];
    for (what, r) in cases {
        assert!(matches!(r, Err(SparseError::Invalid(_))), "{what}: {r:?}");
    }
}

#[test]
fn malformed_bsr_is_refused() {
    let dev = device();
    // 4 × 4 with 2 × 2 blocks: two block rows.
    let bad_col = SparseBsr::from_parts(4, 4, 2, vec![0, 1, 1], vec![2], vec![1.0; 4], &dev);
    assert!(matches!(bad_col, Err(SparseError::Invalid(_))), "{bad_col:?}");
    let bad_len = SparseBsr::from_parts(4, 4, 2, vec![0, 1, 1], vec![0], vec![1.0; 3], &dev);
    assert!(matches!(bad_len, Err(SparseError::Invalid(_))), "{bad_len:?}");
    let zero = SparseBsr::from_parts(4, 4, 0, vec![0], vec![], vec![], &dev);
    assert!(zero.is_err());
}

#[test]
fn mismatched_operands_are_refused() {
    let dev = device();
    let a = csr(2, 3, vec![0, 1, 2], vec![0, 2], vec![1.0, 2.0]).unwrap();
    assert!(matches!(a.spmm(dense(2, 4, 1, &dev)), Err(SparseError::Shape { .. })));
    assert!(matches!(a.sddmm(dense(2, 4, 1, &dev), dense(3, 5, 1, &dev)), Err(SparseError::Shape { .. })));
    assert!(matches!(a.sddmm(dense(3, 4, 1, &dev), dense(3, 4, 1, &dev)), Err(SparseError::Shape { .. })));
    assert!(matches!(a.spmm_bias_relu(dense(3, 4, 1, &dev), vector(3, 1, &dev)), Err(SparseError::Shape { .. })));
    assert!(matches!(a.with_values(vector(3, 1, &dev)), Err(SparseError::Shape { .. })));
    // f64 operand.
    if dev.supports_dtype(DType::F64) {
        let b64 = Tensor::<2>::from_data(TensorData::new(vec![1.0f64; 12], [3, 4]), (&dev, DType::F64));
        assert!(matches!(a.spmm(b64), Err(SparseError::DType { .. })));
    }
}
