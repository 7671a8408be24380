//! BSR (block sparse row) container.

use crate::scalar::{Index, Value};
use crate::validate::{blocks, check_bsr, Report, ValidateError, ValidateOptions};

/// Block sparse row matrix with square `block × block` blocks.
///
/// The matrix is `rows × cols`; blocks tile it from the top-left, so there are
/// `ceil(rows / block)` block rows and `ceil(cols / block)` block columns, and partial
/// blocks at the edges are zero-padded. `indptr`/`indices` form a CSR over blocks
/// (sorted, distinct block columns) and `values` holds `block²` values per stored block,
/// row-major inside the block.
#[derive(Clone, Debug, PartialEq)]
pub struct Bsr<I, V> {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) block: usize,
    pub(crate) indptr: Vec<I>,
    pub(crate) indices: Vec<I>,
    pub(crate) values: Vec<V>,
}

impl<I: Index, V: Value> Bsr<I, V> {
    /// Builds a BSR matrix with sorted, distinct block columns; fails with the first
    /// validation error.
    pub fn try_new(
        rows: usize,
        cols: usize,
        block: usize,
        indptr: Vec<I>,
        indices: Vec<I>,
        values: Vec<V>,
    ) -> Result<Self, ValidateError> {
        check_bsr(
            rows,
            cols,
            block,
            &indptr,
            &indices,
            &values,
            &ValidateOptions::STRICT,
        )
        .into_result()?;
        Ok(Bsr {
            rows,
            cols,
            block,
            indptr,
            indices,
            values,
        })
    }

    /// Validation report (NaNs inside blocks as warnings).
    pub fn validate(&self, opts: &ValidateOptions) -> Report {
        check_bsr(
            self.rows,
            self.cols,
            self.block,
            &self.indptr,
            &self.indices,
            &self.values,
            opts,
        )
    }

    /// `(rows, cols)` of the matrix (not of the block grid).
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
    /// Block size `b` (blocks are `b × b`).
    pub fn block_size(&self) -> usize {
        self.block
    }
    /// Number of block rows, `ceil(rows / b)`.
    pub fn block_rows(&self) -> usize {
        blocks(self.rows, self.block)
    }
    /// Number of block columns, `ceil(cols / b)`.
    pub fn block_cols(&self) -> usize {
        blocks(self.cols, self.block)
    }
    /// Number of stored blocks.
    pub fn nnz_blocks(&self) -> usize {
        self.indices.len()
    }
    /// Block-row pointers (`block_rows + 1` entries).
    pub fn indptr(&self) -> &[I] {
        &self.indptr
    }
    /// Block column of each stored block.
    pub fn indices(&self) -> &[I] {
        &self.indices
    }
    /// Block values, `b²` per block, row-major inside each block.
    pub fn values(&self) -> &[V] {
        &self.values
    }
    /// `(rows, cols, block, indptr, indices, values)`.
    pub fn into_parts(self) -> (usize, usize, usize, Vec<I>, Vec<I>, Vec<V>) {
        (
            self.rows,
            self.cols,
            self.block,
            self.indptr,
            self.indices,
            self.values,
        )
    }
}
