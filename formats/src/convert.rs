//! Conversions between the containers, to/from dense row-major arrays, and between index
//! types. All run in O(nnz) plus O(rows + cols) for pointer arrays.

use crate::bsr::Bsr;
use crate::coo::Coo;
use crate::csr::{Csc, Csr};
use crate::dcsr::Dcsr;
use crate::ell::Ell;
use crate::scalar::{Index, Value};
use crate::validate::blocks;
use thiserror::Error;

/// Why a conversion failed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ConvertError {
    /// A value (dimension, pointer or index) does not fit the target index type.
    #[error("{what} = {value} does not fit the index type {target}")]
    IndexOverflow {
        /// What overflowed (`rows`, `nnz`, `indices`, ...).
        what: &'static str,
        /// The value.
        value: i64,
        /// Target index type name.
        target: &'static str,
    },
    /// A row has more entries than the ELL width.
    #[error("row {row} has {len} entries, more than the ELL width k = {k}")]
    EllRowTooLong {
        /// The first offending (block) row.
        row: usize,
        /// Its number of entries (or blocks).
        len: usize,
        /// The requested width.
        k: usize,
    },
    /// A block size of zero was requested.
    #[error("block size must be positive")]
    ZeroBlockSize,
    /// A dense array of the wrong length.
    #[error("dense array has {len} elements, expected rows * cols = {expected}")]
    DenseLength {
        /// Actual length.
        len: usize,
        /// `rows * cols`.
        expected: usize,
    },
    /// `rows * cols` (or `rows * k`) overflows `usize`.
    #[error("{rows} x {cols} elements overflow the address space")]
    TooLarge {
        /// First factor.
        rows: usize,
        /// Second factor.
        cols: usize,
    },
}

fn overflow<J: Index>(what: &'static str, value: usize) -> ConvertError {
    ConvertError::IndexOverflow {
        what,
        value: value.min(i64::MAX as usize) as i64,
        target: J::DTYPE.name(),
    }
}

/// Converts `value` to index type `J` or reports which quantity overflowed.
fn fit<J: Index>(what: &'static str, value: usize) -> Result<J, ConvertError> {
    J::from_usize(value).ok_or_else(|| overflow::<J>(what, value))
}

/// Converts an index array to another index type.
fn cast_vec<I: Index, J: Index>(what: &'static str, v: &[I]) -> Result<Vec<J>, ConvertError> {
    v.iter()
        .map(|x| {
            J::from_i64(x.to_i64()).ok_or(ConvertError::IndexOverflow {
                what,
                value: x.to_i64(),
                target: J::DTYPE.name(),
            })
        })
        .collect()
}

/// Sorts each row of a pattern (`ptr` over `outer` rows, `idx` in `0..inner`) by two
/// counting transposes; returns the sorted indices and the permutation applied
/// (`out[q] = idx[perm[q]]`).
pub(crate) fn sort_pattern(
    outer: usize,
    inner: usize,
    ptr: &[usize],
    idx: &[usize],
) -> (Vec<usize>, Vec<usize>) {
    let mut tptr = vec![0usize; inner + 1];
    for &j in idx {
        tptr[j + 1] += 1;
    }
    for j in 0..inner {
        tptr[j + 1] += tptr[j];
    }
    // Transposed entries, in row order: (row, original position).
    let mut next = tptr.clone();
    let mut trow = vec![(0usize, 0usize); idx.len()];
    for r in 0..outer {
        for (p, &j) in idx.iter().enumerate().take(ptr[r + 1]).skip(ptr[r]) {
            trow[next[j]] = (r, p);
            next[j] += 1;
        }
    }
    let mut fill = ptr[..outer].to_vec();
    let mut out = vec![0usize; idx.len()];
    let mut perm = vec![0usize; idx.len()];
    for j in 0..inner {
        for &(r, p) in &trow[tptr[j]..tptr[j + 1]] {
            out[fill[r]] = j;
            perm[fill[r]] = p;
            fill[r] += 1;
        }
    }
    (out, perm)
}

impl<I: Index, V: Value> Coo<I, V> {
    /// CSR with sorted indices and duplicates summed (scipy `tocsr` semantics).
    pub fn to_csr(&self) -> Csr<I, V> {
        let mut count = vec![0usize; self.rows + 1];
        for r in &self.row {
            count[r.ix() + 1] += 1;
        }
        for i in 0..self.rows {
            count[i + 1] += count[i];
        }
        let indptr: Vec<I> = count.iter().map(|&x| I::from_ix(x)).collect();
        let mut next = count;
        let nnz = self.nnz();
        let mut indices = vec![I::ZERO; nnz];
        let mut values = vec![V::zero(); nnz];
        for p in 0..nnz {
            let r = self.row[p].ix();
            indices[next[r]] = self.col[p];
            values[next[r]] = self.values[p];
            next[r] += 1;
        }
        let mut csr = Csr {
            rows: self.rows,
            cols: self.cols,
            indptr,
            indices,
            values,
        };
        csr.sum_duplicates();
        csr
    }

    /// CSC with sorted indices and duplicates summed.
    pub fn to_csc(&self) -> Csc<I, V> {
        self.to_csr().to_csc()
    }

    /// The same matrix with another index type.
    pub fn cast_index<J: Index>(&self) -> Result<Coo<J, V>, ConvertError> {
        fit::<J>("rows", self.rows)?;
        fit::<J>("cols", self.cols)?;
        fit::<J>("nnz", self.nnz())?;
        Ok(Coo {
            rows: self.rows,
            cols: self.cols,
            row: cast_vec("row", &self.row)?,
            col: cast_vec("col", &self.col)?,
            values: self.values.clone(),
        })
    }
}

impl<I: Index, V: Value> Csr<I, V> {
    /// COO listing the entries row by row (in storage order).
    pub fn to_coo(&self) -> Coo<I, V> {
        let mut row = Vec::with_capacity(self.nnz());
        for i in 0..self.rows {
            let n = self.indptr[i + 1].ix() - self.indptr[i].ix();
            row.extend(std::iter::repeat_n(I::from_ix(i), n));
        }
        Coo {
            rows: self.rows,
            cols: self.cols,
            row,
            col: self.indices.clone(),
            values: self.values.clone(),
        }
    }

    /// CSC of the same matrix (sorted row indices; duplicates kept).
    pub fn to_csc(&self) -> Csc<I, V> {
        Csc {
            t: self.transpose(),
        }
    }

    /// Copy in canonical form (sorted, duplicates summed), borrowed if already canonical.
    fn canonical(&self) -> std::borrow::Cow<'_, Csr<I, V>> {
        if self.has_canonical_format() {
            std::borrow::Cow::Borrowed(self)
        } else {
            let mut c = self.clone();
            c.sum_duplicates();
            std::borrow::Cow::Owned(c)
        }
    }

    /// BSR with `b × b` blocks: every block holding at least one stored entry is kept,
    /// partial edge blocks are zero-padded, duplicates are summed.
    pub fn to_bsr(&self, b: usize) -> Result<Bsr<I, V>, ConvertError> {
        if b == 0 {
            return Err(ConvertError::ZeroBlockSize);
        }
        let (br, bc) = (blocks(self.rows, b), blocks(self.cols, b));
        // Pass 1: distinct block columns per block row (unsorted), via a marker array.
        let mut marker = vec![usize::MAX; bc];
        let mut bptr = vec![0usize; br + 1];
        let mut bidx: Vec<usize> = Vec::new();
        for rb in 0..br {
            let rows = rb * b..((rb + 1) * b).min(self.rows);
            for i in rows {
                for c in &self.indices[self.indptr[i].ix()..self.indptr[i + 1].ix()] {
                    let cb = c.ix() / b;
                    if marker[cb] != rb {
                        marker[cb] = rb;
                        bidx.push(cb);
                    }
                }
            }
            bptr[rb + 1] = bidx.len();
        }
        let (bidx, _) = sort_pattern(br, bc, &bptr, &bidx);
        let nnzb = bidx.len();
        let per = b
            .checked_mul(b)
            .ok_or(ConvertError::TooLarge { rows: b, cols: b })?;
        let total = nnzb.checked_mul(per).ok_or(ConvertError::TooLarge {
            rows: nnzb,
            cols: per,
        })?;
        // Pass 2: scatter values into their block slots.
        let mut values = vec![V::zero(); total];
        let mut slot = vec![0usize; bc];
        for rb in 0..br {
            for (p, &cb) in bidx.iter().enumerate().take(bptr[rb + 1]).skip(bptr[rb]) {
                slot[cb] = p;
            }
            for i in rb * b..((rb + 1) * b).min(self.rows) {
                for q in self.indptr[i].ix()..self.indptr[i + 1].ix() {
                    let c = self.indices[q].ix();
                    let at = slot[c / b] * per + (i - rb * b) * b + c % b;
                    values[at] = values[at] + self.values[q];
                }
            }
        }
        Ok(Bsr {
            rows: self.rows,
            cols: self.cols,
            block: b,
            indptr: bptr
                .iter()
                .map(|&x| fit::<I>("nnz blocks", x))
                .collect::<Result<_, _>>()?,
            indices: bidx.iter().map(|&x| I::from_ix(x)).collect(),
            values,
        })
    }

    /// Scalar ELL with `k` slots per row (see [`Ell`] for the padding convention).
    /// Fails if a row has more than `k` entries (after summing duplicates).
    pub fn to_ell(&self, k: usize) -> Result<Ell<I, V>, ConvertError> {
        let m = self.canonical();
        if let Some((row, len)) = m
            .row_lengths()
            .into_iter()
            .enumerate()
            .find(|(_, l)| *l > k)
        {
            return Err(ConvertError::EllRowTooLong { row, len, k });
        }
        fit::<I>("k", k)?;
        let slots = m.rows.checked_mul(k).ok_or(ConvertError::TooLarge {
            rows: m.rows,
            cols: k,
        })?;
        let mut indices = vec![I::ZERO; slots];
        let mut values = vec![V::zero(); slots];
        let mut lengths = Vec::with_capacity(m.rows);
        for i in 0..m.rows {
            let (s, e) = (m.indptr[i].ix(), m.indptr[i + 1].ix());
            let base = i * k;
            indices[base..base + (e - s)].copy_from_slice(&m.indices[s..e]);
            values[base..base + (e - s)].copy_from_slice(&m.values[s..e]);
            let pad = if e > s { m.indices[e - 1] } else { I::ZERO };
            indices[base + (e - s)..base + k].fill(pad);
            lengths.push(I::from_ix(e - s));
        }
        Ok(Ell {
            rows: m.rows,
            cols: m.cols,
            block: 1,
            k,
            indices,
            values,
            lengths,
        })
    }

    /// DCSR listing only the non-empty rows (sorted, duplicates summed).
    pub fn to_dcsr(&self) -> Dcsr<I, V> {
        let m = self.canonical();
        let mut row_ids = Vec::new();
        let mut indptr = vec![I::ZERO];
        for i in 0..m.rows {
            if m.indptr[i + 1] > m.indptr[i] {
                row_ids.push(I::from_ix(i));
                indptr.push(m.indptr[i + 1]);
            }
        }
        Dcsr {
            rows: m.rows,
            cols: m.cols,
            row_ids,
            indptr,
            indices: m.indices.clone(),
            values: m.values.clone(),
        }
    }

    /// CSR of a dense row-major `rows × cols` array; zeros are not stored.
    pub fn from_dense(rows: usize, cols: usize, data: &[V]) -> Result<Csr<I, V>, ConvertError> {
        let expected = rows
            .checked_mul(cols)
            .ok_or(ConvertError::TooLarge { rows, cols })?;
        if data.len() != expected {
            return Err(ConvertError::DenseLength {
                len: data.len(),
                expected,
            });
        }
        fit::<I>("rows", rows)?;
        fit::<I>("cols", cols)?;
        let mut indptr = vec![I::ZERO];
        let (mut indices, mut values) = (Vec::new(), Vec::new());
        for i in 0..rows {
            for (j, v) in data[i * cols..(i + 1) * cols].iter().enumerate() {
                if !v.is_zero() {
                    indices.push(I::from_ix(j));
                    values.push(*v);
                }
            }
            indptr.push(fit::<I>("nnz", indices.len())?);
        }
        Ok(Csr {
            rows,
            cols,
            indptr,
            indices,
            values,
        })
    }

    /// Dense row-major array (duplicates summed).
    pub fn to_dense(&self) -> Result<Vec<V>, ConvertError> {
        let n = self
            .rows
            .checked_mul(self.cols)
            .ok_or(ConvertError::TooLarge {
                rows: self.rows,
                cols: self.cols,
            })?;
        let mut out = vec![V::zero(); n];
        for i in 0..self.rows {
            for p in self.indptr[i].ix()..self.indptr[i + 1].ix() {
                let at = i * self.cols + self.indices[p].ix();
                out[at] = out[at] + self.values[p];
            }
        }
        Ok(out)
    }

    /// The same matrix with another index type; fails if a dimension or nnz overflows.
    pub fn cast_index<J: Index>(&self) -> Result<Csr<J, V>, ConvertError> {
        fit::<J>("rows", self.rows)?;
        fit::<J>("cols", self.cols)?;
        Ok(Csr {
            rows: self.rows,
            cols: self.cols,
            indptr: cast_vec("indptr", &self.indptr)?,
            indices: cast_vec("indices", &self.indices)?,
            values: self.values.clone(),
        })
    }
}

impl<I: Index, V: Value> Csc<I, V> {
    /// CSR of the same matrix (sorted column indices; duplicates kept).
    pub fn to_csr(&self) -> Csr<I, V> {
        self.t.transpose()
    }

    /// COO listing the entries column by column.
    pub fn to_coo(&self) -> Coo<I, V> {
        let t = self.t.to_coo();
        Coo {
            rows: t.cols,
            cols: t.rows,
            row: t.col,
            col: t.row,
            values: t.values,
        }
    }

    /// The same matrix with another index type.
    pub fn cast_index<J: Index>(&self) -> Result<Csc<J, V>, ConvertError> {
        Ok(Csc {
            t: self.t.cast_index()?,
        })
    }
}

impl<I: Index, V: Value> Bsr<I, V> {
    /// CSR of the same matrix. Every in-bounds entry of a stored block is kept, zeros
    /// included (like scipy); call [`Csr::eliminate_zeros`] to drop them.
    pub fn to_csr(&self) -> Result<Csr<I, V>, ConvertError> {
        let b = self.block;
        let per = b.saturating_mul(b);
        let mut indptr = vec![I::ZERO];
        let (mut indices, mut values) = (Vec::new(), Vec::new());
        for rb in 0..self.block_rows() {
            let (s, e) = (self.indptr[rb].ix(), self.indptr[rb + 1].ix());
            for i in rb * b..((rb + 1) * b).min(self.rows) {
                for p in s..e {
                    let cb = self.indices[p].ix();
                    for bj in 0..b {
                        let j = cb * b + bj;
                        if j < self.cols {
                            indices.push(I::from_ix(j));
                            values.push(self.values[p * per + (i - rb * b) * b + bj]);
                        }
                    }
                }
                indptr.push(fit::<I>("nnz", indices.len())?);
            }
        }
        Ok(Csr {
            rows: self.rows,
            cols: self.cols,
            indptr,
            indices,
            values,
        })
    }

    /// Blocked ELL with `k` block slots per block row; padding slots repeat the row's last
    /// block column and hold zero blocks.
    pub fn to_ell(&self, k: usize) -> Result<Ell<I, V>, ConvertError> {
        let br = self.block_rows();
        let per = self.block.saturating_mul(self.block);
        fit::<I>("k", k)?;
        let slots = br
            .checked_mul(k)
            .ok_or(ConvertError::TooLarge { rows: br, cols: k })?;
        let nvals = slots.checked_mul(per).ok_or(ConvertError::TooLarge {
            rows: slots,
            cols: per,
        })?;
        let mut indices = vec![I::ZERO; slots];
        let mut values = vec![V::zero(); nvals];
        let mut lengths = Vec::with_capacity(br);
        for rb in 0..br {
            let (s, e) = (self.indptr[rb].ix(), self.indptr[rb + 1].ix());
            if e - s > k {
                return Err(ConvertError::EllRowTooLong {
                    row: rb,
                    len: e - s,
                    k,
                });
            }
            let base = rb * k;
            indices[base..base + (e - s)].copy_from_slice(&self.indices[s..e]);
            values[base * per..(base + e - s) * per]
                .copy_from_slice(&self.values[s * per..e * per]);
            let pad = if e > s { self.indices[e - 1] } else { I::ZERO };
            indices[base + (e - s)..base + k].fill(pad);
            lengths.push(I::from_ix(e - s));
        }
        Ok(Ell {
            rows: self.rows,
            cols: self.cols,
            block: self.block,
            k,
            indices,
            values,
            lengths,
        })
    }

    /// The same matrix with another index type.
    pub fn cast_index<J: Index>(&self) -> Result<Bsr<J, V>, ConvertError> {
        fit::<J>("rows", self.rows)?;
        fit::<J>("cols", self.cols)?;
        Ok(Bsr {
            rows: self.rows,
            cols: self.cols,
            block: self.block,
            indptr: cast_vec("indptr", &self.indptr)?,
            indices: cast_vec("indices", &self.indices)?,
            values: self.values.clone(),
        })
    }
}

impl<I: Index, V: Value> Ell<I, V> {
    /// BSR (block size = the ELL block size, 1 for scalar ELL) of the valid slots.
    pub fn to_bsr(&self) -> Result<Bsr<I, V>, ConvertError> {
        let per = self.block.saturating_mul(self.block);
        let mut indptr = vec![I::ZERO];
        let (mut indices, mut values) = (Vec::new(), Vec::new());
        for (r, len) in self.lengths.iter().enumerate() {
            let s = r * self.k;
            let e = s + len.ix();
            indices.extend_from_slice(&self.indices[s..e]);
            values.extend_from_slice(&self.values[s * per..e * per]);
            indptr.push(fit::<I>("nnz", indices.len())?);
        }
        Ok(Bsr {
            rows: self.rows,
            cols: self.cols,
            block: self.block,
            indptr,
            indices,
            values,
        })
    }

    /// CSR of the valid entries (for blocked ELL, all in-bounds entries of valid blocks).
    pub fn to_csr(&self) -> Result<Csr<I, V>, ConvertError> {
        let bsr = self.to_bsr()?;
        if self.block == 1 {
            let Bsr {
                rows,
                cols,
                indptr,
                indices,
                values,
                ..
            } = bsr;
            return Ok(Csr {
                rows,
                cols,
                indptr,
                indices,
                values,
            });
        }
        bsr.to_csr()
    }

    /// The same matrix with another index type.
    pub fn cast_index<J: Index>(&self) -> Result<Ell<J, V>, ConvertError> {
        fit::<J>("rows", self.rows)?;
        fit::<J>("cols", self.cols)?;
        fit::<J>("k", self.k)?;
        Ok(Ell {
            rows: self.rows,
            cols: self.cols,
            block: self.block,
            k: self.k,
            indices: cast_vec("indices", &self.indices)?,
            values: self.values.clone(),
            lengths: cast_vec("lengths", &self.lengths)?,
        })
    }
}

impl<I: Index, V: Value> Dcsr<I, V> {
    /// CSR with the empty rows restored.
    pub fn to_csr(&self) -> Csr<I, V> {
        let mut indptr = vec![I::ZERO; self.rows + 1];
        for (k, r) in self.row_ids.iter().enumerate() {
            indptr[r.ix() + 1] = self.indptr[k + 1];
        }
        // Empty rows inherit the pointer of the row before them.
        for i in 0..self.rows {
            if indptr[i + 1] < indptr[i] {
                indptr[i + 1] = indptr[i];
            }
        }
        Csr {
            rows: self.rows,
            cols: self.cols,
            indptr,
            indices: self.indices.clone(),
            values: self.values.clone(),
        }
    }

    /// The same matrix with another index type.
    pub fn cast_index<J: Index>(&self) -> Result<Dcsr<J, V>, ConvertError> {
        fit::<J>("rows", self.rows)?;
        fit::<J>("cols", self.cols)?;
        Ok(Dcsr {
            rows: self.rows,
            cols: self.cols,
            row_ids: cast_vec("row_ids", &self.row_ids)?,
            indptr: cast_vec("indptr", &self.indptr)?,
            indices: cast_vec("indices", &self.indices)?,
            values: self.values.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_pattern_sorts_each_row_and_reports_permutation() {
        let ptr = [0, 3, 3, 5];
        let idx = [4, 0, 2, 1, 0];
        let (out, perm) = sort_pattern(3, 5, &ptr, &idx);
        assert_eq!(out, vec![0, 2, 4, 0, 1]);
        assert_eq!(perm, vec![1, 2, 0, 4, 3]);
    }

    #[test]
    fn cast_vec_reports_the_offending_value() {
        let e = cast_vec::<i64, i32>("indices", &[1, 1 << 33]).unwrap_err();
        assert_eq!(
            e,
            ConvertError::IndexOverflow {
                what: "indices",
                value: 1 << 33,
                target: "i32"
            }
        );
    }
}
