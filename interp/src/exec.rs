//! Statements and expressions.

use crate::access::Slot;
use crate::error::InterpError;
use crate::machine::{Active, BufLayout, IterPos, Machine, Result};
use crate::observe::{unit_slot, AccessKind};
use sparsec_ir::value::{Value, ValueError as OpError};
use sparsec_ir::data::Array;
use sparsec_ir::{
    AxisId, AxisKind, BinOp, Intrinsic, Block, BufferId, Expr, For, IterKind, Layout, MergeOp, SpIter, SpIterAxis, Span,
    Stmt, StmtKind, Storage, VarId,
};

/// A binding to undo at the end of a statement list.
enum Undo {
    Var(VarId, Option<Value>),
    Alloc(BufferId, Option<Array>),
}

/// One iterator of a sparse iteration.
#[derive(Clone, Copy, Debug)]
struct IterSpec<'f> {
    axis: AxisId,
    var: VarId,
    /// Where the row comes from, for axes with a parent.
    row: RowFrom,
    /// A co-iteration: how it merges, and its members (`axis` is the first).
    merge: Option<(MergeOp, &'f [AxisId])>,
}

#[derive(Clone, Copy, Debug)]
enum RowFrom {
    /// A root axis: its one row (positions `0..row_extent`).
    None,
    /// The flat position of the nearest iterator over the declared parent.
    Parent(AxisId),
    /// The coordinate of the nearest iterator over this axis (`attach`).
    Attached(AxisId),
}

fn op_error(e: OpError, span: Span) -> InterpError {
    match e {
        OpError::DivisionByZero => InterpError::DivisionByZero { span },
        OpError::Type(message) => InterpError::Type { message, span },
    }
}

impl<'f> Machine<'f> {
    /// Runs a statement list; `let`s and allocations end with it.
    pub(crate) fn exec_list(&mut self, stmts: &'f [Stmt]) -> Result<()> {
        let mut undo = Vec::new();
        for s in stmts {
            self.exec(s, &mut undo)?;
        }
        for u in undo.into_iter().rev() {
            match u {
                Undo::Var(v, prev) => self.vars[v.index()] = prev,
                Undo::Alloc(b, prev) => self.allocs[b.index()] = prev,
            }
        }
        Ok(())
    }

    /// Runs the function's body, telling the observer which top-level statement runs.
    pub(crate) fn exec_body(&mut self, stmts: &'f [Stmt]) -> Result<()> {
        let mut undo = Vec::new();
        for (k, s) in stmts.iter().enumerate() {
            if let Some(o) = &mut self.observer {
                o.stmt = k;
            }
            self.exec(s, &mut undo)?;
        }
        Ok(())
    }

    fn exec(&mut self, s: &'f Stmt, undo: &mut Vec<Undo>) -> Result<()> {
        let span = s.span;
        match &s.kind {
            StmtKind::Store { buffer, indices, value } => {
                let v = self.eval(value, span)?;
                match self.locate(*buffer, indices, true, span)? {
                    Slot::At(i) => {
                        if let Some(o) = &mut self.observer {
                            o.access(s as *const Stmt as usize, buffer.index(), i, AccessKind::Store, indices);
                        }
                        self.write(*buffer, i, v, span)
                    }
                    Slot::Absent => Ok(()), // `locate` reports absent stores.
                }
            }
            StmtKind::SpIter(it) => self.sp_iter(it, span),
            StmtKind::For(f) => self.for_loop(f, span),
            StmtKind::Block(b) => self.block(b, span),
            StmtKind::If { cond, then_body, else_body } => {
                if self.eval_bool(cond, span)? {
                    self.exec_list(then_body)
                } else {
                    self.exec_list(else_body)
                }
            }
            StmtKind::While { cond, body } => {
                let mut n = 0i64;
                while self.eval_bool(cond, span)? {
                    if n == self.max_while {
                        return Err(InterpError::WhileLimit { limit: n, span }.into());
                    }
                    n += 1;
                    self.tick(span)?;
                    self.exec_list(body)?;
                }
                Ok(())
            }
            StmtKind::Let { var, value } => {
                let v = self.eval(value, span)?;
                let decl = self.var(*var, span)?;
                if v.dtype() != decl.dtype {
                    let message = format!("`let {}: {}` is given a {} value", decl.name, decl.dtype, v.dtype());
                    return Err(InterpError::Type { message, span }.into());
                }
                let prev = self.vars[var.index()].replace(v);
                undo.push(Undo::Var(*var, prev));
                Ok(())
            }
            StmtKind::Alloc(b) => {
                let buf = self.buffer(*b, span)?;
                if !matches!(buf.storage, Storage::Alloc(_)) {
                    let message = format!("buffer `{}` is bound to a parameter and cannot be allocated", buf.name);
                    return Err(InterpError::Invalid { message, span }.into());
                }
                if let Layout::Dense(shape) = &buf.layout {
                    let dims = self.eval_shape(buf, shape, span)?;
                    self.bufs[b.index()].layout = BufLayout::Dense(dims);
                }
                let storage = self.fresh_storage(*b, span)?;
                let prev = self.allocs[b.index()].replace(storage);
                undo.push(Undo::Alloc(*b, prev));
                Ok(())
            }
            StmtKind::Evaluate(e) => self.eval(e, span).map(drop),
        }
    }

    fn for_loop(&mut self, f: &'f For, span: Span) -> Result<()> {
        let min = self.eval_int(&f.min, span)?;
        let extent = self.eval_int(&f.extent, span)?;
        let dtype = self.var(f.var, span)?.dtype;
        let prev = self.vars[f.var.index()];
        // The unit index this loop sets, when observed.
        let unit = self.observer.as_ref().and_then(|o| unit_slot(f.kind).map(|k| (k, o.unit[k])));
        let unrolled = f.kind == sparsec_ir::ForKind::Unrolled && self.observer.is_some();
        if let (true, Some(o)) = (unrolled, &mut self.observer) {
            o.unrolled.push(0);
        }
        let lanes = self.runs_as_vectors(f);
        let outer_lane = self.observer.as_ref().and_then(|o| o.lane);
        for i in 0..extent.max(0) {
            self.tick(span)?;
            let x = min.checked_add(i).ok_or_else(|| InterpError::BadSize {
                message: "loop variable overflows".into(),
                span,
            })?;
            self.vars[f.var.index()] = Some(Value::from_i64(dtype, x));
            if let (Some((k, _)), Some(o)) = (unit, &mut self.observer) {
                o.unit[k] = x;
            }
            if let (true, Some(o)) = (unrolled, &mut self.observer) {
                if let Some(last) = o.unrolled.last_mut() {
                    *last = i as u32;
                }
            }
            if let (true, Some(o)) = (lanes, &mut self.observer) {
                o.lane = Some(i as u32);
            }
            self.exec_list(&f.body)?;
        }
        if let (true, Some(o)) = (lanes, &mut self.observer) {
            o.lane = outer_lane;
        }
        if let (true, Some(o)) = (unrolled, &mut self.observer) {
            o.unrolled.pop();
        }
        self.vars[f.var.index()] = prev;
        if let (Some((k, old)), Some(o)) = (unit, &mut self.observer) {
            o.unit[k] = old;
        }
        Ok(())
    }

    /// Whether an observed `vectorized` loop runs as vectors: it has a vector form whose
    /// assumptions hold for the parameters' values (see `observe`).
    fn runs_as_vectors(&mut self, f: &'f For) -> bool {
        if f.kind != sparsec_ir::ForKind::Vectorized {
            return false;
        }
        let func = self.func.func();
        let Some(o) = &mut self.observer else { return false };
        let form = o.vector_forms.entry(f as *const For as usize).or_insert_with(|| sparsec_ir::vector::plan(func, f).map(|p| (p.width, p.assume)));
        let Some((w, assume)) = form.clone() else { return false };
        assume.iter().all(|v| self.vars.get(v.index()).copied().flatten().and_then(|x| x.as_int()).is_some_and(|x| x % w == 0))
    }

    fn block(&mut self, b: &'f Block, span: Span) -> Result<()> {
        let mut run_init = true;
        for it in &b.iters {
            let v = self.eval(&it.binding, span)?;
            let extent = self.eval_int(&it.extent, span)?;
            let var = self.var(it.var, span)?;
            let value = v.as_int().ok_or_else(|| InterpError::Type {
                message: format!("block iterator `{}` is bound to a {} value", var.name, v.dtype()),
                span,
            })?;
            if !(0..extent).contains(&value) {
                return Err(InterpError::BindingOutOfRange {
                    block: b.name.clone(),
                    var: var.name.clone(),
                    value,
                    extent,
                    span,
                }.into());
            }
            run_init &= it.kind == IterKind::Spatial || value == 0;
            self.vars[it.var.index()] = Some(v);
        }
        if let (true, Some(init)) = (run_init, &b.init) {
            self.exec_list(init)?;
        }
        self.exec_list(&b.body)?;
        for it in &b.iters {
            self.vars[it.var.index()] = None;
        }
        Ok(())
    }

    // ---- sparse iterations ---------------------------------------------------------------

    fn sp_iter(&mut self, it: &'f SpIter, span: Span) -> Result<()> {
        let invalid = |message: String| InterpError::Invalid { message, span };
        let mut specs = Vec::with_capacity(it.vars.len());
        let mut entry_axes = Vec::new();
        for entry in &it.axes {
            match entry {
                SpIterAxis::Axis(a) => entry_axes.push((*a, None, None)),
                SpIterAxis::Fuse(group) => entry_axes.extend(group.iter().map(|a| (*a, None, None))),
                SpIterAxis::Attach { axis, parent } => entry_axes.push((*axis, Some(*parent), None)),
                SpIterAxis::Merge { op, axes } => {
                    let first = *axes.first().ok_or_else(|| invalid(format!("an empty {}(..)", op.name())))?;
                    entry_axes.push((first, None, Some((*op, axes.as_slice()))));
                }
            }
        }
        let kinds = it.iter_kinds().unwrap_or_default();
        if entry_axes.len() != it.vars.len() || kinds.len() != it.vars.len() {
            return Err(invalid(format!(
                "sparse iteration `{}` has {} axes, {} variables and kinds \"{}\"",
                it.name,
                entry_axes.len(),
                it.vars.len(),
                it.kinds
            )).into());
        }
        for ((axis, attach, merge), &var) in entry_axes.into_iter().zip(&it.vars) {
            let info = self.axes.get(axis.index()).ok_or_else(|| invalid(format!("unknown axis {axis:?}")))?;
            self.var(var, span)?;
            let row = match (info.kind, attach) {
                (AxisKind::DenseFixed, _) => RowFrom::None,
                (_, Some(p)) => RowFrom::Attached(p),
                (_, None) => match info.parent {
                    Some(p) => RowFrom::Parent(p),
                    None if info.kind == AxisKind::SparseFixed => RowFrom::None,
                    None => return Err(invalid(format!("axis {axis:?} has no parent")).into()),
                },
            };
            specs.push(IterSpec { axis, var, row, merge });
        }
        if let Some(init) = &it.init {
            let spatial: Vec<IterSpec> =
                specs.iter().zip(&kinds).filter(|(_, k)| **k == IterKind::Spatial).map(|(s, _)| *s).collect();
            self.nest(&spatial, init, span)?;
        }
        self.nest(&specs, &it.body, span)
    }

    /// Iterates `specs` outermost first and runs `body` at every point.
    fn nest(&mut self, specs: &[IterSpec<'f>], body: &'f [Stmt], span: Span) -> Result<()> {
        let Some((spec, inner)) = specs.split_first() else {
            return self.exec_list(body);
        };
        if let Some((op, members)) = spec.merge {
            return self.merge_nest(spec, op, members, inner, body, span);
        }
        let ax = self.axes[spec.axis.index()];
        let (row, start, end, src) = match spec.row {
            RowFrom::None => (0, 0, ax.row_extent, None),
            RowFrom::Parent(p) | RowFrom::Attached(p) => {
                let attached = matches!(spec.row, RowFrom::Attached(_));
                let found = self.active.iter().rev().find(|a| a.axis == p);
                let src = found.map(|a| a.var);
                let row = found.map(|a| if attached { a.coord } else { a.flat }).ok_or_else(|| {
                    InterpError::ParentNotIterated { axis: self.axis_name(spec.axis), parent: self.axis_name(p), span }
                })?;
                let (start, end) = match ax.kind {
                    AxisKind::SparseFixed => self.fixed_row(spec.axis, row, span)?,
                    AxisKind::DenseFixed => (0, ax.length),
                    AxisKind::DenseVariable | AxisKind::SparseVariable => self.row_range(spec.axis, row, span)?,
                };
                (row, start, end, src)
            }
        };
        let slot = spec.var.index();
        for flat in start..end {
            self.tick(span)?;
            let coord = match ax.kind {
                AxisKind::DenseFixed => flat,
                AxisKind::DenseVariable => flat - start,
                AxisKind::SparseFixed | AxisKind::SparseVariable => self.index_at(spec.axis, flat, span)?,
            };
            self.vars[slot] = Some(Value::from_i64(ax.idtype, coord));
            self.iters[slot] = Some(IterPos { axis: spec.axis, row, flat, src });
            self.active.push(Active { axis: spec.axis, flat, coord, var: spec.var });
            let r = self.nest(inner, body, span);
            self.active.pop();
            r?;
        }
        self.vars[slot] = None;
        self.iters[slot] = None;
        Ok(())
    }

    /// A co-iteration: its iterator takes, in ascending order, each coordinate stored in the
    /// rows of any (union) or every (intersection) member, once. It stands for no position:
    /// accesses through it look their coordinate up, absent ones read the default.
    fn merge_nest(
        &mut self,
        spec: &IterSpec<'f>,
        op: MergeOp,
        members: &'f [AxisId],
        inner: &[IterSpec<'f>],
        body: &'f [Stmt],
        span: Span,
    ) -> Result<()> {
        let mut rows: Vec<Vec<i64>> = Vec::with_capacity(members.len());
        for &a in members {
            let ax = self.axes[a.index()];
            let (start, end) = match ax.parent {
                None => (0, ax.row_extent),
                Some(p) => {
                    let found = self.active.iter().rev().find(|x| x.axis == p).ok_or_else(|| {
                        InterpError::ParentNotIterated { axis: self.axis_name(a), parent: self.axis_name(p), span }
                    })?;
                    match ax.kind {
                        AxisKind::SparseFixed => self.fixed_row(a, found.flat, span)?,
                        _ => self.row_range(a, found.flat, span)?,
                    }
                }
            };
            let mut row = Vec::with_capacity(usize::try_from(end - start).unwrap_or(0));
            for p in start..end {
                self.tick(span)?;
                row.push(self.index_at(a, p, span)?);
            }
            row.sort_unstable();
            rows.push(row);
        }
        let mut coords: Vec<i64> = match op {
            MergeOp::Union => rows.iter().flatten().copied().collect(),
            MergeOp::Intersect => {
                let (first, rest) = rows.split_first().map_or((&[][..], &[][..]), |(f, r)| (f.as_slice(), r));
                first.iter().copied().filter(|c| rest.iter().all(|r| r.binary_search(c).is_ok())).collect()
            }
        };
        coords.sort_unstable();
        coords.dedup();
        let slot = spec.var.index();
        let idtype = self.axes[spec.axis.index()].idtype;
        for c in coords {
            self.tick(span)?;
            self.vars[slot] = Some(Value::from_i64(idtype, c));
            self.iters[slot] = None;
            self.nest(inner, body, span)?;
        }
        self.vars[slot] = None;
        Ok(())
    }

    // ---- expressions ---------------------------------------------------------------------

    /// Evaluates an expression; errors carry the statement's `span`.
    pub(crate) fn eval(&mut self, e: &'f Expr, span: Span) -> Result<Value> {
        Ok(match e {
            Expr::Int(x, d) => Value::from_i64(*d, *x),
            Expr::Float(x, d) => Value::from_f64(*d, *x),
            Expr::Bool(b) => Value::Bool(*b),
            Expr::Var(v) => match self.vars.get(v.index()) {
                Some(Some(x)) => *x,
                _ => {
                    let var = self.func.vars.try_get(*v).map_or_else(|| format!("{v:?}"), |x| x.name.clone());
                    return Err(InterpError::UnboundVar { var, span }.into());
                }
            },
            Expr::Binary(op @ (BinOp::And | BinOp::Or), a, b) => {
                // Short-circuits.
                let x = self.eval_bool(a, span)?;
                if x == (*op == BinOp::Or) {
                    Value::Bool(x)
                } else {
                    Value::Bool(self.eval_bool(b, span)?)
                }
            }
            Expr::Binary(op, a, b) => {
                let x = self.eval(a, span)?;
                let y = self.eval(b, span)?;
                Value::binary(*op, x, y).map_err(|e| op_error(e, span))?
            }
            Expr::Unary(op, a) => {
                let x = self.eval(a, span)?;
                Value::unary(*op, x).map_err(|e| op_error(e, span))?
            }
            Expr::Select(c, a, b) => self.select(c, a, b, span)?,
            Expr::Cast(d, a) => self.eval(a, span)?.cast(*d),
            Expr::Call(f, args) => self.call(*f, args, span)?,
            Expr::Load(b, idx) => match self.locate(*b, idx, false, span)? {
                Slot::At(i) => {
                    if let Some(o) = &mut self.observer {
                        o.access(e as *const Expr as usize, b.index(), i, AccessKind::Load, idx);
                    }
                    self.read(*b, i, span)?
                }
                Slot::Absent => self.bufs[b.index()].default,
            },
            Expr::AtomicAdd(b, idx, v) => self.atomic_add(e, *b, idx, v, span)?,
        })
    }

    // Rarer expression forms, kept out of `eval` to keep its frame small.

    fn select(&mut self, c: &'f Expr, a: &'f Expr, b: &'f Expr, span: Span) -> Result<Value> {
        let c = self.eval_bool(c, span)?;
        let x = self.eval(a, span)?;
        let y = self.eval(b, span)?;
        if x.dtype() != y.dtype() {
            let message = format!("arms of `select` have different types: {} and {}", x.dtype(), y.dtype());
            return Err(InterpError::Type { message, span }.into());
        }
        Ok(if c { x } else { y })
    }

    fn call(&mut self, f: Intrinsic, args: &'f [Expr], span: Span) -> Result<Value> {
        let mut vals = [Value::Bool(false); 3];
        if args.len() > vals.len() {
            let message = format!("`{}` takes {} operands, found {}", f.name(), f.arity(), args.len());
            return Err(InterpError::Type { message, span }.into());
        }
        for (slot, a) in vals.iter_mut().zip(args) {
            *slot = self.eval(a, span)?;
        }
        Ok(Value::call(f, &vals[..args.len()]).map_err(|e| op_error(e, span))?)
    }

    fn atomic_add(&mut self, node: &'f Expr, b: BufferId, idx: &'f [Expr], v: &'f Expr, span: Span) -> Result<Value> {
        let v = self.eval(v, span)?;
        let Slot::At(i) = self.locate(b, idx, true, span)? else {
            return Err(InterpError::Invalid { message: "atomic_add to an absent element".into(), span }.into());
        };
        if let Some(o) = &mut self.observer {
            o.access(node as *const Expr as usize, b.index(), i, AccessKind::Atomic, idx);
        }
        let old = self.read(b, i, span)?;
        let new = Value::binary(BinOp::Add, old, v).map_err(|e| op_error(e, span))?;
        self.write(b, i, new, span)?;
        Ok(old)
    }

    /// Evaluates an integer expression.
    pub(crate) fn eval_int(&mut self, e: &'f Expr, span: Span) -> Result<i64> {
        let v = self.eval(e, span)?;
        let message = || format!("expected an integer, found a {} value", v.dtype());
        Ok(v.as_int().ok_or_else(|| InterpError::Type { message: message(), span })?)
    }

    /// Evaluates a condition.
    pub(crate) fn eval_bool(&mut self, e: &'f Expr, span: Span) -> Result<bool> {
        match self.eval(e, span)? {
            Value::Bool(b) => Ok(b),
            v => Err(InterpError::Type { message: format!("expected a bool, found a {} value", v.dtype()), span }.into()),
        }
    }
}
