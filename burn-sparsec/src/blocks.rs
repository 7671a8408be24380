//! Block structure of a sparse weight: whether its entries fill whole `b × b` blocks (then its
//! forward pass runs the BSR kernel), the map from its CSR entries to BSR storage, and block
//! magnitude pruning.

use crate::bsr::SparseBsr;
use crate::csr::{fit, int_tensor, Pattern};
use crate::error::Result;
use burn::tensor::{Int, Tensor};
use std::collections::HashMap;

/// How a weight's forward pass multiplies: by the CSR kernel, or by the BSR kernel with
/// `block × block` blocks when its entries fill whole blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightFormat {
    /// Compressed sparse rows (`csrmm`).
    Csr,
    /// Blocks of `block × block` (`bsrmm`).
    Bsr {
        /// The block size.
        block: usize,
    },
}

impl WeightFormat {
    /// `"CSR"` or `"BSR b×b"`.
    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::Csr => "CSR",
            WeightFormat::Bsr { block: 2 } => "BSR 2×2",
            WeightFormat::Bsr { block: 4 } => "BSR 4×4",
            WeightFormat::Bsr { block: 8 } => "BSR 8×8",
            WeightFormat::Bsr { .. } => "BSR",
        }
    }
}

/// Block sizes a weight is tried with, largest first.
pub const BSR_BLOCKS: [usize; 3] = [8, 4, 2];

/// The least share of its blocks' cells a weight's entries must fill for the BSR kernel: at
/// 0.9 it multiplies at most 11% stored zeros and reads one column index per block instead
/// of one per entry.
pub const BSR_FILL: f64 = 0.9;

/// The format of a pattern: BSR with the largest block of [`BSR_BLOCKS`] whose blocks the
/// entries fill to at least [`BSR_FILL`] (cells outside the matrix not counted), else CSR.
pub(crate) fn choose(p: &Pattern) -> WeightFormat {
    if p.nnz() == 0 {
        return WeightFormat::Csr;
    }
    for b in BSR_BLOCKS {
        let cells: usize =
            blocks_of(p, b).keys().map(|&(br, bc)| b.min(p.rows - br * b) * b.min(p.cols - bc * b)).sum();
        if p.nnz() as f64 >= BSR_FILL * cells as f64 {
            return WeightFormat::Bsr { block: b };
        }
    }
    WeightFormat::Csr
}

/// The distinct `(block row, block column)` of a pattern's entries, each numbered in BSR
/// order (by block row, then block column).
fn blocks_of(p: &Pattern, b: usize) -> HashMap<(usize, usize), usize> {
    let mut blocks: Vec<(usize, usize)> = p.coords().map(|(r, c)| (r / b, c / b)).collect();
    blocks.sort_unstable();
    blocks.dedup();
    blocks.into_iter().enumerate().map(|(k, rc)| (rc, k)).collect()
}

/// A weight's BSR form: the block pattern (zero values) and, for every CSR entry in storage
/// order, its position among the BSR values (block `k`, row-major inside the block).
#[derive(Debug)]
pub(crate) struct BsrPlan {
    pub(crate) matrix: SparseBsr,
    pub(crate) slots: Tensor<1, Int>,
    pub(crate) len: usize,
}

/// The BSR plan of `p` with `b × b` blocks.
pub(crate) fn plan(p: &Pattern, b: usize) -> Result<BsrPlan> {
    let blocks = blocks_of(p, b);
    let mut order: Vec<(usize, usize)> = blocks.keys().copied().collect();
    order.sort_unstable();
    let nb = p.rows.div_ceil(b);
    let mut indptr = vec![0i32; nb + 1];
    let mut indices = Vec::with_capacity(order.len());
    for &(br, bc) in &order {
        indptr[br + 1] += 1;
        indices.push(fit("block column", bc)?);
    }
    for i in 0..nb {
        indptr[i + 1] += indptr[i];
    }
    let mut slots = Vec::with_capacity(p.nnz());
    for (r, c) in p.coords() {
        let k = blocks[&(r / b, c / b)];
        slots.push(fit("block slot", k * b * b + (r % b) * b + c % b)?);
    }
    let len = order.len() * b * b;
    let matrix = SparseBsr::from_parts(p.rows, p.cols, b, indptr, indices, vec![0.0; len], &p.device)?;
    Ok(BsrPlan { matrix, slots: int_tensor(slots, &p.device), len })
}

/// The positions (row-major, `rows × cols`) of the `keep` blocks of `b × b` with the largest
/// sum of squares in `flat` (ties to the earlier block); edge blocks are cut at the border.
pub(crate) fn largest_blocks(flat: &[f32], rows: usize, cols: usize, b: usize, keep: usize) -> Vec<bool> {
    let (nb, mb) = (rows.div_ceil(b), cols.div_ceil(b));
    let mut norms = vec![0f32; nb * mb];
    for r in 0..rows {
        for c in 0..cols {
            norms[(r / b) * mb + c / b] += flat[r * cols + c] * flat[r * cols + c];
        }
    }
    let mut mask = vec![false; rows * cols];
    for k in crate::weight::largest(&norms, keep) {
        let (br, bc) = (k / mb, k % mb);
        for r in br * b..((br + 1) * b).min(rows) {
            for c in bc * b..((bc + 1) * b).min(cols) {
                mask[r * cols + c] = true;
            }
        }
    }
    mask
}
