//! [`SparseCsr`]: a CSR matrix on a Burn device, and the operations on it.

use crate::backend::{RowOp, SparseBackend};
use crate::error::{Result, SparseError};
use crate::kernels::Kernel;
use burn::backend::Dispatch;
use burn::tensor::{DType, Device, FloatDType, IndexingUpdateOp, Int, Tensor, TensorData};
use sparsec_formats::validate::{check_compressed, ValidateOptions};
use sparsec_formats::{Csr, Index, Value};
use std::sync::{Arc, OnceLock};

/// The transposed pattern (a CSC of the matrix read as a CSR of `Aᵀ`), built on first need.
#[derive(Clone, Debug)]
pub(crate) struct Transposed {
    pub(crate) indptr: Tensor<1, Int>,
    pub(crate) indices: Tensor<1, Int>,
    /// `perm[q]`: the position in the original of the transpose's `q`-th entry.
    pub(crate) perm: Tensor<1, Int>,
    /// The inverse of `perm`: the position in the transpose of the original's `p`-th entry.
    pub(crate) inverse: Tensor<1, Int>,
}

/// A CSR structure on a device, shared by every matrix with that pattern.
#[derive(Debug)]
pub(crate) struct Pattern {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) host_indptr: Vec<i32>,
    pub(crate) host_indices: Vec<i32>,
    pub(crate) indptr: Tensor<1, Int>,
    pub(crate) indices: Tensor<1, Int>,
    pub(crate) device: Device,
    transposed: OnceLock<Transposed>,
    flat: OnceLock<Tensor<1, Int>>,
}

/// `value` as an `i32`, or [`SparseError::TooLarge`].
pub(crate) fn fit(what: &'static str, value: usize) -> Result<i32> {
    i32::try_from(value).map_err(|_| SparseError::TooLarge { what, value })
}

/// An `i32` index tensor on `device`.
pub(crate) fn int_tensor(v: Vec<i32>, device: &Device) -> Tensor<1, Int> {
    let n = v.len();
    Tensor::from_data(TensorData::new(v, [n]), (device, DType::I32))
}

/// Host CSR → CSR of the transpose: `(indptr, indices, perm)` over `cols` rows. Stable, so
/// the transpose's rows come out sorted.
pub(crate) fn transpose_host(cols: usize, indptr: &[i32], indices: &[i32]) -> (Vec<i32>, Vec<i32>, Vec<i32>) {
    let nnz = indices.len();
    let mut t_ptr = vec![0i32; cols + 1];
    for &c in indices {
        t_ptr[c as usize + 1] += 1;
    }
    for c in 0..cols {
        t_ptr[c + 1] += t_ptr[c];
    }
    let mut next: Vec<i32> = t_ptr[..cols].to_vec();
    let mut t_idx = vec![0i32; nnz];
    let mut perm = vec![0i32; nnz];
    for r in 0..indptr.len().saturating_sub(1) {
        for p in indptr[r] as usize..indptr[r + 1] as usize {
            let c = indices[p] as usize;
            let q = next[c] as usize;
            next[c] += 1;
            t_idx[q] = r as i32;
            perm[q] = p as i32;
        }
    }
    (t_ptr, t_idx, perm)
}

/// Whether `device` (or the device an autodiff device wraps) runs the kernels: a CubeCL device
/// (the traced GPU programs) or a Flex device (the CPU programs through the MLIR JIT).
pub(crate) fn check_supported(device: &Device) -> Result<()> {
    cpu_device(device).map(|_| ())
}

/// Whether `device` runs the CPU kernels (Flex) rather than the CubeCL ones; an error for a
/// device that runs neither.
pub(crate) fn cpu_device(device: &Device) -> Result<bool> {
    match device.clone().inner().as_dispatch() {
        burn::backend::DispatchDevice::Cube(_) => Ok(false),
        burn::backend::DispatchDevice::Flex(_) => Ok(true),
        other => Err(SparseError::UnsupportedDevice(format!("{other:?}"))),
    }
}

/// Builds `kernels` for `device`, so a kernel that does not build is an error before the
/// operation runs.
pub(crate) fn prepare(kernels: &[Kernel], device: &Device) -> Result<()> {
    let cpu = cpu_device(device)?;
    for k in kernels {
        if cpu {
            k.cpu_compiled()?;
        } else {
            k.compiled()?;
        }
    }
    Ok(())
}

impl Pattern {
    /// A validated pattern on `device` (checked: shape, monotone `indptr`, column bounds,
    /// sorted and distinct columns per row, 32-bit sizes).
    pub(crate) fn new(rows: usize, cols: usize, indptr: Vec<i32>, indices: Vec<i32>, device: &Device) -> Result<Self> {
        fit("rows", rows)?;
        fit("cols", cols)?;
        fit("nnz", indices.len())?;
        check_supported(device)?;
        let values = vec![1.0f32; indices.len()];
        check_compressed(rows, cols, &indptr, &indices, &values, &ValidateOptions::STRICT).into_result()?;
        Ok(Pattern {
            rows,
            cols,
            indptr: int_tensor(indptr.clone(), device),
            indices: int_tensor(indices.clone(), device),
            host_indptr: indptr,
            host_indices: indices,
            device: device.clone(),
            transposed: OnceLock::new(),
            flat: OnceLock::new(),
        })
    }

    pub(crate) fn nnz(&self) -> usize {
        self.host_indices.len()
    }

    /// The transposed pattern, built once.
    pub(crate) fn transposed(&self) -> &Transposed {
        self.transposed.get_or_init(|| {
            let (p, i, perm) = transpose_host(self.cols, &self.host_indptr, &self.host_indices);
            let mut inverse = vec![0i32; perm.len()];
            for (q, &p) in perm.iter().enumerate() {
                inverse[p as usize] = q as i32;
            }
            Transposed {
                indptr: int_tensor(p, &self.device),
                indices: int_tensor(i, &self.device),
                perm: int_tensor(perm, &self.device),
                inverse: int_tensor(inverse, &self.device),
            }
        })
    }

    /// `(row, column)` of every stored entry, in storage order.
    pub(crate) fn coords(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..self.rows).flat_map(move |r| {
            let (lo, hi) = (self.host_indptr[r] as usize, self.host_indptr[r + 1] as usize);
            self.host_indices[lo..hi].iter().map(move |&c| (r, c as usize))
        })
    }

    /// `row * cols + col` of every entry (for densifying), built once.
    fn flat(&self) -> &Tensor<1, Int> {
        self.flat.get_or_init(|| {
            let v: Vec<i64> = self.coords().map(|(r, c)| r as i64 * self.cols as i64 + c as i64).collect();
            let n = v.len();
            Tensor::from_data(TensorData::new(v, [n]), &self.device)
        })
    }
}

/// A sparse matrix in CSR form on a Burn device: `indptr` and `indices` as `i32` Int tensors
/// and the entries as an `f32` Float tensor.
///
/// The structure is validated when the matrix is built (sorted, distinct columns per row,
/// indices in bounds), so operations never launch on a malformed matrix. Matrices built with
/// [`SparseCsr::with_values`] or returned by [`SparseCsr::sddmm`] share their pattern.
/// Operations are differentiable in the values and in the dense operands when the device is
/// an autodiff device.
#[derive(Clone, Debug)]
pub struct SparseCsr {
    pub(crate) pattern: Arc<Pattern>,
    values: Tensor<1>,
}

impl SparseCsr {
    /// A matrix from its CSR arrays, validated, on `device`.
    pub fn from_parts(
        rows: usize,
        cols: usize,
        indptr: Vec<i32>,
        indices: Vec<i32>,
        values: Vec<f32>,
        device: &Device,
    ) -> Result<Self> {
        check_compressed(rows, cols, &indptr, &indices, &values, &ValidateOptions::STRICT).into_result()?;
        let pattern = Pattern::new(rows, cols, indptr, indices, device)?;
        let n = values.len();
        let values = Tensor::from_data(TensorData::new(values, [n]), (device, DType::F32));
        Ok(SparseCsr { pattern: Arc::new(pattern), values })
    }

    /// A matrix from a `formats` CSR matrix (any index and value type), on `device`.
    pub fn from_csr<I: Index, V: Value>(m: &Csr<I, V>, device: &Device) -> Result<Self> {
        let conv = |what: &'static str, v: &[I]| -> Result<Vec<i32>> {
            v.iter().map(|x| fit(what, x.to_usize().unwrap_or(usize::MAX))).collect()
        };
        let indptr = conv("indptr entry", m.indptr())?;
        let indices = conv("column index", m.indices())?;
        let values = m.values().iter().map(|&v| v.to_f64() as f32).collect();
        Self::from_parts(m.rows(), m.cols(), indptr, indices, values, device)
    }

    /// The entries of `dense` whose magnitude exceeds `threshold`, as a CSR matrix on the same
    /// device. Reads `dense` back to the host.
    pub fn from_dense(dense: Tensor<2>, threshold: f32) -> Result<Self> {
        let device = dense.device();
        let [rows, cols] = dense.dims();
        let flat = read_floats(dense)?;
        Self::from_masked(rows, cols, &flat, |p| flat[p].abs() > threshold, &device)
    }

    /// The entries `p` of a dense row-major `rows × cols` matrix for which `keep(p)` holds.
    pub(crate) fn from_masked(
        rows: usize,
        cols: usize,
        flat: &[f32],
        keep: impl Fn(usize) -> bool,
        device: &Device,
    ) -> Result<Self> {
        let (mut indptr, mut indices, mut values) = (vec![0i32], Vec::new(), Vec::new());
        for r in 0..rows {
            for c in 0..cols {
                if keep(r * cols + c) {
                    indices.push(fit("column index", c)?);
                    values.push(flat[r * cols + c]);
                }
            }
            indptr.push(fit("nnz", indices.len())?);
        }
        Self::from_parts(rows, cols, indptr, indices, values, device)
    }

    /// A matrix with this pattern and new entries (`values` of `[nnz]`, f32, same device).
    pub fn with_values(&self, values: Tensor<1>) -> Result<Self> {
        Self::from_pattern(self.pattern.clone(), values)
    }

    /// The matrix with its values in `dtype` (`F32`, `F16` or `BF16`; the pattern is shared).
    /// Half-precision values halve their memory; every kernel computes in `f32` (values cast
    /// at the kernel's boundary, differentiably), dense results take the dense operand's type
    /// and value results (`softmax`, `row_max`, `to_dense`, ...) the values' type.
    pub fn cast(&self, dtype: FloatDType) -> Result<Self> {
        if !matches!(dtype, FloatDType::F32 | FloatDType::F16 | FloatDType::BF16) {
            return Err(SparseError::DType { op: "cast", found: format!("{dtype:?}") });
        }
        Ok(SparseCsr { pattern: self.pattern.clone(), values: self.values.clone().cast(dtype) })
    }

    /// A matrix of `pattern` with `values` (`[nnz]`, f32, on the pattern's device).
    pub(crate) fn from_pattern(pattern: Arc<Pattern>, values: Tensor<1>) -> Result<Self> {
        let [n] = values.dims();
        if n != pattern.nnz() {
            return Err(SparseError::Shape {
                op: "with_values",
                detail: format!("the pattern has {} entries, the values {n}", pattern.nnz()),
            });
        }
        check_float("with_values", &values)?;
        check_device("with_values", &pattern.device, &values.device())?;
        Ok(SparseCsr { pattern, values })
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.pattern.rows, self.pattern.cols)
    }
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.pattern.rows
    }
    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.pattern.cols
    }
    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.pattern.nnz()
    }
    /// The device.
    pub fn device(&self) -> Device {
        self.pattern.device.clone()
    }
    /// Row pointers (`rows + 1`, i32).
    pub fn indptr(&self) -> Tensor<1, Int> {
        self.pattern.indptr.clone()
    }
    /// Column index of every entry (i32).
    pub fn indices(&self) -> Tensor<1, Int> {
        self.pattern.indices.clone()
    }
    /// The entries (`[nnz]`, f32); tracked when the matrix was built from tracked values.
    pub fn values(&self) -> Tensor<1> {
        self.values.clone()
    }
    /// Row pointers on the host.
    pub fn host_indptr(&self) -> &[i32] {
        &self.pattern.host_indptr
    }
    /// Column indices on the host.
    pub fn host_indices(&self) -> &[i32] {
        &self.pattern.host_indices
    }

    /// The dense `[rows, cols]` matrix (a scatter on the device, differentiable in the values).
    pub fn to_dense(&self) -> Tensor<2> {
        let (rows, cols) = self.shape();
        let zeros = Tensor::<1>::zeros([rows * cols], (&self.pattern.device, self.values.dtype()));
        zeros.scatter(0, self.pattern.flat().clone(), self.values.clone(), IndexingUpdateOp::Add).reshape([rows, cols])
    }

    /// The entries of a dense `[rows, cols]` tensor at this pattern's positions, as a matrix
    /// of this pattern (`dense ∘ pattern`: masking a dense tensor by the pattern, as sparse
    /// attention masks its scores); a device gather, differentiable in `dense`.
    pub fn mask(&self, dense: Tensor<2>) -> Result<Self> {
        check_float("mask", &dense)?;
        check_device("mask", &self.pattern.device, &dense.device())?;
        let (rows, cols) = self.shape();
        if dense.dims() != [rows, cols] {
            return Err(SparseError::Shape {
                op: "mask",
                detail: format!("the dense tensor is {:?}, the pattern {rows}×{cols}", dense.dims()),
            });
        }
        let values = dense.reshape([rows * cols]).select(0, self.pattern.flat().clone());
        Ok(SparseCsr { pattern: self.pattern.clone(), values })
    }

    /// The matrix back on the host as a `formats` CSR matrix.
    pub fn to_csr(&self) -> Result<Csr<i32, f32>> {
        let values = read_floats(self.values.clone())?;
        Ok(Csr::try_new(
            self.rows(),
            self.cols(),
            self.pattern.host_indptr.clone(),
            self.pattern.host_indices.clone(),
            values,
        )?)
    }

    /// The transpose, `cols × rows` (entries gathered on the device; differentiable).
    pub fn transpose(&self) -> Result<Self> {
        let t = self.pattern.transposed();
        let (p, i, _) = transpose_host(self.cols(), &self.pattern.host_indptr, &self.pattern.host_indices);
        let pattern = Pattern::new(self.cols(), self.rows(), p, i, &self.pattern.device)?;
        let values = self.values.clone().select(0, t.perm.clone());
        Ok(SparseCsr { pattern: Arc::new(pattern), values })
    }

    /// SpMM: `A · rhs` for `rhs` of `[cols, f]`, by the sparsec `csrmm` kernel.
    pub fn spmm(&self, rhs: Tensor<2>) -> Result<Tensor<2>> {
        self.check_dense("spmm", &rhs, self.cols())?;
        self.spmm_of(rhs, false)
    }

    /// The transposed SpMM `Aᵀ · rhs` for `rhs` of `[rows, f]`, by the `csrmm` kernel on the
    /// cached transposed pattern (built once per pattern; nothing re-validated or uploaded per
    /// call, unlike `transpose().spmm(..)`); differentiable in the values and `rhs`.
    pub fn spmm_t(&self, rhs: Tensor<2>) -> Result<Tensor<2>> {
        self.check_dense("spmm_t", &rhs, self.rows())?;
        self.spmm_of(rhs, true)
    }

    /// `A · rhs`, or `Aᵀ · rhs` where `transposed`, computed in f32; the result has the dense
    /// operand's type.
    fn spmm_of(&self, rhs: Tensor<2>, transposed: bool) -> Result<Tensor<2>> {
        let dtype = rhs.dtype();
        self.prepare(&[Kernel::Csrmm, Kernel::Sddmm])?;
        let (p, t) = (&self.pattern, self.pattern.transposed());
        let values = f32_of(self.values.clone());
        let ((ptr, idx, t_ptr, t_idx, perm), values, (rows, cols)) = if transposed {
            // The transpose's entries in its own order: a differentiable gather.
            let values = values.select(0, t.perm.clone());
            ((&t.indptr, &t.indices, &p.indptr, &p.indices, &t.inverse), values, (p.cols, p.rows))
        } else {
            ((&p.indptr, &p.indices, &t.indptr, &t.indices, &t.perm), values, (p.rows, p.cols))
        };
        let out = <Dispatch as SparseBackend>::csr_spmm(
            ptr.clone().into_dispatch(),
            idx.clone().into_dispatch(),
            t_ptr.clone().into_dispatch(),
            t_idx.clone().into_dispatch(),
            perm.clone().into_dispatch(),
            values.into_dispatch(),
            f32_of(rhs).into_dispatch(),
            rows,
            cols,
        );
        Ok(Tensor::<2>::from_dispatch(out).cast(dtype))
    }

    /// `relu(A · rhs + bias)` (`bias` of `[f]`) by one sparsec program whose second sparse
    /// iteration applies the epilogue per row (`kernels/csrmm_bias_relu.sptir`).
    pub fn spmm_bias_relu(&self, rhs: Tensor<2>, bias: Tensor<1>) -> Result<Tensor<2>> {
        self.check_dense("spmm_bias_relu", &rhs, self.cols())?;
        let dtype = rhs.dtype();
        let feat = rhs.dims()[1];
        check_float("spmm_bias_relu", &bias)?;
        check_device("spmm_bias_relu", &self.pattern.device, &bias.device())?;
        if bias.dims()[0] != feat {
            return Err(SparseError::Shape {
                op: "spmm_bias_relu",
                detail: format!("bias has {} entries, rhs {feat} columns", bias.dims()[0]),
            });
        }
        self.prepare(&[Kernel::CsrmmBiasRelu, Kernel::Csrmm, Kernel::Sddmm])?;
        let (p, t) = (&self.pattern, self.pattern.transposed());
        let out = <Dispatch as SparseBackend>::csr_spmm_bias_relu(
            p.indptr.clone().into_dispatch(),
            p.indices.clone().into_dispatch(),
            t.indptr.clone().into_dispatch(),
            t.indices.clone().into_dispatch(),
            t.perm.clone().into_dispatch(),
            f32_of(self.values.clone()).into_dispatch(),
            f32_of(rhs).into_dispatch(),
            f32_of(bias).into_dispatch(),
            p.rows,
            p.cols,
        );
        Ok(Tensor::<2>::from_dispatch(out).cast(dtype))
    }

    /// `s · A` (same pattern; differentiable in the values).
    pub fn scale(&self, s: f32) -> Self {
        SparseCsr { pattern: self.pattern.clone(), values: self.values.clone() * s }
    }

    /// `max(A, 0)` entry-wise on the pattern (stored entries stay stored; differentiable).
    pub fn relu(&self) -> Self {
        SparseCsr { pattern: self.pattern.clone(), values: burn::tensor::activation::relu(self.values.clone()) }
    }

    /// `A + B` for `B` with the same pattern (entry-wise on the stored entries).
    pub fn add(&self, other: &SparseCsr) -> Result<Self> {
        self.check_same_pattern("add", other)?;
        Ok(SparseCsr { pattern: self.pattern.clone(), values: self.values.clone() + other.values.clone() })
    }

    /// `A ∘ B` for `B` with the same pattern (entry-wise on the stored entries).
    pub fn mul(&self, other: &SparseCsr) -> Result<Self> {
        self.check_same_pattern("mul", other)?;
        Ok(SparseCsr { pattern: self.pattern.clone(), values: self.values.clone() * other.values.clone() })
    }

    /// The sum of every row (`[rows]`), by the SpMM kernel against a column of ones
    /// (differentiable in the values).
    pub fn row_sum(&self) -> Result<Tensor<1>> {
        let ones = Tensor::<2>::ones([self.cols(), 1], (&self.pattern.device, self.values.dtype()));
        Ok(self.spmm(ones)?.reshape([self.rows()]))
    }

    /// The Euclidean norm of every row (`[rows]`).
    pub fn row_norm(&self) -> Result<Tensor<1>> {
        let squares = SparseCsr { pattern: self.pattern.clone(), values: self.values.clone().powi_scalar(2) };
        Ok(squares.row_sum()?.sqrt())
    }

    /// Row-wise softmax over the stored entries (implicit zeros are not entries): entry
    /// `(i, j)` becomes `exp(a_ij − max_j a_ij) / Σ_j exp(a_ij − max_j a_ij)`, on the same
    /// pattern — the normalisation of sparse attention. By the sparsec `softmax` kernel
    /// (`kernels/softmax.sptir`); differentiable in the values.
    pub fn softmax(&self) -> Result<Self> {
        Ok(SparseCsr { pattern: self.pattern.clone(), values: self.row_op(RowOp::Softmax)? })
    }

    /// The largest stored entry of every row (`[rows]`; implicit zeros are not entries, and a
    /// row without entries gives `f32::MIN`). By the sparsec `row_max` kernel
    /// (`kernels/row_max.sptir`); differentiable in the values (a row's gradient goes to its
    /// entries equal to the maximum, shared evenly among ties).
    pub fn row_max(&self) -> Result<Tensor<1>> {
        self.row_op(RowOp::Max)
    }

    /// `op` of this matrix, computed in `f32` and returned in the values' type.
    fn row_op(&self, op: RowOp) -> Result<Tensor<1>> {
        self.prepare(&[op.kernel(), Kernel::Csrmm, Kernel::Sddmm])?;
        let (p, t) = (&self.pattern, self.pattern.transposed());
        let out = <Dispatch as SparseBackend>::csr_row_op(
            op,
            p.indptr.clone().into_dispatch(),
            p.indices.clone().into_dispatch(),
            t.indptr.clone().into_dispatch(),
            t.indices.clone().into_dispatch(),
            t.perm.clone().into_dispatch(),
            f32_of(self.values.clone()).into_dispatch(),
            p.rows,
            p.cols,
        );
        Ok(Tensor::<1>::from_dispatch(out).cast(self.values.dtype()))
    }

    /// Fails unless `other` has this matrix's pattern (shared, or equal arrays) and device.
    fn check_same_pattern(&self, op: &'static str, other: &SparseCsr) -> Result<()> {
        if self.values.dtype() != other.values.dtype() {
            return Err(SparseError::DType {
                op,
                found: format!("values of {:?} and {:?}", self.values.dtype(), other.values.dtype()),
            });
        }
        let (a, b) = (&self.pattern, &other.pattern);
        let same = Arc::ptr_eq(a, b)
            || (a.rows == b.rows
                && a.cols == b.cols
                && a.host_indptr == b.host_indptr
                && a.host_indices == b.host_indices);
        if !same {
            return Err(SparseError::Shape { op, detail: "the matrices have different patterns".into() });
        }
        check_device(op, &a.device, &b.device)
    }

    /// SDDMM on this matrix's pattern: a matrix with the same pattern whose entry `(i, j)` is
    /// `Σ_k lhs[i, k] · rhs[j, k]` (`lhs` of `[rows, f]`, `rhs` of `[cols, f]`); this matrix's
    /// own values are not read. By the sparsec `sddmm` kernel.
    pub fn sddmm(&self, lhs: Tensor<2>, rhs: Tensor<2>) -> Result<Self> {
        self.check_dense("sddmm", &lhs, self.rows())?;
        self.check_dense("sddmm", &rhs, self.cols())?;
        let dtype = lhs.dtype();
        if lhs.dims()[1] != rhs.dims()[1] {
            return Err(SparseError::Shape {
                op: "sddmm",
                detail: format!("lhs has {} columns, rhs {}", lhs.dims()[1], rhs.dims()[1]),
            });
        }
        self.prepare(&[Kernel::Sddmm, Kernel::Csrmm])?;
        let (p, t) = (&self.pattern, self.pattern.transposed());
        let out = <Dispatch as SparseBackend>::csr_sddmm(
            p.indptr.clone().into_dispatch(),
            p.indices.clone().into_dispatch(),
            t.indptr.clone().into_dispatch(),
            t.indices.clone().into_dispatch(),
            t.perm.clone().into_dispatch(),
            f32_of(lhs).into_dispatch(),
            f32_of(rhs).into_dispatch(),
            p.rows,
            p.cols,
        );
        Ok(SparseCsr { pattern: self.pattern.clone(), values: Tensor::<1>::from_dispatch(out).cast(dtype) })
    }

    /// Builds the kernels an operation and its backward pass use, so failures are errors.
    fn prepare(&self, kernels: &[Kernel]) -> Result<()> {
        prepare(kernels, &self.pattern.device)
    }

    /// A dense f32 operand of `[rows, _]` on this matrix's device.
    fn check_dense(&self, op: &'static str, t: &Tensor<2>, rows: usize) -> Result<()> {
        check_float(op, t)?;
        check_device(op, &self.pattern.device, &t.device())?;
        let [r, f] = t.dims();
        if r != rows {
            return Err(SparseError::Shape { op, detail: format!("the dense operand has {r} rows, expected {rows}") });
        }
        fit("feature size", f)?;
        fit("dense elements", r.saturating_mul(f))?;
        Ok(())
    }
}

/// Fails unless `t` holds a float type the kernels take: `f32`, or `f16`/`bf16`, which are
/// computed in `f32` (cast at the kernel's boundary) and returned in their own type.
pub(crate) fn check_float<const D: usize>(op: &'static str, t: &Tensor<D>) -> Result<()> {
    match t.dtype() {
        DType::F32 | DType::F16 | DType::BF16 => Ok(()),
        other => Err(SparseError::DType { op, found: format!("{other:?}") }),
    }
}

/// Reads a float tensor back to the host as `f32`s.
pub(crate) fn read_floats<const D: usize>(t: Tensor<D>) -> Result<Vec<f32>> {
    let data = t.try_into_data().map_err(|e| SparseError::ReadBack(format!("{e:?}")))?;
    data.convert::<f32>().try_to_vec::<f32>().map_err(|e| SparseError::ReadBack(format!("{e:?}")))
}

/// `t` in `f32` for a kernel (a no-op for `f32`; differentiable).
pub(crate) fn f32_of<const D: usize>(t: Tensor<D>) -> Tensor<D> {
    t.cast(FloatDType::F32)
}

/// Fails unless both devices are the same (autodiff-ness included).
pub(crate) fn check_device(op: &'static str, a: &Device, b: &Device) -> Result<()> {
    if a == b {
        Ok(())
    } else {
        Err(SparseError::Device { op, detail: format!("{a:?} and {b:?}") })
    }
}

/// SpMM: `a · rhs` (see [`SparseCsr::spmm`]).
pub fn spmm(a: &SparseCsr, rhs: Tensor<2>) -> Result<Tensor<2>> {
    a.spmm(rhs)
}

/// SDDMM on `pattern`'s structure (see [`SparseCsr::sddmm`]).
pub fn sddmm(pattern: &SparseCsr, lhs: Tensor<2>, rhs: Tensor<2>) -> Result<SparseCsr> {
    pattern.sddmm(lhs, rhs)
}

/// `relu(a · rhs + bias)` in one program (see [`SparseCsr::spmm_bias_relu`]).
pub fn spmm_bias_relu(a: &SparseCsr, rhs: Tensor<2>, bias: Tensor<1>) -> Result<Tensor<2>> {
    a.spmm_bias_relu(rhs, bias)
}
