//! Loops and blocks: the iterators of a sparse iteration are grouped into blocks (a new block
//! starts where a loop extent depends on a variable of the current block, and after a fused
//! loop so that its row search is hoisted), each iterator gets a loop whose extent comes from
//! `indptr` differences, and each block binds one block variable per loop.

use super::{IterInfo, Lowerer};
use crate::build::{add, bin, int, mul, stmt, store, sub};
use crate::PassError;
use sparsec_ir::expr::{BinOp, Expr};
use sparsec_ir::func::{Attrs, AxisId, Block, BlockIter, For, MergeOp, SpIter, SpIterAxis, Stmt, StmtKind, VarId};
use sparsec_ir::{AxisKind, BufferId, ForKind, IterKind};

/// One entry of a sparse iteration's axis list with its variables and kinds.
struct Entry {
    spec: SpIterAxis,
    vars: Vec<VarId>,
    kinds: Vec<IterKind>,
}

impl Entry {
    fn is_spatial(&self) -> bool {
        self.kinds.iter().all(|k| *k == IterKind::Spatial)
    }
}

/// Which nest is being generated: the computation, or the hoisted `init`.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Main,
    Init,
}

struct Plan<'s> {
    it: &'s SpIter,
    entries: Vec<Entry>,
    blocks: Vec<Vec<usize>>,
    init_block: Option<usize>,
    /// The position maps asked for (axis, map), filled in the loop of the axis's parent.
    maps: Vec<(AxisId, BufferId)>,
}

impl Lowerer<'_> {
    /// Lowers one sparse iteration to its loop nests.
    pub(super) fn sp_iter(&mut self, it: &SpIter) -> Result<Vec<Stmt>, PassError> {
        let kinds = it.iter_kinds().ok_or_else(|| PassError::Internal(format!("bad kinds {:?}", it.kinds)))?;
        let mut entries = Vec::new();
        let mut k = 0;
        for spec in &it.axes {
            let n = spec.axes().len();
            entries.push(Entry { spec: spec.clone(), vars: it.vars[k..k + n].to_vec(), kinds: kinds[k..k + n].to_vec() });
            k += n;
        }
        let blocks = partition(&entries, |a| self.out.axes[a].parent);
        let init_block = blocks.iter().position(|b| b.iter().any(|&e| !entries[e].is_spatial()));
        // Position maps live over the whole nest; a root axis's one row is filled before it.
        let mut out = Vec::new();
        let mut maps = Vec::new();
        let depth = self.maps.len();
        for key in it.attrs.keys() {
            let Some(name) = key.strip_prefix(sparsec_ir::WORKSPACE_ATTR) else { continue };
            let a = self.out.axes.iter().find(|(_, x)| x.name == name).map(|(h, _)| h);
            let a = a.ok_or_else(|| PassError::Internal(format!("workspace of unknown axis `{name}` verified")))?;
            let axis = self.out.axes[a].clone();
            let len = add(&self.out, axis.length.clone(), int(1, axis.idtype));
            let (map, alloc) = self.alloc(&format!("{}_map", axis.name), axis.idtype, len, sparsec_ir::Scope::Global);
            out.push(alloc);
            if axis.parent.is_none() {
                out.extend(self.map_fill(a, map, &[]));
                self.maps.push(super::PositionMap { axis: a, buffer: map, row: vec![] });
            } else {
                maps.push((a, map));
            }
        }
        let plan = Plan { it, entries, blocks, init_block, maps };
        let nest = self.nest(&plan, 0, Mode::Main, false);
        self.maps.truncate(depth);
        out.extend(nest?);
        Ok(out)
    }

    /// Fills position map `map` of sparse axis `a` for row `row`: each coordinate's element
    /// holds its position in the row (the first one where a row repeats a coordinate, as a
    /// search finds it). Elements of other coordinates keep whatever they held, which a
    /// lookup tells apart by reading the coordinate back ([`Self::map_lookup`]).
    fn map_fill(&mut self, a: AxisId, map: BufferId, row: &[Expr]) -> Vec<Stmt> {
        let mut out = Vec::new();
        let name = self.out.axes[a].name.clone();
        let idtype = self.out.axes[a].idtype;
        let len = self.row_len(a, row);
        let len = self.bind(&format!("{name}_row_len"), len, &mut out);
        let d = self.out.expr_dtype(&len);
        let q = self.out.add_var(self.namer.var(&format!("{name}_q")), d);
        // Last position first, so a repeated coordinate ends up at its first position.
        let last = sub(&self.out, len.clone(), int(1, d));
        let p = sub(&self.out, last, Expr::Var(q));
        let ind = self.indices_buffer(a);
        let mut at = row.to_vec();
        at.push(p.clone());
        let value = crate::build::cast_to(&self.out, p, idtype);
        out.push(stmt(StmtKind::For(For {
            var: q,
            min: int(0, d),
            extent: len,
            kind: ForKind::Serial,
            body: vec![store(map, vec![Expr::Load(ind, at)], value)],
            attrs: Attrs::new(),
        })));
        out
    }

    /// Fills the position maps of `plan` whose row block `b` fixes (its parent's iterator
    /// opened in it): the fills, each with the index in `loops` of the loop it goes in.
    fn open_maps(&mut self, plan: &Plan, iters: &[BlockIter], loops: &[(VarId, Expr)]) -> Vec<(usize, Vec<Stmt>)> {
        let mut fills = Vec::new();
        for &(a, map) in &plan.maps {
            let Some(parent) = self.out.axes[a].parent else { continue };
            let Some(pi) = self.iter_over(parent).cloned() else { continue };
            let Some(k) = iters.iter().position(|it| pi.pos == Expr::Var(it.var)) else { continue };
            if loops.get(k).is_none_or(|l| iters[k].binding != Expr::Var(l.0)) {
                continue;
            }
            // The fill runs in the loop, outside the block: block variables become bindings.
            let bound: std::collections::HashMap<VarId, Expr> =
                iters.iter().map(|it| (it.var, it.binding.clone())).collect();
            let row: Vec<Expr> = pi.chain.iter().map(|e| e.clone().substitute(&bound)).collect();
            fills.push((k, self.map_fill(a, map, &row)));
            self.maps.push(super::PositionMap { axis: a, buffer: map, row: pi.chain.clone() });
        }
        fills
    }

    /// The statements at the level where block `b`'s loops begin.
    /// `opened` says whether this nest has opened a block yet.
    fn nest(&mut self, plan: &Plan, b: usize, mode: Mode, opened: bool) -> Result<Vec<Stmt>, PassError> {
        let mut out = Vec::new();
        if mode == Mode::Main && plan.init_block == Some(b) && plan.it.init.is_some() {
            out.extend(self.nest(plan, b, Mode::Init, false)?);
        }
        if b == plan.blocks.len() {
            match mode {
                Mode::Init => {
                    let init = self.stmts(plan.it.init.as_deref().unwrap_or(&[]))?;
                    if opened {
                        out.extend(init);
                    } else {
                        // No spatial loop left: the init still gets a block of its own.
                        let name = self.block_name(&format!("{}_init", plan.it.name));
                        out.push(stmt(StmtKind::Block(Block {
                            name,
                            iters: vec![],
                            reads: vec![],
                            writes: vec![],
                            init: None,
                            body: init,
                            attrs: Attrs::new(),
                        })));
                    }
                }
                Mode::Main => {
                    let init = plan.it.init.as_deref().filter(|_| plan.init_block.is_none()).unwrap_or(&[]);
                    out.extend(self.stmt_lists(&[init, &plan.it.body])?);
                }
            }
            return Ok(out);
        }
        let ids: Vec<usize> =
            plan.blocks[b].iter().copied().filter(|&e| mode == Mode::Main || plan.entries[e].is_spatial()).collect();
        if ids.is_empty() {
            out.extend(self.nest(plan, b + 1, mode, opened)?);
            return Ok(out);
        }
        if let [e] = ids[..] {
            if let SpIterAxis::Merge { op, axes } = &plan.entries[e].spec {
                let s = self.merge_nest(plan, b, mode, &plan.entries[e], *op, axes)?;
                out.push(s);
                return Ok(out);
            }
        }
        self.namer.push();
        let depth = self.iters.len();
        let maps = self.maps.len();
        let mut loops: Vec<(VarId, Expr)> = Vec::new();
        let mut iters = Vec::new();
        let mut head = Vec::new();
        let mut fills = Vec::new();
        let r = (|| {
            for &e in &ids {
                self.open_entry(&plan.entries[e], &mut loops, &mut iters, &mut head)?;
            }
            if mode == Mode::Main {
                fills = self.open_maps(plan, &iters, &loops);
            }
            self.nest(plan, b + 1, mode, true)
        })();
        self.iters.truncate(depth);
        self.maps.truncate(maps);
        self.namer.pop();
        let inner = r?;
        let (name, attrs) = self.block_name_and_attrs(plan, b, mode);
        head.extend(inner);
        let mut s = stmt(StmtKind::Block(Block {
            name,
            iters,
            reads: vec![],
            writes: vec![],
            init: None,
            body: head,
            attrs,
        }));
        for (k, (var, extent)) in loops.into_iter().enumerate().rev() {
            let d = self.out.vars[var].dtype;
            let mut body: Vec<Stmt> = fills.iter().filter(|f| f.0 == k).flat_map(|f| f.1.clone()).collect();
            body.push(s);
            let kind = ForKind::Serial;
            s = stmt(StmtKind::For(For { var, min: int(0, d), extent, kind, body, attrs: Attrs::new() }));
        }
        out.push(s);
        Ok(out)
    }

    /// The name of block `b` of `plan`'s nest (`mode`'s), and its attributes: the sparse
    /// iteration's on the first block of the computation.
    fn block_name_and_attrs(&mut self, plan: &Plan, b: usize, mode: Mode) -> (String, Attrs) {
        let base = match mode {
            Mode::Main => format!("{}{b}", plan.it.name),
            Mode::Init => format!("{}_init{b}", plan.it.name),
        };
        // The workspaces are the lowering's; the rest of the iteration's attributes stay.
        let attrs = match (b, mode) {
            (0, Mode::Main) => {
                let kept = plan.it.attrs.iter().filter(|(k, _)| !k.starts_with(sparsec_ir::WORKSPACE_ATTR));
                kept.map(|(k, v)| (k.clone(), v.clone())).collect()
            }
            _ => Attrs::new(),
        };
        (self.block_name(&base), attrs)
    }

    fn block_name(&mut self, base: &str) -> String {
        sparsec_ir::names::fresh_in(&mut self.block_names, base)
    }

    /// A loop variable and a block variable for an iterator called `name`.
    fn loop_and_block_var(&mut self, name: &str, extent: &Expr) -> (VarId, VarId) {
        let d = self.out.expr_dtype(extent);
        let lv = self.out.add_var(self.namer.var(name), d);
        let bv = self.out.add_var(self.namer.var(&format!("v{name}")), d);
        (lv, bv)
    }

    /// Domain of a block variable iterating `a`: its coordinate bound, or `k` for ELL.
    fn domain(&self, a: AxisId) -> Expr {
        let axis = &self.out.axes[a];
        match axis.kind {
            AxisKind::SparseFixed => axis.nnz.clone().unwrap_or(Expr::i32(0)),
            _ => axis.length.clone(),
        }
    }

    /// Opens the loop of one entry: its extent, block variable and iterator info.
    fn open_entry(
        &mut self,
        e: &Entry,
        loops: &mut Vec<(VarId, Expr)>,
        iters: &mut Vec<BlockIter>,
        head: &mut Vec<Stmt>,
    ) -> Result<(), PassError> {
        let var_name = |l: &Self, v: VarId| l.src.vars[v].name.clone();
        match &e.spec {
            SpIterAxis::Axis(a) | SpIterAxis::Attach { axis: a, .. } => {
                let a = *a;
                let (prefix, row, row_src) = match &e.spec {
                    SpIterAxis::Attach { parent: q, .. } => {
                        let qi = self.iter_over(*q).cloned().ok_or_else(|| self.not_iterated(*q))?;
                        (vec![qi.coord.clone()], vec![qi.coord.clone()], Some(qi.var))
                    }
                    _ => match self.out.axes[a].parent {
                        None => (vec![], vec![], None),
                        Some(p) => {
                            let pi = self.iter_over(p).cloned().ok_or_else(|| self.not_iterated(p))?;
                            (pi.chain.clone(), pi.chain.clone(), Some(pi.var))
                        }
                    },
                };
                let extent = self.row_len(a, &row);
                let name = var_name(self, e.vars[0]);
                let (lv, bv) = self.loop_and_block_var(&name, &extent);
                loops.push((lv, extent));
                iters.push(BlockIter { var: bv, kind: e.kinds[0], extent: self.domain(a), binding: Expr::Var(lv) });
                self.push_iter(e.vars[0], a, Expr::Var(bv), prefix, row_src);
            }
            SpIterAxis::Fuse(group) => self.open_fused(e, group, loops, iters, head)?,
            SpIterAxis::Merge { .. } => return Err(PassError::Internal("a co-iteration shares a block".into())),
        }
        Ok(())
    }

    /// A co-iteration (`union`/`intersect` of sparse axes with one parent): a block of no
    /// iterators holding a merge loop, one cursor per member. Each step reads each cursor's
    /// coordinate (the axis length once the cursor has passed its row's end), takes the
    /// least as the iterator's coordinate, runs the body (an intersection only where every
    /// cursor stands there) and moves the cursors that stand there; an intersection's
    /// cursors that do not all stand there gallop to the furthest one's coordinate instead
    /// ([`Self::gallop`]). The loop runs while any (union) or every (intersection) cursor is
    /// inside its row: at most the rows' total length of steps. Accesses through the
    /// iterator to a member use its cursor's position.
    fn merge_nest(&mut self, plan: &Plan, b: usize, mode: Mode, e: &Entry, op: MergeOp, axes: &[AxisId]) -> Result<Stmt, PassError> {
        self.namer.push();
        let depth = self.iters.len();
        let r = (|| {
            let first = &self.out.axes[axes[0]];
            let (idtype, length, parent) = (first.idtype, first.length.clone(), first.parent);
            let (row, row_src) = match parent {
                None => (vec![], None),
                Some(p) => {
                    let pi = self.iter_over(p).cloned().ok_or_else(|| self.not_iterated(p))?;
                    (pi.chain.clone(), Some(pi.var))
                }
            };
            let name = self.src.vars[e.vars[0]].name.clone();
            let mut head = Vec::new();
            let mut step = Vec::new();
            let (mut inside, mut cursors, mut coords, mut lens) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            let at = vec![Expr::i32(0)];
            for &a in axes {
                let axis_name = self.out.axes[a].name.clone();
                let len = self.row_len(a, &row);
                let len = self.bind(&format!("{axis_name}_len"), len, &mut head);
                let (cur, alloc) = self.local_scalar(&format!("{axis_name}_cursor"), idtype);
                head.push(alloc);
                head.push(store(cur, at.clone(), int(0, idtype)));
                let p = Expr::Load(cur, at.clone());
                inside.push(bin(&self.out, BinOp::Lt, p.clone(), len.clone()));
                // The cursor's coordinate, or the axis length past the row's end.
                let (c, alloc) = self.local_scalar(&format!("{axis_name}_coord"), idtype);
                step.push(alloc);
                step.push(store(c, at.clone(), length.clone()));
                let pos = self.bind(&format!("{axis_name}_pos"), p, &mut step);
                let mut probe = row.clone();
                probe.push(pos.clone());
                let ind = self.indices_buffer(a);
                step.push(stmt(StmtKind::If {
                    cond: inside.last().cloned().expect("pushed"),
                    then_body: vec![store(c, at.clone(), Expr::Load(ind, probe))],
                    else_body: vec![],
                }));
                let coord = self.bind(&format!("{axis_name}_at"), Expr::Load(c, at.clone()), &mut step);
                lens.push(len);
                cursors.push((a, cur, pos));
                coords.push(coord);
            }
            let least = coords[1..].iter().fold(coords[0].clone(), |m, c| Expr::binary(BinOp::Min, m, c.clone()));
            // Inside the loop some cursor stands at the least coordinate, so it lies in
            // `0..length`; the clamp, a no-op, states it where the verifier sees flat offsets
            // (`D[vi * n + j]` is row `vi`).
            let last = sub(&self.out, length.clone(), int(1, idtype));
            let least = Expr::binary(BinOp::Max, Expr::binary(BinOp::Min, least, last), int(0, idtype));
            let j = self.bind(&name, least, &mut step);
            let here: Vec<Expr> = coords.iter().map(|c| bin(&self.out, BinOp::Eq, c.clone(), j.clone())).collect();
            // Inside an intersection's body every cursor stands at the coordinate.
            let mut merged: Vec<(AxisId, Expr, Expr)> = cursors
                .iter()
                .zip(&here)
                .map(|((a, _, p), h)| (*a, p.clone(), if op == MergeOp::Intersect { Expr::Bool(true) } else { h.clone() }))
                .collect();
            // An axis assembled from exactly this co-iteration holds its coordinates in the
            // order visited: the position of a point is the count of points before it in the
            // row (a cursor of its own, moved after the body).
            let assembled: Vec<AxisId> = self
                .out
                .axes
                .iter()
                .filter(|(_, x)| x.parent == parent && x.pattern.as_ref().is_some_and(|pt| pt.is_iterated_by(op, axes)))
                .map(|(h, _)| h)
                .collect();
            let mut visited = None;
            if let Some(&first_out) = assembled.first() {
                let out_name = self.out.axes[first_out].name.clone();
                let (cur, alloc) = self.local_scalar(&format!("{out_name}_cursor"), idtype);
                head.push(alloc);
                head.push(store(cur, at.clone(), int(0, idtype)));
                let p = self.bind(&format!("{out_name}_pos"), Expr::Load(cur, at.clone()), &mut step);
                merged.extend(assembled.iter().map(|&x| (x, p.clone(), Expr::Bool(true))));
                visited = Some(store(cur, at.clone(), add(&self.out, p, int(1, idtype))));
            }
            self.iters.push(IterInfo { var: e.vars[0], axis: axes[0], pos: j.clone(), coord: j.clone(), chain: vec![], row_src, merged });
            let mut inner = self.nest(plan, b + 1, mode, true)?;
            inner.extend(visited);
            match op {
                MergeOp::Union => {
                    step.extend(inner);
                    for ((_, cur, p), h) in cursors.iter().zip(&here) {
                        let one = Expr::Select(Box::new(h.clone()), Box::new(int(1, idtype)), Box::new(int(0, idtype)));
                        step.push(store(*cur, at.clone(), add(&self.out, p.clone(), one)));
                    }
                }
                MergeOp::Intersect => {
                    // Where every cursor stands at `j`, the body runs and all move on by
                    // one; elsewhere each cursor behind the furthest coordinate gallops to it.
                    let all = here[1..].iter().fold(here[0].clone(), |a, h| Expr::binary(BinOp::And, a, h.clone()));
                    let mut then_body = inner;
                    for (_, cur, p) in &cursors {
                        then_body.push(store(*cur, at.clone(), add(&self.out, p.clone(), int(1, idtype))));
                    }
                    let furthest = coords[1..].iter().fold(coords[0].clone(), |m, c| Expr::binary(BinOp::Max, m, c.clone()));
                    let mut else_body = Vec::new();
                    let target = self.bind(&format!("{name}_next"), furthest, &mut else_body);
                    for (((a, cur, p), c), len) in cursors.iter().zip(&coords).zip(&lens) {
                        let gallop = self.gallop(*a, &row, *cur, p.clone(), len.clone(), target.clone());
                        let behind = bin(&self.out, BinOp::Lt, c.clone(), target.clone());
                        else_body.push(stmt(StmtKind::If { cond: behind, then_body: gallop, else_body: vec![] }));
                    }
                    step.push(stmt(StmtKind::If { cond: all, then_body, else_body }));
                }
            }
            let join = match op {
                MergeOp::Union => BinOp::Or,
                MergeOp::Intersect => BinOp::And,
            };
            let cond = inside[1..].iter().fold(inside[0].clone(), |a, c| Expr::binary(join, a, c.clone()));
            head.push(stmt(StmtKind::While { cond, body: step }));
            Ok(head)
        })();
        self.iters.truncate(depth);
        self.namer.pop();
        let body = r?;
        let (name, attrs) = self.block_name_and_attrs(plan, b, mode);
        Ok(stmt(StmtKind::Block(Block { name, iters: vec![], reads: vec![], writes: vec![], init: None, body, attrs })))
    }

    /// Moves cursor `cur` of member `a` (at position `p`, whose coordinate lies below
    /// `target`) to the first position of its row of length `len` whose coordinate is at
    /// least `target`, or to `len`: steps of 1, 2, 4, … bracket it, then a binary search
    /// inside the bracket finds it. `O(log d)` for a move of `d` positions, one probe for a
    /// move of one. Every probe lies inside the row, so no load depends on `&&` short-circuiting.
    fn gallop(&mut self, a: AxisId, row: &[Expr], cur: BufferId, p: Expr, len: Expr, target: Expr) -> Vec<Stmt> {
        let idtype = self.out.axes[a].idtype;
        let name = self.out.axes[a].name.clone();
        let ind = self.indices_buffer(a);
        let at = vec![Expr::i32(0)];
        let (low, a1) = self.local_scalar(&format!("{name}_gallop"), idtype);
        let (width, a2) = self.local_scalar(&format!("{name}_stride"), idtype);
        let (lo, w) = (Expr::Load(low, at.clone()), Expr::Load(width, at.clone()));
        let f = &self.out;
        let probe_at = |_: &sparsec_ir::Func, q: Expr| {
            let mut idx = row.to_vec();
            idx.push(q);
            Expr::Load(ind, idx)
        };
        // `low` stays below the answer; `width` never passes the row's end.
        let room = sub(f, len.clone(), lo.clone());
        let last = sub(f, sub(f, len.clone(), int(1, idtype)), lo.clone());
        let ahead = add(f, lo.clone(), Expr::binary(BinOp::Min, w.clone(), last));
        let more = Expr::binary(
            BinOp::And,
            bin(f, BinOp::Lt, w.clone(), room.clone()),
            bin(f, BinOp::Lt, probe_at(f, ahead), target.clone()),
        );
        let grow = vec![
            store(low, at.clone(), add(f, lo.clone(), w.clone())),
            // Doubles, but never past the row's end (no overflow in long rows).
            store(width, at.clone(), add(f, w.clone(), Expr::binary(BinOp::Min, w.clone(), sub(f, len.clone(), lo.clone())))),
        ];
        let mut out = vec![
            a1,
            a2,
            store(low, at.clone(), p),
            store(width, at.clone(), int(1, idtype)),
            stmt(StmtKind::While { cond: more, body: grow }),
        ];
        // The answer lies in `low + 1 ..= low + min(width, len - low)`.
        let base = self.bind(&format!("{name}_from"), add(f, lo.clone(), int(1, idtype)), &mut out);
        let f = &self.out;
        let span = sub(f, Expr::binary(BinOp::Min, w, room), int(1, idtype));
        let span = self.bind(&format!("{name}_span"), span, &mut out);
        let b2 = base.clone();
        let s = self.bound_search(&format!("{name}_leap"), span, target, BinOp::Lt, &|f, q| probe_at(f, add(f, b2.clone(), q)));
        out.extend(s.stmts);
        out.push(store(cur, at, add(&self.out, base, s.pos)));
        out
    }

    fn push_iter(&mut self, var: VarId, axis: AxisId, pos: Expr, mut chain: Vec<Expr>, row_src: Option<VarId>) {
        chain.push(pos.clone());
        let coord = if self.out.axes[axis].kind.is_sparse() {
            let ind = self.indices_buffer(axis);
            Expr::Load(ind, chain.clone())
        } else {
            pos.clone()
        };
        self.iters.push(IterInfo { var, axis, pos, coord, chain, row_src, merged: vec![] });
    }

    fn not_iterated(&self, a: AxisId) -> PassError {
        PassError::Internal(format!("axis `{}` is not iterated before its children", self.out.axes[a].name))
    }

    /// `fuse(A1, ..., An)`: one loop over An's flat positions; each member's position is
    /// recovered at the top of the block by searching the row pointers (hoisted once per
    /// fused position).
    fn open_fused(
        &mut self,
        e: &Entry,
        group: &[AxisId],
        loops: &mut Vec<(VarId, Expr)>,
        iters: &mut Vec<BlockIter>,
        head: &mut Vec<Stmt>,
    ) -> Result<(), PassError> {
        if self.out.axes[group[0]].parent.is_some() {
            return Err(PassError::Unsupported {
                pass: "lower_sparse_iter",
                what: "fusing axes whose first member is not a root axis".into(),
            });
        }
        // Flat sizes of each level.
        let mut sizes = vec![self.out.axes[group[0]].fixed_row_extent().cloned().unwrap_or(Expr::i32(0))];
        for &a in &group[1..] {
            let axis = &self.out.axes[a];
            let prev = sizes.last().cloned().expect("non-empty");
            sizes.push(match axis.kind {
                AxisKind::DenseVariable | AxisKind::SparseVariable => axis.nnz.clone().unwrap_or(Expr::i32(0)),
                _ => mul(&self.out, prev, axis.nnz.clone().unwrap_or(Expr::i32(0))),
            });
        }
        let names: Vec<String> = e.vars.iter().map(|&v| self.src.vars[v].name.clone()).collect();
        let total = sizes.last().cloned().expect("non-empty");
        let (lv, bv) = self.loop_and_block_var(&names.concat(), &total);
        loops.push((lv, total.clone()));
        let kind = if e.is_spatial() { IterKind::Spatial } else { IterKind::Reduce };
        iters.push(BlockIter { var: bv, kind, extent: total, binding: Expr::Var(lv) });
        // Walk up from the innermost level: flat[t] → flat[t-1] and pos[t].
        let n = group.len();
        let mut flat: Vec<Expr> = vec![Expr::Int(0, sparsec_ir::DType::I32); n];
        let mut pos: Vec<Expr> = vec![Expr::Int(0, sparsec_ir::DType::I32); n];
        flat[n - 1] = Expr::Var(bv);
        for t in (1..n).rev() {
            let axis = self.out.axes[group[t]].clone();
            if axis.kind.is_variable() {
                let ip = if t == 1 {
                    self.indptr_buffer(group[t])
                } else {
                    self.flat_indptr_buffer(group[t], sizes[t - 1].clone())
                };
                let target = flat[t].clone();
                let probe = move |_: &sparsec_ir::Func, m: Expr| Expr::Load(ip, vec![m]);
                let s = self.bound_search(&axis.name, sizes[t - 1].clone(), target, BinOp::Le, &probe);
                head.extend(s.stmts);
                let one = int(1, self.out.expr_dtype(&s.pos));
                let row = sub(&self.out, s.pos, one);
                flat[t - 1] = self.bind(&level_name(&names, t - 1), row, head);
                let p = sub(&self.out, flat[t].clone(), Expr::Load(ip, vec![flat[t - 1].clone()]));
                pos[t] = self.bind(&format!("v{}", names[t]), p, head);
            } else {
                let k = axis.nnz.clone().unwrap_or(Expr::i32(1));
                let f = &self.out;
                let row = crate::build::bin(f, BinOp::FloorDiv, flat[t].clone(), k.clone());
                flat[t - 1] = self.bind(&level_name(&names, t - 1), row, head);
                let p = crate::build::bin(&self.out, BinOp::FloorMod, flat[t].clone(), k);
                pos[t] = self.bind(&format!("v{}", names[t]), p, head);
            }
        }
        pos[0] = flat[0].clone();
        let mut chain = Vec::new();
        for t in 0..n {
            self.push_iter(e.vars[t], group[t], pos[t].clone(), chain.clone(), (t > 0).then(|| e.vars[t - 1]));
            chain.push(pos[t].clone());
        }
        Ok(())
    }

}

/// Name of the `let` holding the flat position of fused level `t`: the first level's flat
/// position is its position (`vi`); deeper ones are `j_flat`.
fn level_name(names: &[String], t: usize) -> String {
    if t == 0 {
        format!("v{}", names[0])
    } else {
        format!("{}_flat", names[t])
    }
}

/// Groups entries into blocks: a new block starts when an entry's loop extent depends on an
/// iterator of the current block, or after a fused entry.
fn partition(entries: &[Entry], parent: impl Fn(AxisId) -> Option<AxisId>) -> Vec<Vec<usize>> {
    let mut blocks: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let dep_axis = match &e.spec {
            SpIterAxis::Axis(a) => parent(*a),
            SpIterAxis::Fuse(g) => parent(g[0]),
            SpIterAxis::Attach { parent: q, .. } => Some(*q),
            SpIterAxis::Merge { axes, .. } => axes.first().and_then(|a| parent(*a)),
        };
        let depends = dep_axis.is_some_and(|p| current.iter().any(|&c| entries[c].spec.axes().contains(&p)));
        let after_fuse = current.last().is_some_and(|&c| matches!(entries[c].spec, SpIterAxis::Fuse(_) | SpIterAxis::Merge { .. }));
        // A co-iteration is a block of its own (its merge loop holds the rest).
        if !current.is_empty() && (depends || after_fuse || e.spec.is_merge()) {
            blocks.push(std::mem::take(&mut current));
        }
        current.push(i);
    }
    if !current.is_empty() {
        blocks.push(current);
    }
    blocks
}
