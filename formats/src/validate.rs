//! Validation of raw sparse arrays.
//!
//! Checks return a [`Report`] listing hard errors ([`ValidateError`], the data must be
//! rejected) and warnings ([`ValidateWarning`], the data is usable but suspicious). Every
//! entry-level finding carries its location: `row` is the outer index of the compressed
//! format (row for CSR/DCSR, column for CSC, block row for BSR) and `pos` the absolute
//! position in the `indices`/`values` arrays. Container constructors (`try_new`) run these
//! checks and fail with the first error.

use crate::scalar::{Index, Value};
use thiserror::Error;

/// What the compressed formats tolerate beyond the structural rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValidateOptions {
    /// Reject rows whose indices are not ascending.
    pub require_sorted: bool,
    /// Accept an index stored twice in the same row.
    pub allow_duplicates: bool,
}

impl ValidateOptions {
    /// Sorted indices, no duplicates (what `try_new` requires).
    pub const STRICT: ValidateOptions = ValidateOptions {
        require_sorted: true,
        allow_duplicates: false,
    };
    /// Unsorted rows and duplicates allowed; only structure and ranges are checked.
    pub const LENIENT: ValidateOptions = ValidateOptions {
        require_sorted: false,
        allow_duplicates: true,
    };
}

impl Default for ValidateOptions {
    fn default() -> Self {
        ValidateOptions::STRICT
    }
}

/// A hard validation error: the arrays do not describe a valid matrix.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ValidateError {
    /// A dimension does not fit the index type.
    #[error("{dim} = {value} does not fit the index type {index}")]
    ShapeTooLarge {
        /// Which dimension (`rows`, `cols`, `nnz`, ...).
        dim: &'static str,
        /// Its value.
        value: usize,
        /// Index type name.
        index: &'static str,
    },
    /// An array has the wrong length.
    #[error("`{array}` has length {len}, expected {expected}")]
    LengthMismatch {
        /// Array name.
        array: &'static str,
        /// Actual length.
        len: usize,
        /// Expected length.
        expected: usize,
    },
    /// `indptr[0]` is not 0.
    #[error("indptr[0] is {value}, expected 0")]
    IndptrStart {
        /// The value found.
        value: i64,
    },
    /// `indptr[row] > indptr[row + 1]`.
    #[error("indptr decreases at row {row}: indptr[{row}] = {start} > indptr[{}] = {end}", row + 1)]
    IndptrDecreasing {
        /// The row.
        row: usize,
        /// `indptr[row]`.
        start: i64,
        /// `indptr[row + 1]`.
        end: i64,
    },
    /// `indptr[last]` differs from the number of stored entries.
    #[error("indptr[last] is {value}, expected nnz = {nnz}")]
    IndptrEnd {
        /// The value found.
        value: i64,
        /// Length of `indices`.
        nnz: usize,
    },
    /// A stored index is negative or not below its bound.
    #[error("row {row}, position {pos}: index {index} out of range 0..{bound}")]
    OutOfRange {
        /// Outer index.
        row: usize,
        /// Position in `indices`.
        pos: usize,
        /// The index found.
        index: i64,
        /// Exclusive upper bound.
        bound: usize,
    },
    /// A row index (COO rows, DCSR row list) is negative or not below the row count.
    #[error("position {pos}: row index {row} out of range 0..{bound}")]
    RowOutOfRange {
        /// Position in the row array.
        pos: usize,
        /// The row index found.
        row: i64,
        /// Number of rows.
        bound: usize,
    },
    /// Indices of a row are not ascending although the format requires it.
    #[error("row {row}, position {pos}: index {index} follows {prev}; indices must be sorted")]
    Unsorted {
        /// Outer index.
        row: usize,
        /// Position in `indices`.
        pos: usize,
        /// The index found.
        index: i64,
        /// The index before it.
        prev: i64,
    },
    /// An index occurs twice in one row.
    #[error("row {row}, position {pos}: duplicate index {index}")]
    Duplicate {
        /// Outer index.
        row: usize,
        /// Position of the second occurrence.
        pos: usize,
        /// The repeated index.
        index: i64,
    },
    /// A block size of zero.
    #[error("block size must be positive")]
    ZeroBlockSize,
    /// An ELL row claims more valid entries than the width `k`.
    #[error("ELL row {row} has length {len}, more than k = {k}")]
    EllRowLength {
        /// The row.
        row: usize,
        /// Its claimed length.
        len: i64,
        /// The ELL width.
        k: usize,
    },
    /// The DCSR row list is not strictly ascending.
    #[error(
        "DCSR row list position {pos}: row {row} follows {prev}; rows must be strictly ascending"
    )]
    DcsrRowOrder {
        /// Position in the row list.
        pos: usize,
        /// The row found.
        row: i64,
        /// The row before it.
        prev: i64,
    },
    /// A DCSR row list names a row without entries.
    #[error("DCSR row list position {pos}: row {row} has no entries")]
    DcsrEmptyRow {
        /// Position in the row list.
        pos: usize,
        /// The row.
        row: i64,
    },
}

/// A validation warning: legal data worth reporting.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ValidateWarning {
    /// A stored value equal to zero.
    #[error("row {row}, position {pos}: explicit zero at index {index}")]
    ExplicitZero {
        /// Outer index.
        row: usize,
        /// Position in `values`.
        pos: usize,
        /// Inner index of the entry.
        index: i64,
    },
    /// A stored NaN.
    #[error("row {row}, position {pos}: NaN at index {index}")]
    NaN {
        /// Outer index.
        row: usize,
        /// Position in `values`.
        pos: usize,
        /// Inner index of the entry.
        index: i64,
    },
}

/// Result of a validation: all errors and warnings found, in array order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Hard errors.
    pub errors: Vec<ValidateError>,
    /// Warnings.
    pub warnings: Vec<ValidateWarning>,
}

impl Report {
    /// Whether no hard error was found.
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }

    /// The first error, or the warnings if there is none.
    pub fn into_result(self) -> Result<Vec<ValidateWarning>, ValidateError> {
        match self.errors.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(self.warnings),
        }
    }
}

/// Records an error if `value` does not fit index type `I`.
pub(crate) fn check_fits<I: Index>(dim: &'static str, value: usize, r: &mut Report) {
    if value > I::MAX_USIZE {
        r.errors.push(ValidateError::ShapeTooLarge {
            dim,
            value,
            index: I::DTYPE.name(),
        });
    }
}

fn check_len(array: &'static str, len: usize, expected: usize, r: &mut Report) -> bool {
    if len != expected {
        r.errors.push(ValidateError::LengthMismatch {
            array,
            len,
            expected,
        });
        return false;
    }
    true
}

/// Checks `indptr` (length, start, monotone, end). Returns whether it is usable.
fn check_indptr<I: Index>(outer: usize, indptr: &[I], nnz: usize, r: &mut Report) -> bool {
    let Some(expected) = outer.checked_add(1) else {
        r.errors.push(ValidateError::ShapeTooLarge {
            dim: "rows",
            value: outer,
            index: "usize",
        });
        return false;
    };
    if !check_len("indptr", indptr.len(), expected, r) {
        return false;
    }
    let mut ok = true;
    if indptr[0].to_i64() != 0 {
        r.errors.push(ValidateError::IndptrStart {
            value: indptr[0].to_i64(),
        });
        ok = false;
    }
    for (row, w) in indptr.windows(2).enumerate() {
        if w[0] > w[1] {
            r.errors.push(ValidateError::IndptrDecreasing {
                row,
                start: w[0].to_i64(),
                end: w[1].to_i64(),
            });
            ok = false;
        }
    }
    let last = indptr[outer].to_i64();
    if last < 0 || last as u64 != nnz as u64 {
        r.errors.push(ValidateError::IndptrEnd { value: last, nnz });
        ok = false;
    }
    ok
}

/// Checks the indices of each row of a structurally valid compressed matrix.
fn check_rows<I: Index>(
    indptr: &[I],
    indices: &[I],
    inner: usize,
    opts: &ValidateOptions,
    r: &mut Report,
) {
    let mut scratch: Vec<(I, usize)> = Vec::new();
    for (row, w) in indptr.windows(2).enumerate() {
        let (s, e) = (w[0].ix(), w[1].ix());
        let mut sorted = true;
        let mut in_range = true;
        for pos in s..e {
            let c = indices[pos];
            let ci = c.to_i64();
            if ci < 0 || ci as u64 >= inner as u64 {
                r.errors.push(ValidateError::OutOfRange {
                    row,
                    pos,
                    index: ci,
                    bound: inner,
                });
                in_range = false;
            }
            if pos > s {
                let p = indices[pos - 1];
                if c < p {
                    sorted = false;
                    if opts.require_sorted {
                        r.errors.push(ValidateError::Unsorted {
                            row,
                            pos,
                            index: ci,
                            prev: p.to_i64(),
                        });
                    }
                } else if c == p && !opts.allow_duplicates {
                    r.errors.push(ValidateError::Duplicate {
                        row,
                        pos,
                        index: ci,
                    });
                }
            }
        }
        // Unsorted rows may hide non-adjacent duplicates: sort a copy to find them.
        if !sorted && in_range && !opts.allow_duplicates {
            scratch.clear();
            scratch.extend((s..e).map(|p| (indices[p], p)));
            scratch.sort_unstable();
            for w2 in scratch.windows(2) {
                let adjacent = w2[1].1 == w2[0].1 + 1 || w2[0].1 == w2[1].1 + 1;
                if w2[0].0 == w2[1].0 && !adjacent {
                    let pos = w2[0].1.max(w2[1].1);
                    r.errors.push(ValidateError::Duplicate {
                        row,
                        pos,
                        index: w2[0].0.to_i64(),
                    });
                }
            }
        }
    }
}

/// Warns about explicit zeros and NaNs of a compressed matrix (one value per position).
fn check_values<I: Index, V: Value>(indptr: &[I], indices: &[I], values: &[V], r: &mut Report) {
    for (row, w) in indptr.windows(2).enumerate() {
        for pos in w[0].ix()..w[1].ix() {
            let (v, index) = (values[pos], indices[pos].to_i64());
            if v.is_nan() {
                r.warnings.push(ValidateWarning::NaN { row, pos, index });
            } else if v.is_zero() {
                r.warnings
                    .push(ValidateWarning::ExplicitZero { row, pos, index });
            }
        }
    }
}

/// Validates a compressed (CSR-like) matrix with `outer` rows and inner indices in
/// `0..inner`: shape fits `I`, array lengths, `indptr`, index ranges, sortedness and
/// duplicates per `opts`; warns about explicit zeros and NaNs.
pub fn check_compressed<I: Index, V: Value>(
    outer: usize,
    inner: usize,
    indptr: &[I],
    indices: &[I],
    values: &[V],
    opts: &ValidateOptions,
) -> Report {
    let mut r = Report::default();
    check_fits::<I>("rows", outer, &mut r);
    check_fits::<I>("cols", inner, &mut r);
    let lens_ok = check_len("values", values.len(), indices.len(), &mut r);
    if check_indptr(outer, indptr, indices.len(), &mut r) {
        check_rows(indptr, indices, inner, opts, &mut r);
        if lens_ok {
            check_values(indptr, indices, values, &mut r);
        }
    }
    r
}

/// Validates a COO matrix: equal array lengths and every coordinate in range. COO is
/// unordered and may hold duplicates (they are summed by conversions).
pub fn check_coo<I: Index, V: Value>(
    rows: usize,
    cols: usize,
    row: &[I],
    col: &[I],
    val: &[V],
) -> Report {
    let mut r = Report::default();
    check_fits::<I>("rows", rows, &mut r);
    check_fits::<I>("cols", cols, &mut r);
    check_fits::<I>("nnz", row.len(), &mut r);
    let ok = check_len("col", col.len(), row.len(), &mut r)
        & check_len("values", val.len(), row.len(), &mut r);
    if !ok {
        return r;
    }
    for pos in 0..row.len() {
        let (ri, ci) = (row[pos].to_i64(), col[pos].to_i64());
        if ri < 0 || ri as u64 >= rows as u64 {
            r.errors.push(ValidateError::RowOutOfRange {
                pos,
                row: ri,
                bound: rows,
            });
            continue;
        }
        if ci < 0 || ci as u64 >= cols as u64 {
            r.errors.push(ValidateError::OutOfRange {
                row: ri as usize,
                pos,
                index: ci,
                bound: cols,
            });
        } else if val[pos].is_nan() {
            r.warnings.push(ValidateWarning::NaN {
                row: ri as usize,
                pos,
                index: ci,
            });
        } else if val[pos].is_zero() {
            r.warnings.push(ValidateWarning::ExplicitZero {
                row: ri as usize,
                pos,
                index: ci,
            });
        }
    }
    r
}

/// Number of blocks needed to cover `n` with blocks of size `b` (`b > 0`).
pub(crate) fn blocks(n: usize, b: usize) -> usize {
    n.div_ceil(b)
}

/// Validates a BSR matrix of shape `rows × cols` with `block × block` blocks: the block
/// structure is a compressed matrix over block rows/columns and `values` holds
/// `block²` entries per stored block. Zeros inside blocks are normal and not reported;
/// NaNs are reported at the block's position.
pub fn check_bsr<I: Index, V: Value>(
    rows: usize,
    cols: usize,
    block: usize,
    indptr: &[I],
    indices: &[I],
    values: &[V],
    opts: &ValidateOptions,
) -> Report {
    let mut r = Report::default();
    if block == 0 {
        r.errors.push(ValidateError::ZeroBlockSize);
        return r;
    }
    check_fits::<I>("rows", rows, &mut r);
    check_fits::<I>("cols", cols, &mut r);
    let (br, bc) = (blocks(rows, block), blocks(cols, block));
    let per = block.saturating_mul(block);
    let lens_ok = match indices.len().checked_mul(per) {
        Some(n) => check_len("values", values.len(), n, &mut r),
        None => {
            r.errors.push(ValidateError::ShapeTooLarge {
                dim: "values",
                value: indices.len(),
                index: "usize",
            });
            false
        }
    };
    if check_indptr(br, indptr, indices.len(), &mut r) {
        check_rows(indptr, indices, bc, opts, &mut r);
        if lens_ok {
            for (row, w) in indptr.windows(2).enumerate() {
                for pos in w[0].ix()..w[1].ix() {
                    if values[pos * per..(pos + 1) * per]
                        .iter()
                        .any(|v| v.is_nan())
                    {
                        r.warnings.push(ValidateWarning::NaN {
                            row,
                            pos,
                            index: indices[pos].to_i64(),
                        });
                    }
                }
            }
        }
    }
    r
}

/// Validates an ELL matrix of `rows × cols` (in units of `block × block` blocks when
/// `block > 1`): `indices` has `k` slots per block row, `lengths[row] <= k` valid slots
/// come first, and every slot (padding included) holds an index in range. Valid slots
/// must be sorted and distinct per `opts` (padding of a matrix with no columns must be
/// index 0); zeros and NaNs among valid scalar entries
/// (`block == 1`) are reported.
#[allow(clippy::too_many_arguments)]
pub fn check_ell<I: Index, V: Value>(
    rows: usize,
    cols: usize,
    block: usize,
    k: usize,
    indices: &[I],
    values: &[V],
    lengths: &[I],
    opts: &ValidateOptions,
) -> Report {
    let mut r = Report::default();
    if block == 0 {
        r.errors.push(ValidateError::ZeroBlockSize);
        return r;
    }
    check_fits::<I>("rows", rows, &mut r);
    check_fits::<I>("cols", cols, &mut r);
    check_fits::<I>("k", k, &mut r);
    let (br, bc) = (blocks(rows, block), blocks(cols, block));
    let per = block.saturating_mul(block);
    let Some(slots) = br.checked_mul(k) else {
        r.errors.push(ValidateError::ShapeTooLarge {
            dim: "rows * k",
            value: br,
            index: "usize",
        });
        return r;
    };
    let ok = check_len("lengths", lengths.len(), br, &mut r)
        & check_len("indices", indices.len(), slots, &mut r);
    let vals_ok = match slots.checked_mul(per) {
        Some(n) => check_len("values", values.len(), n, &mut r),
        None => false,
    };
    if !ok {
        return r;
    }
    for (row, &len) in lengths.iter().enumerate() {
        let l = len.to_i64();
        if l < 0 || l as u64 > k as u64 {
            r.errors
                .push(ValidateError::EllRowLength { row, len: l, k });
            continue;
        }
        let s = row * k;
        for pos in s..s + k {
            let c = indices[pos].to_i64();
            let valid = pos < s + l as usize;
            // Padding of a matrix without columns can only be index 0.
            let padding_ok = !valid && bc == 0 && c == 0;
            if (c < 0 || c as u64 >= bc as u64) && !padding_ok {
                r.errors.push(ValidateError::OutOfRange {
                    row,
                    pos,
                    index: c,
                    bound: bc,
                });
                continue;
            }
            if valid && pos > s {
                let p = indices[pos - 1].to_i64();
                if c < p && opts.require_sorted {
                    r.errors.push(ValidateError::Unsorted {
                        row,
                        pos,
                        index: c,
                        prev: p,
                    });
                } else if c == p && !opts.allow_duplicates {
                    r.errors
                        .push(ValidateError::Duplicate { row, pos, index: c });
                }
            }
            if valid && vals_ok && per == 1 {
                let v = values[pos];
                if v.is_nan() {
                    r.warnings.push(ValidateWarning::NaN { row, pos, index: c });
                } else if v.is_zero() {
                    r.warnings
                        .push(ValidateWarning::ExplicitZero { row, pos, index: c });
                }
            }
        }
    }
    r
}

/// Validates a DCSR matrix: `row_ids` strictly ascending and in range, each listed row
/// non-empty, and the compressed structure over the listed rows valid.
#[allow(clippy::too_many_arguments)]
pub fn check_dcsr<I: Index, V: Value>(
    rows: usize,
    cols: usize,
    row_ids: &[I],
    indptr: &[I],
    indices: &[I],
    values: &[V],
    opts: &ValidateOptions,
) -> Report {
    let mut r = check_compressed(row_ids.len(), cols, indptr, indices, values, opts);
    check_fits::<I>("rows", rows, &mut r);
    for (pos, &id) in row_ids.iter().enumerate() {
        let v = id.to_i64();
        if v < 0 || v as u64 >= rows as u64 {
            r.errors.push(ValidateError::RowOutOfRange {
                pos,
                row: v,
                bound: rows,
            });
        }
        if pos > 0 && row_ids[pos - 1] >= id {
            r.errors.push(ValidateError::DcsrRowOrder {
                pos,
                row: v,
                prev: row_ids[pos - 1].to_i64(),
            });
        }
        if indptr.len() == row_ids.len() + 1 && indptr[pos] == indptr[pos + 1] {
            r.errors.push(ValidateError::DcsrEmptyRow { pos, row: v });
        }
    }
    r
}
