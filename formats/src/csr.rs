//! CSR and CSC containers.

use crate::scalar::{Index, Value};
use crate::validate::{check_compressed, check_fits, Report, ValidateError, ValidateOptions};

/// Compressed sparse row matrix.
///
/// Invariants (checked by every constructor): `indptr` has `rows + 1` entries, starts at
/// 0, never decreases and ends at `nnz`; every column index is in `0..cols`; `rows` and
/// `cols` fit `I`. Sortedness and duplicate-freeness depend on how it was built
/// ([`Csr::try_new`] requires both; [`Csr::try_new_with`] may relax them).
#[derive(Clone, Debug, PartialEq)]
pub struct Csr<I, V> {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) indptr: Vec<I>,
    pub(crate) indices: Vec<I>,
    pub(crate) values: Vec<V>,
}

impl<I: Index, V: Value> Csr<I, V> {
    /// Builds a CSR matrix with sorted, duplicate-free rows; fails with the first
    /// validation error.
    pub fn try_new(
        rows: usize,
        cols: usize,
        indptr: Vec<I>,
        indices: Vec<I>,
        values: Vec<V>,
    ) -> Result<Self, ValidateError> {
        Self::try_new_with(
            rows,
            cols,
            indptr,
            indices,
            values,
            &ValidateOptions::STRICT,
        )
    }

    /// Builds a CSR matrix under the given options (e.g. [`ValidateOptions::LENIENT`] to
    /// accept unsorted rows or duplicates, to be fixed by [`Csr::sort_indices`] or
    /// [`Csr::sum_duplicates`]).
    pub fn try_new_with(
        rows: usize,
        cols: usize,
        indptr: Vec<I>,
        indices: Vec<I>,
        values: Vec<V>,
        opts: &ValidateOptions,
    ) -> Result<Self, ValidateError> {
        check_compressed(rows, cols, &indptr, &indices, &values, opts).into_result()?;
        Ok(Csr {
            rows,
            cols,
            indptr,
            indices,
            values,
        })
    }

    /// An all-zero `rows × cols` matrix.
    pub fn zeros(rows: usize, cols: usize) -> Result<Self, ValidateError> {
        let mut r = Report::default();
        check_fits::<I>("rows", rows, &mut r);
        check_fits::<I>("cols", cols, &mut r);
        r.into_result()?;
        Ok(Csr {
            rows,
            cols,
            indptr: vec![I::ZERO; rows + 1],
            indices: Vec::new(),
            values: Vec::new(),
        })
    }

    /// Full validation report (errors are impossible for a constructed matrix except
    /// unsortedness/duplicates under `opts`; warnings list explicit zeros and NaNs).
    pub fn validate(&self, opts: &ValidateOptions) -> Report {
        check_compressed(
            self.rows,
            self.cols,
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
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }
    /// Row pointers (`rows + 1` entries).
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
    /// Mutable values (the structure cannot change through this).
    pub fn values_mut(&mut self) -> &mut [V] {
        &mut self.values
    }
    /// `(rows, cols, indptr, indices, values)`.
    pub fn into_parts(self) -> (usize, usize, Vec<I>, Vec<I>, Vec<V>) {
        (self.rows, self.cols, self.indptr, self.indices, self.values)
    }

    /// Column indices and values of row `i`, `None` if out of range.
    pub fn row(&self, i: usize) -> Option<(&[I], &[V])> {
        let (s, e) = (
            self.indptr.get(i)?.ix(),
            self.indptr.get(i.checked_add(1)?)?.ix(),
        );
        Some((&self.indices[s..e], &self.values[s..e]))
    }

    /// Number of entries stored in each row.
    pub fn row_lengths(&self) -> Vec<usize> {
        self.indptr
            .windows(2)
            .map(|w| w[1].ix() - w[0].ix())
            .collect()
    }

    /// The largest number of entries stored in one row (0 for an empty matrix).
    pub fn max_row_length(&self) -> usize {
        self.indptr
            .windows(2)
            .map(|w| w[1].ix() - w[0].ix())
            .max()
            .unwrap_or(0)
    }

    /// Sum of the stored values at `(i, j)`, `None` if nothing is stored there.
    pub fn get(&self, i: usize, j: usize) -> Option<V> {
        let (cols, vals) = self.row(i)?;
        let mut acc: Option<V> = None;
        for (c, v) in cols.iter().zip(vals) {
            if c.ix() == j {
                acc = Some(acc.map_or(*v, |a| a + *v));
            }
        }
        acc
    }

    /// Whether every row's indices are strictly ascending (sorted, no duplicates).
    pub fn has_canonical_format(&self) -> bool {
        self.indptr.windows(2).all(|w| {
            self.indices[w[0].ix()..w[1].ix()]
                .windows(2)
                .all(|p| p[0] < p[1])
        })
    }

    /// Whether every row's indices are non-decreasing.
    pub fn has_sorted_indices(&self) -> bool {
        self.indptr.windows(2).all(|w| {
            self.indices[w[0].ix()..w[1].ix()]
                .windows(2)
                .all(|p| p[0] <= p[1])
        })
    }

    /// The transpose (a `cols × rows` CSR with sorted rows; duplicates kept). O(nnz +
    /// rows + cols).
    pub fn transpose(&self) -> Csr<I, V> {
        let nnz = self.nnz();
        let mut count = vec![0usize; self.cols + 1];
        for c in &self.indices {
            count[c.ix() + 1] += 1;
        }
        for j in 0..self.cols {
            count[j + 1] += count[j];
        }
        let indptr: Vec<I> = count.iter().map(|&x| I::from_ix(x)).collect();
        let mut next = count;
        let mut indices = vec![I::ZERO; nnz];
        let mut values = vec![V::zero(); nnz];
        for i in 0..self.rows {
            for p in self.indptr[i].ix()..self.indptr[i + 1].ix() {
                let c = self.indices[p].ix();
                let q = next[c];
                next[c] += 1;
                indices[q] = I::from_ix(i);
                values[q] = self.values[p];
            }
        }
        Csr {
            rows: self.cols,
            cols: self.rows,
            indptr,
            indices,
            values,
        }
    }

    /// Sorts each row's indices (stable: duplicates keep their order). O(nnz + rows + cols).
    pub fn sort_indices(&mut self) {
        if !self.has_sorted_indices() {
            *self = self.transpose().transpose();
        }
    }

    /// Sorts indices and merges duplicate entries of a row by summing their values.
    pub fn sum_duplicates(&mut self) {
        self.sort_indices();
        if self.has_canonical_format() {
            return;
        }
        let mut w = 0usize;
        let mut start = 0usize;
        for i in 0..self.rows {
            let end = self.indptr[i + 1].ix();
            let row_start = w;
            for p in start..end {
                if w > row_start && self.indices[w - 1] == self.indices[p] {
                    self.values[w - 1] = self.values[w - 1] + self.values[p];
                } else {
                    self.indices[w] = self.indices[p];
                    self.values[w] = self.values[p];
                    w += 1;
                }
            }
            start = end;
            self.indptr[i + 1] = I::from_ix(w);
        }
        self.indices.truncate(w);
        self.values.truncate(w);
    }

    /// Removes stored entries whose value is zero.
    pub fn eliminate_zeros(&mut self) {
        let mut w = 0usize;
        let mut start = 0usize;
        for i in 0..self.rows {
            let end = self.indptr[i + 1].ix();
            for p in start..end {
                if !self.values[p].is_zero() {
                    self.indices[w] = self.indices[p];
                    self.values[w] = self.values[p];
                    w += 1;
                }
            }
            start = end;
            self.indptr[i + 1] = I::from_ix(w);
        }
        self.indices.truncate(w);
        self.values.truncate(w);
    }

    /// The same matrix with values converted by `f`.
    pub fn map_values<W: Value>(&self, mut f: impl FnMut(V) -> W) -> Csr<I, W> {
        Csr {
            rows: self.rows,
            cols: self.cols,
            indptr: self.indptr.clone(),
            indices: self.indices.clone(),
            values: self.values.iter().map(|v| f(*v)).collect(),
        }
    }

    /// The same matrix with values rounded to another value type.
    pub fn cast_values<W: Value>(&self) -> Csr<I, W> {
        self.map_values(|v| W::from_f64(v.to_f64()))
    }
}

/// Compressed sparse column matrix.
///
/// Stored as the CSR of the transpose: `indptr` has `cols + 1` entries and `indices` holds
/// row indices. Same invariants as [`Csr`] with rows and columns exchanged.
#[derive(Clone, Debug, PartialEq)]
pub struct Csc<I, V> {
    /// CSR of the transpose (`cols × rows`).
    pub(crate) t: Csr<I, V>,
}

impl<I: Index, V: Value> Csc<I, V> {
    /// Builds a CSC matrix with sorted, duplicate-free columns. Validation locations use
    /// `row` for the column (outer index).
    pub fn try_new(
        rows: usize,
        cols: usize,
        indptr: Vec<I>,
        indices: Vec<I>,
        values: Vec<V>,
    ) -> Result<Self, ValidateError> {
        Ok(Csc {
            t: Csr::try_new(cols, rows, indptr, indices, values)?,
        })
    }

    /// Builds a CSC matrix under the given options.
    pub fn try_new_with(
        rows: usize,
        cols: usize,
        indptr: Vec<I>,
        indices: Vec<I>,
        values: Vec<V>,
        opts: &ValidateOptions,
    ) -> Result<Self, ValidateError> {
        Ok(Csc {
            t: Csr::try_new_with(cols, rows, indptr, indices, values, opts)?,
        })
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.t.cols, self.t.rows)
    }
    /// Number of rows.
    #[allow(clippy::misnamed_getters)] // stored transposed
    pub fn rows(&self) -> usize {
        self.t.cols
    }
    /// Number of columns.
    #[allow(clippy::misnamed_getters)] // stored transposed
    pub fn cols(&self) -> usize {
        self.t.rows
    }
    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.t.nnz()
    }
    /// Column pointers (`cols + 1` entries).
    pub fn indptr(&self) -> &[I] {
        &self.t.indptr
    }
    /// Row index of each stored entry.
    pub fn indices(&self) -> &[I] {
        &self.t.indices
    }
    /// Value of each stored entry.
    pub fn values(&self) -> &[V] {
        &self.t.values
    }
    /// Validation report (locations use `row` for the column).
    pub fn validate(&self, opts: &ValidateOptions) -> Report {
        self.t.validate(opts)
    }
    /// Sorts each column's row indices.
    pub fn sort_indices(&mut self) {
        self.t.sort_indices()
    }
    /// Sorts and sums duplicates within each column.
    pub fn sum_duplicates(&mut self) {
        self.t.sum_duplicates()
    }
    /// `(rows, cols, indptr, indices, values)`.
    pub fn into_parts(self) -> (usize, usize, Vec<I>, Vec<I>, Vec<V>) {
        let (c, r, p, i, v) = self.t.into_parts();
        (r, c, p, i, v)
    }
}
