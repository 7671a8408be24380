//! ELL (ELLPACK) container, scalar or blocked.

use crate::scalar::{Index, Value};
use crate::validate::{blocks, check_ell, Report, ValidateError, ValidateOptions};

/// ELLPACK matrix: exactly `k` slots per (block) row.
///
/// With `block == 1` each slot is one entry; with `block = b > 1` each slot is a `b × b`
/// block (blocked ELL, values row-major inside the block) and rows/columns below are
/// block rows/columns (`ceil(rows / b)`, `ceil(cols / b)`).
///
/// Row `r` uses slots `r*k .. r*k + k`; the first `lengths[r]` are valid, sorted and
/// distinct. **Padding convention:** a padding slot repeats the column index of the row's
/// last valid slot (column 0 when the row is empty) and holds zero values, so reading
/// padding is harmless for sums and products; use [`Ell::lengths`] or [`Ell::is_padding`]
/// to tell padding apart.
#[derive(Clone, Debug, PartialEq)]
pub struct Ell<I, V> {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) block: usize,
    pub(crate) k: usize,
    pub(crate) indices: Vec<I>,
    pub(crate) values: Vec<V>,
    pub(crate) lengths: Vec<I>,
}

impl<I: Index, V: Value> Ell<I, V> {
    /// Builds a (possibly blocked) ELL matrix; fails with the first validation error.
    /// The padding convention is not checked, only that padding indices are in range.
    pub fn try_new(
        rows: usize,
        cols: usize,
        block: usize,
        k: usize,
        indices: Vec<I>,
        values: Vec<V>,
        lengths: Vec<I>,
    ) -> Result<Self, ValidateError> {
        check_ell(
            rows,
            cols,
            block,
            k,
            &indices,
            &values,
            &lengths,
            &ValidateOptions::STRICT,
        )
        .into_result()?;
        Ok(Ell {
            rows,
            cols,
            block,
            k,
            indices,
            values,
            lengths,
        })
    }

    /// Validation report.
    pub fn validate(&self, opts: &ValidateOptions) -> Report {
        check_ell(
            self.rows,
            self.cols,
            self.block,
            self.k,
            &self.indices,
            &self.values,
            &self.lengths,
            opts,
        )
    }

    /// `(rows, cols)` of the matrix.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
    /// Block size (1 for scalar ELL).
    pub fn block_size(&self) -> usize {
        self.block
    }
    /// Slots per (block) row.
    pub fn k(&self) -> usize {
        self.k
    }
    /// Number of (block) rows, i.e. slot rows.
    pub fn slot_rows(&self) -> usize {
        blocks(self.rows, self.block)
    }
    /// Number of (block) columns, the bound of `indices`.
    pub fn slot_cols(&self) -> usize {
        blocks(self.cols, self.block)
    }
    /// Column (or block column) of each slot, `k` per row.
    pub fn indices(&self) -> &[I] {
        &self.indices
    }
    /// Values, one per slot (`block²` per slot when blocked).
    pub fn values(&self) -> &[V] {
        &self.values
    }
    /// Number of valid slots in each row.
    pub fn lengths(&self) -> &[I] {
        &self.lengths
    }
    /// Number of valid (non-padding) slots.
    pub fn nnz_slots(&self) -> usize {
        self.lengths.iter().map(|l| l.ix()).sum()
    }
    /// Whether slot `pos` (absolute) is padding; `None` if out of range.
    pub fn is_padding(&self, pos: usize) -> Option<bool> {
        if self.k == 0 {
            return None;
        }
        let row = pos / self.k;
        Some(pos % self.k >= self.lengths.get(row)?.ix())
    }
    /// `(rows, cols, block, k, indices, values, lengths)`.
    #[allow(clippy::type_complexity)]
    pub fn into_parts(self) -> (usize, usize, usize, usize, Vec<I>, Vec<V>, Vec<I>) {
        (
            self.rows,
            self.cols,
            self.block,
            self.k,
            self.indices,
            self.values,
            self.lengths,
        )
    }
}
