//! Buffer accesses: from indices (coordinates at Stage I, positions at Stage II, flat
//! offsets at Stage III) to an element of storage, and the axis arrays behind them.

use crate::error::InterpError;
use crate::machine::{BufLayout, Machine, Result};
use sparsec_ir::value::{array_get, array_set, Value};
use sparsec_ir::data::Array;
use sparsec_ir::{AxisId, AxisKind, BufferId, Expr, Span, Stage};

/// Where an access lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    /// This element of the buffer's storage.
    At(usize),
    /// A Stage-I coordinate that the buffer does not store.
    Absent,
}

/// Accesses with at most this many indices evaluate them without allocating.
const INLINE_DIMS: usize = 8;

fn overflow(span: Span) -> Box<InterpError> {
    Box::new(InterpError::BadSize { message: "storage offset overflows".into(), span })
}

impl<'f> Machine<'f> {
    /// Evaluates the indices of an access and resolves them. A store to an absent
    /// coordinate (`write`) is an error.
    pub(crate) fn locate(&mut self, b: BufferId, idx: &'f [Expr], write: bool, span: Span) -> Result<Slot> {
        let n = idx.len();
        if n > INLINE_DIMS {
            let mut vals = vec![0; n];
            return self.locate_in(b, idx, &mut vals, write, span);
        }
        let mut vals = [0i64; INLINE_DIMS];
        self.locate_in(b, idx, &mut vals[..n], write, span)
    }

    /// [`Machine::locate`] with room for the evaluated indices.
    fn locate_in(&mut self, b: BufferId, idx: &'f [Expr], vals: &mut [i64], write: bool, span: Span) -> Result<Slot> {
        let mut d = 0;
        while d < idx.len() {
            vals[d] = self.index_value(&idx[d], span)?;
            d += 1;
        }
        let slot = self.resolve(b, idx, vals, span)?;
        if write && slot == Slot::Absent {
            let buffer = self.buffer_name(b);
            return Err(InterpError::AbsentStore { buffer, coords: vals.to_vec(), span }.into());
        }
        Ok(slot)
    }

    /// Evaluates an index; variables, by far the most common indices, skip the evaluator.
    fn index_value(&mut self, e: &'f Expr, span: Span) -> Result<i64> {
        if let Expr::Var(v) = e {
            match self.vars.get(v.index()) {
                Some(Some(Value::I32(x))) => return Ok(*x as i64),
                Some(Some(Value::I64(x))) => return Ok(*x),
                _ => {}
            }
        }
        self.eval_int(e, span)
    }

    fn resolve(&self, b: BufferId, exprs: &[Expr], idx: &[i64], span: Span) -> Result<Slot> {
        let info = self.info(b, span)?;
        if idx.len() != info.ndim() {
            let message = format!("buffer `{}` takes {} indices, found {}", self.buffer_name(b), info.ndim(), idx.len());
            return Err(InterpError::Invalid { message, span }.into());
        }
        let off = match &info.layout {
            BufLayout::Dense(shape) => {
                let mut off = 0i64;
                for dim in 0..shape.len() {
                    off = self.fixed_step(b, dim, off, idx[dim], shape[dim], span)?;
                }
                off
            }
            BufLayout::Sparse(axes) if self.func.stage == Stage::I => match self.coords_offset(b, axes, exprs, idx, span)? {
                Some(off) => off,
                None => return Ok(Slot::Absent),
            },
            BufLayout::Sparse(axes) => self.positions_offset(b, axes, idx, span)?,
        };
        // The upper bound is checked by `read` and `write`.
        match usize::try_from(off) {
            Ok(i) => Ok(Slot::At(i)),
            Err(_) => {
                let len = self.buf_array(b, span)?.len();
                Err(InterpError::OutOfBounds { buffer: self.buffer_name(b), index: off, len, span }.into())
            }
        }
    }

    /// One step of the walk over a fixed dimension: `off * extent + i`, with `i` checked.
    fn fixed_step(&self, b: BufferId, dim: usize, off: i64, i: i64, extent: i64, span: Span) -> Result<i64> {
        let next = off.checked_mul(extent).and_then(|o| o.checked_add(i));
        match next {
            Some(next) if i >= 0 && i < extent => Ok(next),
            _ => self.check_index(b, dim, i, extent, next, span),
        }
    }

    /// Stage I: walks coordinates; `None` when a coordinate is not stored.
    fn coords_offset(&self, b: BufferId, axes: &[AxisId], exprs: &[Expr], idx: &[i64], span: Span) -> Result<Option<i64>> {
        let mut off = 0i64;
        for dim in 0..axes.len() {
            let (a, c) = (axes[dim], idx[dim]);
            let ax = &self.axes[a.index()];
            // The iterator over this very axis, in the row its parent's index names (the
            // previous index is the iterator that picked its row; a root axis has one row),
            // gives its own position; any other index is looked up: the first position holding
            // it, as Stage II does (they differ where a row repeats a coordinate, as ELL padding
            // and a `unique = false` root do).
            if let Expr::Var(v) = &exprs[dim] {
                if let Some(Some(p)) = self.iters.get(v.index()) {
                    let in_row = match ax.parent {
                        Some(_) => dim > 0 && p.src.is_some_and(|s| exprs[dim - 1] == Expr::Var(s)),
                        None => dim == 0 && ax.kind == AxisKind::SparseFixed,
                    };
                    if p.axis == a && p.row == off && in_row {
                        off = p.flat;
                        continue;
                    }
                }
            }
            off = match ax.kind {
                AxisKind::DenseFixed => self.fixed_step(b, dim, off, c, ax.length, span)?,
                AxisKind::DenseVariable => {
                    let (start, end) = self.row_range(a, off, span)?;
                    if c < 0 || c >= end - start {
                        return Ok(None);
                    }
                    start + c
                }
                AxisKind::SparseVariable => {
                    let (start, end) = self.row_range(a, off, span)?;
                    match self.find(a, start, end, c, span)? {
                        Some(p) => p,
                        None => return Ok(None),
                    }
                }
                AxisKind::SparseFixed => {
                    let (start, end) = self.fixed_row(a, off, span)?;
                    match self.find(a, start, end, c, span)? {
                        Some(p) => p,
                        None => return Ok(None),
                    }
                }
            };
        }
        Ok(Some(off))
    }

    /// Stages II and III: walks positions.
    fn positions_offset(&self, b: BufferId, axes: &[AxisId], idx: &[i64], span: Span) -> Result<i64> {
        let mut off = 0i64;
        for dim in 0..axes.len() {
            let (a, p) = (axes[dim], idx[dim]);
            let ax = &self.axes[a.index()];
            let (next, extent) = if ax.kind.is_variable() {
                let (start, end) = self.row_range(a, off, span)?;
                (start.checked_add(p), end - start)
            } else {
                (off.checked_mul(ax.row_extent).and_then(|o| o.checked_add(p)), ax.row_extent)
            };
            off = self.check_index(b, dim, p, extent, next, span)?;
        }
        Ok(off)
    }

    /// Checks index `i` of dimension `dim` against `0..extent` and returns `next`, the flat
    /// offset it leads to. The last index may run up to `extra_storage` past the end of its
    /// row, as `J_indptr[i + 1]` and `K_indptr[i, j + 1]` do, while it stays in the storage.
    fn check_index(&self, b: BufferId, dim: usize, i: i64, extent: i64, next: Option<i64>, span: Span) -> Result<i64> {
        if (0..extent).contains(&i) {
            return next.ok_or_else(|| overflow(span));
        }
        let info = &self.bufs[b.index()];
        if let Some(off) = next.filter(|_| i >= 0 && i < extent + info.extra && dim + 1 == info.ndim()) {
            let len = self.storage_len(b, span)? as i64;
            if off < len {
                return Ok(off);
            }
        }
        Err(InterpError::IndexOutOfRange { buffer: self.buffer_name(b), dim, index: i, extent, span }.into())
    }

    /// Flat positions `start..end` of `row` of a variable axis.
    pub(crate) fn row_range(&self, a: AxisId, row: i64, span: Span) -> Result<(i64, i64)> {
        let start = self.indptr_at(a, row, span)?;
        let end = self.indptr_at(a, row.checked_add(1).ok_or_else(|| overflow(span))?, span)?;
        if end < start {
            let ax = &self.axes[a.index()];
            return Err(InterpError::MalformedIndptr {
                axis: self.axis_name(a),
                param: ax.indptr.map_or_else(String::new, |p| self.param_name(p)),
                message: format!("decreasing at row {row}: {start} > {end}"),
                span,
            }.into());
        }
        Ok((start, end))
    }

    /// Flat positions `start..end` of `row` of a sparse-fixed axis.
    pub(crate) fn fixed_row(&self, a: AxisId, row: i64, span: Span) -> Result<(i64, i64)> {
        let k = self.axes[a.index()].row_extent;
        let start = row.checked_mul(k).ok_or_else(|| overflow(span))?;
        Ok((start, start.checked_add(k).ok_or_else(|| overflow(span))?))
    }

    /// Entry `i` of a variable axis's `indptr`, checked to be in bounds and non-negative.
    pub(crate) fn indptr_at(&self, a: AxisId, i: i64, span: Span) -> Result<i64> {
        let Some(p) = self.axes[a.index()].indptr else {
            let message = format!("axis `{}` has no indptr", self.axis_name(a));
            return Err(InterpError::Invalid { message, span }.into());
        };
        let v = self.axis_array_at(a, p, "indptr", i, span)?;
        if v < 0 {
            return Err(InterpError::MalformedIndptr {
                axis: self.axis_name(a),
                param: self.param_name(p),
                message: format!("negative entry {v} at index {i}"),
                span,
            }.into());
        }
        Ok(v)
    }

    /// Coordinate stored at flat position `i` of a sparse axis.
    pub(crate) fn index_at(&self, a: AxisId, i: i64, span: Span) -> Result<i64> {
        let Some(p) = self.axes[a.index()].indices else {
            let message = format!("axis `{}` has no indices", self.axis_name(a));
            return Err(InterpError::Invalid { message, span }.into());
        };
        self.axis_array_at(a, p, "indices", i, span)
    }

    fn axis_array_at(&self, a: AxisId, p: usize, role: &'static str, i: i64, span: Span) -> Result<i64> {
        let arr = self.index_array(p, span)?;
        let at = usize::try_from(i).ok().and_then(|i| arr.get_i64(i));
        Ok(at.ok_or_else(|| InterpError::AxisArrayOutOfBounds {
            axis: self.axis_name(a),
            param: self.param_name(p),
            role,
            index: i,
            len: arr.len(),
            span,
        })?)
    }

    /// Flat position of coordinate `c` among `indices[start..end]` of a sparse axis.
    fn find(&self, a: AxisId, start: i64, end: i64, c: i64, span: Span) -> Result<Option<i64>> {
        let ax = &self.axes[a.index()];
        let Some(p) = ax.indices else {
            let message = format!("axis `{}` has no indices", self.axis_name(a));
            return Err(InterpError::Invalid { message, span }.into());
        };
        let arr = self.index_array(p, span)?;
        let (Ok(s), Ok(e)) = (usize::try_from(start), usize::try_from(end)) else {
            return Err(overflow(span));
        };
        if s > e || e > arr.len() {
            return Err(InterpError::AxisArrayOutOfBounds {
                axis: self.axis_name(a),
                param: self.param_name(p),
                role: "indices",
                index: end - 1,
                len: arr.len(),
                span,
            }.into());
        }
        // The first position holding `c` (a row may repeat a coordinate, as ELL padding
        // does): the lower bound where sorted, as the lowered search finds it.
        fn search<T: Ord + Copy>(row: &[T], c: T, sorted: bool) -> Option<usize> {
            if sorted {
                let p = row.partition_point(|&x| x < c);
                (row.get(p) == Some(&c)).then_some(p)
            } else {
                row.iter().position(|&x| x == c)
            }
        }
        let hit = match arr {
            Array::I32(v) => i32::try_from(c).ok().and_then(|c| search(&v[s..e], c, ax.sorted)),
            Array::I64(v) => search(&v[s..e], c, ax.sorted),
            _ => None,
        };
        Ok(hit.map(|h| start + h as i64))
    }

    /// Reads element `i` of a buffer, in the buffer's dtype.
    pub(crate) fn read(&self, b: BufferId, i: usize, span: Span) -> Result<Value> {
        let info = self.info(b, span)?;
        let dtype = info.dtype;
        let arr = self.storage(b, info).ok_or_else(|| self.missing_storage(b, span))?;
        let v = array_get(arr, i).ok_or_else(|| InterpError::OutOfBounds {
            buffer: self.buffer_name(b),
            index: i as i64,
            len: arr.len(),
            span,
        })?;
        Ok(if v.dtype() == dtype { v } else { v.cast(dtype) })
    }

    /// Writes element `i` of a buffer; the value must have the buffer's dtype.
    pub(crate) fn write(&mut self, b: BufferId, i: usize, v: Value, span: Span) -> Result<()> {
        let dtype = self.info(b, span)?.dtype;
        if v.dtype() != dtype {
            let message = format!("storing a {} value into buffer `{}` of {dtype}", v.dtype(), self.buffer_name(b));
            return Err(InterpError::Type { message, span }.into());
        }
        let arr = self.buf_array_mut(b, span)?;
        let len = arr.len();
        if array_set(arr, i, v) {
            Ok(())
        } else {
            Err(InterpError::OutOfBounds { buffer: self.buffer_name(b), index: i as i64, len, span }.into())
        }
    }
}
