//! COO (coordinate list) container.

use crate::scalar::{Index, Value};
use crate::validate::{check_coo, Report, ValidateError};

/// Coordinate-list matrix: parallel `row`, `col`, `values` arrays in any order, possibly
/// with duplicates (conversions to compressed formats sum them).
///
/// Invariants: equal lengths, every coordinate in range, `rows`, `cols` and `nnz` fit `I`.
#[derive(Clone, Debug, PartialEq)]
pub struct Coo<I, V> {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) row: Vec<I>,
    pub(crate) col: Vec<I>,
    pub(crate) values: Vec<V>,
}

impl<I: Index, V: Value> Coo<I, V> {
    /// Builds a COO matrix; fails with the first validation error.
    pub fn try_new(
        rows: usize,
        cols: usize,
        row: Vec<I>,
        col: Vec<I>,
        values: Vec<V>,
    ) -> Result<Self, ValidateError> {
        check_coo(rows, cols, &row, &col, &values).into_result()?;
        Ok(Coo {
            rows,
            cols,
            row,
            col,
            values,
        })
    }

    /// An empty `rows × cols` matrix.
    pub fn zeros(rows: usize, cols: usize) -> Result<Self, ValidateError> {
        Self::try_new(rows, cols, Vec::new(), Vec::new(), Vec::new())
    }

    /// Appends entry `(i, j) = v`; fails if out of range or if nnz no longer fits `I`.
    pub fn push(&mut self, i: usize, j: usize, v: V) -> Result<(), ValidateError> {
        let pos = self.row.len();
        if i >= self.rows {
            return Err(ValidateError::RowOutOfRange {
                pos,
                row: i as i64,
                bound: self.rows,
            });
        }
        if j >= self.cols {
            return Err(ValidateError::OutOfRange {
                row: i,
                pos,
                index: j as i64,
                bound: self.cols,
            });
        }
        if pos + 1 > I::MAX_USIZE {
            return Err(ValidateError::ShapeTooLarge {
                dim: "nnz",
                value: pos + 1,
                index: I::DTYPE.name(),
            });
        }
        self.row.push(I::from_ix(i));
        self.col.push(I::from_ix(j));
        self.values.push(v);
        Ok(())
    }

    /// Validation report (explicit zeros and NaNs as warnings).
    pub fn validate(&self) -> Report {
        check_coo(self.rows, self.cols, &self.row, &self.col, &self.values)
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Number of stored entries (duplicates counted).
    pub fn nnz(&self) -> usize {
        self.row.len()
    }
    /// Row index of each entry.
    pub fn row_indices(&self) -> &[I] {
        &self.row
    }
    /// Column index of each entry.
    pub fn col_indices(&self) -> &[I] {
        &self.col
    }
    /// Value of each entry.
    pub fn values(&self) -> &[V] {
        &self.values
    }
    /// `(rows, cols, row, col, values)`.
    pub fn into_parts(self) -> (usize, usize, Vec<I>, Vec<I>, Vec<V>) {
        (self.rows, self.cols, self.row, self.col, self.values)
    }
}
