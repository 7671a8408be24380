//! Conversions for SparseTIR-style *composable formats*: padded BSR, padded ELL, the
//! column-partitioned hybrid format (`hyb`), SR-BCRS (`condense`), GroupCOO /
//! BlockGroupCOO (Insum) and N:M structured sparsity (`mma.sp` metadata).
//!
//! Every conversion:
//!
//! * takes a [`Csr`] whose rows are sorted and duplicate-free and rejects anything else
//!   with [`ComposeError::Unsorted`] / [`ComposeError::Duplicate`] (never panics);
//! * runs in O(nnz) plus O(rows + cols) (N:M: O(rows · K) for the dense layout);
//! * returns a struct documenting its arrays, whose `to_csr()` reads the format back
//!   through its inverse index map, so `to_csr()` reproduces the input exactly.
//!
//! **Explicit zeros.** Formats that carry a valid count per (padded) row — [`Ell`],
//! [`PaddedRows`], [`Hyb`], [`GroupCoo`] — reproduce stored zeros too. Formats whose
//! padding is only "a zero value" — [`PaddedBsr`], [`BlockGroupCoo`], [`SrBcrs`],
//! [`NmMatrix`] — cannot tell a stored zero from padding; their `to_csr()` returns the
//! stored *nonzeros* (equal to the input after [`Csr::eliminate_zeros`]).

use crate::bsr::Bsr;
use crate::convert::{sort_pattern, ConvertError};
use crate::csr::Csr;
use crate::ell::Ell;
use crate::scalar::{Index, Value};
use crate::validate::blocks;
use thiserror::Error;

/// Why a composable-format conversion failed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ComposeError {
    /// The input row's column indices are not ascending.
    #[error("row {row}, position {pos}: column {index} follows {prev}; input CSR must be sorted")]
    Unsorted {
        /// The row.
        row: usize,
        /// Position in `indices`.
        pos: usize,
        /// The column found.
        index: i64,
        /// The column before it.
        prev: i64,
    },
    /// The input row stores a column twice.
    #[error(
        "row {row}, position {pos}: duplicate column {index}; input CSR must be duplicate-free"
    )]
    Duplicate {
        /// The row.
        row: usize,
        /// Position of the second occurrence.
        pos: usize,
        /// The repeated column.
        index: i64,
    },
    /// A parameter is out of its allowed range.
    #[error("invalid parameter {name} = {value}: {reason}")]
    InvalidParameter {
        /// Parameter name.
        name: &'static str,
        /// Its value.
        value: usize,
        /// What is allowed.
        reason: &'static str,
    },
    /// A row has more entries than the ELL width.
    #[error("row {row} has {len} entries, more than the ELL width k = {k}")]
    RowTooLong {
        /// The first offending row.
        row: usize,
        /// Its number of entries.
        len: usize,
        /// The width.
        k: usize,
    },
    /// A group of `m` consecutive columns holds more than `n` nonzeros.
    #[error("row {row}, group {group} (columns {first_col}..{first_col}+{m}): {count} nonzeros, more than n = {n} of m = {m}")]
    NmViolation {
        /// The row.
        row: usize,
        /// The group (columns `group*m .. group*m + m`).
        group: usize,
        /// First column of the group.
        first_col: usize,
        /// Nonzeros found in the group.
        count: usize,
        /// Allowed nonzeros per group.
        n: usize,
        /// Group width.
        m: usize,
    },
    /// A dense array of the wrong length.
    #[error("dense array has {len} elements, expected rows * cols = {expected}")]
    DenseLength {
        /// Actual length.
        len: usize,
        /// `rows * cols`.
        expected: usize,
    },
    /// A size overflows `usize` or the index type.
    #[error("{what} = {value} overflows the address space or the index type")]
    TooLarge {
        /// What overflowed.
        what: &'static str,
        /// Its value (saturated).
        value: usize,
    },
    /// An underlying container conversion failed.
    #[error(transparent)]
    Convert(#[from] ConvertError),
}

fn bad(name: &'static str, value: usize, reason: &'static str) -> ComposeError {
    ComposeError::InvalidParameter {
        name,
        value,
        reason,
    }
}

fn fit<I: Index>(what: &'static str, value: usize) -> Result<I, ComposeError> {
    I::from_usize(value).ok_or(ComposeError::TooLarge { what, value })
}

fn mul(what: &'static str, a: usize, b: usize) -> Result<usize, ComposeError> {
    a.checked_mul(b).ok_or(ComposeError::TooLarge {
        what,
        value: usize::MAX,
    })
}

/// A CSR matrix's rows cut into *segments* of at most `max_len` consecutive entries: segment
/// `s` holds entries `seg_ptr[s] .. seg_ptr[s + 1]` of the CSR arrays (which it shares, in
/// their order) and belongs to row `seg_row[s]`. A row of `len` entries has `ceil(len /
/// max_len)` segments, an empty row none. A GPU warp per segment then never walks more than
/// `max_len` entries, however skewed the rows (`examples/csrmm_segments.sptir`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowSegments<I> {
    max_len: usize,
    seg_ptr: Vec<I>,
    seg_row: Vec<I>,
}

impl<I: Index> RowSegments<I> {
    /// The segments of `a` with at most `max_len` (> 0) entries each.
    pub fn from_csr<V: Value>(a: &Csr<I, V>, max_len: usize) -> Result<Self, ComposeError> {
        if max_len == 0 {
            return Err(bad("max_len", max_len, "must be positive"));
        }
        let indptr = a.indptr();
        let mut seg_ptr = vec![I::ZERO];
        let mut seg_row = Vec::new();
        for r in 0..a.shape().0 {
            let (lo, hi) = (indptr[r].ix(), indptr[r + 1].ix());
            let mut at = lo;
            while at < hi {
                at = (at + max_len).min(hi);
                seg_ptr.push(fit("segment end", at)?);
                seg_row.push(fit("row", r)?);
            }
        }
        Ok(RowSegments { max_len, seg_ptr, seg_row })
    }

    /// The most entries of a segment.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Number of segments.
    pub fn len(&self) -> usize {
        self.seg_row.len()
    }

    /// Whether there is no segment (the matrix has no entry).
    pub fn is_empty(&self) -> bool {
        self.seg_row.is_empty()
    }

    /// Segment pointer into the CSR arrays (`len() + 1` entries).
    pub fn seg_ptr(&self) -> &[I] {
        &self.seg_ptr
    }

    /// Row of each segment.
    pub fn seg_row(&self) -> &[I] {
        &self.seg_row
    }
}

/// A CSR matrix's rows in a *locality order*: reverse Cuthill–McKee over the graph in which
/// two rows are adjacent when they share a column, then the empty rows. Rows that follow each other then
/// read mostly the same rows of a dense right-hand side, which stay in cache (SpMM with a `B`
/// larger than the L2 cache). Row `order[p]` is stored at position `p` with its entries in the
/// CSR's order (`indptr`, `indices`, the values' permutation `source`). Built in O(nnz log nnz).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReorderedRows<I> {
    order: Vec<I>,
    indptr: Vec<I>,
    indices: Vec<I>,
    source: Vec<usize>,
}

impl<I: Index> ReorderedRows<I> {
    /// The reverse Cuthill–McKee order of `a`'s non-empty rows (each connected part starts at
    /// a row of least degree; neighbours are visited by ascending degree), then its empty
    /// rows: every row once.
    pub fn rcm<V: Value>(a: &Csr<I, V>) -> Result<Self, ComposeError> {
        let (m, n) = a.shape();
        let (indptr, indices) = (a.indptr(), a.indices());
        let row = |r: usize| indptr[r].ix()..indptr[r + 1].ix();
        // Columns to rows: the transpose's pattern.
        let t = a.transpose();
        let col_rows = |c: usize| t.indices()[t.indptr()[c].ix()..t.indptr()[c + 1].ix()].iter().map(|q| q.ix());
        let degree = |r: usize| row(r).len();
        let mut starts: Vec<usize> = (0..m).filter(|&r| degree(r) > 0).collect();
        starts.sort_by_key(|&r| (degree(r), r));
        let (mut seen_row, mut seen_col) = (vec![false; m], vec![false; n]);
        let mut visit = Vec::with_capacity(starts.len());
        let mut next = Vec::new();
        for s in starts {
            if seen_row[s] {
                continue;
            }
            seen_row[s] = true;
            let mut head = visit.len();
            visit.push(s);
            while head < visit.len() {
                let r = visit[head];
                head += 1;
                next.clear();
                for k in row(r) {
                    let c = indices[k].ix();
                    if std::mem::replace(&mut seen_col[c], true) {
                        continue;
                    }
                    for q in col_rows(c) {
                        if !std::mem::replace(&mut seen_row[q], true) {
                            next.push(q);
                        }
                    }
                }
                next.sort_by_key(|&q| (degree(q), q));
                visit.extend_from_slice(&next);
            }
        }
        visit.reverse();
        visit.extend((0..m).filter(|&r| degree(r) == 0));
        let mut out = ReorderedRows {
            order: Vec::with_capacity(visit.len()),
            indptr: vec![I::ZERO],
            indices: Vec::with_capacity(indices.len()),
            source: Vec::with_capacity(indices.len()),
        };
        for r in visit {
            out.order.push(fit("row", r)?);
            out.indices.extend_from_slice(&indices[row(r)]);
            out.source.extend(row(r));
            out.indptr.push(fit("entry count", out.indices.len())?);
        }
        Ok(out)
    }

    /// The stored rows' numbers, in storage order.
    pub fn order(&self) -> &[I] {
        &self.order
    }

    /// Row pointer over the stored rows (`order().len() + 1` entries).
    pub fn indptr(&self) -> &[I] {
        &self.indptr
    }

    /// Column indices in storage order.
    pub fn indices(&self) -> &[I] {
        &self.indices
    }

    /// The CSR entry each stored entry comes from.
    pub fn source(&self) -> &[usize] {
        &self.source
    }
}

/// Checks that every row of `a` is strictly ascending (sorted, no duplicates); reports the
/// first violation.
pub fn check_canonical<I: Index, V: Value>(a: &Csr<I, V>) -> Result<(), ComposeError> {
    for i in 0..a.rows {
        let (s, e) = (a.indptr[i].ix(), a.indptr[i + 1].ix());
        for p in s + 1..e {
            let (prev, cur) = (a.indices[p - 1], a.indices[p]);
            if cur < prev {
                return Err(ComposeError::Unsorted {
                    row: i,
                    pos: p,
                    index: cur.to_i64(),
                    prev: prev.to_i64(),
                });
            }
            if cur == prev {
                return Err(ComposeError::Duplicate {
                    row: i,
                    pos: p,
                    index: cur.to_i64(),
                });
            }
        }
    }
    Ok(())
}

/// The largest number of entries stored in one row (0 for a matrix without rows).
pub fn max_row_length<I: Index, V: Value>(a: &Csr<I, V>) -> usize {
    a.max_row_length()
}

/// Histogram of row degrees: entry `d` is the number of rows storing exactly `d`
/// entries; the vector has `max_row_length + 1` entries and sums to `rows`. O(rows).
pub fn row_degree_histogram<I: Index, V: Value>(a: &Csr<I, V>) -> Vec<usize> {
    let mut h = vec![0usize; a.max_row_length() + 1];
    for w in a.indptr.windows(2) {
        h[w[1].ix() - w[0].ix()] += 1;
    }
    h
}

/// `ceil(log2(d))` for `d >= 1`.
fn ceil_log2(d: usize) -> u32 {
    d.next_power_of_two().trailing_zeros()
}

// ---------------------------------------------------------------------------------------
// 1. Padded BSR
// ---------------------------------------------------------------------------------------

/// BSR(b) with the shape padded to multiples of `b`.
///
/// Layout: the matrix is viewed as `padded_rows × padded_cols` with
/// `padded_rows = ceil(rows / b) · b` and `padded_cols = ceil(cols / b) · b`; the extra
/// rows/columns are zero. [`PaddedBsr::bsr`] is a [`Bsr`] over that grid: `indptr`
/// (`padded_rows / b + 1` entries) and `indices` (block columns, sorted per block row)
/// form a CSR over blocks and `values` holds `b²` values per stored block, row-major
/// inside the block; positions of a stored block without an input entry (including the
/// padded edge) are zero.
#[derive(Clone, Debug, PartialEq)]
pub struct PaddedBsr<I, V> {
    padded_rows: usize,
    padded_cols: usize,
    bsr: Bsr<I, V>,
}

impl<I: Index, V: Value> PaddedBsr<I, V> {
    /// Converts `a` to BSR with `b × b` blocks, `b` in `1..=1024` (SparseTIR uses 2, 4, 8,
    /// 16, 32). Fails on unsorted/duplicate input or if the padded shape does not fit `I`.
    pub fn from_csr(a: &Csr<I, V>, b: usize) -> Result<Self, ComposeError> {
        if b == 0 || b > 1024 {
            return Err(bad("block size b", b, "must be in 1..=1024"));
        }
        check_canonical(a)?;
        let padded_rows = mul("padded rows", blocks(a.rows, b), b)?;
        let padded_cols = mul("padded cols", blocks(a.cols, b), b)?;
        fit::<I>("padded rows", padded_rows)?;
        fit::<I>("padded cols", padded_cols)?;
        Ok(PaddedBsr {
            padded_rows,
            padded_cols,
            bsr: a.to_bsr(b)?,
        })
    }
    /// Original `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        self.bsr.shape()
    }
    /// Padded `(rows, cols)`: multiples of the block size.
    pub fn padded_shape(&self) -> (usize, usize) {
        (self.padded_rows, self.padded_cols)
    }
    /// Block size `b`.
    pub fn block_size(&self) -> usize {
        self.bsr.block_size()
    }
    /// The block-sparse storage (see the type documentation).
    pub fn bsr(&self) -> &Bsr<I, V> {
        &self.bsr
    }
    /// The stored nonzeros as canonical CSR of the original shape.
    pub fn to_csr(&self) -> Result<Csr<I, V>, ComposeError> {
        let mut c = self.bsr.to_csr()?;
        c.eliminate_zeros();
        Ok(c)
    }
}

// ---------------------------------------------------------------------------------------
// 2. ELL(k) and row padding
// ---------------------------------------------------------------------------------------

/// ELL with exactly `k` slots per row (see [`Ell`] for the layout: slots `r*k..r*k+k`,
/// the first `lengths[r]` valid, padding repeats the last valid column with zero value).
/// Fails with [`ComposeError::RowTooLong`] if a row has more than `k` entries, or if the
/// input is not sorted and duplicate-free. Read back with [`Ell::to_csr`].
pub fn to_ell_k<I: Index, V: Value>(a: &Csr<I, V>, k: usize) -> Result<Ell<I, V>, ComposeError> {
    check_canonical(a)?;
    for i in 0..a.rows {
        let len = a.indptr[i + 1].ix() - a.indptr[i].ix();
        if len > k {
            return Err(ComposeError::RowTooLong { row: i, len, k });
        }
    }
    Ok(a.to_ell(k)?)
}

/// A CSR whose row lengths were padded up to multiples of `k`.
///
/// Layout: [`PaddedRows::csr`] has the input's shape; row `i` stores its `counts[i]`
/// original entries (sorted) followed by `padded_len(i) - counts[i]` padding entries,
/// where `padded_len(i) = ceil(counts[i] / k) · k`. A padding entry repeats the row's
/// last valid column and holds zero (so the padded CSR is sorted but not
/// duplicate-free); empty rows stay empty.
#[derive(Clone, Debug, PartialEq)]
pub struct PaddedRows<I, V> {
    k: usize,
    csr: Csr<I, V>,
    counts: Vec<I>,
}

/// Pads every row of `a` to a multiple of `k` entries (see [`PaddedRows`]).
pub fn pad_rows_to_multiple<I: Index, V: Value>(
    a: &Csr<I, V>,
    k: usize,
) -> Result<PaddedRows<I, V>, ComposeError> {
    if k == 0 {
        return Err(bad("k", 0, "must be positive"));
    }
    check_canonical(a)?;
    let mut total = 0usize;
    for w in a.indptr.windows(2) {
        let len = w[1].ix() - w[0].ix();
        total = total
            .checked_add(mul("padded row", len.div_ceil(k), k)?)
            .ok_or(ComposeError::TooLarge {
                what: "padded nnz",
                value: usize::MAX,
            })?;
    }
    fit::<I>("padded nnz", total)?;
    let mut indptr = Vec::with_capacity(a.rows + 1);
    indptr.push(I::ZERO);
    let mut indices = Vec::with_capacity(total);
    let mut values = Vec::with_capacity(total);
    let mut counts = Vec::with_capacity(a.rows);
    for i in 0..a.rows {
        let (s, e) = (a.indptr[i].ix(), a.indptr[i + 1].ix());
        indices.extend_from_slice(&a.indices[s..e]);
        values.extend_from_slice(&a.values[s..e]);
        let len = e - s;
        let pad = len.div_ceil(k) * k - len;
        if pad > 0 {
            let last = a.indices[e - 1];
            indices.extend(std::iter::repeat_n(last, pad));
            values.extend(std::iter::repeat_n(V::zero(), pad));
        }
        counts.push(I::from_ix(len));
        indptr.push(I::from_ix(indices.len()));
    }
    Ok(PaddedRows {
        k,
        csr: Csr {
            rows: a.rows,
            cols: a.cols,
            indptr,
            indices,
            values,
        },
        counts,
    })
}

impl<I: Index, V: Value> PaddedRows<I, V> {
    /// The multiple `k`.
    pub fn k(&self) -> usize {
        self.k
    }
    /// The padded CSR (row lengths are multiples of `k`).
    pub fn csr(&self) -> &Csr<I, V> {
        &self.csr
    }
    /// Number of valid (original) entries at the start of each row.
    pub fn counts(&self) -> &[I] {
        &self.counts
    }
    /// The original matrix: the first `counts[i]` entries of each row.
    pub fn to_csr(&self) -> Csr<I, V> {
        let mut indptr = Vec::with_capacity(self.csr.rows + 1);
        indptr.push(I::ZERO);
        let (mut indices, mut values) = (Vec::new(), Vec::new());
        for i in 0..self.csr.rows {
            let s = self.csr.indptr[i].ix();
            let e = s + self.counts[i].ix();
            indices.extend_from_slice(&self.csr.indices[s..e]);
            values.extend_from_slice(&self.csr.values[s..e]);
            indptr.push(I::from_ix(indices.len()));
        }
        Csr {
            rows: self.csr.rows,
            cols: self.csr.cols,
            indptr,
            indices,
            values,
        }
    }
}

// ---------------------------------------------------------------------------------------
// 3. hyb (column_part_hyb)
// ---------------------------------------------------------------------------------------

/// One ELL bucket of a [`Hyb`] column partition.
///
/// Layout: `len()` ELL rows of `width` slots. ELL row `r` belongs to matrix row
/// `row_indices[r]` and uses slots `r*width .. r*width + width` of `col_indices` /
/// `values`; the first `counts[r]` slots are valid (sorted global column indices), the
/// rest are padding: column = the chunk's last valid column, value zero. ELL rows are
/// ordered by matrix row, then chunk; a matrix row occurs more than once only in the
/// widest bucket (split rows).
#[derive(Clone, Debug, PartialEq)]
pub struct HybBucket<I, V> {
    width: usize,
    row_indices: Vec<I>,
    col_indices: Vec<I>,
    values: Vec<V>,
    counts: Vec<I>,
}

impl<I: Index, V: Value> HybBucket<I, V> {
    /// Slots per ELL row (a power of two).
    pub fn width(&self) -> usize {
        self.width
    }
    /// Number of ELL rows.
    pub fn len(&self) -> usize {
        self.row_indices.len()
    }
    /// Whether the bucket has no ELL row.
    pub fn is_empty(&self) -> bool {
        self.row_indices.is_empty()
    }
    /// Matrix row of each ELL row.
    pub fn row_indices(&self) -> &[I] {
        &self.row_indices
    }
    /// Global column of each slot (`len() * width`).
    pub fn col_indices(&self) -> &[I] {
        &self.col_indices
    }
    /// Value of each slot (`len() * width`, zero in padding).
    pub fn values(&self) -> &[V] {
        &self.values
    }
    /// Valid slots of each ELL row.
    pub fn counts(&self) -> &[I] {
        &self.counts
    }
}

/// SparseTIR's `column_part_hyb` format.
///
/// Columns are split into `num_col_parts` partitions of `part_size =
/// ceil(cols / num_col_parts)` columns (partition `p` = columns `p*part_size ..`).
/// Inside partition `p`, a row with `d > 0` entries there goes to bucket `j =
/// ceil(log2 d)` (width `2^j`) if `d <= 2^bucket_log`, otherwise it is cut into
/// `ceil(d / 2^bucket_log)` chunks of the largest width, all in the last bucket (the last
/// chunk padded). Rows without entries in a partition appear in none of its buckets.
/// `parts[p][j]` is the [`HybBucket`] of width `2^j`, `j = 0..=bucket_log`.
#[derive(Clone, Debug, PartialEq)]
pub struct Hyb<I, V> {
    rows: usize,
    cols: usize,
    part_size: usize,
    bucket_log: u32,
    parts: Vec<Vec<HybBucket<I, V>>>,
}

impl<I: Index, V: Value> Hyb<I, V> {
    /// Converts `a` with `num_col_parts >= 1` column partitions and buckets of width
    /// `1, 2, 4, ..., 2^bucket_log` (`bucket_log <= 24`).
    pub fn from_csr(
        a: &Csr<I, V>,
        num_col_parts: usize,
        bucket_log: u32,
    ) -> Result<Self, ComposeError> {
        if num_col_parts == 0 {
            return Err(bad("num_col_parts", 0, "must be positive"));
        }
        if bucket_log > 24 {
            return Err(bad("bucket_log", bucket_log as usize, "must be at most 24"));
        }
        check_canonical(a)?;
        let nb = bucket_log as usize + 1;
        let max_w = 1usize << bucket_log;
        let part_size = a.cols.div_ceil(num_col_parts).max(1);
        let single = num_col_parts == 1;
        // Visits each (row, partition, chunk) in order: f(row, part, bucket, start, end).
        let visit = |f: &mut dyn FnMut(usize, usize, usize, usize, usize)| {
            for i in 0..a.rows {
                let (mut p, e) = (a.indptr[i].ix(), a.indptr[i + 1].ix());
                while p < e {
                    let (part, q) = if single {
                        (0, e)
                    } else {
                        let part = a.indices[p].ix() / part_size;
                        let lim = (part + 1) * part_size;
                        let mut q = p + 1;
                        while q < e && a.indices[q].ix() < lim {
                            q += 1;
                        }
                        (part, q)
                    };
                    let d = q - p;
                    if d <= max_w {
                        f(i, part, ceil_log2(d) as usize, p, q);
                    } else {
                        let mut c = p;
                        while c < q {
                            let ce = (c + max_w).min(q);
                            f(i, part, nb - 1, c, ce);
                            c = ce;
                        }
                    }
                    p = q;
                }
            }
        };
        let mut count = vec![0usize; num_col_parts * nb];
        visit(&mut |_, part, j, _, _| count[part * nb + j] += 1);
        let mut parts: Vec<Vec<HybBucket<I, V>>> = Vec::with_capacity(num_col_parts);
        for part in 0..num_col_parts {
            let mut bs = Vec::with_capacity(nb);
            for j in 0..nb {
                let n = count[part * nb + j];
                let w = 1usize << j;
                let slots = mul("hyb slots", n, w)?;
                bs.push(HybBucket {
                    width: w,
                    row_indices: Vec::with_capacity(n),
                    col_indices: Vec::with_capacity(slots),
                    values: Vec::with_capacity(slots),
                    counts: Vec::with_capacity(n),
                });
            }
            parts.push(bs);
        }
        visit(&mut |i, part, j, s, e| {
            let b = &mut parts[part][j];
            let pad = b.width - (e - s);
            b.row_indices.push(I::from_ix(i));
            b.counts.push(I::from_ix(e - s));
            b.col_indices.extend_from_slice(&a.indices[s..e]);
            b.values.extend_from_slice(&a.values[s..e]);
            if pad > 0 {
                b.col_indices
                    .extend(std::iter::repeat_n(a.indices[e - 1], pad));
                b.values.extend(std::iter::repeat_n(V::zero(), pad));
            }
        });
        Ok(Hyb {
            rows: a.rows,
            cols: a.cols,
            part_size,
            bucket_log,
            parts,
        })
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
    /// Columns per partition (`ceil(cols / num_col_parts)`, at least 1).
    pub fn part_size(&self) -> usize {
        self.part_size
    }
    /// Number of column partitions.
    pub fn num_col_parts(&self) -> usize {
        self.parts.len()
    }
    /// Bucket widths `1, 2, 4, ..., 2^bucket_log`.
    pub fn bucket_widths(&self) -> Vec<usize> {
        (0..=self.bucket_log).map(|j| 1usize << j).collect()
    }
    /// `parts[p][j]`: bucket of width `2^j` of column partition `p`.
    pub fn parts(&self) -> &[Vec<HybBucket<I, V>>] {
        &self.parts
    }
    /// Total number of slots (valid and padding) over all buckets.
    pub fn total_slots(&self) -> usize {
        self.parts
            .iter()
            .flatten()
            .map(|b| b.col_indices.len())
            .sum()
    }
    /// Sums all buckets' valid entries back into a canonical CSR (split rows and
    /// partitions of the same row are concatenated in column order).
    pub fn to_csr(&self) -> Csr<I, V> {
        let mut ptr = vec![0usize; self.rows + 1];
        for b in self.parts.iter().flatten() {
            for (r, c) in b.row_indices.iter().zip(&b.counts) {
                ptr[r.ix() + 1] += c.ix();
            }
        }
        for i in 0..self.rows {
            ptr[i + 1] += ptr[i];
        }
        let nnz = ptr[self.rows];
        let mut next = ptr.clone();
        let mut indices = vec![I::ZERO; nnz];
        let mut values = vec![V::zero(); nnz];
        // Partitions in column order; a row sits in one bucket per partition, its chunks
        // in order, so each row is filled in ascending column order.
        for b in self.parts.iter().flatten() {
            for (r, (ri, c)) in b.row_indices.iter().zip(&b.counts).enumerate() {
                let (ri, c) = (ri.ix(), c.ix());
                let s = r * b.width;
                let o = next[ri];
                indices[o..o + c].copy_from_slice(&b.col_indices[s..s + c]);
                values[o..o + c].copy_from_slice(&b.values[s..s + c]);
                next[ri] += c;
            }
        }
        Csr {
            rows: self.rows,
            cols: self.cols,
            indptr: ptr.into_iter().map(I::from_ix).collect(),
            indices,
            values,
        }
    }
}

// ---------------------------------------------------------------------------------------
// 4. SR-BCRS (condense)
// ---------------------------------------------------------------------------------------

/// SR-BCRS(t, g) as built by SparseTIR's `condense` (Sputnik-style row tiles).
///
/// Layout: rows are grouped into `num_tiles = ceil(rows / t)` tiles (tile `k` = rows
/// `k*t .. k*t + t`, the last tile padded with zero rows). The union of nonzero columns
/// of a tile, ascending, is stored in column groups of `g` slots: tile `k` owns groups
/// `tile_ptr[k] .. tile_ptr[k+1]` and `ceil(union / g)` of them. Group `q` has column
/// indices `col_indices[q*g .. q*g + g]`; padding slots of the tile's last group repeat
/// its last valid column (`group_counts[q]` valid slots). Values are dense per (group,
/// tile row, slot): `values[(q*t + r)*g + s]` is the entry at row `k*t + r`, column
/// `col_indices[q*g + s]` (zero where the input has none).
#[derive(Clone, Debug, PartialEq)]
pub struct SrBcrs<I, V> {
    rows: usize,
    cols: usize,
    t: usize,
    g: usize,
    tile_ptr: Vec<I>,
    col_indices: Vec<I>,
    group_counts: Vec<I>,
    values: Vec<V>,
}

/// Converts `a` to SR-BCRS with tiles of `t` rows and column groups of `g` (see
/// [`SrBcrs`]); `t` and `g` must be positive.
pub fn condense<I: Index, V: Value>(
    a: &Csr<I, V>,
    t: usize,
    g: usize,
) -> Result<SrBcrs<I, V>, ComposeError> {
    if t == 0 {
        return Err(bad("t", 0, "must be positive"));
    }
    if g == 0 {
        return Err(bad("g", 0, "must be positive"));
    }
    check_canonical(a)?;
    let nt = blocks(a.rows, t);
    // Union of columns per tile (unsorted), then sorted by a counting transpose.
    let mut marker = vec![usize::MAX; a.cols];
    let mut uptr = vec![0usize; nt + 1];
    let mut uidx: Vec<usize> = Vec::new();
    for k in 0..nt {
        let (s, e) = (
            a.indptr[k * t].ix(),
            a.indptr[((k + 1) * t).min(a.rows)].ix(),
        );
        for c in &a.indices[s..e] {
            let c = c.ix();
            if marker[c] != k {
                marker[c] = k;
                uidx.push(c);
            }
        }
        uptr[k + 1] = uidx.len();
    }
    let (uidx, _) = sort_pattern(nt, a.cols, &uptr, &uidx);
    let mut tile_ptr = Vec::with_capacity(nt + 1);
    tile_ptr.push(I::ZERO);
    let mut ngroups = 0usize;
    for k in 0..nt {
        ngroups += (uptr[k + 1] - uptr[k]).div_ceil(g);
        tile_ptr.push(fit::<I>("groups", ngroups)?);
    }
    let slots = mul("SR-BCRS slots", ngroups, g)?;
    let nvals = mul("SR-BCRS values", slots, t)?;
    let mut col_indices = Vec::with_capacity(slots);
    let mut group_counts = Vec::with_capacity(ngroups);
    let mut values = vec![V::zero(); nvals];
    // `slot[c]` = position of column c in its tile's union.
    let mut slot = marker;
    for k in 0..nt {
        let u = &uidx[uptr[k]..uptr[k + 1]];
        for (s, &c) in u.iter().enumerate() {
            slot[c] = s;
        }
        for chunk in u.chunks(g) {
            col_indices.extend(chunk.iter().map(|&c| I::from_ix(c)));
            let last = chunk[chunk.len() - 1];
            col_indices.extend(std::iter::repeat_n(I::from_ix(last), g - chunk.len()));
            group_counts.push(I::from_ix(chunk.len()));
        }
        let g0 = tile_ptr[k].ix();
        for r in 0..t.min(a.rows - k * t) {
            let i = k * t + r;
            for p in a.indptr[i].ix()..a.indptr[i + 1].ix() {
                let s = slot[a.indices[p].ix()];
                values[((g0 + s / g) * t + r) * g + s % g] = a.values[p];
            }
        }
    }
    Ok(SrBcrs {
        rows: a.rows,
        cols: a.cols,
        t,
        g,
        tile_ptr,
        col_indices,
        group_counts,
        values,
    })
}

impl<I: Index, V: Value> SrBcrs<I, V> {
    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
    /// Rows per tile.
    pub fn tile_rows(&self) -> usize {
        self.t
    }
    /// Columns per group.
    pub fn group_width(&self) -> usize {
        self.g
    }
    /// Groups of each tile (`num_tiles + 1` pointers).
    pub fn tile_ptr(&self) -> &[I] {
        &self.tile_ptr
    }
    /// Column of each group slot (`num_groups * g`).
    pub fn col_indices(&self) -> &[I] {
        &self.col_indices
    }
    /// Valid slots per group.
    pub fn group_counts(&self) -> &[I] {
        &self.group_counts
    }
    /// Dense values, `num_groups * t * g`, index `(q*t + r)*g + s`.
    pub fn values(&self) -> &[V] {
        &self.values
    }
    /// The stored nonzeros as canonical CSR.
    pub fn to_csr(&self) -> Csr<I, V> {
        let (t, g) = (self.t, self.g);
        let mut indptr = Vec::with_capacity(self.rows + 1);
        indptr.push(I::ZERO);
        let (mut indices, mut values) = (Vec::new(), Vec::new());
        for k in 0..self.tile_ptr.len().saturating_sub(1) {
            let (q0, q1) = (self.tile_ptr[k].ix(), self.tile_ptr[k + 1].ix());
            for r in 0..t.min(self.rows - k * t) {
                for q in q0..q1 {
                    for s in 0..self.group_counts[q].ix() {
                        let v = self.values[(q * t + r) * g + s];
                        if !v.is_zero() {
                            indices.push(self.col_indices[q * g + s]);
                            values.push(v);
                        }
                    }
                }
                indptr.push(I::from_ix(indices.len()));
            }
        }
        Csr {
            rows: self.rows,
            cols: self.cols,
            indptr,
            indices,
            values,
        }
    }
}

// ---------------------------------------------------------------------------------------
// 5. GroupCOO / BlockGroupCOO
// ---------------------------------------------------------------------------------------

/// Insum's group size: `sqrt(nnz / nonempty_rows)` rounded to the nearest power of two
/// (in log scale), at least 1; 1 when there is no nonempty row.
pub fn insum_group_size(nnz: usize, nonempty_rows: usize) -> usize {
    if nnz == 0 || nonempty_rows == 0 {
        return 1;
    }
    let x = (nnz as f64 / nonempty_rows as f64).sqrt();
    let e = x.log2().round().clamp(0.0, 30.0) as u32;
    1usize << e
}

/// GroupCOO (Insum): each row's nonzeros are cut into groups of `group_size` entries.
///
/// Layout: group `q` belongs to row `group_rows[q]` (groups ordered by row, then column)
/// and has slots `q*G .. q*G + G` of `col_indices` / `values`; the first
/// `group_counts[q]` are valid, the rest pad the row's last group (column = the group's
/// last valid column, value zero). Empty rows have no group.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupCoo<I, V> {
    rows: usize,
    cols: usize,
    group_size: usize,
    group_rows: Vec<I>,
    col_indices: Vec<I>,
    values: Vec<V>,
    group_counts: Vec<I>,
}

impl<I: Index, V: Value> GroupCoo<I, V> {
    /// GroupCOO with Insum's group size ([`insum_group_size`] of nnz and nonempty rows).
    pub fn from_csr(a: &Csr<I, V>) -> Result<Self, ComposeError> {
        let ne = a.indptr.windows(2).filter(|w| w[1] > w[0]).count();
        Self::with_group_size(a, insum_group_size(a.nnz(), ne))
    }

    /// GroupCOO with an explicit positive group size.
    pub fn with_group_size(a: &Csr<I, V>, group_size: usize) -> Result<Self, ComposeError> {
        if group_size == 0 {
            return Err(bad("group_size", 0, "must be positive"));
        }
        check_canonical(a)?;
        fit::<I>("group_size", group_size)?;
        let gs = group_size;
        let ngroups: usize = a
            .indptr
            .windows(2)
            .map(|w| (w[1].ix() - w[0].ix()).div_ceil(gs))
            .sum();
        let slots = mul("GroupCOO slots", ngroups, gs)?;
        let mut out = GroupCoo {
            rows: a.rows,
            cols: a.cols,
            group_size: gs,
            group_rows: Vec::with_capacity(ngroups),
            col_indices: Vec::with_capacity(slots),
            values: Vec::with_capacity(slots),
            group_counts: Vec::with_capacity(ngroups),
        };
        for i in 0..a.rows {
            let (s, e) = (a.indptr[i].ix(), a.indptr[i + 1].ix());
            let mut p = s;
            while p < e {
                let q = (p + gs).min(e);
                out.group_rows.push(I::from_ix(i));
                out.group_counts.push(I::from_ix(q - p));
                out.col_indices.extend_from_slice(&a.indices[p..q]);
                out.values.extend_from_slice(&a.values[p..q]);
                let pad = gs - (q - p);
                out.col_indices
                    .extend(std::iter::repeat_n(a.indices[q - 1], pad));
                out.values.extend(std::iter::repeat_n(V::zero(), pad));
                p = q;
            }
        }
        Ok(out)
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
    /// Entries per group `G`.
    pub fn group_size(&self) -> usize {
        self.group_size
    }
    /// Row of each group.
    pub fn group_rows(&self) -> &[I] {
        &self.group_rows
    }
    /// Column of each slot (`num_groups * G`).
    pub fn col_indices(&self) -> &[I] {
        &self.col_indices
    }
    /// Value of each slot (`num_groups * G`).
    pub fn values(&self) -> &[V] {
        &self.values
    }
    /// Valid slots of each group.
    pub fn group_counts(&self) -> &[I] {
        &self.group_counts
    }
    /// The original matrix (valid slots, in order).
    pub fn to_csr(&self) -> Csr<I, V> {
        let mut ptr = vec![0usize; self.rows + 1];
        let (mut indices, mut values) = (Vec::new(), Vec::new());
        for (q, (r, c)) in self.group_rows.iter().zip(&self.group_counts).enumerate() {
            let s = q * self.group_size;
            let c = c.ix();
            ptr[r.ix() + 1] += c;
            indices.extend_from_slice(&self.col_indices[s..s + c]);
            values.extend_from_slice(&self.values[s..s + c]);
        }
        for i in 0..self.rows {
            ptr[i + 1] += ptr[i];
        }
        Csr {
            rows: self.rows,
            cols: self.cols,
            indptr: ptr.into_iter().map(I::from_ix).collect(),
            indices,
            values,
        }
    }
}

/// BlockGroupCOO (Insum): GroupCOO over the `b × b` blocks of BSR(b).
///
/// Layout: the nonzero blocks of each block row (sorted by block column) are cut into
/// groups of `group_size` blocks. Group `q` belongs to block row `group_block_rows[q]`
/// and has block slots `q*G .. q*G + G` of `block_cols`; the first `group_counts[q]` are
/// valid, padding repeats the group's last valid block column with a zero block.
/// `values` holds `b²` values per slot, row-major inside the block:
/// `values[((q*G + s)*b + bi)*b + bj]` is the entry at row `block_row*b + bi`, column
/// `block_col*b + bj` (zero outside the matrix).
#[derive(Clone, Debug, PartialEq)]
pub struct BlockGroupCoo<I, V> {
    rows: usize,
    cols: usize,
    block: usize,
    group_size: usize,
    group_block_rows: Vec<I>,
    block_cols: Vec<I>,
    values: Vec<V>,
    group_counts: Vec<I>,
}

impl<I: Index, V: Value> BlockGroupCoo<I, V> {
    /// BlockGroupCOO with `b × b` blocks and Insum's group size over blocks
    /// ([`insum_group_size`] of stored blocks and nonempty block rows).
    pub fn from_csr(a: &Csr<I, V>, b: usize) -> Result<Self, ComposeError> {
        let bsr = PaddedBsr::from_csr(a, b)?.bsr;
        let ne = bsr.indptr.windows(2).filter(|w| w[1] > w[0]).count();
        let gs = insum_group_size(bsr.nnz_blocks(), ne);
        Self::from_bsr(bsr, gs)
    }

    /// BlockGroupCOO with `b × b` blocks and an explicit positive group size.
    pub fn with_group_size(
        a: &Csr<I, V>,
        b: usize,
        group_size: usize,
    ) -> Result<Self, ComposeError> {
        if group_size == 0 {
            return Err(bad("group_size", 0, "must be positive"));
        }
        Self::from_bsr(PaddedBsr::from_csr(a, b)?.bsr, group_size)
    }

    fn from_bsr(bsr: Bsr<I, V>, gs: usize) -> Result<Self, ComposeError> {
        fit::<I>("group_size", gs)?;
        let b = bsr.block;
        let per = b * b;
        let br = bsr.block_rows();
        let ngroups: usize = bsr
            .indptr
            .windows(2)
            .map(|w| (w[1].ix() - w[0].ix()).div_ceil(gs))
            .sum();
        let slots = mul("BlockGroupCOO slots", ngroups, gs)?;
        let mut out = BlockGroupCoo {
            rows: bsr.rows,
            cols: bsr.cols,
            block: b,
            group_size: gs,
            group_block_rows: Vec::with_capacity(ngroups),
            block_cols: Vec::with_capacity(slots),
            values: Vec::with_capacity(mul("BlockGroupCOO values", slots, per)?),
            group_counts: Vec::with_capacity(ngroups),
        };
        for rb in 0..br {
            let (s, e) = (bsr.indptr[rb].ix(), bsr.indptr[rb + 1].ix());
            let mut p = s;
            while p < e {
                let q = (p + gs).min(e);
                out.group_block_rows.push(I::from_ix(rb));
                out.group_counts.push(I::from_ix(q - p));
                out.block_cols.extend_from_slice(&bsr.indices[p..q]);
                out.values.extend_from_slice(&bsr.values[p * per..q * per]);
                let pad = gs - (q - p);
                out.block_cols
                    .extend(std::iter::repeat_n(bsr.indices[q - 1], pad));
                out.values.extend(std::iter::repeat_n(V::zero(), pad * per));
                p = q;
            }
        }
        Ok(out)
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
    /// Block size `b`.
    pub fn block_size(&self) -> usize {
        self.block
    }
    /// Blocks per group `G`.
    pub fn group_size(&self) -> usize {
        self.group_size
    }
    /// Block row of each group.
    pub fn group_block_rows(&self) -> &[I] {
        &self.group_block_rows
    }
    /// Block column of each slot (`num_groups * G`).
    pub fn block_cols(&self) -> &[I] {
        &self.block_cols
    }
    /// Block values (`num_groups * G * b²`).
    pub fn values(&self) -> &[V] {
        &self.values
    }
    /// Valid block slots of each group.
    pub fn group_counts(&self) -> &[I] {
        &self.group_counts
    }
    /// The stored nonzeros as canonical CSR (through the equivalent BSR).
    pub fn to_csr(&self) -> Result<Csr<I, V>, ComposeError> {
        let per = self.block * self.block;
        let br = blocks(self.rows, self.block);
        let mut ptr = vec![0usize; br + 1];
        let (mut indices, mut values) = (Vec::new(), Vec::new());
        for (q, (rb, c)) in self
            .group_block_rows
            .iter()
            .zip(&self.group_counts)
            .enumerate()
        {
            let s = q * self.group_size;
            let c = c.ix();
            ptr[rb.ix() + 1] += c;
            indices.extend_from_slice(&self.block_cols[s..s + c]);
            values.extend_from_slice(&self.values[s * per..(s + c) * per]);
        }
        for i in 0..br {
            ptr[i + 1] += ptr[i];
        }
        let bsr = Bsr {
            rows: self.rows,
            cols: self.cols,
            block: self.block,
            indptr: ptr.into_iter().map(I::from_ix).collect(),
            indices,
            values,
        };
        let mut c = bsr.to_csr()?;
        c.eliminate_zeros();
        Ok(c)
    }
}

// ---------------------------------------------------------------------------------------
// 6. N:M structured sparsity
// ---------------------------------------------------------------------------------------

/// An `M × K` matrix with N:M structured sparsity along the reduction axis `K`, in the
/// layout of PTX `mma.sp`.
///
/// Columns are cut into `groups = ceil(K / m)` groups of `m` (the last one may reach past
/// `K`). Each group keeps exactly `n` slots: `values` is row-major `[M, groups * n]`,
/// slot `t` of group `j` of row `i` at `values[i * groups * n + j * n + t]`.
///
/// **Metadata.** Each kept slot stores its position inside the group in
/// `bits = max(1, ceil(log2 m))` bits (2 for 2:4); a group's field is
/// `idx_0 | idx_1 << bits | ... | idx_{n-1} << (n-1)*bits` with `idx_0 < idx_1 < ...`
/// (for 2:4: `idx_lo | idx_hi << 2`, one nibble). Fields are packed LSB-first into `u32`
/// words, `32 / (n*bits)` groups per word (8 for 2:4), never straddling a word; row `i`
/// owns `words_per_row = ceil(groups / groups_per_word)` words, group `j` is at word
/// `metadata[i * words_per_row + j / groups_per_word]`, shift
/// `(j % groups_per_word) * n * bits`. A group with fewer than `n` nonzeros is completed
/// with the smallest unused positions holding zero values.
#[derive(Clone, Debug, PartialEq)]
pub struct NmMatrix<V> {
    rows: usize,
    cols: usize,
    n: usize,
    m: usize,
    values: Vec<V>,
    metadata: Vec<u32>,
}

struct NmGeom {
    groups: usize,
    bits: usize,
    per_word: usize,
    words: usize,
}

fn nm_geom(cols: usize, n: usize, m: usize) -> Result<NmGeom, ComposeError> {
    if m == 0 || m > 1 << 16 {
        return Err(bad("m", m, "must be in 1..=65536"));
    }
    if n == 0 || n > m {
        return Err(bad("n", n, "must be in 1..=m"));
    }
    let bits = (ceil_log2(m) as usize).max(1);
    if n * bits > 32 {
        return Err(bad(
            "n",
            n,
            "n * ceil(log2 m) must be at most 32 metadata bits",
        ));
    }
    let groups = cols.div_ceil(m);
    let per_word = 32 / (n * bits);
    Ok(NmGeom {
        groups,
        bits,
        per_word,
        words: groups.div_ceil(per_word),
    })
}

impl<V: Value> NmMatrix<V> {
    fn build(
        rows: usize,
        cols: usize,
        n: usize,
        m: usize,
        mut row_entries: impl FnMut(usize, &mut Vec<(usize, V)>),
    ) -> Result<Self, ComposeError> {
        let geo = nm_geom(cols, n, m)?;
        let mut values =
            vec![V::zero(); mul("N:M values", mul("N:M values", rows, geo.groups)?, n)?];
        let mut metadata = vec![0u32; mul("N:M metadata", rows, geo.words)?];
        let mut ents: Vec<(usize, V)> = Vec::new();
        let mut used: Vec<bool> = vec![false; m];
        let mut kept: Vec<(usize, V)> = Vec::with_capacity(m);
        for i in 0..rows {
            ents.clear();
            row_entries(i, &mut ents);
            let mut p = 0;
            for j in 0..geo.groups {
                let lim = (j + 1) * m;
                kept.clear();
                while p < ents.len() && ents[p].0 < lim {
                    if !ents[p].1.is_zero() {
                        kept.push((ents[p].0 - j * m, ents[p].1));
                    }
                    p += 1;
                }
                if kept.len() > n {
                    return Err(ComposeError::NmViolation {
                        row: i,
                        group: j,
                        first_col: j * m,
                        count: kept.len(),
                        n,
                        m,
                    });
                }
                if kept.len() < n {
                    for &(x, _) in &kept {
                        used[x] = true;
                    }
                    let mut x = 0;
                    while kept.len() < n && x < m {
                        if !used[x] {
                            kept.push((x, V::zero()));
                        }
                        x += 1;
                    }
                    for &(x, _) in &kept {
                        used[x] = false;
                    }
                    kept.sort_unstable_by_key(|e| e.0);
                }
                let base = (i * geo.groups + j) * n;
                for (t, &(_, v)) in kept.iter().enumerate() {
                    values[base + t] = v;
                }
                let mut field = 0u32;
                for (t, &(x, _)) in kept.iter().enumerate() {
                    field |= (x as u32) << (t * geo.bits);
                }
                let w = i * geo.words + j / geo.per_word;
                metadata[w] |= field << ((j % geo.per_word) * n * geo.bits);
            }
        }
        Ok(NmMatrix {
            rows,
            cols,
            n,
            m,
            values,
            metadata,
        })
    }

    /// Compresses `a` (`M × K`) to N:M; fails with [`ComposeError::NmViolation`] naming
    /// the first row/group with more than `n` nonzero values (stored zeros are ignored).
    pub fn from_csr<I: Index>(a: &Csr<I, V>, n: usize, m: usize) -> Result<Self, ComposeError> {
        check_canonical(a)?;
        Self::build(a.rows, a.cols, n, m, |i, out| {
            let (s, e) = (a.indptr[i].ix(), a.indptr[i + 1].ix());
            out.extend(
                a.indices[s..e]
                    .iter()
                    .zip(&a.values[s..e])
                    .map(|(c, v)| (c.ix(), *v)),
            );
        })
    }

    /// 2:4 compression of `a` (the `mma.sp` default).
    pub fn from_csr_2_4<I: Index>(a: &Csr<I, V>) -> Result<Self, ComposeError> {
        Self::from_csr(a, 2, 4)
    }

    /// Compresses a dense row-major `rows × cols` array to N:M.
    pub fn from_dense(
        rows: usize,
        cols: usize,
        data: &[V],
        n: usize,
        m: usize,
    ) -> Result<Self, ComposeError> {
        let expected = mul("rows * cols", rows, cols)?;
        if data.len() != expected {
            return Err(ComposeError::DenseLength {
                len: data.len(),
                expected,
            });
        }
        Self::build(rows, cols, n, m, |i, out| {
            out.extend(
                data[i * cols..(i + 1) * cols]
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| !v.is_zero())
                    .map(|(c, v)| (c, *v)),
            );
        })
    }

    /// `(M, K)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
    /// `(n, m)`.
    pub fn pattern(&self) -> (usize, usize) {
        (self.n, self.m)
    }
    /// Column groups per row, `ceil(K / m)`.
    pub fn groups_per_row(&self) -> usize {
        self.cols.div_ceil(self.m)
    }
    /// Compressed values, row-major `[M, groups_per_row * n]`.
    pub fn values(&self) -> &[V] {
        &self.values
    }
    /// Packed metadata words (see the type documentation).
    pub fn metadata(&self) -> &[u32] {
        &self.metadata
    }
    /// Bits per stored position, `max(1, ceil(log2 m))`.
    pub fn index_bits(&self) -> usize {
        (ceil_log2(self.m) as usize).max(1)
    }
    /// Metadata `u32` words per row.
    pub fn words_per_row(&self) -> usize {
        let per_word = 32 / (self.n * self.index_bits());
        self.groups_per_row().div_ceil(per_word)
    }
    /// Position inside the group (`0..m`) of slot `t` of group `j` of row `i`, decoded
    /// from the metadata; `None` out of range.
    pub fn position(&self, i: usize, j: usize, t: usize) -> Option<usize> {
        if i >= self.rows || j >= self.groups_per_row() || t >= self.n {
            return None;
        }
        let bits = self.index_bits();
        let per_word = 32 / (self.n * bits);
        let w = *self.metadata.get(i * self.words_per_row() + j / per_word)?;
        let shift = (j % per_word) * self.n * bits + t * bits;
        Some(((w >> shift) & ((1u32 << bits) - 1)) as usize)
    }
    /// Dense row-major `M × K` array.
    pub fn to_dense(&self) -> Vec<V> {
        let mut out = vec![V::zero(); self.rows * self.cols];
        let groups = self.groups_per_row();
        for i in 0..self.rows {
            for j in 0..groups {
                for t in 0..self.n {
                    let c = j * self.m + self.position(i, j, t).unwrap_or(0);
                    let v = self.values[(i * groups + j) * self.n + t];
                    if c < self.cols && !v.is_zero() {
                        out[i * self.cols + c] = v;
                    }
                }
            }
        }
        out
    }
    /// The nonzeros as canonical CSR with index type `I`.
    pub fn to_csr<I: Index>(&self) -> Result<Csr<I, V>, ComposeError> {
        fit::<I>("rows", self.rows)?;
        fit::<I>("cols", self.cols)?;
        let groups = self.groups_per_row();
        let mut indptr = Vec::with_capacity(self.rows + 1);
        indptr.push(I::ZERO);
        let (mut indices, mut values) = (Vec::new(), Vec::new());
        for i in 0..self.rows {
            for j in 0..groups {
                for t in 0..self.n {
                    let c = j * self.m + self.position(i, j, t).unwrap_or(0);
                    let v = self.values[(i * groups + j) * self.n + t];
                    if c < self.cols && !v.is_zero() {
                        indices.push(I::from_ix(c));
                        values.push(v);
                    }
                }
            }
            indptr.push(fit::<I>("nnz", indices.len())?);
        }
        Ok(Csr {
            rows: self.rows,
            cols: self.cols,
            indptr,
            indices,
            values,
        })
    }
}

/// Keeps, in every group of `m` consecutive columns of every row, the `n` entries of
/// largest magnitude (ties: lower column first), so the result satisfies N:M; stored
/// zeros count as small entries. The result is canonical.
pub fn prune_to_nm<I: Index, V: Value>(
    a: &Csr<I, V>,
    n: usize,
    m: usize,
) -> Result<Csr<I, V>, ComposeError> {
    nm_geom(a.cols, n, m)?;
    check_canonical(a)?;
    let mut indptr = Vec::with_capacity(a.rows + 1);
    indptr.push(I::ZERO);
    let (mut indices, mut values) = (Vec::new(), Vec::new());
    let mut sel: Vec<usize> = Vec::with_capacity(m);
    for i in 0..a.rows {
        let (mut p, e) = (a.indptr[i].ix(), a.indptr[i + 1].ix());
        while p < e {
            let grp = a.indices[p].ix() / m;
            let mut q = p + 1;
            while q < e && a.indices[q].ix() / m == grp {
                q += 1;
            }
            sel.clear();
            sel.extend(p..q);
            if sel.len() > n {
                sel.sort_by(|&x, &y| {
                    a.values[y]
                        .to_f64()
                        .abs()
                        .total_cmp(&a.values[x].to_f64().abs())
                        .then(x.cmp(&y))
                });
                sel.truncate(n);
                sel.sort_unstable();
            }
            for &s in &sel {
                indices.push(a.indices[s]);
                values.push(a.values[s]);
            }
            p = q;
        }
        indptr.push(I::from_ix(indices.len()));
    }
    Ok(Csr {
        rows: a.rows,
        cols: a.cols,
        indptr,
        indices,
        values,
    })
}
