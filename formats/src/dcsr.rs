//! DCSR (doubly compressed sparse row) container.

use crate::scalar::{Index, Value};
use crate::validate::{check_dcsr, Report, ValidateError, ValidateOptions};

/// Doubly compressed sparse row matrix: the ascending list of non-empty rows
/// (`row_ids`) plus a CSR over just those rows (`indptr` has `row_ids.len() + 1`
/// entries). Rows in the list are non-empty; column indices sorted and distinct.
/// Validation locations of the inner CSR use `row` for the position in `row_ids`.
#[derive(Clone, Debug, PartialEq)]
pub struct Dcsr<I, V> {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) row_ids: Vec<I>,
    pub(crate) indptr: Vec<I>,
    pub(crate) indices: Vec<I>,
    pub(crate) values: Vec<V>,
}

impl<I: Index, V: Value> Dcsr<I, V> {
    /// Builds a DCSR matrix; fails with the first validation error.
    pub fn try_new(
        rows: usize,
        cols: usize,
        row_ids: Vec<I>,
        indptr: Vec<I>,
        indices: Vec<I>,
        values: Vec<V>,
    ) -> Result<Self, ValidateError> {
        check_dcsr(
            rows,
            cols,
            &row_ids,
            &indptr,
            &indices,
            &values,
            &ValidateOptions::STRICT,
        )
        .into_result()?;
        Ok(Dcsr {
            rows,
            cols,
            row_ids,
            indptr,
            indices,
            values,
        })
    }

    /// Validation report.
    pub fn validate(&self, opts: &ValidateOptions) -> Report {
        check_dcsr(
            self.rows,
            self.cols,
            &self.row_ids,
            &self.indptr,
            &self.indices,
            &self.values,
            opts,
        )
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }
    /// The non-empty rows, ascending.
    pub fn row_ids(&self) -> &[I] {
        &self.row_ids
    }
    /// Pointers into `indices` per listed row (`row_ids.len() + 1` entries).
    pub fn indptr(&self) -> &[I] {
        &self.indptr
    }
    /// Column index of each stored entry.
    pub fn indices(&self) -> &[I] {
        &self.indices
    }
    /// Value of each stored entry.
    pub fn values(&self) -> &[V] {
        &self.values
    }
    /// `(rows, cols, row_ids, indptr, indices, values)`.
    #[allow(clippy::type_complexity)]
    pub fn into_parts(self) -> (usize, usize, Vec<I>, Vec<I>, Vec<I>, Vec<V>) {
        (
            self.rows,
            self.cols,
            self.row_ids,
            self.indptr,
            self.indices,
            self.values,
        )
    }
}
