//! Arguments checked against a Stage-I function before compiled code runs.
//!
//! The interpreter checks every index as it goes; generated code does not. So before a
//! backend runs a lowered function, the arguments are checked here against the function's
//! Stage-I axes and accesses, which makes every access of the generated code land inside
//! its buffer:
//!
//! * [`scalar_values`] — every scalar parameter present and in its type's range;
//! * [`check_structure`] — the sparse structure sound: row pointers start at 0 or more,
//!   never decrease and end within `nnz`; coordinates lie inside their axis (and inside the
//!   row length of a `dense_variable` axis); sorted axes have sorted rows without duplicates;
//! * [`check_accesses`] — every index into a `dense_fixed` dimension and every integer
//!   divisor of the program proven in range for these scalars, by interval arithmetic over
//!   the iterators' coordinate ranges (an index read from an input the function never writes
//!   ranges over the values the input holds). What cannot be proven is refused with its
//!   location.

use crate::data::{Args, Scalar};
use crate::expr::{BinOp, Expr, UnOp};
use crate::func::{AxisId, Func, Layout, ParamKind, PatternOp, Stmt, StmtKind, VarId};
use crate::span::Span;
use crate::types::{AxisKind, DType, IterKind};
use crate::value::Value;
use std::collections::HashMap;

/// Why the arguments are refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ArgsError {
    /// A parameter has no value.
    #[error("no value for parameter `{0}`")]
    Missing(String),
    /// A scalar of the wrong kind or out of range.
    #[error("scalar `{param}`: {message}")]
    BadScalar {
        /// The parameter.
        param: String,
        /// What is wrong.
        message: String,
    },
    /// An array of the wrong element type.
    #[error("array `{param}` holds {found}, expected {expected}")]
    DType {
        /// The parameter.
        param: String,
        /// Its dtype.
        expected: DType,
        /// What it got.
        found: DType,
    },
    /// An array too short for the buffers bound to it.
    #[error("array `{param}` has {found} elements, needs at least {needed}")]
    Length {
        /// The parameter.
        param: String,
        /// Elements needed.
        needed: usize,
        /// Elements given.
        found: usize,
    },
    /// Broken sparse structure.
    #[error("array `{param}`: {message}")]
    Structure {
        /// The parameter.
        param: String,
        /// What is wrong.
        message: String,
    },
    /// A buffer whose storage size cannot be computed from the arguments, or overflows.
    #[error("buffer `{buffer}`: {message}")]
    Size {
        /// The buffer.
        buffer: String,
        /// What is wrong.
        message: String,
    },
    /// An access or a division that may leave its range for these arguments.
    #[error("{message}")]
    Access {
        /// The statement.
        span: Span,
        /// What may go wrong.
        message: String,
    },
}

type R<T> = Result<T, ArgsError>;

/// Elements of storage that `buffer` needs for `args`, by the storage rule: over its axes
/// from `off = 1`, a fixed axis multiplies by its row extent, a variable one reads its
/// `indptr[off]`; a dense buffer is the product of its shape; both plus `extra_storage`.
/// The scalars and row pointers come from `args` (checked by [`check_structure`] first).
pub fn buffer_len(func: &Func, buffer: crate::func::BufferId, args: &Args) -> R<usize> {
    let scalars = scalar_values(func, args)?;
    let buf = func.buffers.try_get(buffer).ok_or_else(|| ArgsError::Missing(format!("buffer #{}", buffer.index())))?;
    let err = |message: String| ArgsError::Size { buffer: buf.name.clone(), message };
    let value = |e: &Expr, what: &str| eval_int(e, &scalars).ok_or_else(|| err(format!("its {what} is not a parameter expression")));
    let overflow = || err("its storage size overflows".into());
    let mut size: i64 = 1;
    match &buf.layout {
        Layout::Sparse(axes) => {
            for &a in axes {
                let axis = func.axes.try_get(a).ok_or_else(|| err("an axis is dangling".into()))?;
                size = match (axis.kind.is_variable(), axis.indptr, axis.fixed_row_extent()) {
                    (true, Some(p), _) => {
                        let name = &func.params[p].name;
                        let ptr = args.arrays.get(name).ok_or_else(|| ArgsError::Missing(name.clone()))?;
                        let at = usize::try_from(size).map_err(|_| overflow())?;
                        ptr.get_i64(at).ok_or(ArgsError::Length { param: name.clone(), needed: at + 1, found: ptr.len() })?
                    }
                    (false, _, Some(extent)) => size.checked_mul(value(extent, &format!("axis `{}` extent", axis.name))?).ok_or_else(overflow)?,
                    _ => return Err(err(format!("axis `{}` has no row extent or indptr", axis.name))),
                };
            }
        }
        Layout::Dense(shape) => {
            for d in shape {
                size = size.checked_mul(value(d, "shape")?).ok_or_else(overflow)?;
            }
        }
    }
    if let Some(extra) = &buf.extra_storage {
        size = size.checked_add(value(extra, "extra_storage")?).ok_or_else(overflow)?;
    }
    usize::try_from(size).map_err(|_| err(format!("its storage size {size} is negative")))
}

/// The integer values of the scalar parameters of `func` (an assembled axis's `nnz`, which
/// the run computes, may be missing).
pub fn scalar_values(func: &Func, args: &Args) -> R<HashMap<VarId, i64>> {
    let mut out = HashMap::new();
    let computed = assembled_nnz(func);
    for p in &func.params {
        if let ParamKind::Scalar(v) = p.kind {
            let d = func.vars.try_get(v).map_or(DType::I32, |x| x.dtype);
            let Some(s) = args.scalars.get(&p.name) else {
                if computed.contains(&v) {
                    continue;
                }
                return Err(ArgsError::Missing(p.name.clone()));
            };
            let bad = |message: &str| ArgsError::BadScalar { param: p.name.clone(), message: message.into() };
            match (s, d) {
                (Scalar::Int(x), DType::I32) => {
                    i32::try_from(*x).map_err(|_| bad("does not fit in i32"))?;
                    out.insert(v, *x);
                }
                (Scalar::Int(x), DType::I64) => {
                    out.insert(v, *x);
                }
                (Scalar::Int(_) | Scalar::Float(_), d) if d.is_float() => {}
                (Scalar::Bool(_), DType::Bool) => {}
                _ => return Err(bad(&format!("is not a {d} value"))),
            }
        }
    }
    Ok(out)
}

/// The value of an integer expression over scalar parameters (`None` if it reads anything
/// else or fails), by the semantic core.
pub fn eval_int(e: &Expr, scalars: &HashMap<VarId, i64>) -> Option<i64> {
    let v = eval(e, scalars)?;
    v.as_int()
}

fn eval(e: &Expr, scalars: &HashMap<VarId, i64>) -> Option<Value> {
    Some(match e {
        Expr::Int(x, d) => Value::from_i64(*d, *x),
        Expr::Var(v) => Value::I64(*scalars.get(v)?),
        Expr::Binary(op, a, b) => {
            let (a, b) = (eval(a, scalars)?, eval(b, scalars)?);
            // Scalars are held as i64; bring both operands to the wider type.
            let d = if a.dtype() == DType::I64 || b.dtype() == DType::I64 { DType::I64 } else { a.dtype() };
            Value::binary(*op, a.cast(d), b.cast(d)).ok()?
        }
        Expr::Unary(op, a) => Value::unary(*op, eval(a, scalars)?).ok()?,
        Expr::Cast(d, a) => eval(a, scalars)?.cast(*d),
        _ => return None,
    })
}

/// Checks the sparse structure described by the axes of `func` (a Stage I or II function)
/// against `args`.
pub fn check_structure(func: &Func, args: &Args) -> R<()> {
    if func.axes.is_empty() {
        return Ok(());
    }
    let scalars = scalar_values(func, args)?;
    let eval = |e: &Expr| eval_int(e, &scalars);
    // Number of rows (parent positions) of each axis, computed in declaration order.
    let mut positions: HashMap<AxisId, i64> = HashMap::new();
    for (id, axis) in func.axes.iter() {
        let length = eval(&axis.length);
        let rows = match axis.parent {
            None => 1,
            Some(p) => positions.get(&p).copied().unwrap_or(0),
        };
        let total = match axis.kind {
            AxisKind::DenseFixed => length.unwrap_or(0).saturating_mul(if axis.parent.is_some() { rows } else { 1 }),
            AxisKind::SparseFixed => rows.saturating_mul(axis.nnz.as_ref().and_then(eval).unwrap_or(0)),
            // Computed by the run where not given; where given, exactly the pattern's rows (its
            // coordinates are written by the run, whatever they hold).
            AxisKind::SparseVariable if axis.pattern.is_some() => {
                let Some(name) = axis.indptr.map(|p| &func.params[p].name) else { continue };
                let Some(given) = args.arrays.get(name) else { continue };
                let (ptr, _) = assemble(func, id, args)?;
                for (r, pair) in ptr.windows(2).enumerate() {
                    let g = (given.get_i64(r), given.get_i64(r + 1));
                    if g != (Some(pair[0]), Some(pair[1])) {
                        return Err(ArgsError::Structure {
                            param: name.clone(),
                            message: format!(
                                "row {r} of assembled axis `{}` does not hold its pattern's {} entries from {} on",
                                axis.name,
                                pair[1] - pair[0],
                                pair[0]
                            ),
                        });
                    }
                }
                positions.insert(id, ptr.last().copied().unwrap_or(0));
                continue;
            }
            AxisKind::DenseVariable | AxisKind::SparseVariable => {
                let Some(p) = axis.indptr else { continue };
                let name = &func.params[p].name;
                let a = args.arrays.get(name).ok_or_else(|| ArgsError::Missing(name.clone()))?;
                let err = |message: String| ArgsError::Structure { param: name.clone(), message };
                if !a.dtype().is_int() {
                    return Err(err(format!("row pointers must be integers, found {}", a.dtype())));
                }
                let rows = rows.max(0) as usize;
                if a.len() < rows + 1 {
                    return Err(ArgsError::Length { param: name.clone(), needed: rows + 1, found: a.len() });
                }
                let mut prev = a.get_i64(0).unwrap_or(0);
                if prev < 0 {
                    return Err(err(format!("row pointer 0 is negative ({prev})")));
                }
                for i in 1..=rows {
                    let x = a.get_i64(i).unwrap_or(0);
                    if x < prev {
                        return Err(err(format!("row pointers decrease at row {}: {prev} then {x}", i - 1)));
                    }
                    // A dense_variable row holds the coordinates 0..its length.
                    if let (AxisKind::DenseVariable, Some(len)) = (axis.kind, length) {
                        if x - prev > len {
                            return Err(err(format!(
                                "row {} of axis `{}` has {} entries, more than its length {len}",
                                i - 1,
                                axis.name,
                                x - prev
                            )));
                        }
                    }
                    prev = x;
                }
                if let Some(nnz) = axis.nnz.as_ref().and_then(eval) {
                    if prev > nnz {
                        return Err(err(format!("the last row pointer {prev} exceeds nnz = {nnz}")));
                    }
                }
                prev
            }
        };
        positions.insert(id, total);
        if let (true, Some(p), None) = (axis.kind.is_sparse(), axis.indices, &axis.pattern) {
            check_coordinates(func, args, &positions, id, p, total, length)?;
        }
    }
    Ok(())
}

/// The pattern of assembled axis `id` for `args` (whose members' structure is sound, see
/// [`check_structure`]): its row pointer (`length + 1` entries over its root parent) and
/// coordinates, each row the sorted union or intersection of the members' rows. The
/// meaning of an assembled axis, defined once: the interpreter computes it with this and
/// the argument checks compare a given row pointer with it.
pub fn assemble(func: &Func, id: AxisId, args: &Args) -> R<(Vec<i64>, Vec<i64>)> {
    let axis = func.axes.try_get(id).ok_or_else(|| ArgsError::Missing(format!("axis #{}", id.index())))?;
    let Some(pt) = &axis.pattern else { return Err(ArgsError::Missing(format!("the pattern of axis `{}`", axis.name))) };
    let scalars = scalar_values(func, args)?;
    let parent = axis.parent.and_then(|p| func.axes.try_get(p));
    let rows = parent.and_then(|p| eval_int(&p.length, &scalars)).unwrap_or(0).max(0);
    let array = |p: Option<usize>| -> R<&crate::data::Array> {
        let name = p.map(|p| func.params[p].name.clone()).unwrap_or_default();
        args.arrays.get(&name).ok_or(ArgsError::Missing(name))
    };
    let members = pt
        .members
        .iter()
        .map(|&m| {
            let x = &func.axes[m];
            Ok((array(x.indptr)?, array(x.indices)?))
        })
        .collect::<R<Vec<_>>>()?;
    let mut ptr = Vec::with_capacity(rows as usize + 1);
    let mut coords: Vec<i64> = Vec::new();
    ptr.push(0);
    let mut row: Vec<i64> = Vec::new();
    for r in 0..rows as usize {
        row.clear();
        let span = |(p, _): &(&crate::data::Array, &crate::data::Array), r: usize| p.get_i64(r).unwrap_or(0)..p.get_i64(r + 1).unwrap_or(0);
        if pt.op == PatternOp::Product {
            // The rows of the second member picked by the coordinates of the first's row.
            let (a, b) = (members[0], members[1]);
            for q in span(&a, r) {
                let j = a.1.get_i64(q as usize).unwrap_or(-1);
                if let Ok(j) = usize::try_from(j) {
                    row.extend(span(&b, j).filter_map(|t| b.1.get_i64(t as usize)));
                }
            }
        }
        for (k, m) in members.iter().enumerate().filter(|_| pt.op != PatternOp::Product) {
            let mine = span(m, r).filter_map(|q| m.1.get_i64(q as usize));
            match pt.op {
                PatternOp::Intersect if k > 0 => {
                    let mut theirs: Vec<i64> = mine.collect();
                    theirs.sort_unstable();
                    row.retain(|c| theirs.binary_search(c).is_ok());
                }
                _ => row.extend(mine),
            }
        }
        row.sort_unstable();
        row.dedup();
        coords.extend_from_slice(&row);
        ptr.push(coords.len() as i64);
    }
    Ok((ptr, coords))
}

/// The `nnz` variables of the assembled axes of `func`: scalar parameters the run sets.
pub fn assembled_nnz(func: &Func) -> Vec<VarId> {
    func.axes
        .iter()
        .filter(|(_, a)| a.pattern.is_some())
        .filter_map(|(_, a)| match &a.nnz {
            Some(Expr::Var(v)) => Some(*v),
            _ => None,
        })
        .collect()
}

/// Whether `buffer` stores values over an assembled axis (over it as an axis, or, flat at
/// Stage III, sized by its `nnz`): its array is sized once the run has the pattern.
pub fn over_assembled(func: &Func, buffer: crate::func::BufferId) -> bool {
    let Some(b) = func.buffers.try_get(buffer) else { return false };
    match &b.layout {
        Layout::Sparse(axes) => axes.iter().any(|a| func.axes.try_get(*a).is_some_and(|x| x.pattern.is_some())),
        Layout::Dense(shape) => {
            let nnz = assembled_nnz(func);
            shape.iter().any(|e| nnz.iter().any(|v| e.uses_var(*v)))
        }
    }
}

/// Puts the pattern of assembled axis `id` into `args`: its row pointer `ptr` and
/// coordinates `coords` as arrays of its index type, and its `nnz` (`ptr`'s last entry).
pub fn set_pattern(func: &Func, id: AxisId, args: &mut Args, ptr: Vec<i64>, coords: Vec<i64>) -> R<()> {
    let axis = func.axes.try_get(id).ok_or_else(|| ArgsError::Missing(format!("axis #{}", id.index())))?;
    let total = ptr.last().copied().unwrap_or(0);
    let mut array = |name: Option<usize>, v: Vec<i64>| -> R<()> {
        let Some(p) = name else { return Ok(()) };
        let name = func.params[p].name.clone();
        let a = match axis.idtype {
            DType::I64 => crate::data::Array::I64(v),
            _ => crate::data::Array::I32(v.into_iter().map(i32::try_from).collect::<Result<_, _>>().map_err(|_| ArgsError::Structure {
                param: name.clone(),
                message: format!("axis `{}` holds {total} entries, which do not fit its index type {}", axis.name, axis.idtype),
            })?),
        };
        args.arrays.insert(name, a);
        Ok(())
    };
    array(axis.indptr, ptr)?;
    array(axis.indices, coords)?;
    if let Some(Expr::Var(v)) = &axis.nnz {
        if let Some(p) = func.params.iter().find(|p| p.kind == ParamKind::Scalar(*v)) {
            args.scalars.insert(p.name.clone(), Scalar::Int(total));
        }
    }
    Ok(())
}

/// Adds a zero-filled array for every buffer over an assembled axis ([`over_assembled`])
/// whose parameter `args` lacks, sized by the pattern `args` now holds.
pub fn zero_assembled_values(func: &Func, args: &mut Args) -> R<()> {
    for (h, b) in func.buffers.iter() {
        let crate::func::Storage::Param(p) = b.storage else { continue };
        let name = &func.params[p].name;
        if args.arrays.contains_key(name) || !over_assembled(func, h) {
            continue;
        }
        let len = buffer_len(func, h, args)?;
        args.arrays.insert(name.clone(), crate::data::Array::zeros(b.dtype, len));
    }
    Ok(())
}

/// Coordinates of sparse axis `id` (held by parameter `p`): inside the axis, sorted where
/// declared.
fn check_coordinates(
    func: &Func,
    args: &Args,
    positions: &HashMap<AxisId, i64>,
    id: AxisId,
    p: usize,
    total: i64,
    length: Option<i64>,
) -> R<()> {
    let axis = &func.axes[id];
    let name = &func.params[p].name;
    let a = args.arrays.get(name).ok_or_else(|| ArgsError::Missing(name.clone()))?;
    let err = |message: String| ArgsError::Structure { param: name.clone(), message };
    if !a.dtype().is_int() {
        return Err(err(format!("coordinates must be integers, found {}", a.dtype())));
    }
    let n = total.max(0) as usize;
    if a.len() < n {
        return Err(ArgsError::Length { param: name.clone(), needed: n, found: a.len() });
    }
    let len = length.unwrap_or(i64::MAX);
    for i in 0..n {
        let x = a.get_i64(i).unwrap_or(0);
        if x < 0 || x >= len {
            return Err(err(format!("coordinate {x} at position {i} is outside 0..{len} (axis `{}`)", axis.name)));
        }
    }
    // A root sparse axis is a set of coordinates (iterators over it are spatial points):
    // no duplicates, ascending where declared sorted. One that repeats them (COO's rows) is
    // non-decreasing where declared sorted; every position is an entry of its own.
    if axis.kind == AxisKind::SparseFixed && axis.parent.is_none() && !axis.unique {
        if axis.sorted {
            for k in 1..n {
                let (x, y) = (a.get_i64(k - 1).unwrap_or(0), a.get_i64(k).unwrap_or(0));
                if y < x {
                    return Err(err(format!("coordinates of root axis `{}` are not sorted ({x} then {y} at position {k})", axis.name)));
                }
            }
        }
    } else if axis.kind == AxisKind::SparseFixed && axis.parent.is_none() {
        if axis.sorted {
            for k in 1..n {
                let (x, y) = (a.get_i64(k - 1).unwrap_or(0), a.get_i64(k).unwrap_or(0));
                if y <= x {
                    return Err(err(format!("coordinates of root axis `{}` are not sorted without duplicates ({x} then {y} at position {k})", axis.name)));
                }
            }
        } else {
            let mut seen: Vec<i64> = (0..n).map(|k| a.get_i64(k).unwrap_or(0)).collect();
            seen.sort_unstable();
            if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
                return Err(err(format!("coordinate {} of root axis `{}` is stored twice", w[0], axis.name)));
            }
        }
    }
    // Sorted rows of a sparse-variable axis (binary searches rely on them).
    if axis.kind == AxisKind::SparseVariable && axis.sorted {
        let ip = &func.params[axis.indptr.unwrap_or(p)].name;
        if let Some(ptr) = args.arrays.get(ip) {
            let rows = positions.get(&axis.parent.unwrap_or(id)).copied().unwrap_or(0).max(0) as usize;
            for r in 0..rows {
                let (s, e) = (ptr.get_i64(r).unwrap_or(0), ptr.get_i64(r + 1).unwrap_or(0));
                for k in (s + 1).max(1)..e {
                    let (x, y) = (a.get_i64((k - 1) as usize).unwrap_or(0), a.get_i64(k as usize).unwrap_or(0));
                    if y <= x {
                        return Err(err(format!("row {r} is not sorted without duplicates ({x} then {y})")));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Checks that every index into a `dense_fixed` dimension (or a dense buffer's dimension)
/// and every integer divisor of the Stage-I function `func` stays in range for the scalars
/// of `args`: an index within `0 .. extent`, a divisor never 0. Indices are bounded by
/// interval arithmetic over the coordinate ranges of the iterators (an iterator over an
/// axis of length `n` lies in `0 .. n`, which [`check_structure`] guarantees for sparse
/// axes). An access that reads memory to compute an index, or an operation the intervals
/// do not cover, cannot be proven and is refused.
pub fn check_accesses(func: &Func, args: &Args) -> R<()> {
    let scalars = scalar_values(func, args)?;
    let written = crate::func::written_buffers(&func.body);
    let mut c = Checker { func, args, written, scalars, ranges: HashMap::new(), guards: Vec::new() };
    c.stmts(&func.body)
}

/// A closed interval of integers.
#[derive(Clone, Copy, Debug)]
struct Range {
    lo: i64,
    hi: i64,
}

struct Checker<'f> {
    func: &'f Func,
    args: &'f Args,
    /// Buffers the function writes; the others hold their arguments' values throughout.
    written: Vec<crate::func::BufferId>,
    scalars: HashMap<VarId, i64>,
    /// Ranges of the iterators and `let`s in scope.
    ranges: HashMap<VarId, Range>,
    /// Ranges that enclosing `if` conditions establish (`j < n` bounds `j` by `n - 1`).
    guards: Vec<(Expr, Range)>,
}

impl Checker<'_> {
    fn stmts(&mut self, list: &[Stmt]) -> R<()> {
        list.iter().try_for_each(|s| self.stmt(s))
    }

    fn stmt(&mut self, s: &Stmt) -> R<()> {
        for e in s.kind.exprs() {
            self.expr(e, s.span)?;
        }
        match &s.kind {
            StmtKind::Store { buffer, indices, .. } => self.access(*buffer, indices, s.span)?,
            StmtKind::Let { var, value } => {
                if let Some(r) = self.range(value) {
                    self.ranges.insert(*var, r);
                }
            }
            // Compiled code runs a `while` without counting (only `--checked` stops a runaway).
            StmtKind::While { .. } => {
                return Err(ArgsError::Access {
                    span: s.span,
                    message: "the iterations of this `while` loop cannot be bounded".into(),
                })
            }
            StmtKind::SpIter(it) => {
                let axes: Vec<AxisId> = it.axes.iter().flat_map(|a| a.axes()).collect();
                let kinds = it.iter_kinds().unwrap_or_default();
                let mut reduction_empty = false;
                for (k, (&v, a)) in it.vars.iter().zip(axes).enumerate() {
                    let len = self.func.axes.try_get(a).and_then(|x| eval_int(&x.length, &self.scalars));
                    let r = len.map_or(Range { lo: 0, hi: i64::MAX }, |n| Range { lo: 0, hi: n - 1 });
                    if len.is_some_and(|n| n <= 0) {
                        // No spatial point: nothing runs. No reduction step: only the init
                        // runs, once per spatial point.
                        if kinds.get(k) != Some(&IterKind::Reduce) {
                            return Ok(());
                        }
                        reduction_empty = true;
                        continue;
                    }
                    self.ranges.insert(v, r);
                }
                if reduction_empty {
                    return it.init.as_deref().map_or(Ok(()), |init| self.stmts(init));
                }
            }
            // Stage II/III: a loop variable lies in `min ..= min + extent - 1`, a block
            // iterator where its binding does.
            StmtKind::For(l) => {
                if let (Some(min), Some(extent)) = (self.range(&l.min), self.range(&l.extent)) {
                    if extent.hi <= 0 {
                        return Ok(()); // never runs
                    }
                    if let Some(hi) = min.hi.checked_add(extent.hi - 1) {
                        self.ranges.insert(l.var, Range { lo: min.lo, hi });
                    }
                }
            }
            StmtKind::Block(b) => {
                for it in &b.iters {
                    if let Some(r) = self.range(&it.binding) {
                        self.ranges.insert(it.var, r);
                    }
                }
            }
            _ => {}
        }
        if let StmtKind::If { cond, then_body, else_body } = &s.kind {
            let mark = self.guards.len();
            self.assume(cond);
            self.stmts(then_body)?;
            self.guards.truncate(mark);
            return self.stmts(else_body);
        }
        for child in s.kind.child_lists() {
            self.stmts(child)?;
        }
        Ok(())
    }

    /// Records the bounds that `cond` (comparisons joined by `&&`) puts on its operands.
    fn assume(&mut self, cond: &Expr) {
        let Expr::Binary(op, a, b) = cond else { return };
        if *op == BinOp::And {
            self.assume(a);
            self.assume(b);
            return;
        }
        // `x < y` as `x <= y - 1`; `y > x` as `x < y`.
        let (x, y, strict) = match op {
            BinOp::Lt => (a, b, 1),
            BinOp::Le => (a, b, 0),
            BinOp::Gt => (b, a, 1),
            BinOp::Ge => (b, a, 0),
            _ => return,
        };
        let (Some(rx), Some(ry)) = (self.range(x), self.range(y)) else { return };
        // Bounds through the condition: x <= y.hi - strict, and y >= x.lo + strict.
        let (Some(hi), Some(lo)) = (ry.hi.checked_sub(strict), rx.lo.checked_add(strict)) else { return };
        self.guards.push(((**x).clone(), Range { lo: rx.lo, hi: rx.hi.min(hi) }));
        self.guards.push(((**y).clone(), Range { lo: ry.lo.max(lo), hi: ry.hi }));
    }

    /// Divisions, then loads, inside `e`.
    fn expr(&self, e: &Expr, span: Span) -> R<()> {
        self.walk(e, span, false)?;
        self.walk(e, span, true)
    }

    fn walk(&self, e: &Expr, span: Span, loads: bool) -> R<()> {
        let mut result = Ok(());
        e.walk(&mut |x| {
            if result.is_err() {
                return;
            }
            result = match x {
                Expr::Load(b, idx) | Expr::AtomicAdd(b, idx, _) if loads => self.access(*b, idx, span),
                Expr::Binary(BinOp::Div | BinOp::FloorDiv | BinOp::FloorMod, _, d) if !loads && self.func.expr_dtype(d).is_int() => {
                    match self.range(d) {
                        Some(r) if r.lo > 0 || r.hi < 0 => Ok(()),
                        _ => Err(ArgsError::Access {
                            span,
                            message: "an integer divisor of this statement may be 0 for these arguments, \
                                      which compiled code cannot report"
                                .into(),
                        }),
                    }
                }
                _ => Ok(()),
            };
        });
        result
    }

    fn access(&self, b: crate::func::BufferId, idx: &[Expr], span: Span) -> R<()> {
        let Some(buf) = self.func.buffers.try_get(b) else { return Ok(()) };
        for (d, e) in idx.iter().enumerate() {
            let extent = match &buf.layout {
                Layout::Dense(shape) => shape.get(d).and_then(|x| eval_int(x, &self.scalars)),
                Layout::Sparse(axes) => {
                    let Some(axis) = axes.get(d).and_then(|&a| self.func.axes.try_get(a)) else { continue };
                    // Other axes are looked up (or guarded) by the lowering.
                    if axis.kind != AxisKind::DenseFixed {
                        continue;
                    }
                    eval_int(&axis.length, &self.scalars)
                }
            };
            let fits = match (self.range(e), extent) {
                (Some(r), Some(n)) => r.lo >= 0 && r.hi < n,
                _ => false,
            };
            if !fits {
                let what = match (self.range(e), extent) {
                    (Some(r), Some(n)) => format!("takes values in {}..={} but the dimension has extent {n}", r.lo, r.hi),
                    _ => "cannot be bounded".to_string(),
                };
                return Err(ArgsError::Access {
                    span,
                    message: format!("index {d} of buffer `{}` {what} for these arguments", buf.name),
                });
            }
        }
        Ok(())
    }

    /// The range of an integer expression, if the intervals cover it, narrowed by the
    /// enclosing guards.
    fn range(&self, e: &Expr) -> Option<Range> {
        let r = self.range_of(e);
        self.guards.iter().filter(|(g, _)| g == e).fold(r, |r, (_, g)| match r {
            Some(r) => Some(Range { lo: r.lo.max(g.lo), hi: r.hi.min(g.hi) }),
            None => Some(*g),
        })
    }

    fn range_of(&self, e: &Expr) -> Option<Range> {
        let point = |x: i64| Some(Range { lo: x, hi: x });
        match e {
            Expr::Int(x, _) => point(*x),
            Expr::Var(v) => self.ranges.get(v).copied().or_else(|| self.scalars.get(v).and_then(|&x| point(x))),
            Expr::Cast(d, a) if d.is_int() => {
                let r = self.range(a)?;
                // A cast to i32 keeps the range only where it fits.
                (*d == DType::I64 || (r.lo >= i32::MIN as i64 && r.hi <= i32::MAX as i64)).then_some(r)
            }
            // An index read from an input that is never written: the values it holds.
            Expr::Load(b, _) if !self.written.contains(b) => {
                let buf = self.func.buffers.try_get(*b)?;
                let crate::func::Storage::Param(p) = buf.storage else { return None };
                let a = self.args.arrays.get(&self.func.params.get(p)?.name)?;
                if !a.dtype().is_int() {
                    return None;
                }
                let mut values = (0..a.len()).filter_map(|i| a.get_i64(i));
                let first = values.next()?;
                let (mut lo, mut hi) = values.fold((first, first), |(lo, hi), x| (lo.min(x), hi.max(x)));
                // A coordinate the buffer does not store reads its default.
                if buf.axes().iter().any(|&x| self.func.axes.try_get(x).is_none_or(|x| x.kind != AxisKind::DenseFixed)) {
                    let d = match &buf.default {
                        Some(e) => eval_int(e, &self.scalars)?,
                        None => 0,
                    };
                    (lo, hi) = (lo.min(d), hi.max(d));
                }
                Some(Range { lo, hi })
            }
            Expr::Unary(UnOp::Neg, a) => {
                let r = self.range(a)?;
                Some(Range { lo: r.hi.checked_neg()?, hi: r.lo.checked_neg()? })
            }
            // Either value: the hull of both ranges.
            Expr::Select(_, a, b) => {
                let (x, y) = (self.range(a)?, self.range(b)?);
                Some(Range { lo: x.lo.min(y.lo), hi: x.hi.max(y.hi) })
            }
            Expr::Binary(op, a, b) => {
                let (x, y) = (self.range(a)?, self.range(b)?);
                let corners = |f: fn(i64, i64) -> Option<i64>| -> Option<Range> {
                    let c = [f(x.lo, y.lo)?, f(x.lo, y.hi)?, f(x.hi, y.lo)?, f(x.hi, y.hi)?];
                    Some(Range { lo: *c.iter().min()?, hi: *c.iter().max()? })
                };
                let r = match op {
                    BinOp::Add => Range { lo: x.lo.checked_add(y.lo)?, hi: x.hi.checked_add(y.hi)? },
                    BinOp::Sub => Range { lo: x.lo.checked_sub(y.hi)?, hi: x.hi.checked_sub(y.lo)? },
                    BinOp::Mul => corners(i64::checked_mul)?,
                    BinOp::Min => Range { lo: x.lo.min(y.lo), hi: x.hi.min(y.hi) },
                    BinOp::Max => Range { lo: x.lo.max(y.lo), hi: x.hi.max(y.hi) },
                    // Positive divisors only: floor division is monotone in the dividend.
                    BinOp::FloorDiv if y.lo > 0 => corners(|a, b| Some(a.div_euclid(b)))?,
                    BinOp::Div if y.lo > 0 && x.lo >= 0 => corners(i64::checked_div)?,
                    BinOp::FloorMod if y.lo > 0 => Range { lo: 0, hi: y.hi - 1 },
                    _ => return None,
                };
                // Values must not wrap in i32 arithmetic.
                let wraps = self.func.expr_dtype(a) == DType::I32 && (r.lo < i32::MIN as i64 || r.hi > i32::MAX as i64);
                (!wraps).then_some(r)
            }
            _ => None,
        }
    }
}
