//! Helpers of the loop primitives (Stage II/III): loop lookups and nests for `split`, `fuse`
//! and `reorder`, and the loop kinds (`bind`, `parallel`, `vectorize`, `unroll`) with the
//! proof that a loop's iterations are independent.
//!
//! Loop extents are assumed non-negative, as every lowering pass produces them.

use crate::error::ScheduleError;
use crate::primitives::Step;
use crate::schedule::{stale, LoopRv, Schedule};
use crate::tree::{self, Path};
use sparsec_ir::expr::{BinOp, Expr};
use sparsec_ir::func::{Attrs, BufferId, For, Func, Stmt, StmtKind, VarId};
use sparsec_ir::injective::{self, Role};
use sparsec_ir::{walk_stmts, ForKind, IterKind, ThreadTag};
use std::collections::HashMap;

type Result<T> = std::result::Result<T, ScheduleError>;

/// The loop at `path`.
pub(crate) fn loop_at<'f>(g: &'f Func, path: &Path, rv: u32) -> Result<&'f For> {
    match tree::get(&g.body, path).map(|s| &s.kind) {
        Some(StmtKind::For(l)) => Ok(l),
        _ => Err(stale(rv, "loop")),
    }
}

/// `a op b` on expressions of the same dtype.
pub(crate) fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::binary(op, a, b)
}

/// A serial loop statement.
pub(crate) fn for_stmt(var: VarId, min: Expr, extent: Expr, kind: ForKind, body: Vec<Stmt>, attrs: Attrs) -> Stmt {
    Stmt::new(StmtKind::For(For { var, min, extent, kind, body, attrs }))
}

impl Schedule {
    /// Resolves loop references: paths, variables and the loops themselves (cloned).
    pub(crate) fn resolve_loops(&self, g: &Func, loops: &[LoopRv]) -> Result<Vec<(Path, For)>> {
        let mut out: Vec<(Path, For)> = Vec::new();
        for r in loops {
            let (path, _) = self.loop_path(g, r.0)?;
            let l = loop_at(g, &path, r.0)?.clone();
            if out.iter().any(|(_, o)| o.var == l.var) {
                return Err(ScheduleError::Duplicate { name: Self::var_name(g, l.var) });
            }
            out.push((path, l));
        }
        Ok(out)
    }


    /// Checks that `loops` (outermost first) are a perfectly nested chain: each loop is the
    /// only statement of the previous one's body.
    pub(crate) fn check_chain(g: &Func, loops: &[(Path, For)]) -> Result<()> {
        for w in loops.windows(2) {
            let (outer, inner) = (&w[0].1, &w[1].1);
            let nested = matches!(outer.body.as_slice(), [s] if tree::is_loop_over(s, inner.var));
            if !nested {
                return Err(ScheduleError::LoopsNotNested {
                    outer: Self::var_name(g, outer.var),
                    inner: Self::var_name(g, inner.var),
                });
            }
        }
        Ok(())
    }


    /// Sets the kind of a serial loop after the checks of the primitive `step` records.
    pub(crate) fn set_kind(&mut self, lp: LoopRv, kind: ForKind, step: Step) -> Result<()> {
        let primitive = step.name();
        self.need_loop_stage(primitive)?;
        let mut g = self.func.clone();
        let (path, _) = self.loop_path(&g, lp.0)?;
        let l = loop_at(&g, &path, lp.0)?;
        let name = Self::var_name(&g, l.var);
        if l.kind != ForKind::Serial {
            return Err(ScheduleError::AlreadyBound { loop_var: name, kind: l.kind.name().to_string() });
        }
        // (variable, kind) of every loop inside.
        let mut inner_loops: Vec<(VarId, ForKind)> = Vec::new();
        walk_stmts(&l.body, &mut |s| {
            if let StmtKind::For(x) = &s.kind {
                inner_loops.push((x.var, x.kind));
            }
        });
        match kind {
            ForKind::Thread(tag) => {
                let outer = tree::ancestors(&g.body, &path).into_iter().filter_map(|s| match &s.kind {
                    StmtKind::For(x) => Some((x.var, x.kind)),
                    _ => None,
                });
                if let Some((other, _)) = outer.chain(inner_loops.iter().copied()).find(|x| x.1 == kind) {
                    return Err(ScheduleError::ThreadTagInUse {
                        loop_var: name,
                        tag: tag.name().to_string(),
                        other: Self::var_name(&g, other),
                    });
                }
            }
            ForKind::Vectorized => {
                if let Some((x, _)) = inner_loops.first() {
                    return Err(ScheduleError::NotInnermost { loop_var: name, inner: Self::var_name(&g, *x) });
                }
            }
            _ => {}
        }
        prove_body(&g, l, kind)?;
        match tree::get_mut(&mut g.body, &path).map(|s| &mut s.kind) {
            Some(StmtKind::For(x)) => x.kind = kind,
            _ => return Err(stale(lp.0, "loop")),
        }
        if let ForKind::Thread(tag) = kind {
            // Each top-level statement is one kernel.
            for top in &g.body {
                for list in top.kind.child_lists() {
                    if let Err(buffer) = grid_writes(&g, list) {
                        let tag = tag.name().to_string();
                        return Err(ScheduleError::RepeatedByBlocks { loop_var: name, tag, buffer });
                    }
                }
            }
        }
        self.commit(primitive, g)?;
        self.record(step, vec![]);
        Ok(())
    }
}

/// Within a kernel (`list` lies inside a top-level statement), a loop
/// bound to a block index makes every statement beside the way to it run once per block of
/// that dimension, with no way to order them: a write there to memory the blocks share (a
/// parameter or a global allocation) races with the loop's own updates. `Err` names the
/// buffer. Returns whether `list` holds such a block-bound loop.
pub(crate) fn grid_writes(g: &Func, list: &[Stmt]) -> std::result::Result<bool, String> {
    let mut holds = vec![false; list.len()];
    for (k, s) in list.iter().enumerate() {
        for child in s.kind.child_lists() {
            holds[k] |= grid_writes(g, child)?;
        }
        holds[k] |= matches!(&s.kind, StmtKind::For(l) if matches!(l.kind, ForKind::Thread(t) if t.is_block()));
    }
    if holds.contains(&true) {
        for (s, _) in list.iter().zip(&holds).filter(|(_, h)| !**h) {
            if let Some(b) = g.global_write(std::slice::from_ref(s)) {
                return Err(g.buffers[b].name.clone());
            }
        }
    }
    Ok(holds.contains(&true))
}

/// Whether `body` writes memory only through `atomic_add` (at least once) into buffers it
/// (or buffers sharing their storage) never reads otherwise, apart from stores into buffers it allocates itself.
pub(crate) fn only_atomic_writes(g: &Func, body: &[Stmt]) -> bool {
    let mut own = Vec::new();
    let (mut added, mut loaded) = (Vec::new(), Vec::new());
    let mut other = false;
    walk_stmts(body, &mut |s| {
        if let StmtKind::Alloc(b) = &s.kind {
            own.push(*b);
        }
        for e in s.kind.exprs() {
            e.walk(&mut |x| match x {
                Expr::AtomicAdd(b, ..) => added.push(*b),
                Expr::Load(b, _) => loaded.push(*b),
                _ => {}
            });
        }
    });
    walk_stmts(body, &mut |s| {
        if let StmtKind::Store { buffer, .. } = &s.kind {
            other |= !own.contains(buffer);
        }
    });
    let storage = |b: &sparsec_ir::BufferId| g.buffers[*b].storage;
    !added.is_empty() && !other && !added.iter().any(|a| loaded.iter().any(|l| storage(l) == storage(a)))
}

/// How an access touches its buffer.
#[derive(Clone, Copy, PartialEq)]
enum Touch {
    Read,
    Store,
    Atomic,
}

/// One access under a loop, for [`check_independent`].
struct Access {
    buffer: BufferId,
    touch: Touch,
    /// The first block under the loop on the way to it (numbered), with its name and
    /// whether the loop drives it through a spatial iterator.
    block: Option<(usize, String, bool)>,
    /// Its indices, with block iterators replaced by their bindings.
    indices: Vec<Expr>,
}

/// Walks the statements under a loop, collecting accesses.
struct Walk {
    lp: VarId,
    accesses: Vec<Access>,
    local: Vec<BufferId>,
    blocks: usize,
    /// Block iterators met so far, with their bindings in terms of loops.
    subst: HashMap<VarId, Expr>,
    /// Loops under the loop (and itself) with their extents; `let`s under it.
    loops: HashMap<VarId, Expr>,
    lets: Vec<VarId>,
}

impl Walk {
    fn subst(&self, e: &Expr) -> Expr {
        e.clone().substitute(&self.subst)
    }

    fn stmts(&mut self, list: &[Stmt], block: &Option<(usize, String, bool)>) {
        for s in list {
            let mut inner = block.clone();
            match &s.kind {
                StmtKind::Block(b) => {
                    if inner.is_none() {
                        let driven =
                            b.iters.iter().any(|it| it.kind == IterKind::Spatial && it.binding.uses_var(self.lp));
                        inner = Some((self.blocks, b.name.clone(), driven));
                        self.blocks += 1;
                    }
                    for it in &b.iters {
                        let e = self.subst(&it.binding);
                        self.subst.insert(it.var, e);
                    }
                }
                StmtKind::For(l) => {
                    self.loops.insert(l.var, l.extent.clone());
                }
                StmtKind::Let { var, .. } => self.lets.push(*var),
                StmtKind::Alloc(b) => self.local.push(*b),
                StmtKind::Store { buffer, indices, .. } => {
                    let indices = indices.iter().map(|e| self.subst(e)).collect();
                    self.accesses.push(Access { buffer: *buffer, touch: Touch::Store, block: inner.clone(), indices });
                }
                _ => {}
            }
            for e in s.kind.exprs() {
                e.walk(&mut |x| {
                    let (buffer, idx, touch) = match x {
                        Expr::Load(b, idx) => (*b, idx, Touch::Read),
                        Expr::AtomicAdd(b, idx, _) => (*b, idx, Touch::Atomic),
                        _ => return,
                    };
                    let indices = idx.iter().map(|e| self.subst(e)).collect();
                    self.accesses.push(Access { buffer, touch, block: inner.clone(), indices });
                });
            }
            for child in s.kind.child_lists() {
                self.stmts(child, &inner);
            }
        }
    }
}

/// What `parallel`, `vectorize` and `bind` prove of the body of loop `l` before giving it
/// `kind` (nothing for `unrolled`): it drives no reduction iterator and its iterations are
/// independent — or, except for vectorizing, it writes through `atomic_add` only (and into
/// buffers it allocates), whose additions commute.
fn prove_body(g: &Func, l: &For, kind: ForKind) -> Result<()> {
    let action = match kind {
        ForKind::Unrolled | ForKind::Serial => return Ok(()),
        ForKind::Parallel => "parallelized",
        ForKind::Vectorized => "vectorized",
        ForKind::Thread(_) => "bound",
    };
    if kind != ForKind::Vectorized && only_atomic_writes(g, &l.body) {
        return Ok(());
    }
    let mut found = None;
    walk_stmts(&l.body, &mut |s| {
        if let StmtKind::Block(b) = &s.kind {
            for it in &b.iters {
                if found.is_none() && it.kind == IterKind::Reduce && it.binding.uses_var(l.var) {
                    found = Some((b.name.clone(), Schedule::var_name(g, it.var)));
                }
            }
        }
    });
    if let Some((block, iter)) = found {
        return Err(ScheduleError::ReductionLoop { loop_var: Schedule::var_name(g, l.var), block, iter, action });
    }
    check_independent(g, l, action)
}

/// Proves the kind of every parallel, vectorized and thread-bound loop of `f` as `parallel`,
/// `vectorize` and `bind` prove it before setting it: no thread index bound twice on one
/// path, no reduction iterator driven, iterations independent (or writing through
/// `atomic_add` only). For programs written at Stage II or III, whose loop kinds no primitive
/// checked: the interpreter runs such loops one iteration after another, a GPU or a thread
/// team all at once, so only proven loops mean the same everywhere. Returns the first loop
/// that fails, with why.
pub fn check_loop_kinds(f: &Func) -> std::result::Result<(), (sparsec_ir::Span, ScheduleError)> {
    type R = std::result::Result<(), (sparsec_ir::Span, ScheduleError)>;
    fn go(f: &Func, stmts: &[Stmt], tags: &mut Vec<(VarId, ThreadTag)>) -> R {
        for s in stmts {
            let mut pushed = false;
            if let StmtKind::For(l) = &s.kind {
                let name = Schedule::var_name(f, l.var);
                if let ForKind::Thread(tag) = l.kind {
                    if let Some((other, _)) = tags.iter().find(|x| x.1 == tag) {
                        return Err((s.span, ScheduleError::ThreadTagInUse { loop_var: name, tag: tag.name().to_string(), other: Schedule::var_name(f, *other) }));
                    }
                    tags.push((l.var, tag));
                    pushed = true;
                }
                if l.kind != ForKind::Serial {
                    prove_body(f, l, l.kind).map_err(|e| (s.span, e))?;
                }
            }
            for list in s.kind.child_lists() {
                go(f, list, tags)?;
            }
            if pushed {
                tags.pop();
            }
        }
        Ok(())
    }
    go(f, &f.body, &mut Vec::new())
}

/// Proves that the iterations of `l` do not race (the rules are on [`Schedule::parallel`]).
fn check_independent(g: &Func, l: &For, action: &'static str) -> Result<()> {
    let mut w = Walk {
        lp: l.var,
        accesses: Vec::new(),
        local: Vec::new(),
        blocks: 0,
        subst: HashMap::new(),
        loops: HashMap::from([(l.var, l.extent.clone())]),
        lets: Vec::new(),
    };
    w.stmts(&l.body, &None);
    w.local.extend(sparsec_ir::verify::fault_record(g));
    let loop_var = Schedule::var_name(g, l.var);
    let fail = |buffer: BufferId, why: String| ScheduleError::NotIndependent {
        loop_var: loop_var.clone(),
        buffer: g.buffers[buffer].name.clone(),
        why,
        action,
    };
    let role = |v: VarId| match w.loops.get(&v) {
        Some(extent) => Role::Free(Some(extent.clone())),
        None if w.lets.contains(&v) || w.subst.contains_key(&v) => Role::Unknown,
        None => Role::Fixed,
    };
    let outside = |a: &Access| match &a.block {
        None => format!("lies outside any block driven by loop `{loop_var}`"),
        Some((_, b, _)) => {
            format!("lies in block `{b}`, which loop `{loop_var}` does not drive through a spatial iterator")
        }
    };
    for a in w.accesses.iter().filter(|a| !w.local.contains(&a.buffer)) {
        let name = &g.buffers[a.buffer].name;
        let driven = a.block.as_ref().is_some_and(|b| b.2);
        let same = || w.accesses.iter().filter(move |b| b.buffer == a.buffer);
        match a.touch {
            Touch::Store if !driven => return Err(fail(a.buffer, format!("the store to `{name}` {}", outside(a)))),
            Touch::Atomic if !driven && same().any(|b| b.touch != Touch::Atomic) => {
                return Err(fail(
                    a.buffer,
                    format!("the atomic_add to `{name}` {}, and `{name}` is also read or stored under it", outside(a)),
                ))
            }
            Touch::Store => {
                // Touched by several blocks: every access must be this store's expression,
                // up to inner loops, and show the iteration.
                let group = |b: &Access| b.block.as_ref().map(|x| x.0);
                if same().any(|b| group(b) != group(a)) {
                    for b in same() {
                        if !injective::same_point(&a.indices, &b.indices, &[l.var], &role) {
                            let show = |idx: &[Expr]| {
                                idx.iter().map(|e| sparsec_ir::text::print_expr(g, e)).collect::<Vec<_>>().join(", ")
                            };
                            return Err(fail(
                                a.buffer,
                                format!(
                                    "`{name}` is written at [{}] and accessed at [{}] by different blocks under it, which is not proven to be the same iteration of `{loop_var}`",
                                    show(&a.indices),
                                    show(&b.indices)
                                ),
                            ));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}
