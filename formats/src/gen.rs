//! Seeded, deterministic random matrix generators and small edge-case matrices.
//!
//! Randomness comes from [`SplitMix64`], a tiny 64-bit generator (Steele, Lea & Flood,
//! 2014; public-domain reference by Vigna) whose output depends only on the seed, so the
//! same seed gives the same matrix on every platform. Generated values lie in `(0, 1]`
//! (never zero), and every generator returns a canonical CSR (sorted, no duplicates).

use crate::coo::Coo;
use crate::csr::Csr;
use crate::scalar::{Index, Value};
use crate::validate::blocks;
use std::collections::HashSet;
use thiserror::Error;

/// Why a generator refused its parameters.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum GenError {
    /// A density outside `[0, 1]` (or NaN).
    #[error("density {0} is not in [0, 1]")]
    InvalidDensity(f64),
    /// More nonzeros requested than positions exist.
    #[error("{nnz} nonzeros requested but the matrix has only {capacity} positions")]
    TooManyNonzeros {
        /// Requested.
        nnz: usize,
        /// `rows * cols` (saturated).
        capacity: usize,
    },
    /// A dimension or count that does not fit the index type or `usize`.
    #[error("{what} = {value} is too large for the index type")]
    TooLarge {
        /// What is too large.
        what: &'static str,
        /// Its value (saturated).
        value: u64,
    },
    /// R-MAT probabilities that are negative, NaN or do not sum to 1.
    #[error(
        "R-MAT probabilities must be non-negative and sum to 1, got a={a}, b={b}, c={c}, d={d}"
    )]
    InvalidRmat {
        /// Top-left quadrant probability.
        a: f64,
        /// Top-right.
        b: f64,
        /// Bottom-left.
        c: f64,
        /// Bottom-right.
        d: f64,
    },
    /// A block size of zero.
    #[error("block size must be positive")]
    ZeroBlockSize,
    /// A row index beyond the matrix.
    #[error("row {row} out of range 0..{rows}")]
    RowOutOfRange {
        /// The row.
        row: usize,
        /// Number of rows.
        rows: usize,
    },
}

/// SplitMix64 pseudo-random generator: `state += 0x9E3779B97F4A7C15`, then a fixed
/// mix of the state is the output. Small, fast and fully determined by the seed.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n` (`n > 0`; returns 0 for `n == 0`), by multiply-shift (bias below
    /// 2^-64 · n, irrelevant here).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// A value in `(0, 1]`.
    pub fn value<V: Value>(&mut self) -> V {
        V::from_f64(1.0 - self.next_f64())
    }
}

fn check_dims<I: Index>(rows: usize, cols: usize) -> Result<u64, GenError> {
    for (what, v) in [("rows", rows), ("cols", cols)] {
        if v > I::MAX_USIZE {
            return Err(GenError::TooLarge {
                what,
                value: v as u64,
            });
        }
    }
    let total = (rows as u128) * (cols as u128);
    u64::try_from(total).map_err(|_| GenError::TooLarge {
        what: "rows * cols",
        value: u64::MAX,
    })
}

/// Picks `n` distinct positions of `0..total`, in a seed-determined order.
fn distinct_positions(rng: &mut SplitMix64, total: u64, n: u64) -> Vec<u64> {
    if n.saturating_mul(2) <= total {
        let mut seen = HashSet::with_capacity(n.min(1 << 20) as usize);
        let mut out = Vec::with_capacity(n.min(1 << 20) as usize);
        while (out.len() as u64) < n {
            let p = rng.below(total);
            if seen.insert(p) {
                out.push(p);
            }
        }
        out
    } else {
        // Dense request: pick the excluded positions instead (total <= 2n).
        let mut excluded = HashSet::new();
        while (excluded.len() as u64) < total - n {
            excluded.insert(rng.below(total));
        }
        (0..total).filter(|p| !excluded.contains(p)).collect()
    }
}

/// Builds a canonical CSR from linear positions `r * cols + c`, with random values.
fn from_positions<I: Index, V: Value>(
    rows: usize,
    cols: usize,
    pos: &[u64],
    rng: &mut SplitMix64,
) -> Result<Csr<I, V>, GenError> {
    if pos.len() > I::MAX_USIZE {
        return Err(GenError::TooLarge {
            what: "nnz",
            value: pos.len() as u64,
        });
    }
    let c = cols.max(1) as u64;
    let row = pos.iter().map(|p| I::from_ix((p / c) as usize)).collect();
    let col = pos.iter().map(|p| I::from_ix((p % c) as usize)).collect();
    let values = pos.iter().map(|_| rng.value::<V>()).collect();
    Ok(Coo {
        rows,
        cols,
        row,
        col,
        values,
    }
    .to_csr())
}

/// Uniformly random `rows × cols` matrix with exactly `nnz` distinct nonzeros.
pub fn uniform<I: Index, V: Value>(
    rows: usize,
    cols: usize,
    nnz: usize,
    seed: u64,
) -> Result<Csr<I, V>, GenError> {
    let total = check_dims::<I>(rows, cols)?;
    if nnz as u64 > total {
        return Err(GenError::TooManyNonzeros {
            nnz,
            capacity: total.min(usize::MAX as u64) as usize,
        });
    }
    let mut rng = SplitMix64::new(seed);
    let pos = distinct_positions(&mut rng, total, nnz as u64);
    from_positions(rows, cols, &pos, &mut rng)
}

/// Uniformly random matrix with `round(density · rows · cols)` nonzeros.
pub fn uniform_density<I: Index, V: Value>(
    rows: usize,
    cols: usize,
    density: f64,
    seed: u64,
) -> Result<Csr<I, V>, GenError> {
    if !(0.0..=1.0).contains(&density) {
        return Err(GenError::InvalidDensity(density));
    }
    let total = check_dims::<I>(rows, cols)?;
    let nnz = (density * total as f64).round().min(total as f64) as u64;
    let nnz = usize::try_from(nnz).map_err(|_| GenError::TooLarge {
        what: "nnz",
        value: nnz,
    })?;
    uniform(rows, cols, nnz, seed)
}

/// R-MAT power-law matrix of size `2^scale × 2^scale` from `edges` samples: each sample
/// descends `scale` levels choosing quadrant top-left/top-right/bottom-left/bottom-right
/// with probabilities `a, b, c, d`. Repeated samples are summed, so the result has at most
/// `edges` nonzeros.
pub fn rmat<I: Index, V: Value>(
    scale: u32,
    edges: usize,
    [a, b, c, d]: [f64; 4],
    seed: u64,
) -> Result<Csr<I, V>, GenError> {
    let sum = a + b + c + d;
    if [a, b, c, d].iter().any(|p| p.is_nan() || *p < 0.0)
        || !sum.is_finite()
        || (sum - 1.0).abs() > 1e-6
    {
        return Err(GenError::InvalidRmat { a, b, c, d });
    }
    if scale >= 63 {
        return Err(GenError::TooLarge {
            what: "2^scale",
            value: u64::MAX,
        });
    }
    let n = usize::try_from(1u64 << scale).map_err(|_| GenError::TooLarge {
        what: "2^scale",
        value: 1u64 << scale,
    })?;
    check_dims::<I>(n, n)?;
    if edges > I::MAX_USIZE {
        return Err(GenError::TooLarge {
            what: "edges",
            value: edges as u64,
        });
    }
    let mut rng = SplitMix64::new(seed);
    let (mut row, mut col, mut values) = (
        Vec::with_capacity(edges.min(1 << 20)),
        Vec::with_capacity(edges.min(1 << 20)),
        Vec::with_capacity(edges.min(1 << 20)),
    );
    for _ in 0..edges {
        let (mut i, mut j) = (0usize, 0usize);
        for _ in 0..scale {
            let u = rng.next_f64() * sum;
            let (di, dj) = if u < a {
                (0, 0)
            } else if u < a + b {
                (0, 1)
            } else if u < a + b + c {
                (1, 0)
            } else {
                (1, 1)
            };
            i = (i << 1) | di;
            j = (j << 1) | dj;
        }
        row.push(I::from_ix(i));
        col.push(I::from_ix(j));
        values.push(rng.value::<V>());
    }
    Ok(Coo {
        rows: n,
        cols: n,
        row,
        col,
        values,
    }
    .to_csr())
}

/// Square `n × n` banded matrix: every `(i, j)` with `|i − j| <= bandwidth` is stored.
pub fn banded<I: Index, V: Value>(
    n: usize,
    bandwidth: usize,
    seed: u64,
) -> Result<Csr<I, V>, GenError> {
    check_dims::<I>(n, n)?;
    let mut rng = SplitMix64::new(seed);
    let mut indptr = vec![I::ZERO];
    let (mut indices, mut values) = (Vec::new(), Vec::new());
    for i in 0..n {
        for j in i.saturating_sub(bandwidth)..=i.saturating_add(bandwidth).min(n.saturating_sub(1))
        {
            indices.push(I::from_ix(j));
            values.push(rng.value::<V>());
        }
        let nnz = indices.len();
        indptr.push(I::from_usize(nnz).ok_or(GenError::TooLarge {
            what: "nnz",
            value: nnz as u64,
        })?);
    }
    Ok(Csr {
        rows: n,
        cols: n,
        indptr,
        indices,
        values,
    })
}

/// Block-sparse `rows × cols` matrix: `round(block_density · #blocks)` distinct
/// `block × block` tiles chosen uniformly are completely filled (clipped at the edges).
pub fn block_sparse<I: Index, V: Value>(
    rows: usize,
    cols: usize,
    block: usize,
    block_density: f64,
    seed: u64,
) -> Result<Csr<I, V>, GenError> {
    if block == 0 {
        return Err(GenError::ZeroBlockSize);
    }
    if !(0.0..=1.0).contains(&block_density) {
        return Err(GenError::InvalidDensity(block_density));
    }
    check_dims::<I>(rows, cols)?;
    let (br, bc) = (blocks(rows, block), blocks(cols, block));
    let total = (br as u64)
        .checked_mul(bc as u64)
        .ok_or(GenError::TooLarge {
            what: "number of blocks",
            value: u64::MAX,
        })?;
    let nb = (block_density * total as f64).round().min(total as f64) as u64;
    let mut rng = SplitMix64::new(seed);
    let chosen = distinct_positions(&mut rng, total, nb);
    let mut coo = Coo::<I, V> {
        rows,
        cols,
        row: Vec::new(),
        col: Vec::new(),
        values: Vec::new(),
    };
    for p in chosen {
        let (rb, cb) = ((p / bc as u64) as usize, (p % bc as u64) as usize);
        for i in rb * block..((rb + 1) * block).min(rows) {
            for j in cb * block..((cb + 1) * block).min(cols) {
                let v = rng.value::<V>();
                coo.push(i, j, v).map_err(|_| GenError::TooLarge {
                    what: "nnz",
                    value: coo.nnz() as u64,
                })?;
            }
        }
    }
    Ok(coo.to_csr())
}

/// Random matrix (density about 0.3) whose rows `0, 3, 6, ...` and last row are empty.
pub fn with_empty_rows<I: Index, V: Value>(
    rows: usize,
    cols: usize,
    seed: u64,
) -> Result<Csr<I, V>, GenError> {
    let m = uniform_density::<I, V>(rows, cols, 0.3, seed)?;
    let mut coo = m.to_coo();
    let keep: Vec<bool> = coo
        .row
        .iter()
        .map(|r| r.ix() % 3 != 0 && r.ix() + 1 != rows)
        .collect();
    let mut k = keep.iter();
    coo.row.retain(|_| *k.next().unwrap_or(&false));
    let mut k = keep.iter();
    coo.col.retain(|_| *k.next().unwrap_or(&false));
    let mut k = keep.iter();
    coo.values.retain(|_| *k.next().unwrap_or(&false));
    Ok(coo.to_csr())
}

/// Matrix where row `row` stores every column and all other rows are empty.
pub fn single_full_row<I: Index, V: Value>(
    rows: usize,
    cols: usize,
    row: usize,
    seed: u64,
) -> Result<Csr<I, V>, GenError> {
    check_dims::<I>(rows, cols)?;
    if row >= rows {
        return Err(GenError::RowOutOfRange { row, rows });
    }
    let mut rng = SplitMix64::new(seed);
    let indptr = (0..=rows)
        .map(|i| if i <= row { I::ZERO } else { I::from_ix(cols) })
        .collect();
    let indices = (0..cols).map(I::from_ix).collect();
    let values = (0..cols).map(|_| rng.value::<V>()).collect();
    Ok(Csr {
        rows,
        cols,
        indptr,
        indices,
        values,
    })
}

/// The `1 × 1` matrix `[value]` (stored even if zero).
pub fn one_by_one<I: Index, V: Value>(value: V) -> Csr<I, V> {
    Csr {
        rows: 1,
        cols: 1,
        indptr: vec![I::ZERO, I::from_ix(1)],
        indices: vec![I::ZERO],
        values: vec![value],
    }
}
