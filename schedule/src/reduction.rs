//! Reduction primitives (Stage II/III): `decompose_reduction` and `rfactor`, and helpers
//! shared with `compute_at` (loop nests above a block, statement lists, names in scope).
//!
//! Semantics kept: a block's `init` runs when all its reduction iterators are 0, i.e. at the
//! first step of the reduction of each spatial point (a point whose reduction domain is
//! empty is never initialised by the block). `decompose_reduction` keeps that exactly by
//! guarding the new init block with "the first reduction step is reached"; the guard is
//! left out where it simplifies to true (constant positive extents, no guards).

use crate::error::ScheduleError;
use crate::schedule::{stale, BlockRv, LoopRv, Schedule, Target};
use crate::trace::Step;
use crate::tree::{self, Path};
use sparsec_ir::expr::{BinOp, Expr};
use sparsec_ir::func::{
    Attrs, Block, BlockIter, Buffer, BufferId, For, Func, Layout, ParamKind, Region, RegionRange, Stmt, StmtKind,
    Storage, VarId,
};
use sparsec_ir::span::Span;
use sparsec_ir::{IterKind, Scope};
use sparsec_passes::build::{int, zero};
use sparsec_passes::simplify::simplify_expr;
use std::collections::{HashMap, HashSet};

type Result<T> = std::result::Result<T, ScheduleError>;

// ---- shared helpers ------------------------------------------------------------------------

/// The statement list that holds the statement at `path`, mutably.
pub(crate) fn list_mut<'a>(body: &'a mut Vec<Stmt>, path: &[(usize, usize)]) -> Option<&'a mut Vec<Stmt>> {
    let (last, parent) = path.split_last()?;
    if parent.is_empty() {
        return Some(body);
    }
    let p = tree::get_mut(body, parent)?;
    p.kind.child_lists_mut().into_iter().nth(last.0)
}

/// The statement list that holds the statement at `path`.
pub(crate) fn list_at<'a>(body: &'a [Stmt], path: &[(usize, usize)]) -> Option<&'a [Stmt]> {
    let (last, parent) = path.split_last()?;
    if parent.is_empty() {
        return Some(body);
    }
    let p = tree::get(body, parent)?;
    p.kind.child_lists().into_iter().nth(last.0).map(Vec::as_slice)
}


/// Variables in scope just before the statement at `path` (bound by enclosing statements or
/// by earlier `let`s of enclosing lists), scalar parameters included.
pub(crate) fn vars_in_scope(f: &Func, path: &[(usize, usize)]) -> HashSet<VarId> {
    let mut vars: HashSet<VarId> = f.params.iter().filter_map(|p| match p.kind {
        ParamKind::Scalar(v) => Some(v),
        ParamKind::Handle => None,
    }).collect();
    let mut list: &[Stmt] = &f.body;
    for (k, &(_, i)) in path.iter().enumerate() {
        for prev in list.iter().take(i) {
            if let StmtKind::Let { var, .. } = prev.kind {
                vars.insert(var);
            }
        }
        let Some(s) = list.get(i) else { break };
        if k + 1 == path.len() {
            break;
        }
        vars.extend(tree::binders(&s.kind));
        match path.get(k + 1).and_then(|&(l, _)| s.kind.child_lists().into_iter().nth(l)) {
            Some(next) => list = next,
            None => break,
        }
    }
    vars
}

/// Names a new binder at the statement at `path` must avoid: names in scope there and the
/// names of axes, buffers and parameters.
pub(crate) fn taken_names(f: &Func, path: &[(usize, usize)]) -> HashSet<String> {
    let mut taken: HashSet<String> =
        vars_in_scope(f, path).into_iter().filter_map(|v| f.vars.try_get(v)).map(|v| v.name.clone()).collect();
    taken.extend(sparsec_ir::names::function_names(f));
    taken
}

/// A block name not used by any block of `f`.
pub(crate) fn fresh_block_name(f: &Func, base: &str) -> String {
    sparsec_ir::names::fresh_in(&mut sparsec_ir::names::block_names(f), base)
}

/// The statements between the enclosing block (or the function body) and the statement at
/// `path`, outermost first, with their paths.
pub(crate) fn nest_above<'f>(f: &'f Func, path: &Path) -> Vec<(Path, &'f Stmt)> {
    let mut out = Vec::new();
    for k in (1..path.len()).rev() {
        let p = path[..k].to_vec();
        let Some(s) = tree::get(&f.body, &p) else { break };
        if matches!(s.kind, StmtKind::Block(_)) {
            break;
        }
        out.push((p, s));
    }
    out.reverse();
    out
}

/// Whether `e` uses any of `vars`.
pub(crate) fn uses_any(e: &Expr, vars: &HashSet<VarId>) -> bool {
    let mut found = false;
    e.walk(&mut |x| {
        if let Expr::Var(v) = x {
            found |= vars.contains(v);
        }
    });
    found
}

/// Every variable `e` uses.
pub(crate) fn vars_of(e: &Expr) -> Vec<VarId> {
    let mut out = Vec::new();
    e.walk(&mut |x| {
        if let Expr::Var(v) = x {
            out.push(*v);
        }
    });
    out
}

/// A region with its expressions substituted.
pub(crate) fn subst_region(r: &Region, map: &HashMap<VarId, Expr>) -> Region {
    Region {
        buffer: r.buffer,
        ranges: r
            .ranges
            .iter()
            .map(|x| RegionRange {
                begin: sparsec_passes::simplify::substitute_simplified(x.begin.clone(), map),
                end: x.end.clone().map(|e| sparsec_passes::simplify::substitute_simplified(e, map)),
            })
            .collect(),
    }
}

/// A point region.
fn point(buffer: BufferId, indices: &[Expr]) -> Region {
    Region { buffer, ranges: indices.iter().map(|e| RegionRange { begin: e.clone(), end: None }).collect() }
}

/// Point regions of the stores (`writes`) or loads (`!writes`) of `stmts`, deduplicated.
fn point_regions(stmts: &[Stmt], writes: bool) -> Vec<Region> {
    let mut out: Vec<Region> = Vec::new();
    let mut push = |r: Region| {
        if !out.contains(&r) {
            out.push(r);
        }
    };
    sparsec_ir::walk_stmts(stmts, &mut |s| {
        if writes {
            if let StmtKind::Store { buffer, indices, .. } = &s.kind {
                push(point(*buffer, indices));
            }
        } else {
            for e in s.kind.exprs() {
                e.walk(&mut |x| {
                    if let Expr::Load(b, idx) = x {
                        push(point(*b, idx));
                    }
                });
            }
        }
    });
    out
}


/// `a && b`, dropping literal `true`s.
fn and(a: Option<Expr>, b: Expr) -> Option<Expr> {
    let b = simplify_expr(b);
    if b == Expr::Bool(true) {
        return a;
    }
    Some(match a {
        Some(a) => Expr::binary(BinOp::And, a, b),
        None => b,
    })
}

/// A loop statement.
fn for_stmt(l: &For, var: VarId, min: Expr, extent: Expr, body: Vec<Stmt>) -> Stmt {
    Stmt::new(StmtKind::For(For { var, min, extent, kind: l.kind, body, attrs: l.attrs.clone() }))
}

/// One statement of the nest above a block: a loop or a guard.
enum Level {
    Loop(For),
    Guard(Expr),
}

/// The nest above the block at `bp` as loops and guards; anything else is refused.
fn levels(g: &Func, bp: &Path, block: &str) -> Result<Vec<(Path, Level)>> {
    nest_above(g, bp)
        .into_iter()
        .map(|(p, s)| match &s.kind {
            StmtKind::For(l) => Ok((p, Level::Loop(l.clone()))),
            StmtKind::If { cond, else_body, .. } if else_body.is_empty() => Ok((p, Level::Guard(cond.clone()))),
            other => Err(ScheduleError::UnsupportedNest { block: block.to_string(), stmt: stmt_name(other) }),
        })
        .collect()
}

/// The keyword of a statement, for errors.
pub(crate) fn stmt_name(k: &StmtKind) -> &'static str {
    match k {
        StmtKind::Store { .. } => "store",
        StmtKind::SpIter(_) => "sp_iter",
        StmtKind::For(_) => "for",
        StmtKind::Block(_) => "block",
        StmtKind::If { .. } => "if",
        StmtKind::While { .. } => "while",
        StmtKind::Let { .. } => "let",
        StmtKind::Alloc(_) => "alloc_buffer",
        StmtKind::Evaluate(_) => "evaluate",
    }
}

/// The block at `path`.
fn block_at(g: &Func, path: &Path, rv: u32) -> Result<Block> {
    match tree::get(&g.body, path).map(|s| &s.kind) {
        Some(StmtKind::Block(b)) => Ok(b.clone()),
        _ => Err(stale(rv, "block")),
    }
}

impl Schedule {
    /// Moves the `init` of a reduction block into a new block `<name>_init` placed right
    /// before loop `at` (a loop around the block, inside its enclosing block). The new block
    /// has the block's spatial iterators only and sits in copies of the loops between `at`
    /// and the block that drive spatial iterators; the block loses its `init`.
    ///
    /// Every loop from `at` down must drive only spatial or only reduction iterators, no
    /// loop above `at` may drive a reduction iterator, and the reduction iterators must be
    /// 0 at the first iteration of their loops. The init block is guarded by "the first
    /// reduction step is reached" (positive extents of the reduction loops, guards at their
    /// first iteration) where that is not trivially true, so the meaning is kept exactly.
    /// Returns the init block.
    pub fn decompose_reduction(&mut self, block: BlockRv, at: LoopRv) -> Result<BlockRv> {
        const P: &str = "decompose_reduction";
        self.need_loop_stage(P)?;
        let mut g = self.func.clone();
        let bp = self.block_path(&g, block.0)?;
        let b = block_at(&g, &bp, block.0)?;
        let Some(init) = b.init.clone() else { return Err(ScheduleError::NoInit { block: b.name.clone() }) };
        let (ap, av) = self.loop_path(&g, at.0)?;
        let levels = levels(&g, &bp, &b.name)?;
        let Some(a) = levels.iter().position(|(p, _)| *p == ap) else {
            return Err(ScheduleError::NotAnEnclosingLoop { loop_var: Self::var_name(&g, av), block: b.name.clone() });
        };
        let spatial: Vec<&BlockIter> = b.iters.iter().filter(|i| i.kind == IterKind::Spatial).collect();
        let reduce: Vec<&BlockIter> = b.iters.iter().filter(|i| i.kind == IterKind::Reduce).collect();
        let drives = |its: &[&BlockIter], v: VarId| its.iter().any(|i| i.binding.uses_var(v));
        for (_, lv) in &levels[..a] {
            if let Level::Loop(l) = lv {
                if drives(&reduce, l.var) {
                    return Err(ScheduleError::ReductionLoopAbove {
                        loop_var: Self::var_name(&g, l.var),
                        at: Self::var_name(&g, av),
                        block: b.name.clone(),
                    });
                }
            }
        }
        // Loops from `at` down: copied (spatial) or not (reduction).
        let mut reduce_loops: HashMap<VarId, Expr> = HashMap::new(); // var -> min
        for (_, lv) in &levels[a..] {
            if let Level::Loop(l) = lv {
                let (s, r) = (drives(&spatial, l.var), drives(&reduce, l.var));
                let name = Self::var_name(&g, l.var);
                match (s, r) {
                    (true, true) => return Err(ScheduleError::MixedLoop { loop_var: name, block: b.name.clone() }),
                    (false, false) => return Err(ScheduleError::UnboundLoop { loop_var: name, block: b.name.clone() }),
                    (false, true) => {
                        reduce_loops.insert(l.var, l.min.clone());
                    }
                    (true, false) => {}
                }
            }
        }
        let reduce_set: HashSet<VarId> = reduce_loops.keys().copied().collect();
        // Reduction iterators are 0 at the first iteration.
        for it in &reduce {
            if sparsec_passes::simplify::substitute_simplified(it.binding.clone(), &reduce_loops).as_int() != Some(0) {
                return Err(ScheduleError::InitNotAtStart { block: b.name.clone(), iter: Self::var_name(&g, it.var) });
            }
        }
        // Build the new nest, innermost last: (loop or condition) per level.
        let mut taken = taken_names(&g, &ap);
        let mut map: HashMap<VarId, Expr> = HashMap::new();
        enum New {
            Loop(Box<For>, VarId, Expr, Expr),
            Cond(Expr),
        }
        let mut parts: Vec<New> = Vec::new();
        for (_, lv) in &levels[a..] {
            match lv {
                Level::Loop(l) if !reduce_set.contains(&l.var) => {
                    if uses_any(&l.min, &reduce_set) || uses_any(&l.extent, &reduce_set) {
                        let dep = reduce_set
                            .iter()
                            .find(|v| l.min.uses_var(**v) || l.extent.uses_var(**v))
                            .map_or_else(String::new, |v| Self::var_name(&g, *v));
                        return Err(ScheduleError::DependentExtent {
                            loop_var: Self::var_name(&g, l.var),
                            depends_on: dep,
                        });
                    }
                    let d = g.vars[l.var].dtype;
                    let nv = g.add_var(sparsec_ir::names::fresh_in(&mut taken, &Self::var_name(&g, l.var)), d);
                    let (min, ext) = (sparsec_passes::simplify::substitute_simplified(l.min.clone(), &map), sparsec_passes::simplify::substitute_simplified(l.extent.clone(), &map));
                    map.insert(l.var, Expr::Var(nv));
                    parts.push(New::Loop(Box::new(l.clone()), nv, min, ext));
                }
                Level::Loop(l) => {
                    // A reduction loop: at the first step its variable is its minimum.
                    let ext = sparsec_passes::simplify::substitute_simplified(l.extent.clone(), &map);
                    map.insert(l.var, sparsec_passes::simplify::substitute_simplified(l.min.clone(), &map));
                    let d = g.expr_dtype(&ext);
                    parts.push(New::Cond(Expr::binary(BinOp::Gt, ext, int(0, d))));
                }
                Level::Guard(c) => parts.push(New::Cond(sparsec_passes::simplify::substitute_simplified(c.clone(), &map))),
            }
        }
        // The init block: spatial iterators (fresh variables), reduction iterators are 0.
        let mut imap: HashMap<VarId, Expr> = HashMap::new();
        let mut iters = Vec::new();
        for it in &spatial {
            let d = g.vars[it.var].dtype;
            let nv = g.add_var(sparsec_ir::names::fresh_in(&mut taken, &Self::var_name(&g, it.var)), d);
            imap.insert(it.var, Expr::Var(nv));
            iters.push(BlockIter {
                var: nv,
                kind: IterKind::Spatial,
                extent: it.extent.clone(),
                binding: sparsec_passes::simplify::substitute_simplified(it.binding.clone(), &map),
            });
        }
        for it in &reduce {
            imap.insert(it.var, zero(g.vars[it.var].dtype));
        }
        let mut body = init;
        sparsec_passes::simplify::substitute_stmts(&mut body, &imap);
        let name = fresh_block_name(&g, &format!("{}_init", b.name));
        let nb = Block {
            name: name.clone(),
            iters,
            reads: point_regions(&body, false),
            writes: point_regions(&body, true),
            init: None,
            body,
            attrs: Attrs::new(),
        };
        let mut inner = vec![Stmt::new(StmtKind::Block(nb))];
        let mut cond: Option<Expr> = None;
        for p in parts.into_iter().rev() {
            match p {
                New::Cond(c) => cond = and(cond, c),
                New::Loop(l, nv, min, ext) => {
                    if let Some(c) = cond.take() {
                        inner = vec![Stmt::new(StmtKind::If { cond: c, then_body: inner, else_body: vec![] })];
                    }
                    inner = vec![for_stmt(&l, nv, min, ext, inner)];
                }
            }
        }
        if let Some(c) = cond.take() {
            inner = vec![Stmt::new(StmtKind::If { cond: c, then_body: inner, else_body: vec![] })];
        }
        match tree::get_mut(&mut g.body, &bp).map(|s| &mut s.kind) {
            Some(StmtKind::Block(x)) => x.init = None,
            _ => return Err(stale(block.0, "block")),
        }
        let list = list_mut(&mut g.body, &ap).ok_or_else(|| stale(at.0, "loop"))?;
        let idx = ap.last().map_or(0, |x| x.1);
        for (k, s) in inner.into_iter().enumerate() {
            list.insert(idx + k, s);
        }
        self.commit(P, g)?;
        let out = self.new_rv(Target::Block(name));
        self.record(Step::DecomposeReduction { block, r#loop: at }, vec![out]);
        Ok(BlockRv(out))
    }

    /// Factors a reduction: `lp` drives exactly one reduction iterator of a block whose body
    /// is `C[idx] = C[idx] + e`. A new dense buffer `<C>_rf` (global scope) holds partial
    /// sums: its shape is the extents of the block's spatial iterators with the extent of
    /// `lp` inserted at `factor_axis`. The block is replaced, in place, by `<name>_rf`, in
    /// which `lp` drives a new spatial iterator (the other loops of the factored iterator
    /// drive new reduction iterators) and which adds `e` into the rf buffer (its `init`
    /// zeroes it). After that nest comes the write-back block, which keeps the block's name
    /// and `init`, iterates copies of the loops driving spatial iterators plus a copy of
    /// `lp` (now a reduction), and does `C[idx] = C[idx] + C_rf[...]`.
    ///
    /// Without an `init` (the form produced by lowering, where a separate nest initialises
    /// `C` before), the write-back adds the partial sums to `C`, so the meaning is kept up
    /// to the order of the float additions. The rf buffer is allocated just before the
    /// nest, inside the enclosing block, so every instance of that block gets fresh zeroed
    /// partial sums (a function-level buffer when the nest is at the top of the function).
    /// With an `init`, the write-back block runs it (TensorIR's rfactor): a spatial point
    /// whose reduction domain is empty is then initialised, which the original block would
    /// not do. Returns the rf block.
    pub fn rfactor(&mut self, lp: LoopRv, factor_axis: usize) -> Result<BlockRv> {
        const P: &str = "rfactor";
        self.need_loop_stage(P)?;
        let mut g = self.func.clone();
        let (lpath, lv) = self.loop_path(&g, lp.0)?;
        let lname = Self::var_name(&g, lv);
        // The one block under `lp` (at its scope level) whose iterators `lp` drives.
        let mut found: Vec<Path> = Vec::new();
        if let Some(s) = tree::get(&g.body, &lpath) {
            find_blocks(s, &mut lpath.clone(), &mut |p, b| {
                if b.iters.iter().any(|i| i.binding.uses_var(lv)) {
                    found.push(p.clone());
                }
            });
        }
        if found.len() != 1 {
            return Err(ScheduleError::RfactorBlocks { loop_var: lname, count: found.len() });
        }
        let bp = found.remove(0);
        let b = block_at(&g, &bp, lp.0)?;
        let spatial: Vec<BlockIter> = b.iters.iter().filter(|i| i.kind == IterKind::Spatial).cloned().collect();
        let n_sp = spatial.iter().filter(|i| i.binding.uses_var(lv)).count();
        let red: Vec<&BlockIter> =
            b.iters.iter().filter(|i| i.kind == IterKind::Reduce && i.binding.uses_var(lv)).collect();
        if n_sp != 0 || red.len() != 1 {
            return Err(ScheduleError::NotOneReduceIter {
                loop_var: lname,
                block: b.name.clone(),
                spatial: n_sp,
                reduce: red.len(),
            });
        }
        let rstar = red[0].clone();
        // The body: C[idx] = C[idx] + e.
        let not_red = |reason: &str| ScheduleError::NotAReduction { block: b.name.clone(), reason: reason.to_string() };
        let (cbuf, cidx, e) = match b.body.as_slice() {
            [Stmt { kind: StmtKind::Store { buffer, indices, value }, .. }] => {
                let e = match value {
                    Expr::Binary(BinOp::Add, x, y) => match (&**x, &**y) {
                        (Expr::Load(c, i), e) if c == buffer && i == indices => e.clone(),
                        (e, Expr::Load(c, i)) if c == buffer && i == indices => e.clone(),
                        _ => return Err(not_red("the stored value is not `C[idx] + e`")),
                    },
                    _ => return Err(not_red("the stored value is not a sum")),
                };
                (*buffer, indices.clone(), e)
            }
            _ => return Err(not_red("the body is not a single store")),
        };
        let mut reads_c = false;
        e.walk(&mut |x| {
            if let Expr::Load(c, _) | Expr::AtomicAdd(c, _, _) = x {
                reads_c |= *c == cbuf;
            }
        });
        if reads_c {
            return Err(not_red("the added value reads the reduced buffer"));
        }
        if let Some(init) = &b.init {
            let mut other = false;
            sparsec_ir::walk_stmts(init, &mut |s| {
                other |= !matches!(&s.kind, StmtKind::Store { buffer, indices, .. } if *buffer == cbuf && *indices == cidx);
            });
            if other {
                return Err(not_red("the init does more than store to the reduced element"));
            }
        }
        if factor_axis > spatial.len() {
            return Err(ScheduleError::FactorAxisOutOfRange { axis: factor_axis, max: spatial.len() });
        }
        let levels = levels(&g, &bp, &b.name)?;
        // Classify the loops: copied into the write-back (spatial and `lp`) or not.
        let reduce_all: Vec<&BlockIter> = b.iters.iter().filter(|i| i.kind == IterKind::Reduce).collect();
        let mut copied: HashSet<VarId> = HashSet::new();
        let mut not_copied: HashSet<VarId> = HashSet::new();
        let mut spatial_loops: HashSet<VarId> = HashSet::new();
        let mut lp_for: Option<For> = None;
        for (_, lvl) in &levels {
            let Level::Loop(l) = lvl else { continue };
            let s = spatial.iter().any(|i| i.binding.uses_var(l.var));
            let r = reduce_all.iter().any(|i| i.binding.uses_var(l.var));
            if s && r {
                return Err(ScheduleError::MixedLoop { loop_var: Self::var_name(&g, l.var), block: b.name.clone() });
            }
            if l.var == lv {
                lp_for = Some(l.clone());
                copied.insert(l.var);
            } else if s {
                copied.insert(l.var);
                spatial_loops.insert(l.var);
            } else {
                not_copied.insert(l.var);
            }
        }
        let lp_for = lp_for.ok_or_else(|| stale(lp.0, "loop"))?;
        for (_, lvl) in &levels {
            if let Level::Loop(l) = lvl {
                if copied.contains(&l.var) {
                    if let Some(v) = vars_of(&l.min).into_iter().chain(vars_of(&l.extent)).find(|v| not_copied.contains(v))
                    {
                        return Err(ScheduleError::DependentExtent {
                            loop_var: Self::var_name(&g, l.var),
                            depends_on: Self::var_name(&g, v),
                        });
                    }
                }
            }
        }
        // Guards: kept in the write-back when they only test spatial loops.
        let mut keep_guard: Vec<bool> = Vec::new();
        for (_, lvl) in &levels {
            if let Level::Guard(c) = lvl {
                let s = uses_any(c, &spatial_loops);
                let r = uses_any(c, &not_copied) || c.uses_var(lv);
                if s && r {
                    return Err(ScheduleError::GuardMixesIters {
                        block: b.name.clone(),
                        cond: sparsec_ir::text::print_expr(&g, c),
                    });
                }
                keep_guard.push(!r);
            }
        }
        // The rf buffer: where it lives and its shape.
        let top = levels.first().map_or_else(|| bp.clone(), |(p, _)| p.clone());
        let at_function_level = top.len() == 1;
        let d_lp = g.vars[lv].dtype;
        let mut shape: Vec<Expr> = spatial.iter().map(|i| i.extent.clone()).collect();
        shape.insert(factor_axis, lp_for.extent.clone());
        let in_scope = vars_in_scope(&g, &top);
        for e in &shape {
            if let Some(v) = vars_of(e).into_iter().find(|v| !in_scope.contains(v)) {
                return Err(ScheduleError::RfactorShape { var: Self::var_name(&g, v) });
            }
        }
        let cb = g.buffers.try_get(cbuf).cloned().ok_or_else(|| stale(lp.0, "buffer"))?;
        let mut btaken: HashSet<String> = g.buffers.iter().map(|(_, x)| x.name.clone()).collect();
        btaken.extend(g.axes.iter().map(|(_, a)| a.name.clone()));
        btaken.extend(g.params.iter().map(|p| p.name.clone()));
        btaken.extend(g.vars.iter().map(|(_, v)| v.name.clone()));
        let rf_name = sparsec_ir::names::fresh_in(&mut btaken, &format!("{}_rf", cb.name));
        let rf = g.buffers.append(Buffer {
            name: rf_name,
            dtype: cb.dtype,
            layout: Layout::Dense(shape),
            storage: Storage::Alloc(Scope::Global),
            extra_storage: None,
            default: None,
            span: Span::NONE,
        });
        // The rf block: new iterators for the loops of the factored iterator.
        let mut taken_b = taken_names(&g, &bp);
        for it in &b.iters {
            taken_b.insert(Self::var_name(&g, it.var));
        }
        let mut rmap: HashMap<VarId, Expr> = HashMap::new(); // loop var -> new iterator
        let mut new_iters: Vec<BlockIter> = Vec::new();
        let mut rf_var = None;
        for (_, lvl) in &levels {
            let Level::Loop(l) = lvl else { continue };
            if !rstar.binding.uses_var(l.var) {
                continue;
            }
            let d = g.vars[l.var].dtype;
            let nv = g.add_var(sparsec_ir::names::fresh_in(&mut taken_b, &format!("v{}", Self::var_name(&g, l.var))), d);
            let binding = simplify_expr(Expr::binary(BinOp::Sub, Expr::Var(l.var), l.min.clone()));
            rmap.insert(l.var, simplify_expr(Expr::binary(BinOp::Add, Expr::Var(nv), l.min.clone())));
            let kind = if l.var == lv { IterKind::Spatial } else { IterKind::Reduce };
            if l.var == lv {
                rf_var = Some(nv);
            }
            new_iters.push(BlockIter { var: nv, kind, extent: l.extent.clone(), binding });
        }
        let rf_var = rf_var.ok_or_else(|| stale(lp.0, "loop"))?;
        let rstar_value = sparsec_passes::simplify::substitute_simplified(rstar.binding.clone(), &rmap);
        let body_map = HashMap::from([(rstar.var, rstar_value)]);
        let mut iters = Vec::new();
        for it in &b.iters {
            if it.var == rstar.var {
                iters.append(&mut new_iters);
            } else {
                iters.push(it.clone());
            }
        }
        let mut ridx: Vec<Expr> = spatial.iter().map(|i| Expr::Var(i.var)).collect();
        ridx.insert(factor_axis, Expr::Var(rf_var));
        let e_rf = sparsec_passes::simplify::substitute_simplified(e.clone(), &body_map);
        let rf_update = Expr::binary(BinOp::Add, Expr::Load(rf, ridx.clone()), e_rf);
        let mut reads: Vec<Region> =
            b.reads.iter().filter(|r| r.buffer != cbuf).map(|r| subst_region(r, &body_map)).collect();
        reads.insert(0, point(rf, &ridx));
        let rf_block = Block {
            name: fresh_block_name(&g, &format!("{}_rf", b.name)),
            iters,
            reads,
            writes: vec![point(rf, &ridx)],
            init: Some(vec![Stmt::new(StmtKind::Store { buffer: rf, indices: ridx.clone(), value: zero(cb.dtype) })]),
            body: vec![Stmt::new(StmtKind::Store { buffer: rf, indices: ridx, value: rf_update })],
            attrs: b.attrs.clone(),
        };
        let rf_name = rf_block.name.clone();
        // The write-back nest: copies of the spatial loops and of `lp`, kept guards.
        let mut taken_w = taken_names(&g, &top);
        let mut lmap: HashMap<VarId, Expr> = HashMap::new();
        enum New {
            Loop(Box<For>, VarId, Expr, Expr),
            Guard(Expr),
        }
        let mut parts = Vec::new();
        let mut guards = keep_guard.into_iter();
        for (_, lvl) in &levels {
            match lvl {
                Level::Loop(l) if copied.contains(&l.var) => {
                    let d = g.vars[l.var].dtype;
                    let nv = g.add_var(sparsec_ir::names::fresh_in(&mut taken_w, &Self::var_name(&g, l.var)), d);
                    let (min, ext) =
                        (sparsec_passes::simplify::substitute_simplified(l.min.clone(), &lmap), sparsec_passes::simplify::substitute_simplified(l.extent.clone(), &lmap));
                    lmap.insert(l.var, Expr::Var(nv));
                    parts.push(New::Loop(Box::new(l.clone()), nv, min, ext));
                }
                Level::Loop(_) => {}
                Level::Guard(c) => {
                    if guards.next().unwrap_or(false) {
                        parts.push(New::Guard(sparsec_passes::simplify::substitute_simplified(c.clone(), &lmap)));
                    }
                }
            }
        }
        let mut wmap: HashMap<VarId, Expr> = HashMap::new();
        let mut witers = Vec::new();
        for it in &spatial {
            let d = g.vars[it.var].dtype;
            let nv = g.add_var(sparsec_ir::names::fresh_in(&mut taken_w, &Self::var_name(&g, it.var)), d);
            wmap.insert(it.var, Expr::Var(nv));
            witers.push(BlockIter {
                var: nv,
                kind: IterKind::Spatial,
                extent: it.extent.clone(),
                binding: sparsec_passes::simplify::substitute_simplified(it.binding.clone(), &lmap),
            });
        }
        let wk = g.add_var(sparsec_ir::names::fresh_in(&mut taken_w, &Self::var_name(&g, rf_var)), d_lp);
        let lp_new = lmap.get(&lv).cloned().ok_or_else(|| stale(lp.0, "loop"))?;
        witers.push(BlockIter {
            var: wk,
            kind: IterKind::Reduce,
            extent: lp_for.extent.clone(),
            binding: simplify_expr(Expr::binary(BinOp::Sub, lp_new, lp_for.min.clone())),
        });
        for it in &reduce_all {
            wmap.entry(it.var).or_insert_with(|| zero(g.vars[it.var].dtype));
        }
        let widx: Vec<Expr> = cidx.iter().map(|x| sparsec_passes::simplify::substitute_simplified(x.clone(), &wmap)).collect();
        let mut wridx: Vec<Expr> = spatial.iter().map(|i| wmap[&i.var].clone()).collect();
        wridx.insert(factor_axis, Expr::Var(wk));
        let winit = b.init.clone().map(|mut s| {
            sparsec_passes::simplify::substitute_stmts(&mut s, &wmap);
            s
        });
        let wb = Block {
            name: b.name.clone(),
            iters: witers,
            reads: vec![point(cbuf, &widx), point(rf, &wridx)],
            writes: vec![point(cbuf, &widx)],
            init: winit,
            body: vec![Stmt::new(StmtKind::Store {
                buffer: cbuf,
                indices: widx.clone(),
                value: Expr::binary(BinOp::Add, Expr::Load(cbuf, widx), Expr::Load(rf, wridx)),
            })],
            attrs: b.attrs.clone(),
        };
        let mut inner = vec![Stmt::new(StmtKind::Block(wb))];
        for p in parts.into_iter().rev() {
            inner = vec![match p {
                New::Loop(l, nv, min, ext) => for_stmt(&l, nv, min, ext, inner),
                New::Guard(c) => Stmt::new(StmtKind::If { cond: c, then_body: inner, else_body: vec![] }),
            }];
        }
        // Install: the rf block in place, the write-back nest after the top statement, the
        // allocation before it.
        match tree::get_mut(&mut g.body, &bp) {
            Some(s) => s.kind = StmtKind::Block(rf_block),
            None => return Err(stale(lp.0, "block")),
        }
        let idx = top.last().map_or(0, |x| x.1);
        let list = list_mut(&mut g.body, &top).ok_or_else(|| stale(lp.0, "loop"))?;
        for (k, s) in inner.into_iter().enumerate() {
            list.insert(idx + 1 + k, s);
        }
        if !at_function_level {
            list.insert(idx, Stmt::new(StmtKind::Alloc(rf)));
        }
        self.commit(P, g)?;
        let out = self.new_rv(Target::Block(rf_name));
        self.record(Step::Rfactor { r#loop: lp, axis: factor_axis }, vec![out]);
        Ok(BlockRv(out))
    }
}

/// Calls `f` on every block in `s` (itself included) that is not inside another block of
/// `s`, with its path (`path` is the path of `s`).
fn find_blocks(s: &Stmt, path: &mut Path, f: &mut impl FnMut(&Path, &Block)) {
    if let StmtKind::Block(b) = &s.kind {
        f(path, b);
        return;
    }
    for (l, child) in s.kind.child_lists().into_iter().enumerate() {
        for (i, c) in child.iter().enumerate() {
            path.push((l, i));
            find_blocks(c, path, f);
            path.pop();
        }
    }
}
