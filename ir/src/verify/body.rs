//! Statements: stage rules, sparse iterations, loops, blocks, reductions and scoping.

use super::{Reducer, Verifier, VerifyErrorKind as K};
use crate::expr::{BinOp, Expr};
use crate::func::{AxisId, Block, BufferId, For, SpIter, SpIterAxis, Stmt, StmtKind, Storage, VarId};
use crate::injective::Role;
use crate::types::{AxisKind, IterKind, Stage};

/// What an iterator of an enclosing sp_iter iterates, for the stores it indexes.
#[derive(Clone, Debug)]
pub(super) enum Iterated {
    /// One axis (plain, fused or attached).
    Axis(AxisId),
    /// A union: its coordinates need not be stored in any one member.
    Union(Vec<AxisId>),
    /// An intersection: every member stores its coordinates.
    Intersect(Vec<AxisId>),
}

/// One iterator of a sparse iteration, resolved.
struct Iter {
    /// The axis iterated; `None` for a dangling handle (already reported).
    axis: Option<AxisId>,
    /// The axis whose iterator picks the row: the declared parent, the previous member of a
    /// fuse group, or the new parent of an `attach`.
    parent: Option<AxisId>,
    /// The axes a co-iteration merges (empty otherwise).
    merged: Vec<AxisId>,
}

impl<'f> Verifier<'f> {
    /// The function body, with parameters and function-level buffers in scope.
    pub(super) fn body(&mut self) {
        let f = self.f;
        self.stmts(&f.body);
    }

    /// A statement list: `let`s and allocations it makes end with it.
    fn stmts(&mut self, list: &'f [Stmt]) {
        let mark = self.scope.len();
        for s in list {
            self.stmt(s);
        }
        self.pop_to(mark);
    }

    fn stmt(&mut self, s: &'f Stmt) {
        self.span = s.span;
        match &s.kind {
            StmtKind::Store { buffer, indices, value } => {
                let buf = self.access(*buffer, indices);
                let t = self.expr(value);
                if let (Some(buf), Some(t)) = (buf, t) {
                    if t != buf.dtype {
                        self.err(K::StoreDType { buffer: buf.name.clone(), expected: buf.dtype, found: t });
                    }
                }
                self.reduction_write(*buffer, indices);
                self.looked_up_write(*buffer, indices);
            }
            StmtKind::SpIter(it) => self.sp_iter(it),
            StmtKind::For(l) => self.for_loop(l),
            StmtKind::Block(b) => self.block(b),
            StmtKind::If { cond, then_body, else_body } => {
                self.cond("if", cond);
                self.stmts(then_body);
                self.stmts(else_body);
            }
            StmtKind::While { cond, body } => {
                self.cond("while", cond);
                self.stmts(body);
            }
            StmtKind::Let { var, value } => {
                let t = self.expr(value);
                if let (Some(v), Some(t)) = (self.f.vars.try_get(*var), t) {
                    if v.dtype != t {
                        self.err(K::LetDType { var: v.name.clone(), expected: v.dtype, found: t });
                    }
                }
                let mut driven = false;
                value.walk(&mut |x| {
                    if let Expr::Var(v) = x {
                        driven |= self.loop_lets.contains(v) || self.loops.iter().any(|(l, _)| l == v);
                    }
                });
                if driven {
                    self.loop_lets.insert(*var);
                }
                self.bind(*var, None);
            }
            StmtKind::Alloc(b) => {
                if !self.loops.is_empty() {
                    self.loop_allocs.push((*b, self.loops.iter().map(|(v, _)| *v).collect()));
                }
                self.alloc(*b)
            }
            StmtKind::Evaluate(e) => {
                // Only call forms print as statements.
                let is_call = matches!(
                    e,
                    Expr::Call(..)
                        | Expr::AtomicAdd(..)
                        | Expr::Select(..)
                        | Expr::Cast(..)
                        | Expr::Binary(BinOp::Min | BinOp::Max, ..)
                );
                if !is_call {
                    self.err(K::EvaluateNotCall);
                }
                self.expr(e);
            }
        }
    }

    /// Reports a form the function's stage does not have.
    fn stage_allows(&mut self, stmt: &'static str, ok: bool, hint: &'static str) {
        if !ok {
            self.err(K::StmtNotAllowed { stmt, stage: self.f.stage, hint });
        }
    }

    /// An `Alloc` statement: the buffer is an allocation, allocated once, checked here with
    /// the variables in scope, and usable until the end of the list.
    fn alloc(&mut self, b: BufferId) {
        let Some(buf) = self.f.buffers.try_get(b) else {
            self.dangling("buffer", b, self.f.buffers.len());
            return;
        };
        if matches!(buf.storage, Storage::Param(_)) {
            self.err(K::AllocOfParamBuffer { buffer: buf.name.clone() });
        }
        if std::mem::replace(&mut self.alloc_seen[b.index()], true) {
            self.err(K::AllocTwice { buffer: buf.name.clone() });
        } else {
            self.buffer_decl(buf);
        }
        self.bind_buffer(b);
    }

    /// A store inside a reduction must not be indexed directly by a reduction iterator.
    /// Through a load (a coordinate looked up in an `indices` array) it is a scatter: the
    /// rows being reduced over pick the element, which only accumulates. So is an iterator
    /// over an axis that repeats coordinates (`unique = false`) or lies below one: each
    /// position is one entry, whose coordinates are looked up in the axes' `indices`.
    fn reduction_write(&mut self, buffer: BufferId, indices: &'f [Expr]) {
        fn direct_vars(e: &Expr, out: &mut Vec<VarId>) {
            match e {
                Expr::Var(v) => out.push(*v),
                Expr::Load(..) | Expr::AtomicAdd(..) => {}
                _ => e.children().into_iter().for_each(|c| direct_vars(c, out)),
            }
        }
        let mut vars = Vec::new();
        indices.iter().for_each(|e| direct_vars(e, &mut vars));
        let mut found: Vec<(VarId, Reducer<'f>)> = Vec::new();
        let f = self.f;
        let repeats = |v: VarId| {
            self.iterated(v).is_some_and(|w| {
                let Iterated::Axis(mut a) = w else { return false };
                loop {
                    match f.axes.try_get(a) {
                        Some(x) if !x.unique => return true,
                        Some(x) => match x.parent {
                            Some(p) if p < a => a = p,
                            _ => return false,
                        },
                        None => return false,
                    }
                }
            })
        };
        for v in vars {
            if repeats(v) {
                continue;
            }
            if let Some(Some(r)) = self.reducer.get(v.index()) {
                if !found.iter().any(|(w, _)| *w == v) {
                    found.push((v, *r));
                }
            }
        }
        for (v, r) in found {
            let (var, buffer) = (self.var_name(v), self.buffer_name(buffer));
            self.err(match r {
                Reducer::SpIter(s) => K::SpIterReductionWrite { var, buffer, sp_iter: s.to_string() },
                Reducer::Block(b) => K::BlockReductionWrite { var, buffer, block: b.to_string() },
            });
        }
    }

    // ---- sparse iterations -------------------------------------------------------------

    fn sp_iter(&mut self, it: &'f SpIter) {
        let f = self.f;
        let name = it.name.as_str();
        self.stage_allows("sp_iter", f.stage == Stage::I, "sparse iterations belong to Stage I");
        let iters = self.sp_iter_axes(it);
        if it.vars.len() != iters.len() {
            self.err(K::SpIterVarCount { sp_iter: name.to_string(), axes: iters.len(), vars: it.vars.len() });
        }
        let len = it.kinds.chars().count();
        if len != it.vars.len() {
            self.err(K::KindsLength { kinds: it.kinds.clone(), len, sp_iter: name.to_string(), iters: it.vars.len() });
        }
        if let Some(letter) = it.kinds.chars().find(|&c| c != 'S' && c != 'R') {
            self.err(K::KindsLetter { kinds: it.kinds.clone(), sp_iter: name.to_string(), letter });
        }
        let kinds: Vec<Option<IterKind>> = it.kinds.chars().map(IterKind::from_letter).collect();
        let kind = |k: usize| kinds.get(k).copied().flatten();

        for (k, iter) in iters.iter().enumerate() {
            let (Some(a), Some(p)) = (iter.axis, iter.parent) else { continue };
            if !f.axes.contains(p) {
                continue; // reported where the parent is declared
            }
            if iters[..k].iter().any(|j| j.merged.contains(&p)) {
                self.err(K::BelowMerge { sp_iter: name.to_string(), axis: self.axis_name(a), parent: self.axis_name(p) });
                continue;
            }
            match iters[..k].iter().rposition(|j| j.axis == Some(p)) {
                // Without an init, a spatial iterator below a reduction is a scatter: every
                // point accumulates, and no per-point init has to run before the reduction.
                Some(j)
                    if kind(k) == Some(IterKind::Spatial) && kind(j) == Some(IterKind::Reduce) && it.init.is_some() =>
                {
                    self.err(K::SpatialUnderReduction {
                        sp_iter: name.to_string(),
                        var: it.vars.get(k).map_or_else(|| "?".to_string(), |v| self.var_name(*v)),
                        axis: self.axis_name(a),
                        parent: self.axis_name(p),
                    });
                }
                Some(_) => {}
                None if self.axis_iterated[p.index()] == 0 => self.err(K::MissingParentIterator {
                    sp_iter: name.to_string(),
                    axis: self.axis_name(a),
                    parent: self.axis_name(p),
                }),
                None => {}
            }
        }
        for (k, (iter, &v)) in iters.iter().zip(&it.vars).enumerate() {
            let (Some(axis), Some(var)) = (iter.axis.and_then(|a| f.axes.try_get(a)), f.vars.try_get(v)) else {
                continue;
            };
            if !axis.unique && iter.merged.is_empty() {
                if kind(k) == Some(IterKind::Spatial) {
                    self.err(K::SpatialOverRepeats { sp_iter: name.to_string(), var: var.name.clone(), axis: axis.name.clone() });
                }
                if it.init.is_some() {
                    self.err(K::InitOverRepeats { sp_iter: name.to_string(), axis: axis.name.clone() });
                }
            }
            if var.dtype != axis.idtype {
                self.err(K::SpIterVarDType {
                    sp_iter: name.to_string(),
                    var: var.name.clone(),
                    axis: axis.name.clone(),
                    expected: axis.idtype,
                    found: var.dtype,
                });
            }
        }

        self.workspaces(it);
        let mark = self.scope.len();
        for (k, &v) in it.vars.iter().enumerate() {
            let reducer = (kind(k) == Some(IterKind::Reduce)).then_some(Reducer::SpIter(name));
            self.bind(v, reducer);
        }
        let outer_vars = self.sp_vars.len();
        let mut k = 0;
        for entry in &it.axes {
            let what: Vec<Iterated> = match entry {
                SpIterAxis::Merge { op: crate::func::MergeOp::Union, axes } => vec![Iterated::Union(axes.clone())],
                SpIterAxis::Merge { axes, .. } => vec![Iterated::Intersect(axes.clone())],
                other => other.axes().into_iter().map(Iterated::Axis).collect(),
            };
            for w in what {
                if let Some(&v) = it.vars.get(k) {
                    self.sp_vars.push((v, name, w));
                }
                k += 1;
            }
        }
        for a in iters.iter().filter(|i| i.merged.is_empty()).filter_map(|i| i.axis) {
            self.axis_iterated[a.index()] += 1;
        }
        self.check_kinds(it);
        if let Some(init) = &it.init {
            self.stmts(init);
        }
        self.stmts(&it.body);
        for a in iters.iter().filter(|i| i.merged.is_empty()).filter_map(|i| i.axis) {
            self.axis_iterated[a.index()] -= 1;
        }
        self.sp_vars.truncate(outer_vars);
        self.pop_to(mark);
    }

    /// The sparse iteration's workspace attributes ([`crate::WORKSPACE_ATTR`]): each names a
    /// sparse axis that the iteration looks coordinates up in, not one it iterates, whose
    /// parent (if any) it iterates as an entry of its own, so that one loop fixes the row the
    /// map is filled for.
    fn workspaces(&mut self, it: &SpIter) {
        let f = self.f;
        for (key, value) in &it.attrs {
            let Some(axis) = key.strip_prefix(crate::WORKSPACE_ATTR) else { continue };
            let found = f.axes.iter().find(|(_, x)| x.name == axis);
            let why = match (value, found) {
                (v, _) if *v != crate::AttrValue::Str(crate::POSITION_MAP.into()) => {
                    Some(format!("the only workspace is \"{}\"", crate::POSITION_MAP))
                }
                (_, None) => Some(format!("no axis is called `{axis}`")),
                (_, Some((_, x))) if !matches!(x.kind, AxisKind::SparseVariable | AxisKind::SparseFixed) => {
                    Some(format!("`{axis}` is {}, and only a sparse axis's coordinates are looked up", x.kind.name()))
                }
                (_, Some((a, _))) if it.axes.iter().any(|e| e.members().contains(&a)) => {
                    Some(format!("`{axis}` is iterated here, so its positions need no lookup"))
                }
                (_, Some((a, _))) if !accesses_axis(f, it, a) => Some(format!("no buffer over `{axis}` is accessed here")),
                (_, Some((_, x))) => x.parent.filter(|p| !it.axes.contains(&SpIterAxis::Axis(*p))).map(|p| {
                    format!(
                        "the parent of `{axis}`, `{}`, is not iterated here as an entry of its own (not fused, attached or co-iterated), so no loop fixes the row a map would be filled for",
                        self.axis_name(p)
                    )
                }),
            };
            if let Some(why) = why {
                self.err(K::BadWorkspace { sp_iter: it.name.clone(), key: key.clone(), why });
            }
        }
    }

    /// Resolves the axis list of a sparse iteration, checking `fuse` and `attach` entries.
    fn sp_iter_axes(&mut self, it: &'f SpIter) -> Vec<Iter> {
        let f = self.f;
        let mut iters = Vec::new();
        for entry in &it.axes {
            match entry {
                SpIterAxis::Axis(a) => iters.push(self.declared(*a)),
                SpIterAxis::Fuse(group) => {
                    for (k, &a) in group.iter().enumerate() {
                        let mut iter = self.declared(a);
                        if let (Some(axis), Some(&prev)) =
                            (iter.axis.and_then(|a| f.axes.try_get(a)), k.checked_sub(1).map(|j| &group[j]))
                        {
                            if axis.parent != Some(prev) {
                                let found = match axis.parent {
                                    None => "it has no parent".to_string(),
                                    Some(p) => format!("its parent is `{}`", self.axis_name(p)),
                                };
                                self.err(K::FuseNotChain {
                                    sp_iter: it.name.clone(),
                                    axis: axis.name.clone(),
                                    expected: self.axis_name(prev),
                                    found,
                                });
                            }
                            // The previous member is this one's row either way; do not report
                            // a missing parent iterator on top of the broken chain.
                            iter.parent = Some(prev);
                        }
                        iters.push(iter);
                    }
                }
                SpIterAxis::Merge { op, axes } => {
                    let iter = self.merged(it, *op, axes);
                    iters.push(iter);
                }
                SpIterAxis::Attach { axis, parent } => {
                    let mut iter = self.declared(*axis);
                    if let Some(x) = iter.axis.and_then(|a| f.axes.try_get(a)) {
                        let found = match x.parent.map(|p| f.axes.try_get(p)) {
                            None => Some("it has none".to_string()),
                            Some(None) => None, // dangling: reported at the axis
                            Some(Some(p)) if p.kind != AxisKind::DenseFixed => {
                                Some(format!("it is `{}` ({})", p.name, p.kind.name()))
                            }
                            Some(Some(_)) => None,
                        };
                        if let Some(found) = found {
                            self.err(K::AttachParent {
                                sp_iter: it.name.clone(),
                                axis: x.name.clone(),
                                new_parent: self.axis_name(*parent),
                                found,
                            });
                        }
                    }
                    if f.axes.contains(*parent) {
                        iter.parent = Some(*parent);
                    } else {
                        self.dangling("axis", *parent, f.axes.len());
                        iter.parent = None;
                    }
                    iters.push(iter);
                }
            }
        }
        iters
    }

    /// The one iterator of a co-iteration: its members must be sorted sparse axes whose rows
    /// hold each coordinate once (sparse-variable, or root sparse-fixed), of one parent,
    /// length and index type.
    fn merged(&mut self, it: &'f SpIter, op: crate::func::MergeOp, axes: &'f [AxisId]) -> Iter {
        let f = self.f;
        let Some(&first) = axes.first() else { return Iter { axis: None, parent: None, merged: vec![] } };
        let mut iter = self.declared(first);
        iter.merged = axes.to_vec();
        let Some(a0) = f.axes.try_get(first) else { return iter };
        for (k, &a) in axes.iter().enumerate() {
            let Some(x) = f.axes.try_get(a) else {
                self.dangling("axis", a, f.axes.len());
                continue;
            };
            let why = if !(x.kind == AxisKind::SparseVariable || x.kind == AxisKind::SparseFixed && x.parent.is_none()) {
                Some(format!("it is {}; only sparse-variable and root sparse-fixed axes, whose rows hold each coordinate once, merge", x.kind.name()))
            } else if !x.unique {
                Some("it repeats coordinates (`unique = false`)".to_string())
            } else if !x.sorted {
                Some("its coordinates are not sorted (`sorted = false`)".to_string())
            } else if axes[..k].contains(&a) {
                Some("it is named twice".to_string())
            } else if a == first {
                None
            } else if x.parent != a0.parent {
                Some(format!("its parent is {}, not {}", x.parent.map_or("none".into(), |p| format!("`{}`", self.axis_name(p))), a0.parent.map_or("none".into(), |p| format!("`{}`", self.axis_name(p)))))
            } else if x.length != a0.length {
                Some("its length differs".to_string())
            } else if x.idtype != a0.idtype {
                Some(format!("its index type is {}, not {}", x.idtype, a0.idtype))
            } else {
                None
            };
            if let Some(why) = why {
                self.err(K::MergeAxes { sp_iter: it.name.clone(), op: op.name(), axis: x.name.clone(), first: a0.name.clone(), why });
            }
        }
        iter
    }

    /// A store whose index at a sparse dimension is an iterator that does not iterate that
    /// axis: refused, since the axis need not store the coordinate (at Stage
    /// I such a store is an error where it runs; lowered, it would be a looked-up position no
    /// block iterator determines). A union's iterator iterates no axis; an intersection's
    /// iterates each member.
    fn looked_up_write(&mut self, buffer: BufferId, indices: &'f [Expr]) {
        let f = self.f;
        let Some(axes) = f.buffers.try_get(buffer).map(|b| b.axes().to_vec()) else { return };
        for (d, e) in indices.iter().enumerate() {
            let Expr::Var(v) = e else { continue };
            let Some((_, sp_iter, what)) = self.sp_vars.iter().rev().find(|(u, _, _)| u == v).cloned() else { continue };
            let Some((a, axis)) = axes.get(d).and_then(|a| Some((*a, f.axes.try_get(*a)?))) else { continue };
            // A dense-variable row holds every coordinate below its length: a lookup there is a
            // range check, and programs (bmm) write through it.
            // An assembled axis is indexed by its own co-iteration alone (`assembled_access`).
            if !axis.kind.is_sparse() || axis.pattern.is_some() {
                continue;
            }
            let (buffer, var, axis_name) = (self.buffer_name(buffer), self.var_name(*v), axis.name.clone());
            match what {
                Iterated::Union(_) => {
                    self.err(K::StoreAtUnionCoordinate { buffer, var, sp_iter: sp_iter.to_string(), axis: axis_name })
                }
                Iterated::Axis(x) if x != a => {
                    let iterated = self.axis_name(x);
                    self.err(K::StoreAtLookedUpCoordinate { buffer, var, axis: axis_name, iterated })
                }
                Iterated::Intersect(members) if !members.contains(&a) => {
                    let iterated = format!("intersect({})", members.iter().map(|m| self.axis_name(*m)).collect::<Vec<_>>().join(", "));
                    self.err(K::StoreAtLookedUpCoordinate { buffer, var, axis: axis_name, iterated })
                }
                _ => {}
            }
        }
    }

    /// A Stage-I access to a dimension over an assembled axis: its index must be the iterator
    /// of a co-iteration of exactly the axis's pattern, which visits the row's coordinates in
    /// its order (the lowering takes the visit count as the position), or, for a product,
    /// an iterator over its second member (whose coordinates the pattern holds: looked up).
    pub(super) fn assembled_access(&mut self, buffer: BufferId, indices: &'f [Expr]) {
        let f = self.f;
        let Some(axes) = f.buffers.try_get(buffer).map(|b| b.axes().to_vec()) else { return };
        for (d, &a) in axes.iter().enumerate() {
            let Some(pt) = f.axes.try_get(a).and_then(|x| x.pattern.as_ref()) else { continue };
            let ok = match indices.get(d) {
                Some(Expr::Var(v)) => self.iterated(*v).is_some_and(|w| match w {
                    Iterated::Union(m) => pt.is_iterated_by(crate::func::MergeOp::Union, m),
                    Iterated::Intersect(m) => pt.is_iterated_by(crate::func::MergeOp::Intersect, m),
                    // A product's coordinates are those of its second member's rows.
                    Iterated::Axis(x) => pt.op == crate::func::PatternOp::Product && pt.members.get(1) == Some(x),
                }),
                _ => false,
            };
            if !ok {
                let members: Vec<String> = pt.members.iter().map(|m| self.axis_name(*m)).collect();
                self.err(K::AssembledIndex {
                    buffer: self.buffer_name(buffer),
                    axis: self.axis_name(a),
                    pattern: format!("{}({})", pt.op.name(), members.join(", ")),
                });
            }
        }
    }

    /// A Stage-I access to a dimension over an axis that repeats coordinates: its index must
    /// be an iterator over that axis, whose position the access then takes (a coordinate
    /// names no single entry there).
    pub(super) fn non_unique_access(&mut self, buffer: BufferId, indices: &'f [Expr]) {
        let f = self.f;
        let Some(axes) = f.buffers.try_get(buffer).map(|b| b.axes().to_vec()) else { return };
        for (d, &a) in axes.iter().enumerate() {
            if f.axes.try_get(a).is_none_or(|x| x.unique) {
                continue;
            }
            let ok = match indices.get(d) {
                Some(Expr::Var(v)) => self.iterated(*v).is_some_and(|w| matches!(w, Iterated::Axis(x) if *x == a)),
                _ => false,
            };
            if !ok {
                self.err(K::NonUniqueIndex { buffer: self.buffer_name(buffer), axis: self.axis_name(a) });
            }
        }
    }

    /// What the innermost enclosing sp_iter iterator `v` iterates.
    fn iterated(&self, v: VarId) -> Option<&Iterated> {
        self.sp_vars.iter().rev().find(|(u, _, _)| *u == v).map(|(_, _, w)| w)
    }

    /// An iterator over `a` with its declared parent.
    fn declared(&mut self, a: AxisId) -> Iter {
        match self.f.axes.try_get(a) {
            Some(axis) => Iter { axis: Some(a), parent: axis.parent, merged: vec![] },
            None => {
                self.dangling("axis", a, self.f.axes.len());
                Iter { axis: None, parent: None, merged: vec![] }
            }
        }
    }

    // ---- loops and blocks --------------------------------------------------------------

    fn for_loop(&mut self, l: &'f For) {
        let f = self.f;
        self.stage_allows("for", f.stage != Stage::I, "loops belong to Stage II and III");
        let var = f.vars.try_get(l.var);
        for (what, e) in [("start", &l.min), ("extent", &l.extent)] {
            let Some(t) = self.expr(e) else { continue };
            let name = self.var_name(l.var);
            if !t.is_int() {
                self.err(K::LoopBoundNotInt { var: name, what, found: t });
            } else if let Some(v) = var.filter(|v| v.dtype != t) {
                self.err(K::LoopBoundDType { var: name, what, expected: v.dtype, found: t });
            }
        }
        let mark = self.scope.len();
        self.bind(l.var, None);
        self.loops.push((l.var, &l.extent));
        self.stmts(&l.body);
        self.loops.pop();
        self.pop_to(mark);
    }

    fn block(&mut self, b: &'f Block) {
        let f = self.f;
        self.stage_allows("block", f.stage != Stage::I, "blocks belong to Stage II and III");
        // Extents and bindings are evaluated outside the block.
        for it in &b.iters {
            let name = self.var_name(it.var);
            if let Some(t) = self.expr(&it.extent) {
                if !t.is_int() {
                    self.err(K::BlockIterExtentNotInt { var: name.clone(), found: t });
                }
            }
            let binding = self.expr(&it.binding);
            if let Some(v) = f.vars.try_get(it.var) {
                if !v.dtype.is_int() {
                    self.err(K::BlockIterNotInt { var: name, found: v.dtype });
                } else if let Some(t) = binding.filter(|&t| t != v.dtype) {
                    self.err(K::BlockIterBindingDType { var: name, expected: v.dtype, found: t });
                }
            }
        }
        let (loops, lets) = (std::mem::take(&mut self.loops), std::mem::take(&mut self.loop_lets));
        let allocs = std::mem::take(&mut self.loop_allocs);
        let role = |v: VarId| match loops.iter().find(|(l, _)| *l == v) {
            Some((_, extent)) => Role::Free(Some((*extent).clone())),
            None if lets.contains(&v) => Role::Unknown,
            None => Role::Fixed,
        };
        self.check_block_kinds(b, &role, &allocs);
        let mark = self.scope.len();
        // Without an init a block is a scatter: every instance writes what its indices name,
        // and a reduce iterator may pick an element directly (a COO row's position).
        for it in &b.iters {
            let reducer = (it.kind == IterKind::Reduce && b.init.is_some()).then_some(Reducer::Block(b.name.as_str()));
            self.bind(it.var, reducer);
        }
        for r in b.reads.iter().chain(&b.writes) {
            self.region(r);
        }
        if let Some(init) = &b.init {
            self.stmts(init);
        }
        self.stmts(&b.body);
        self.pop_to(mark);
        (self.loops, self.loop_lets, self.loop_allocs) = (loops, lets, allocs);
    }
}

/// Whether the body or init of `it` loads or stores a buffer laid out over axis `a`.
fn accesses_axis(f: &crate::func::Func, it: &SpIter, a: AxisId) -> bool {
    let over = |b: BufferId| {
        f.buffers.try_get(b).is_some_and(|x| matches!(&x.layout, crate::func::Layout::Sparse(axes) if axes.contains(&a)))
    };
    let mut hit = false;
    for list in [it.init.as_deref().unwrap_or(&[]), &it.body[..]] {
        crate::func::walk_stmts(list, &mut |s| {
            if let StmtKind::Store { buffer, .. } = &s.kind {
                hit |= over(*buffer);
            }
            for e in s.kind.exprs() {
                e.walk(&mut |x| {
                    if let Expr::Load(b, _) | Expr::AtomicAdd(b, _, _) = x {
                        hit |= over(*b);
                    }
                });
            }
        });
    }
    hit
}
