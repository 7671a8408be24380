//! [`SparseBsr`]: a block-sparse (BSR) matrix on a Burn device.

use crate::backend::SparseBackend;
use crate::csr::{check_device, check_float, check_supported, f32_of, fit, int_tensor, prepare, transpose_host};
use crate::error::{Result, SparseError};
use crate::kernels::Kernel;
use burn::backend::Dispatch;
use burn::tensor::{DType, Device, IndexingUpdateOp, Int, Tensor, TensorData};
use sparsec_formats::validate::{check_bsr, ValidateOptions};
use sparsec_formats::{Bsr, Index, Value};
use std::sync::Arc;

/// The block structure on a device.
#[derive(Debug)]
struct BlockPattern {
    rows: usize,
    cols: usize,
    blk: usize,
    nb: usize,
    mb: usize,
    host_indptr: Vec<i32>,
    host_indices: Vec<i32>,
    indptr: Tensor<1, Int>,
    indices: Tensor<1, Int>,
    block_rows: Tensor<1, Int>,
    t_indptr: Tensor<1, Int>,
    t_indices: Tensor<1, Int>,
    t_perm: Tensor<1, Int>,
    /// Position in the padded dense matrix of every stored element.
    flat: Tensor<1, Int>,
    device: Device,
}

/// A block-sparse matrix with square `blk × blk` blocks on a Burn device: a CSR over blocks
/// (`indptr`, `indices` as `i32` Int tensors) and `blk²` row-major `f32` entries per stored
/// block. Partial blocks at the right and bottom edges are zero-padded, as in
/// `sparsec_formats::Bsr`. Validated when built.
#[derive(Clone, Debug)]
pub struct SparseBsr {
    pattern: Arc<BlockPattern>,
    values: Tensor<1>,
}

impl SparseBsr {
    /// A matrix from its BSR arrays (`rows × cols`, blocks of `blk × blk`), validated.
    pub fn from_parts(
        rows: usize,
        cols: usize,
        blk: usize,
        indptr: Vec<i32>,
        indices: Vec<i32>,
        values: Vec<f32>,
        device: &Device,
    ) -> Result<Self> {
        check_bsr(rows, cols, blk, &indptr, &indices, &values, &ValidateOptions::STRICT).into_result()?;
        check_supported(device)?;
        let (nb, mb) = (rows.div_ceil(blk), cols.div_ceil(blk));
        fit("padded rows", nb * blk)?;
        fit("padded cols", mb * blk)?;
        fit("stored elements", values.len())?;
        let mut block_rows = Vec::with_capacity(indices.len());
        let mut flat = Vec::with_capacity(values.len());
        let width = (mb * blk) as i64;
        for r in 0..nb {
            for p in indptr[r] as usize..indptr[r + 1] as usize {
                block_rows.push(r as i32);
                let c = indices[p] as i64;
                for bi in 0..blk as i64 {
                    for bj in 0..blk as i64 {
                        flat.push((r as i64 * blk as i64 + bi) * width + c * blk as i64 + bj);
                    }
                }
            }
        }
        let (tp, ti, perm) = transpose_host(mb, &indptr, &indices);
        let n = flat.len();
        let pattern = BlockPattern {
            rows,
            cols,
            blk,
            nb,
            mb,
            indptr: int_tensor(indptr.clone(), device),
            indices: int_tensor(indices.clone(), device),
            block_rows: int_tensor(block_rows, device),
            t_indptr: int_tensor(tp, device),
            t_indices: int_tensor(ti, device),
            t_perm: int_tensor(perm, device),
            flat: Tensor::from_data(TensorData::new(flat, [n]), device),
            host_indptr: indptr,
            host_indices: indices,
            device: device.clone(),
        };
        let n = values.len();
        let values = Tensor::from_data(TensorData::new(values, [n]), (device, DType::F32));
        Ok(SparseBsr { pattern: Arc::new(pattern), values })
    }

    /// A matrix from a `formats` BSR matrix (any index and value type).
    pub fn from_bsr<I: Index, V: Value>(m: &Bsr<I, V>, device: &Device) -> Result<Self> {
        let conv = |what: &'static str, v: &[I]| -> Result<Vec<i32>> {
            v.iter().map(|x| fit(what, x.to_usize().unwrap_or(usize::MAX))).collect()
        };
        let (rows, cols) = m.shape();
        let indptr = conv("indptr entry", m.indptr())?;
        let indices = conv("block column", m.indices())?;
        let values = m.values().iter().map(|&v| v.to_f64() as f32).collect();
        Self::from_parts(rows, cols, m.block_size(), indptr, indices, values, device)
    }

    /// The `blk × blk` blocks of `dense` holding an entry of magnitude above `threshold`.
    /// Reads `dense` back to the host.
    pub fn from_dense(dense: Tensor<2>, blk: usize, threshold: f32) -> Result<Self> {
        if blk == 0 {
            return Err(SparseError::Shape { op: "from_dense", detail: "block size 0".into() });
        }
        let device = dense.device();
        let [rows, cols] = dense.dims();
        let data = dense.try_into_data().map_err(|e| SparseError::ReadBack(format!("{e:?}")))?;
        let data = data.convert::<f32>();
        let d = data.as_slice::<f32>().map_err(|e| SparseError::ReadBack(format!("{e:?}")))?;
        let (nb, mb) = (rows.div_ceil(blk), cols.div_ceil(blk));
        let at = |r: usize, c: usize| if r < rows && c < cols { d[r * cols + c] } else { 0.0 };
        let (mut indptr, mut indices, mut values) = (vec![0i32], Vec::new(), Vec::new());
        for br in 0..nb {
            for bc in 0..mb {
                let keep = (0..blk).any(|i| (0..blk).any(|j| at(br * blk + i, bc * blk + j).abs() > threshold));
                if keep {
                    indices.push(fit("block column", bc)?);
                    for i in 0..blk {
                        for j in 0..blk {
                            values.push(at(br * blk + i, bc * blk + j));
                        }
                    }
                }
            }
            indptr.push(fit("stored blocks", indices.len())?);
        }
        Self::from_parts(rows, cols, blk, indptr, indices, values, &device)
    }

    /// A matrix with this block pattern and new entries (`[nnzb · blk²]`, f32, same device).
    pub fn with_values(&self, values: Tensor<1>) -> Result<Self> {
        let want = self.pattern.host_indices.len() * self.pattern.blk * self.pattern.blk;
        if values.dims()[0] != want {
            return Err(SparseError::Shape {
                op: "with_values",
                detail: format!("the pattern stores {want} entries, the values have {}", values.dims()[0]),
            });
        }
        check_float("with_values", &values)?;
        check_device("with_values", &self.pattern.device, &values.device())?;
        Ok(SparseBsr { pattern: self.pattern.clone(), values })
    }

    /// `(rows, cols)` of the matrix.
    pub fn shape(&self) -> (usize, usize) {
        (self.pattern.rows, self.pattern.cols)
    }
    /// Block size.
    pub fn block_size(&self) -> usize {
        self.pattern.blk
    }
    /// Number of stored blocks.
    pub fn nnzb(&self) -> usize {
        self.pattern.host_indices.len()
    }
    /// Block row pointers (`ceil(rows / blk) + 1`, i32).
    pub fn indptr(&self) -> Tensor<1, Int> {
        self.pattern.indptr.clone()
    }
    /// Block column of every stored block (i32).
    pub fn indices(&self) -> Tensor<1, Int> {
        self.pattern.indices.clone()
    }
    /// The entries, `blk²` per stored block, row-major.
    pub fn values(&self) -> Tensor<1> {
        self.values.clone()
    }
    /// The device.
    pub fn device(&self) -> Device {
        self.pattern.device.clone()
    }
    /// Block row pointers on the host.
    pub fn host_indptr(&self) -> &[i32] {
        &self.pattern.host_indptr
    }

    /// The dense `[rows, cols]` matrix (differentiable in the values).
    pub fn to_dense(&self) -> Tensor<2> {
        let p = &self.pattern;
        let (pr, pc) = (p.nb * p.blk, p.mb * p.blk);
        let zeros = Tensor::<1>::zeros([pr * pc], (&p.device, DType::F32));
        zeros
            .scatter(0, p.flat.clone(), self.values.clone(), IndexingUpdateOp::Add)
            .reshape([pr, pc])
            .slice([0..p.rows, 0..p.cols])
    }

    /// SpMM `A · rhs` (`rhs` of `[cols, f]`) by the sparsec `bsrmm` kernel; differentiable in
    /// the values and `rhs` on an autodiff device.
    pub fn spmm(&self, rhs: Tensor<2>) -> Result<Tensor<2>> {
        let p = &self.pattern;
        check_float("bsr spmm", &rhs)?;
        check_device("bsr spmm", &p.device, &rhs.device())?;
        let [r, f] = rhs.dims();
        if r != p.cols {
            return Err(SparseError::Shape {
                op: "bsr spmm",
                detail: format!("rhs has {r} rows, expected {}", p.cols),
            });
        }
        fit("dense elements", (p.mb * p.blk).saturating_mul(f).max(p.nb * p.blk * f))?;
        prepare(&[Kernel::Bsrmm], &self.pattern.device)?;
        // Computed in f32; the result has the dense operand's type.
        let dtype = rhs.dtype();
        let rhs = f32_of(rhs);
        // Zero rows pad the operand to whole blocks; the padded output rows are cut off.
        let pad = p.mb * p.blk - p.cols;
        let rhs = if pad > 0 {
            let zeros = Tensor::<2>::zeros([pad, f], (&p.device, DType::F32));
            Tensor::cat(vec![rhs, zeros], 0)
        } else {
            rhs
        };
        let out = <Dispatch as SparseBackend>::bsr_spmm(
            p.indptr.clone().into_dispatch(),
            p.indices.clone().into_dispatch(),
            p.block_rows.clone().into_dispatch(),
            p.t_indptr.clone().into_dispatch(),
            p.t_indices.clone().into_dispatch(),
            p.t_perm.clone().into_dispatch(),
            f32_of(self.values.clone()).into_dispatch(),
            rhs.into_dispatch(),
            p.nb,
            p.mb,
            p.blk,
        );
        let out = Tensor::<2>::from_dispatch(out).cast(dtype);
        Ok(if p.nb * p.blk > p.rows { out.slice([0..p.rows, 0..f]) } else { out })
    }
}
