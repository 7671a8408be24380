//! Caches (Stage II/III): [`CacheAt`] and the helpers of `cache_read` and `cache_write`.
//!
//! A cache is a dense buffer in another memory scope (shared or local) that stands in for the
//! region of a buffer that a loop or block body accesses. The region is found per dimension:
//! an index that every access writes the same way with variables bound outside the body is a
//! point; an index that is such a point plus a multiple of the variable of a serial loop of
//! constant extent inside the body is strided (one element per iteration of that loop, which
//! indexes the cache: a few registers per unit); any other dimension is taken whole (its
//! extent must be fixed per row). The copy nests are ordinary loops and blocks, so they can be
//! split and bound like any other.

use crate::error::ScheduleError;
use crate::schedule::{stale, BlockRv, LoopRv, Schedule, Target};
use crate::tree::{self, Fresh, Path};
use sparsec_ir::expr::{BinOp, Expr};
use sparsec_ir::func::{Block, BlockIter, Buffer, BufferId, For, Func, Layout, Region, Stmt, StmtKind, Storage, VarId};
use sparsec_ir::{walk_stmts, Attrs, AxisKind, ForKind, IterKind, Scope, Span};
use sparsec_passes::build::int;
use sparsec_passes::scope::{bound_inside, depends_on};
use std::collections::HashSet;

type Result<T> = std::result::Result<T, ScheduleError>;

/// Where a cache lives: at the start (and, for writes, the end) of a loop's or a block's body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheAt {
    /// The body of a loop: the cache is refilled at every iteration.
    Loop(LoopRv),
    /// The body of a block.
    Block(BlockRv),
}

impl From<LoopRv> for CacheAt {
    fn from(r: LoopRv) -> Self {
        CacheAt::Loop(r)
    }
}

impl From<BlockRv> for CacheAt {
    fn from(r: BlockRv) -> Self {
        CacheAt::Block(r)
    }
}

impl CacheAt {
    pub(crate) fn id(self) -> u32 {
        match self {
            CacheAt::Loop(r) => r.0,
            CacheAt::Block(r) => r.0,
        }
    }
}

/// One dimension of a cached region.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Dim {
    /// Every access uses this index.
    Point(Expr),
    /// The whole dimension, of this extent.
    Whole(Expr),
    /// A dimension of a different extent in every row: cacheable only where the block's
    /// bindings make it a point at the site; otherwise the plan fails with this error.
    Ragged(Box<ScheduleError>),
    /// `base + stride * var` for `var` the variable of a serial loop in the body running
    /// `0..count`: the cache holds `count` elements, indexed by `var`.
    Strided {
        /// The index at `var = 0`, fixed at the site.
        base: Expr,
        /// The step between two elements, fixed at the site.
        stride: Expr,
        /// The loop variable inside the body.
        var: VarId,
        /// The loop's (constant) extent.
        count: i64,
        /// Other loops of the body over `0..count` that index the same elements the same way
        /// (an accumulator's `init` moved in beside it): each indexes the cache by its own
        /// variable.
        others: Vec<VarId>,
    },
}

impl Dim {
    /// Whether the dimension has a cache index of its own (whole or strided).
    fn kept(&self) -> bool {
        !matches!(self, Dim::Point(_))
    }

    /// The cache index of an access whose index in this dimension is `e`, inside blocks whose
    /// iterators have the values `env`.
    fn cache_index(&self, e: Expr, env: &std::collections::HashMap<VarId, Expr>) -> Expr {
        match self {
            Dim::Strided { var, others, .. } => {
                let e = e.substitute(env);
                Expr::Var(others.iter().copied().find(|v| e.uses_var(*v)).unwrap_or(*var))
            }
            _ => e,
        }
    }
}

/// `e` with the other loop variables of the strided dimensions renamed to the dimension's own
/// (so the accesses of an `init` and of the accumulation compare equal).
fn canonical(dims: &[Dim], e: &Expr) -> Expr {
    let map: std::collections::HashMap<VarId, Expr> = dims
        .iter()
        .flat_map(|d| match d {
            Dim::Strided { var, others, .. } => others.iter().map(|o| (*o, Expr::Var(*var))).collect(),
            _ => Vec::new(),
        })
        .collect();
    if map.is_empty() {
        e.clone()
    } else {
        sparsec_passes::simplify::simplify_expr(e.clone().substitute(&map))
    }
}

/// The most elements a strided dimension keeps (per unit, as registers).
const MAX_STRIDED: i64 = 16;

/// `vars` without the loop variables of the strided dimensions of `dims`.
fn free_of_strides(vars: &HashSet<VarId>, dims: &[Dim]) -> HashSet<VarId> {
    let mut free = vars.clone();
    for d in dims {
        if let Dim::Strided { var, others, .. } = d {
            free.remove(var);
            for o in others {
                free.remove(o);
            }
        }
    }
    free
}

/// Serial loops inside `body` that start at 0 and run a constant number of times (at most
/// [`MAX_STRIDED`]), by variable.
fn constant_loops(body: &[Stmt]) -> std::collections::HashMap<VarId, i64> {
    let mut out = std::collections::HashMap::new();
    walk_stmts(body, &mut |s| {
        if let StmtKind::For(l) = &s.kind {
            let serial = matches!(l.kind, ForKind::Serial | ForKind::Unrolled);
            if let (true, Some(0), Some(n)) = (serial, l.min.as_int(), l.extent.as_int()) {
                if (1..=MAX_STRIDED).contains(&n) {
                    out.insert(l.var, n);
                }
            }
        }
    });
    out
}

/// What a cache rewrite needs, from [`Schedule::cache_plan`].
pub(crate) struct CachePlan {
    /// The cache site (a loop or block).
    pub site: Path,
    /// The first statement of the site's body that mentions the buffer: the cache covers the
    /// body from there on, so `let`s and local work before it may fix the region's point.
    pub start: usize,
    /// The cached buffer.
    pub buf: BufferId,
    /// The cached region.
    pub dims: Vec<Dim>,
    /// The condition under which the copies run.
    pub guard: Option<Expr>,
}

/// Whether `s` accesses `b` or names it in a block region or an allocation.
fn mentions(s: &Stmt, b: BufferId) -> bool {
    let u = uses_of(std::slice::from_ref(s), b);
    if !u.reads.is_empty() || !u.writes.is_empty() || u.atomics > 0 {
        return true;
    }
    let mut named = false;
    walk_stmts(std::slice::from_ref(s), &mut |x| match &x.kind {
        StmtKind::Block(blk) => named |= blk.reads.iter().chain(&blk.writes).any(|r| r.buffer == b),
        StmtKind::Alloc(a) => named |= *a == b,
        _ => {}
    });
    named
}

/// Whether `binding < extent` holds wherever `binding` is: it is the variable of a loop from
/// 0 over a row's positions, and `extent` bounds the length of every row of that axis
/// ([`Func::row_length_bound`]); the copies of a cache need no guard for it.
fn within_rows(g: &Func, binding: &Expr, extent: &Expr) -> bool {
    let Expr::Var(v) = binding else { return false };
    let mut found = false;
    walk_stmts(&g.body, &mut |s| {
        if let StmtKind::For(l) = &s.kind {
            found |= l.var == *v && l.min.as_int() == Some(0) && g.row_length_bound(&l.extent) == Some(extent);
        }
    });
    found
}

/// Whether `s` (the first statement of a cache's body that mentions `buf`) stores the whole
/// region without reading `buf`, so the copy into the cache (under `guard`) would be dead (an
/// accumulator's `init`): a single point, unconditionally; or, for a region strided over one
/// dimension, a loop over its `0..count` storing each element under the copies' own guard.
pub(crate) fn overwrites_region(g: &Func, s: &Stmt, buf: BufferId, dims: &[Dim], guard: Option<&Expr>) -> bool {
    if dims.iter().all(|d| matches!(d, Dim::Point(_))) {
        return overwrites_point(g, s, buf, dims, None);
    }
    let strided: Vec<usize> = (0..dims.len()).filter(|&d| matches!(dims[d], Dim::Strided { .. })).collect();
    let (&[d], StmtKind::For(l)) = (&strided[..], &s.kind) else { return false };
    let Dim::Strided { var, count, others, .. } = &dims[d] else { return false };
    if dims.iter().any(|x| matches!(x, Dim::Whole(_) | Dim::Ragged(_)))
        || !(l.var == *var || others.contains(&l.var))
        || l.min.as_int() != Some(0)
        || l.extent.as_int() != Some(*count)
        || !matches!(l.kind, ForKind::Serial | ForKind::Unrolled)
    {
        return false;
    }
    let (cond, inner): (Option<&Expr>, &[Stmt]) = match l.body.as_slice() {
        [Stmt { kind: StmtKind::If { cond, then_body, else_body }, .. }] if else_body.is_empty() => (Some(cond), then_body),
        body => (None, body),
    };
    let [one] = inner else { return false };
    // The stores run where the copies would: under the copies' guard, up to the storing
    // block's own domain (its iterators lie within their extents whenever it runs).
    let terms = |e: Option<&Expr>| {
        let mut out = Vec::new();
        if let Some(e) = e {
            conjuncts(canonical(dims, e), &mut out);
        }
        out
    };
    let (stores_under, copies_under) = (terms(cond), terms(guard));
    let mut implied = stores_under.clone();
    if let StmtKind::Block(b) = &one.kind {
        for it in &b.iters {
            let within = Expr::binary(BinOp::Lt, it.binding.clone(), it.extent.clone());
            implied.push(canonical(dims, &sparsec_passes::simplify::simplify_expr(within)));
        }
    }
    stores_under.iter().all(|c| copies_under.contains(c))
        && copies_under.iter().all(|c| implied.contains(c))
        && overwrites_point(g, one, buf, dims, Some(l.var))
}

/// Appends the terms of the conjunction `e` to `out`, each once.
fn conjuncts(e: Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::Binary(BinOp::And, a, b) => {
            conjuncts(*a, out);
            conjuncts(*b, out);
        }
        other if !out.contains(&other) => out.push(other),
        _ => {}
    }
}

/// Whether `s` stores, unconditionally and without reading `buf`, the point of `dims`: the
/// strided dimension's element of loop variable `lane`, if any.
fn overwrites_point(g: &Func, s: &Stmt, buf: BufferId, dims: &[Dim], lane: Option<VarId>) -> bool {
    if dims.iter().any(|d| !matches!((d, lane), (Dim::Point(_), _) | (Dim::Strided { .. }, Some(_)))) {
        return false;
    }
    // The index of dimension `d` is the region's point there.
    let hits = |d: &Dim, i: &Expr| match (d, lane) {
        (Dim::Point(e), _) => sparsec_passes::simplify::simplify_expr(i.clone()) == sparsec_passes::simplify::simplify_expr(e.clone()),
        (Dim::Strided { base, stride, .. }, Some(v)) => sparsec_passes::simplify::affine_in(g, i, v).is_some_and(|(b, c)| b == *base && c == *stride),
        _ => false,
    };
    let (stmt, env) = match &s.kind {
        StmtKind::Block(b) if b.init.is_none() && b.body.len() == 1 => {
            (&b.body[0], b.iters.iter().map(|it| (it.var, it.binding.clone())).collect())
        }
        _ => (s, std::collections::HashMap::new()),
    };
    match &stmt.kind {
        StmtKind::Store { buffer, indices, value } if *buffer == buf => {
            let mut reads = false;
            value.walk(&mut |x| reads |= matches!(x, Expr::Load(b, _) | Expr::AtomicAdd(b, _, _) if *b == buf));
            !reads && indices.len() == dims.len() && indices.iter().zip(dims).all(|(i, d)| hits(d, &i.clone().substitute(&env)))
        }
        _ => false,
    }
}

/// Which cache a plan is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CacheKind {
    /// `cache_read`: copied in, never written.
    Read,
    /// `cache_write`: copied in (unless overwritten) and written back; the unit's own region.
    Write,
    /// `cache_accumulate`: zeroed, summed into, added back; conditions decided in the body
    /// only gate the terms.
    Accumulate,
}

/// Accesses to one buffer inside a body: as written (`reads`, `writes`) and with the
/// variables of blocks inside the body replaced by their bindings (`*_at_site`).
#[derive(Default)]
pub(crate) struct Uses {
    pub(crate) reads: Vec<Vec<Expr>>,
    pub(crate) writes: Vec<Vec<Expr>>,
    reads_at_site: Vec<Vec<Expr>>,
    writes_at_site: Vec<Vec<Expr>>,
    atomics: usize,
    /// The conditions (at the site) under which each access runs: reads first, then writes.
    conds: Vec<Vec<Expr>>,
    /// Every block iterator inside the body: its binding at the site and its extent.
    iters: std::collections::HashMap<VarId, (Expr, Expr)>,
}

/// The accesses to `b` in `body`, also with the variables of blocks inside it replaced by their
/// bindings (so an index fixed at the cache site reads as a point there).
pub(crate) fn uses_of(body: &[Stmt], b: BufferId) -> Uses {
    let mut u = Uses::default();
    let mut write_conds = Vec::new();
    collect_uses(body, b, &mut std::collections::HashMap::new(), &mut Vec::new(), &mut write_conds, &mut u);
    u.conds.extend(write_conds);
    u
}

fn collect_uses(
    body: &[Stmt],
    b: BufferId,
    env: &mut std::collections::HashMap<VarId, Expr>,
    conds: &mut Vec<Expr>,
    write_conds: &mut Vec<Vec<Expr>>,
    u: &mut Uses,
) {
    let subst = |idx: &[Expr], env: &std::collections::HashMap<VarId, Expr>| -> Vec<Expr> {
        idx.iter().map(|e| e.clone().substitute(env)).collect()
    };
    for s in body {
        if let StmtKind::Store { buffer, indices, .. } = &s.kind {
            if *buffer == b {
                u.writes.push(indices.clone());
                u.writes_at_site.push(subst(indices, env));
                write_conds.push(conds.clone());
            }
        }
        // A block's regions name its own iterators: they are bound first.
        if let StmtKind::Block(blk) = &s.kind {
            for it in &blk.iters {
                let value = it.binding.clone().substitute(env);
                u.iters.insert(it.var, (value.clone(), it.extent.clone().substitute(env)));
                env.insert(it.var, value);
            }
        }
        for e in s.kind.exprs() {
            e.walk(&mut |x| match x {
                Expr::Load(buf, idx) if *buf == b => {
                    u.reads.push(idx.clone());
                    u.reads_at_site.push(subst(idx, env));
                    u.conds.push(conds.clone());
                }
                Expr::AtomicAdd(buf, _, _) if *buf == b => u.atomics += 1,
                _ => {}
            });
        }
        match &s.kind {
            StmtKind::If { cond, then_body, else_body } => {
                let c = cond.clone().substitute(env);
                conds.push(c.clone());
                collect_uses(then_body, b, env, conds, write_conds, u);
                conds.pop();
                conds.push(Expr::Unary(sparsec_ir::expr::UnOp::Not, Box::new(c)));
                collect_uses(else_body, b, env, conds, write_conds, u);
                conds.pop();
                continue;
            }
            StmtKind::While { cond, body } => {
                conds.push(cond.clone().substitute(env));
                collect_uses(body, b, env, conds, write_conds, u);
                conds.pop();
                continue;
            }
            _ => {}
        }
        for child in s.kind.child_lists() {
            collect_uses(child, b, env, conds, write_conds, u);
        }
    }
}

/// Whether `e` is a sum of products of non-negative literals and variables of loops that start
/// at 0 (so it is never negative).
fn non_negative(g: &Func, e: &Expr) -> bool {
    let mut from_zero: HashSet<VarId> = HashSet::new();
    walk_stmts(&g.body, &mut |s| {
        if let StmtKind::For(l) = &s.kind {
            if l.min.as_int() == Some(0) {
                from_zero.insert(l.var);
            }
        }
    });
    fn ok(e: &Expr, vars: &HashSet<VarId>) -> bool {
        match e {
            Expr::Int(v, _) => *v >= 0,
            Expr::Var(v) => vars.contains(v),
            Expr::Binary(BinOp::Add | BinOp::Mul, a, b) => ok(a, vars) && ok(b, vars),
            _ => false,
        }
    }
    ok(e, &from_zero)
}

/// Replaces accesses to `from` by accesses to `to` at the whole dimensions of `dims`.
pub(crate) fn redirect(stmts: &mut [Stmt], from: BufferId, to: BufferId, dims: &[Dim]) {
    redirect_in(stmts, from, to, dims, &std::collections::HashMap::new());
}

/// [`redirect`] inside blocks whose iterators have the values `env` (a strided dimension's
/// index is read through them to find its loop).
fn redirect_in(stmts: &mut [Stmt], from: BufferId, to: BufferId, dims: &[Dim], env: &std::collections::HashMap<VarId, Expr>) {
    let pick = |idx: Vec<Expr>| -> Vec<Expr> {
        let kept: Vec<Expr> =
            idx.into_iter().zip(dims).filter(|(_, d)| d.kept()).map(|(e, d)| d.cache_index(e, env)).collect();
        if kept.is_empty() {
            vec![Expr::i32(0)]
        } else {
            kept
        }
    };
    let mut map_expr = |e: Expr| {
        e.map(&mut |x| match x {
            Expr::Load(b, idx) if b == from => Expr::Load(to, pick(idx)),
            other => other,
        })
    };
    for s in stmts.iter_mut() {
        if let StmtKind::Store { buffer, indices, .. } = &mut s.kind {
            if *buffer == from {
                *buffer = to;
                *indices = pick(std::mem::take(indices));
            }
        }
        let mut inner = env.clone();
        if let StmtKind::Block(b) = &mut s.kind {
            // Indices name the block's iterators: read through their bindings, they show which
            // loop of a strided dimension indexes the cache.
            for it in &b.iters {
                inner.insert(it.var, it.binding.clone().substitute(env));
            }
            let env = &inner;
            for r in b.reads.iter_mut().chain(b.writes.iter_mut()) {
                if r.buffer == from {
                    r.buffer = to;
                    let kept: Vec<_> = std::mem::take(&mut r.ranges)
                        .into_iter()
                        .zip(dims)
                        .filter(|(_, d)| d.kept())
                        .map(|(x, d)| match d {
                            Dim::Strided { .. } => {
                                sparsec_ir::RegionRange { begin: d.cache_index(x.begin, env), end: None }
                            }
                            _ => x,
                        })
                        .collect();
                    r.ranges = if kept.is_empty() {
                        vec![sparsec_ir::RegionRange { begin: Expr::i32(0), end: None }]
                    } else {
                        kept
                    };
                }
            }
        }
        s.kind.map_exprs(&mut map_expr);
        for child in s.kind.child_lists_mut() {
            redirect_in(child, from, to, dims, &inner);
        }
    }
}

impl Schedule {
    /// Path of the cache location and the body list index to edit there.
    fn cache_site(&self, g: &Func, at: CacheAt) -> Result<Path> {
        match self.rvs.get(at.id() as usize) {
            Some(Target::Loop(_)) => Ok(self.loop_path(g, at.id())?.0),
            Some(Target::Block(_)) => self.block_path(g, at.id()),
            Some(_) => Err(ScheduleError::WrongRefKind { rv: at.id(), expected: "loop or block" }),
            None => Err(stale(at.id(), "an unknown reference")),
        }
    }

    /// The body of the loop or block at `path`.
    pub(crate) fn site_body<'g>(g: &'g mut Func, path: &Path, rv: u32) -> Result<&'g mut Vec<Stmt>> {
        match tree::get_mut(&mut g.body, path).map(|s| &mut s.kind) {
            Some(StmtKind::For(l)) => Ok(&mut l.body),
            Some(StmtKind::Block(b)) => Ok(&mut b.body),
            _ => Err(stale(rv, "cache location")),
        }
    }

    /// The region of `buf` accessed by `accesses` inside a body binding `vars`/`bufs`.
    fn cache_region(
        g: &Func,
        buf: BufferId,
        accesses: &[Vec<Expr>],
        vars: &HashSet<VarId>,
        bufs: &HashSet<BufferId>,
    ) -> Result<Vec<Dim>> {
        let b = &g.buffers[buf];
        (0..b.ndim())
            .map(|d| {
                let first = &accesses[0][d];
                let same = accesses.iter().all(|a| &a[d] == first);
                if same && !depends_on(first, vars, bufs) {
                    return Ok(Dim::Point(first.clone()));
                }
                let whole = match &b.layout {
                    Layout::Dense(shape) => shape[d].clone(),
                    Layout::Sparse(axes) => {
                        let a = &g.axes[axes[d]];
                        match a.kind {
                            AxisKind::DenseFixed => a.length.clone(),
                            AxisKind::SparseFixed => a.nnz.clone().unwrap_or(Expr::i32(0)),
                            _ => {
                                return Ok(Dim::Ragged(Box::new(ScheduleError::UncacheableRegion {
                                    buffer: b.name.clone(),
                                    dim: d,
                                    reason: format!("axis `{}` has a different length in every row", a.name),
                                })))
                            }
                        }
                    }
                };
                // Storage past the axes (a row pointer's last element) belongs to the last dimension.
                let whole = match &b.extra_storage {
                    Some(extra) if b.ndim() == 1 => Expr::binary(sparsec_ir::expr::BinOp::Add, whole, extra.clone()),
                    Some(_) => {
                        return Err(ScheduleError::UncacheableRegion {
                            buffer: b.name.clone(),
                            dim: d,
                            reason: "the buffer has storage past its axes".into(),
                        })
                    }
                    None => whole,
                };
                if depends_on(&whole, vars, bufs) {
                    return Err(ScheduleError::UncacheableRegion {
                        buffer: b.name.clone(),
                        dim: d,
                        reason: "its extent depends on the body".into(),
                    });
                }
                Ok(Dim::Whole(whole))
            })
            .collect()
    }

    /// Builds `for ax in ...: block name(v: spatial(e) = ax) { dst = src }`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn build_copy(
        g: &mut Func,
        fresh: &mut Fresh,
        block_name: String,
        buf: BufferId,
        cache: BufferId,
        dims: &[Dim],
        guard: Option<&Expr>,
        into_cache: bool,
    ) -> Stmt {
        let mut loops: Vec<(VarId, Expr)> = Vec::new();
        let mut iters = Vec::new();
        let mut buf_idx = Vec::new();
        let mut cache_idx = Vec::new();
        // A strided dimension's loop variable inside the body stands for the copy's.
        let mut lanes: std::collections::HashMap<VarId, Expr> = std::collections::HashMap::new();
        for (d, dim) in dims.iter().enumerate() {
            match dim {
                // Never planned: `cache_plan` refuses it.
                Dim::Ragged(_) => {}
                Dim::Point(e) => buf_idx.push(e.clone()),
                Dim::Strided { base, stride, var, count, .. } => {
                    let dt = g.vars[*var].dtype;
                    let lv = g.add_var(fresh.name(&format!("ax{d}")), dt);
                    let bv = g.add_var(fresh.name(&format!("v_ax{d}")), dt);
                    loops.push((lv, int(*count, dt)));
                    iters.push(BlockIter { var: bv, kind: IterKind::Spatial, extent: int(*count, dt), binding: Expr::Var(lv) });
                    let at = Expr::binary(BinOp::Add, base.clone(), Expr::binary(BinOp::Mul, stride.clone(), Expr::Var(bv)));
                    buf_idx.push(sparsec_passes::simplify::simplify_expr(at));
                    cache_idx.push(Expr::Var(bv));
                    lanes.insert(*var, Expr::Var(lv));
                }
                Dim::Whole(extent) => {
                    let dt = g.expr_dtype(extent);
                    let lv = g.add_var(fresh.name(&format!("ax{d}")), dt);
                    let bv = g.add_var(fresh.name(&format!("v_ax{d}")), dt);
                    loops.push((lv, extent.clone()));
                    iters.push(BlockIter { var: bv, kind: IterKind::Spatial, extent: extent.clone(), binding: Expr::Var(lv) });
                    buf_idx.push(Expr::Var(bv));
                    cache_idx.push(Expr::Var(bv));
                }
            }
        }
        if cache_idx.is_empty() {
            cache_idx.push(Expr::i32(0));
        }
        let (dst, dst_idx, src, src_idx) =
            if into_cache { (cache, cache_idx, buf, buf_idx) } else { (buf, buf_idx, cache, cache_idx) };
        let copy = Stmt::new(StmtKind::Store { buffer: dst, indices: dst_idx.clone(), value: Expr::Load(src, src_idx.clone()) });
        let region = |b: BufferId, idx: Vec<Expr>| Region {
            buffer: b,
            ranges: idx.into_iter().map(|e| sparsec_ir::RegionRange { begin: e, end: None }).collect(),
        };
        let mut s = Stmt::new(StmtKind::Block(Block {
            name: block_name,
            iters,
            reads: vec![region(src, src_idx)],
            writes: vec![region(dst, dst_idx)],
            init: None,
            body: vec![copy],
            attrs: Attrs::new(),
        }));
        // With strided dimensions the guard may name their loops: it holds per element.
        let inner = guard.filter(|_| !lanes.is_empty());
        if let Some(cond) = inner {
            s = Stmt::new(StmtKind::If { cond: cond.clone().substitute(&lanes), then_body: vec![s], else_body: vec![] });
        }
        for (var, extent) in loops.into_iter().rev() {
            let d = g.vars[var].dtype;
            s = Stmt::new(StmtKind::For(For {
                var,
                min: int(0, d),
                extent,
                kind: ForKind::Serial,
                body: vec![s],
                attrs: Attrs::new(),
            }));
        }
        match guard {
            Some(cond) if lanes.is_empty() => Stmt::new(StmtKind::If { cond: cond.clone(), then_body: vec![s], else_body: vec![] }),
            _ => s,
        }
    }

    pub(crate) fn unique_block_name(g: &Func, base: &str) -> String {
        sparsec_ir::names::fresh_in(&mut sparsec_ir::names::block_names(g), base)
    }

    /// Checks the common preconditions of a cache and returns what the rewrite needs.
    pub(crate) fn cache_plan(
        &self,
        g: &Func,
        primitive: &'static str,
        block: BlockRv,
        buffer: &str,
        at: CacheAt,
        kind: CacheKind,
    ) -> Result<CachePlan> {
        let written_only_here = kind != CacheKind::Read;
        self.need_loop_stage(primitive)?;
        let site = self.cache_site(g, at)?;
        let block_path = self.block_path(g, block.0)?;
        if block_path.len() <= site.len() || block_path[..site.len()] != site[..] {
            return Err(ScheduleError::CacheSiteNotAround { block: self.block_name(g, block.0) });
        }
        let buf = g.buffer_by_name(buffer).ok_or_else(|| ScheduleError::UnknownBuffer { name: buffer.to_string() })?;
        let site_stmt = tree::get(&g.body, &site).ok_or_else(|| stale(at.id(), "cache location"))?;
        let whole_body: &[Stmt] = match &site_stmt.kind {
            StmtKind::For(l) => &l.body,
            StmtKind::Block(b) => &b.body,
            _ => return Err(stale(at.id(), "cache location")),
        };
        let start = whole_body.iter().position(|s| mentions(s, buf)).unwrap_or(0);
        let body = &whole_body[start..];
        // No other buffer over the same parameter may be touched there (aliasing).
        if let Storage::Param(p) = g.buffers[buf].storage {
            for (other, ob) in g.buffers.iter() {
                if other != buf && ob.storage == Storage::Param(p) {
                    let u = uses_of(body, other);
                    if !u.reads.is_empty() || !u.writes.is_empty() || u.atomics > 0 {
                        return Err(ScheduleError::AliasedBuffer { buffer: buffer.to_string(), other: ob.name.clone() });
                    }
                }
            }
        }
        let uses = uses_of(body, buf);
        if uses.atomics > 0 {
            return Err(ScheduleError::AtomicInCache { buffer: buffer.to_string() });
        }
        // `block` must read (cache_read) or write (cache_write) the buffer.
        let in_block = tree::get(&g.body, &block_path).map(|s| uses_of(std::slice::from_ref(s), buf));
        let needed = in_block.as_ref().is_some_and(|u| if written_only_here { !u.writes.is_empty() } else { !u.reads.is_empty() });
        if !needed {
            return Err(ScheduleError::BufferNotAccessed { buffer: buffer.to_string(), primitive });
        }
        if !written_only_here && !uses.writes.is_empty() {
            return Err(ScheduleError::CacheReadOfWrittenBuffer { buffer: buffer.to_string() });
        }
        let (vars, bufs) = bound_inside(body);
        let all: Vec<Vec<Expr>> = uses.reads.iter().chain(&uses.writes).cloned().collect();
        if all.is_empty() {
            return Err(ScheduleError::BufferNotAccessed { buffer: buffer.to_string(), primitive });
        }
        let dims = Self::cache_region(g, buf, &all, &vars, &bufs)?;
        let lanes = constant_loops(body);
        let (site, buf, dims, guard) = Self::sharpen(g, site, buf, dims, &uses, in_block, &all, &vars, &bufs, &lanes)?;
        if let Some(Dim::Ragged(e)) = dims.iter().find(|d| matches!(d, Dim::Ragged(_))) {
            return Err((**e).clone());
        }
        // One position of a variable axis in every row of a whole dimension above it: rows
        // differ in length, so some copies would leave their row.
        if let sparsec_ir::Layout::Sparse(axes) = &g.buffers[buf].layout {
            for e in 1..dims.len().min(axes.len()) {
                let variable = g.axes.try_get(axes[e]).is_some_and(|a| a.kind.is_variable());
                if variable && matches!(dims[e - 1], Dim::Whole(_)) && !matches!(dims[e], Dim::Whole(_)) {
                    return Err(ScheduleError::UncacheableRegion {
                        buffer: g.buffers[buf].name.clone(),
                        dim: e,
                        reason: "it is one position in every row of the whole dimension above it, and the rows differ in length".into(),
                    });
                }
            }
        }
        let guard = Self::conditions(g, buf, &dims, &uses, &all, kind, &vars, &bufs, guard)?;
        if kind == CacheKind::Write {
            Self::check_owned_write_back(g, &site, buf, &dims)?;
        }
        Ok(CachePlan { site, start, buf, dims, guard })
    }

    /// The region with the indices that `block`'s bindings fix at the site as points, and the
    /// condition (the block's domain) under which the copies run; or the region as it is.
    #[allow(clippy::too_many_arguments)]
    fn sharpen(
        g: &Func,
        site: Path,
        buf: BufferId,
        dims: Vec<Dim>,
        uses: &Uses,
        in_block: Option<Uses>,
        all: &[Vec<Expr>],
        vars: &HashSet<VarId>,
        bufs: &HashSet<BufferId>,
        lanes: &std::collections::HashMap<VarId, i64>,
    ) -> Result<(Path, BufferId, Vec<Dim>, Option<Expr>)> {
        // When `block` holds every access, an index fixed by its iterators' bindings is a point
        // too (a feature of one thread): the copies then run where the block's domain holds.
        let in_block = in_block.unwrap_or_default();
        // Accesses outside `block` are allowed when they reach the same elements up to the
        // loop of a strided dimension (an `init` moved in beside the accumulation), checked below.
        let alone = in_block.reads.len() + in_block.writes.len() == all.len();
        let at_site: Vec<Vec<Expr>> = uses.reads_at_site.iter().chain(&uses.writes_at_site).cloned().collect();
        let mut sharp = Self::cache_region(g, buf, &at_site, vars, bufs)?;
        // A whole dimension indexed by a point plus a multiple of a short serial loop's
        // variable inside the body is strided; each access may use a loop of its own.
        for (d, dim) in sharp.iter_mut().enumerate() {
            if !matches!(dim, Dim::Whole(_)) {
                continue;
            }
            let mut form: Option<(Expr, Expr, i64)> = None;
            let mut loops: Vec<VarId> = Vec::new();
            let ok = at_site.iter().all(|a| {
                let mut inner: Vec<VarId> = Vec::new();
                for v in crate::reduction::vars_of(&a[d]) {
                    if vars.contains(&v) && !inner.contains(&v) {
                        inner.push(v);
                    }
                }
                let [v] = inner[..] else { return false };
                let (Some(&count), Some((base, stride))) = (lanes.get(&v), sparsec_passes::simplify::affine_in(g, &a[d], v)) else { return false };
                if !loops.contains(&v) {
                    loops.push(v);
                }
                let this = (base, stride, count);
                form.get_or_insert_with(|| this.clone()) == &this
            });
            let Some((base, stride, count)) = form.filter(|_| ok) else { continue };
            if !depends_on(&base, vars, bufs) && !depends_on(&stride, vars, bufs) && stride.as_int() != Some(0) {
                *dim = Dim::Strided { base, stride, var: loops[0], count, others: loops[1..].to_vec() };
            }
        }
        if !alone {
            let renamed: Vec<Vec<Expr>> = at_site.iter().map(|a| a.iter().map(|e| canonical(&sharp, e)).collect()).collect();
            let shared = sharp.iter().any(|d| matches!(d, Dim::Strided { others, .. } if !others.is_empty()));
            if !shared || renamed.iter().any(|a| *a != renamed[0]) {
                return Ok((site, buf, dims, None));
            }
        }
        let free = free_of_strides(vars, &sharp);
        let mut within: Vec<Expr> = Vec::new();
        // The domain conditions of each access: with several blocks they must agree.
        let mut each: Vec<Vec<Expr>> = vec![Vec::new(); all.len()];
        for (d, dim) in sharp.iter().enumerate() {
            if !matches!((dim, &dims[d]), (Dim::Point(_) | Dim::Strided { .. }, Dim::Whole(_) | Dim::Ragged(_))) {
                continue;
            }
            for (k, a) in all.iter().enumerate() {
                for v in crate::reduction::vars_of(&a[d]) {
                    let Some((binding, extent)) = uses.iters.get(&v) else { continue };
                    if depends_on(binding, &free, bufs) || depends_on(extent, vars, bufs) {
                        return Ok((site, buf, dims, None));
                    }
                    let dt = g.expr_dtype(binding);
                    let low = (!non_negative(g, binding)).then(|| Expr::binary(BinOp::Ge, binding.clone(), int(0, dt)));
                    let high = (!within_rows(g, binding, extent)).then(|| Expr::binary(BinOp::Lt, binding.clone(), extent.clone()));
                    for c in low.into_iter().chain(high) {
                        let c = canonical(&sharp, &sparsec_passes::simplify::simplify_expr(c));
                        if c != Expr::Bool(true) && !within.contains(&c) {
                            within.push(c.clone());
                        }
                        if c != Expr::Bool(true) && !each[k].contains(&c) {
                            each[k].push(c);
                        }
                    }
                }
            }
        }
        if !alone && each.iter().any(|c| c.len() != each[0].len() || c.iter().any(|x| !each[0].contains(x))) {
            return Ok((site, buf, dims, None));
        }
        if sharp != dims {
            let guard = within.into_iter().reduce(|a, b| Expr::binary(BinOp::And, a, b));
            return Ok((site, buf, sharp, guard));
        }
        Ok((site, buf, dims, None))
    }

    /// `guard` and the conditions under which the body accesses a point of the region: the
    /// copies of a point must run only where the body would reach it (an index may leave the
    /// buffer where a condition fails). Every access must then run under the same conditions,
    /// known at the site. A read cache skips a condition that only keeps a block iterator
    /// that no access names in its domain (a split's predicate, decided in the body): every
    /// access reads the same elements whatever it decides; and it copies unconditionally what
    /// some access reads unconditionally (the value a guard tests).
    #[allow(clippy::too_many_arguments)]
    fn conditions(
        g: &Func,
        buf: BufferId,
        dims: &[Dim],
        uses: &Uses,
        all: &[Vec<Expr>],
        kind: CacheKind,
        vars: &HashSet<VarId>,
        bufs: &HashSet<BufferId>,
        guard: Option<Expr>,
    ) -> Result<Option<Expr>> {
        let read_only = kind == CacheKind::Read;
        let Some(point) = dims.iter().position(|d| !matches!(d, Dim::Whole(_))) else { return Ok(guard) };
        let named: HashSet<VarId> = all.iter().flatten().flat_map(crate::reduction::vars_of).collect();
        let domain_only = |c: &Expr| {
            read_only
                && depends_on(c, vars, bufs)
                && crate::reduction::vars_of(c).iter().all(|v| !named.contains(v))
                && uses.iters.iter().any(|(v, (binding, extent))| {
                    !named.contains(v) && *c == Expr::binary(BinOp::Lt, binding.clone(), extent.clone())
                })
        };
        // A free dimension's loop may appear in a condition: the copies test it per element.
        let free = free_of_strides(vars, dims);
        let mut conds: Vec<Vec<Expr>> =
            uses.conds.iter().map(|cs| cs.iter().filter(|c| !domain_only(c)).map(|c| canonical(dims, c)).collect()).collect();
        if kind == CacheKind::Accumulate {
            // What the body decides only says whether a term is added (the cache starts at
            // zero): the copies keep the conjuncts fixed at the site, such as a row's bound.
            for cs in &mut conds {
                let mut kept = Vec::new();
                for c in cs.drain(..) {
                    conjuncts(c, &mut kept);
                }
                kept.retain(|c| !depends_on(c, &free, bufs));
                *cs = kept;
            }
        }
        let first = &conds[0];
        if first.is_empty() && conds.iter().all(Vec::is_empty) {
            return Ok(guard);
        }
        // A read cache whose element some access reads unconditionally (a guard's own
        // condition) copies it unconditionally: every access reads that same value.
        if read_only && conds.iter().any(Vec::is_empty) {
            return Ok(guard);
        }
        if conds.iter().any(|c| c != first) || first.iter().any(|c| depends_on(c, &free, bufs)) {
            return Err(ScheduleError::UncacheableRegion {
                buffer: g.buffers[buf].name.clone(),
                dim: point,
                reason: "its accesses run under conditions that differ between them or are decided in the body".into(),
            });
        }
        let mut all: Vec<Expr> = Vec::new();
        for c in guard.into_iter().chain(first.iter().cloned()) {
            conjuncts(c, &mut all);
        }
        Ok(all.into_iter().reduce(|a, b| Expr::binary(BinOp::And, a, b)))
    }

    /// Refuses a write-back that iterations of an enclosing parallel, vectorized or
    /// thread-bound loop would all make to the same elements: some point of the region must
    /// vary with each such loop (the region of one iteration is then its own).
    fn check_owned_write_back(g: &Func, site: &Path, buf: BufferId, dims: &[Dim]) -> Result<()> {
        let mut chain = tree::ancestors(&g.body, site);
        chain.extend(tree::get(&g.body, site));
        let parallel: Vec<VarId> = chain
            .iter()
            .filter_map(|s| match &s.kind {
                StmtKind::For(l) if matches!(l.kind, ForKind::Parallel | ForKind::Vectorized | ForKind::Thread(_)) => Some(l.var),
                _ => None,
            })
            .collect();
        // Units that share an output (a reduction over parallel iterations, or atomics) would
        // each write back their own partial value over the others'.
        for s in &chain {
            if let StmtKind::Block(b) = &s.kind {
                let shared = b.attrs.contains_key(sparsec_passes::ATOMIC_ATTR)
                    || b.iters.iter().any(|it| {
                        it.kind == IterKind::Reduce && crate::reduction::vars_of(&it.binding).iter().any(|v| parallel.contains(v))
                    });
                if shared {
                    return Err(ScheduleError::SharedAccumulator { buffer: g.buffers[buf].name.clone(), block: b.name.clone() });
                }
            }
        }
        if dims.iter().all(|d| !matches!(d, Dim::Whole(_))) {
            // Exactly the elements the body writes, which the loop's own proof keeps apart.
            return Ok(());
        }
        let mut env = std::collections::HashMap::new();
        for s in &chain {
            if let StmtKind::Block(b) = &s.kind {
                for it in &b.iters {
                    let value = it.binding.clone().substitute(&env);
                    env.insert(it.var, value);
                }
            }
        }
        let points: Vec<Vec<VarId>> = dims
            .iter()
            .filter_map(|d| match d {
                Dim::Point(e) | Dim::Strided { base: e, .. } => Some(crate::reduction::vars_of(&e.clone().substitute(&env))),
                Dim::Whole(_) | Dim::Ragged(_) => None,
            })
            .collect();
        for s in chain {
            if let StmtKind::For(l) = &s.kind {
                let parallel = matches!(l.kind, ForKind::Parallel | ForKind::Vectorized | ForKind::Thread(_));
                if parallel && !points.iter().any(|p| p.contains(&l.var)) {
                    return Err(ScheduleError::SharedWriteBack { buffer: g.buffers[buf].name.clone(), r#loop: Self::var_name(g, l.var) });
                }
            }
        }
        Ok(())
    }

    pub(crate) fn block_name(&self, g: &Func, rv: u32) -> String {
        match self.block_path(g, rv).ok().and_then(|p| tree::get(&g.body, &p).cloned()) {
            Some(Stmt { kind: StmtKind::Block(b), .. }) => b.name,
            _ => format!("#{rv}"),
        }
    }

    /// Adds the cache buffer and returns it.
    pub(crate) fn add_cache_buffer(g: &mut Func, buf: BufferId, scope: Scope, dims: &[Dim]) -> BufferId {
        let b = g.buffers[buf].clone();
        let mut shape: Vec<Expr> = dims
            .iter()
            .filter_map(|d| match d {
                Dim::Whole(e) => Some(e.clone()),
                Dim::Strided { count, .. } => Some(Expr::i32(*count)),
                Dim::Point(_) | Dim::Ragged(_) => None,
            })
            .collect();
        if shape.is_empty() {
            shape.push(Expr::i32(1));
        }
        let name = sparsec_ir::names::fresh_in(&mut sparsec_ir::names::function_names(g), &format!("{}_{}", b.name, scope.name()));
        g.buffers.append(Buffer {
            name,
            dtype: b.dtype,
            layout: Layout::Dense(shape),
            storage: Storage::Alloc(scope),
            extra_storage: None,
            default: None,
            modes: None,
            span: Span::NONE,
        })
    }


    /// Decodes a cache location from a trace reference (a loop or a block).
    pub(crate) fn cache_at_from_rv(&self, rv: u32) -> Result<CacheAt> {
        match self.rvs.get(rv as usize) {
            Some(Target::Loop(_)) => Ok(CacheAt::Loop(LoopRv(rv))),
            Some(Target::Block(_)) => Ok(CacheAt::Block(BlockRv(rv))),
            Some(_) => Err(ScheduleError::WrongRefKind { rv, expected: "loop or block" }),
            None => Err(stale(rv, "an unknown reference")),
        }
    }
}