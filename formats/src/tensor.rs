//! Sparse tensors of any order in coordinate form, the FROSTT `.tns` reader, and the
//! arrays of any chain of storage levels built from coordinates.
//!
//! A level is one axis of a sparse buffer: dense (`dense_fixed`: every coordinate of every
//! parent position is stored), compressed (`sparse_variable`: each parent position stores
//! its distinct coordinates, `indptr` delimits them; a root `sparse_fixed` is the same with
//! one parent and no `indptr`), or padded (`sparse_fixed` below a parent: every parent
//! position stores `k` coordinates, the longest row's count; padding repeats the row's last
//! coordinate, or 0, and holds zero, as [`crate::Ell`] does). [`Tensor::levels`] walks the
//! levels outermost first over entries sorted by the level order; duplicates are summed.

use crate::coo::Coo;
use crate::scalar::{Index, Value};
use thiserror::Error;

/// Why a tensor could not be read or laid out.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum TensorError {
    /// A `.tns` line is not `i1 i2 ... in value` with 1-based coordinates.
    #[error("line {line}: {message}")]
    Syntax {
        /// Line (1-based).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The file has no entries, so its order and shape are unknown.
    #[error("no entries: the order and shape of a `.tns` tensor come from its coordinates")]
    Empty,
    /// A coordinate, dimension or count does not fit the index type.
    #[error("{what} = {value} does not fit the index type")]
    Overflow {
        /// What it is.
        what: String,
        /// The value.
        value: u128,
    },
    /// The levels would store more positions than allowed.
    #[error("level {level} would store {positions} positions (limit {limit})")]
    TooLarge {
        /// Level (0 = outermost).
        level: usize,
        /// Positions it needs.
        positions: u128,
        /// The limit given.
        limit: usize,
    },
    /// The level kinds or modes do not match the tensor.
    #[error("{0}")]
    Shape(String),
}

/// A sparse tensor: its shape and entries `(coords[0][e], .., coords[n-1][e]) = values[e]`
/// in any order, possibly repeated (repeats are summed when laid out).
///
/// Invariants: `coords.len() == dims.len()`, every coordinate list as long as `values`,
/// every coordinate of mode `d` below `dims[d]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor<I, V> {
    dims: Vec<usize>,
    coords: Vec<Vec<I>>,
    values: Vec<V>,
}

/// The kind of one storage level (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LevelKind {
    /// Every coordinate `0..dim` of every parent position.
    Dense,
    /// The distinct coordinates of each parent position, delimited by `indptr`.
    Compressed,
    /// The distinct coordinates of the one root position, without `indptr`.
    Root,
    /// The coordinate of every entry of the one root position, repeated across the entries
    /// that share it (COO's row level, a root `sparse_fixed` axis with `unique = false`):
    /// each position holds one entry, so every level below holds one coordinate a position.
    Repeated,
    /// `k` coordinates per parent position, padded.
    Padded,
}

/// The arrays of one level.
#[derive(Clone, Debug, PartialEq)]
pub struct Level<I> {
    /// Dimension of the mode the level stores (bound of its coordinates).
    pub dim: usize,
    /// Positions per parent position for dense and padded levels, total positions for
    /// compressed and root levels.
    pub extent: usize,
    /// Row pointers (compressed levels).
    pub indptr: Option<Vec<I>>,
    /// Coordinates (compressed, root and padded levels).
    pub indices: Option<Vec<I>>,
}

/// A tensor laid out in levels: one [`Level`] per axis and the values of the last level's
/// positions.
#[derive(Clone, Debug, PartialEq)]
pub struct Levels<I, V> {
    /// The levels, outermost first.
    pub levels: Vec<Level<I>>,
    /// One value per position of the last level (zero where nothing is stored).
    pub values: Vec<V>,
}

impl<I: Index, V: Value> Tensor<I, V> {
    /// A tensor from its shape and entries; checks lengths, coordinates and that every
    /// dimension and the entry count fit `I`.
    pub fn try_new(dims: Vec<usize>, coords: Vec<Vec<I>>, values: Vec<V>) -> Result<Self, TensorError> {
        if coords.len() != dims.len() {
            return Err(TensorError::Shape(format!("{} coordinate lists for {} modes", coords.len(), dims.len())));
        }
        for (d, (&n, c)) in dims.iter().zip(&coords).enumerate() {
            fits::<I>(&format!("dimension {d}"), n as u128)?;
            if c.len() != values.len() {
                return Err(TensorError::Shape(format!("mode {d} has {} coordinates for {} values", c.len(), values.len())));
            }
            if let Some((e, x)) = c.iter().enumerate().find(|(_, x)| x.to_usize().is_none_or(|x| x >= n)) {
                return Err(TensorError::Shape(format!("entry {e}: coordinate {} of mode {d} is outside 0..{n}", x.to_i64())));
            }
        }
        fits::<I>("nnz", values.len() as u128)?;
        Ok(Tensor { dims, coords, values })
    }

    /// Shape.
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// Number of entries (repeats counted).
    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// The coordinates of mode `d`.
    pub fn coords(&self, d: usize) -> &[I] {
        &self.coords[d]
    }

    /// The values.
    pub fn values(&self) -> &[V] {
        &self.values
    }

    /// Lays the tensor out in levels: level `k` stores mode `modes[k]` with kind
    /// `kinds[k]`. Fails if any level would store more than `limit` positions.
    pub fn levels(&self, kinds: &[LevelKind], modes: &[usize], limit: usize) -> Result<Levels<I, V>, TensorError> {
        let n = self.dims.len();
        let mut seen = vec![false; n];
        if kinds.len() != n || modes.len() != n || modes.iter().any(|&m| m >= n || std::mem::replace(&mut seen[m], true)) {
            return Err(TensorError::Shape(format!(
                "a tensor of order {n} needs {n} levels over a permutation of its modes, found {} levels over modes {modes:?}",
                kinds.len()
            )));
        }
        if let Some(k) = kinds.iter().skip(1).position(|&k| matches!(k, LevelKind::Root | LevelKind::Repeated)) {
            return Err(TensorError::Shape(format!("level {} is a root level below level 0", k + 1)));
        }
        // Entries sorted by the level order, repeats summed (keys flat, `n` per entry).
        let mut flat = Vec::with_capacity(self.nnz() * n);
        for e in 0..self.nnz() {
            flat.extend(modes.iter().map(|&m| self.coords[m][e].ix()));
        }
        let key = |e: usize| &flat[e * n..e * n + n];
        let mut order: Vec<usize> = (0..self.nnz()).collect();
        order.sort_unstable_by(|&a, &b| key(a).cmp(key(b)));
        let (mut keys, mut vals): (Vec<usize>, Vec<f64>) = (Vec::with_capacity(flat.len()), Vec::with_capacity(order.len()));
        for e in order {
            let v = self.values[e].to_f64();
            if vals.last().is_some() && keys[keys.len() - n..] == *key(e) {
                *vals.last_mut().expect("non-empty") += v;
            } else {
                keys.extend_from_slice(key(e));
                vals.push(v);
            }
        }
        drop(flat);
        // Entries of each position of the current level: a range of the sorted entries.
        let mut ranges: Vec<(usize, usize)> = vec![(0, vals.len())];
        let mut levels = Vec::with_capacity(n);
        for (l, (&kind, &mode)) in kinds.iter().zip(modes).enumerate() {
            let dim = self.dims[mode];
            let coord = |e: usize| keys[e * n + l];
            // Runs of equal coordinates inside one parent range.
            let runs = |(s, e): (usize, usize)| {
                let mut out = Vec::new();
                let mut a = s;
                while a < e {
                    let mut b = a + 1;
                    while b < e && coord(b) == coord(a) {
                        b += 1;
                    }
                    out.push((coord(a), a, b));
                    a = b;
                }
                out
            };
            let too_large = |positions: u128| TensorError::TooLarge { level: l, positions, limit };
            let mut next = Vec::new();
            let level = match kind {
                LevelKind::Dense => {
                    let total = ranges.len() as u128 * dim as u128;
                    if total > limit as u128 {
                        return Err(too_large(total));
                    }
                    for &(s, e) in &ranges {
                        let mut a = s;
                        for c in 0..dim {
                            let mut b = a;
                            while b < e && coord(b) == c {
                                b += 1;
                            }
                            next.push((a, b));
                            a = b;
                        }
                    }
                    Level { dim, extent: dim, indptr: None, indices: None }
                }
                LevelKind::Compressed | LevelKind::Root => {
                    let mut indptr = vec![I::ZERO];
                    let mut indices = Vec::new();
                    for &r in &ranges {
                        for (c, a, b) in runs(r) {
                            indices.push(I::from_ix(c));
                            next.push((a, b));
                        }
                        fits::<I>("nnz", next.len() as u128)?;
                        indptr.push(I::from_ix(next.len()));
                    }
                    let extent = next.len();
                    let indptr = (kind == LevelKind::Compressed).then_some(indptr);
                    Level { dim, extent, indptr, indices: Some(indices) }
                }
                LevelKind::Repeated => {
                    let mut indices = Vec::with_capacity(vals.len());
                    for &(s, e) in &ranges {
                        for x in s..e {
                            indices.push(I::from_ix(coord(x)));
                            next.push((x, x + 1));
                        }
                    }
                    fits::<I>("nnz", next.len() as u128)?;
                    Level { dim, extent: next.len(), indptr: None, indices: Some(indices) }
                }
                LevelKind::Padded => {
                    let rows: Vec<_> = ranges.iter().map(|&r| runs(r)).collect();
                    let k = rows.iter().map(Vec::len).max().unwrap_or(0).max(1);
                    let total = ranges.len() as u128 * k as u128;
                    if total > limit as u128 {
                        return Err(too_large(total));
                    }
                    fits::<I>("the row width", k as u128)?;
                    let mut indices = Vec::with_capacity(total as usize);
                    for row in rows {
                        let pad = row.last().map_or(0, |r| r.0);
                        for &(c, a, b) in &row {
                            indices.push(I::from_ix(c));
                            next.push((a, b));
                        }
                        for _ in row.len()..k {
                            indices.push(I::from_ix(pad));
                            next.push((0, 0));
                        }
                    }
                    Level { dim, extent: k, indptr: None, indices: Some(indices) }
                }
            };
            if next.len() > limit {
                return Err(too_large(next.len() as u128));
            }
            levels.push(level);
            ranges = next;
        }
        let values = ranges.iter().map(|&(a, b)| V::from_f64(vals[a..b].iter().sum())).collect();
        Ok(Levels { levels, values })
    }
}

impl<I: Index, V: Value> From<&Coo<I, V>> for Tensor<I, V> {
    fn from(m: &Coo<I, V>) -> Self {
        Tensor { dims: vec![m.rows, m.cols], coords: vec![m.row.clone(), m.col.clone()], values: m.values.clone() }
    }
}

fn fits<I: Index>(what: &str, value: u128) -> Result<(), TensorError> {
    match usize::try_from(value).ok().and_then(I::from_usize) {
        Some(_) => Ok(()),
        None => Err(TensorError::Overflow { what: what.to_string(), value }),
    }
}

/// Writes a tensor as FROSTT `.tns` text (1-based coordinates, one entry a line). The
/// format has no shape line: reading it back gives the largest coordinate of each mode.
pub fn write_tns<I: Index, V: Value>(t: &Tensor<I, V>) -> String {
    let mut out = String::new();
    for e in 0..t.nnz() {
        for c in &t.coords {
            out.push_str(&(c[e].ix() + 1).to_string());
            out.push(' ');
        }
        out.push_str(&format!("{:?}\n", t.values[e].to_f64()));
    }
    out
}

/// Parses a FROSTT `.tns` file: one entry a line, `i1 .. in value` with 1-based
/// coordinates; `#` starts a comment; every line has the same order. The shape is the
/// largest coordinate of each mode.
pub fn parse_tns<I: Index, V: Value>(input: &[u8]) -> Result<Tensor<I, V>, TensorError> {
    let text = std::str::from_utf8(input).map_err(|e| {
        let line = input[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
        TensorError::Syntax { line, message: "not UTF-8".into() }
    })?;
    let mut coords: Vec<Vec<I>> = Vec::new();
    let mut dims: Vec<usize> = Vec::new();
    let mut values = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = n + 1;
        let body = raw.split('#').next().unwrap_or("");
        let toks: Vec<&str> = body.split_whitespace().collect();
        if toks.is_empty() {
            continue;
        }
        let syntax = |message: String| TensorError::Syntax { line, message };
        if toks.len() < 2 {
            return Err(syntax(format!("expected coordinates and a value, found `{}`", body.trim())));
        }
        let order = toks.len() - 1;
        if coords.is_empty() {
            coords = vec![Vec::new(); order];
            dims = vec![0; order];
        } else if order != coords.len() {
            return Err(syntax(format!("{order} coordinates, but the first entry has {}", coords.len())));
        }
        for (d, t) in toks[..order].iter().enumerate() {
            let c: u64 = t.parse().map_err(|_| syntax(format!("coordinate {} is not a positive integer: `{t}`", d + 1)))?;
            if c == 0 {
                return Err(syntax(format!("coordinate {} is 0; `.tns` coordinates start at 1", d + 1)));
            }
            let c = usize::try_from(c - 1).ok().and_then(I::from_usize).ok_or(TensorError::Overflow {
                what: format!("line {line}: coordinate {}", d + 1),
                value: u128::from(c),
            })?;
            dims[d] = dims[d].max(c.ix() + 1);
            coords[d].push(c);
        }
        let v: f64 = toks[order].parse().map_err(|_| syntax(format!("value is not a number: `{}`", toks[order])))?;
        values.push(V::from_f64(v));
    }
    if values.is_empty() {
        return Err(TensorError::Empty);
    }
    Tensor::try_new(dims, coords, values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use LevelKind::*;

    fn t3() -> Tensor<i32, f64> {
        // (0,1,2)=1, (0,1,0)=2, (2,0,1)=3, (0,1,2)=4 (a repeat)
        parse_tns(b"# a comment\n1 2 3 1.0\n1 2 1 2\n3 1 2 3\n\n1 2 3 4 # repeat\n").unwrap()
    }

    #[test]
    fn tns_shape_comes_from_the_largest_coordinates_and_errors_name_the_line() {
        let t = t3();
        assert_eq!(t.dims(), &[3, 2, 3]);
        assert_eq!(t.nnz(), 4);
        let e = |s: &[u8]| parse_tns::<i32, f64>(s).unwrap_err().to_string();
        assert_eq!(e(b"1 2 3\n1 2\n"), "line 2: 1 coordinates, but the first entry has 2");
        assert_eq!(e(b"0 1 1.0\n"), "line 1: coordinate 1 is 0; `.tns` coordinates start at 1");
        assert_eq!(e(b"1 x 1.0\n"), "line 1: coordinate 2 is not a positive integer: `x`");
        assert_eq!(e(b"3000000000 1 1.0\n"), "line 1: coordinate 1 = 3000000000 does not fit the index type");
        assert_eq!(e(b"# nothing\n"), TensorError::Empty.to_string());
    }

    #[test]
    fn written_tns_reads_back() {
        let t = t3();
        assert_eq!(parse_tns::<i32, f64>(write_tns(&t).as_bytes()).unwrap(), t);
    }

    #[test]
    fn coo_levels_give_every_entry_a_position_sorted_with_repeats_summed() {
        // COO: the root repeats mode 0 once per (distinct) entry; singletons below it.
        let l = t3().levels(&[Repeated, Padded, Padded], &[0, 1, 2], 1 << 20).unwrap();
        assert_eq!(l.levels[0].extent, 3);
        assert_eq!(l.levels[0].indices.as_deref(), Some(&[0, 0, 2][..]));
        assert_eq!((l.levels[1].extent, l.levels[1].indices.as_deref()), (1, Some(&[1, 1, 0][..])));
        assert_eq!((l.levels[2].extent, l.levels[2].indices.as_deref()), (1, Some(&[0, 2, 1][..])));
        assert_eq!(l.values, vec![2.0, 5.0, 3.0]);
        let e = t3().levels(&[Dense, Repeated, Padded], &[0, 1, 2], 1 << 20).unwrap_err().to_string();
        assert!(e.contains("level 1 is a root level below level 0"), "{e}");
    }

    #[test]
    fn csf_levels_sum_repeats_and_keep_only_stored_fibres() {
        let l = t3().levels(&[Dense, Compressed, Compressed], &[0, 1, 2], 1 << 20).unwrap();
        assert_eq!(l.levels[0].extent, 3);
        assert_eq!(l.levels[1].indptr.as_deref(), Some(&[0, 1, 1, 2][..]));
        assert_eq!(l.levels[1].indices.as_deref(), Some(&[1, 0][..]));
        assert_eq!(l.levels[2].indptr.as_deref(), Some(&[0, 2, 3][..]));
        assert_eq!(l.levels[2].indices.as_deref(), Some(&[0, 2, 1][..]));
        assert_eq!(l.values, vec![2.0, 5.0, 3.0]);
    }

    #[test]
    fn modes_reorder_levels_and_roots_and_padding_follow_their_rules() {
        // A 3x4 matrix as DCSC (root columns, compressed rows) and as ELL.
        let m = Tensor::<i32, f32>::try_new(vec![3, 4], vec![vec![0, 2, 2], vec![3, 0, 3]], vec![1.0, 2.0, 3.0]).unwrap();
        let dcsc = m.levels(&[Root, Compressed], &[1, 0], 100).unwrap();
        assert_eq!(dcsc.levels[0].indices.as_deref(), Some(&[0, 3][..]));
        assert_eq!(dcsc.levels[0].indptr, None);
        assert_eq!(dcsc.levels[1].indptr.as_deref(), Some(&[0, 1, 3][..]));
        assert_eq!(dcsc.levels[1].indices.as_deref(), Some(&[2, 0, 2][..]));
        assert_eq!(dcsc.values, vec![2.0, 1.0, 3.0]);
        let ell = m.levels(&[Dense, Padded], &[0, 1], 100).unwrap();
        assert_eq!(ell.levels[1].extent, 2);
        assert_eq!(ell.levels[1].indices.as_deref(), Some(&[3, 3, 0, 0, 0, 3][..]));
        assert_eq!(ell.values, vec![1.0, 0.0, 0.0, 0.0, 2.0, 3.0]);
        // A dense level over a large mode is refused before it is allocated.
        let big = Tensor::<i64, f32>::try_new(vec![1 << 40, 2], vec![vec![5], vec![1]], vec![1.0]).unwrap();
        assert!(matches!(big.levels(&[Dense, Dense], &[0, 1], 1 << 20), Err(TensorError::TooLarge { level: 0, .. })));
        assert!(matches!(m.levels(&[Dense, Root], &[0, 1], 100), Err(TensorError::Shape(_))));
        assert!(matches!(m.levels(&[Dense, Dense], &[0, 0], 100), Err(TensorError::Shape(_))));
    }
}
