//! Loop primitives (Stage II/III): `split`, `fuse`, `reorder`, and the loop kinds
//! (`bind`, `parallel`, `vectorize`, `unroll`).
//!
//! Loop extents are assumed non-negative, as every lowering pass produces them.

use crate::error::ScheduleError;
use crate::schedule::{stale, LoopRv, Schedule, Target};
use crate::trace::Step;
use crate::tree::{self, Fresh, Path};
use sparsec_ir::expr::{BinOp, Expr};
use sparsec_ir::func::{Attrs, BufferId, For, Func, Stmt, StmtKind, VarId};
use sparsec_ir::injective::{self, Role};
use sparsec_ir::{walk_stmts, ForKind, IterKind, ThreadTag};
use sparsec_passes::build::{cast_to, int};
use sparsec_passes::simplify::simplify_expr;
use std::collections::HashMap;

type Result<T> = std::result::Result<T, ScheduleError>;

/// The loop at `path`.
fn loop_at<'f>(g: &'f Func, path: &Path, rv: u32) -> Result<&'f For> {
    match tree::get(&g.body, path).map(|s| &s.kind) {
        Some(StmtKind::For(l)) => Ok(l),
        _ => Err(stale(rv, "loop")),
    }
}

/// `a op b` on expressions of the same dtype.
fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::binary(op, a, b)
}

/// A serial loop statement.
fn for_stmt(var: VarId, min: Expr, extent: Expr, kind: ForKind, body: Vec<Stmt>, attrs: Attrs) -> Stmt {
    Stmt::new(StmtKind::For(For { var, min, extent, kind, body, attrs }))
}

impl Schedule {
    /// Resolves loop references: paths, variables and the loops themselves (cloned).
    fn resolve_loops(&self, g: &Func, loops: &[LoopRv]) -> Result<Vec<(Path, For)>> {
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

    /// Splits a loop into nested loops with the given factors (outermost first). At most
    /// one factor may be `None`; it is inferred as `ceil(extent / product of the others)`.
    /// When the factors do not divide the extent exactly (or the extent is symbolic) the
    /// body is guarded by `if fused < extent`. Returns the new loops, outermost first.
    pub fn split(&mut self, lp: LoopRv, factors: &[Option<i64>]) -> Result<Vec<LoopRv>> {
        const P: &str = "split";
        self.need_loop_stage(P)?;
        let mut g = self.func.clone();
        let (path, _) = self.loop_path(&g, lp.0)?;
        let l = loop_at(&g, &path, lp.0)?.clone();
        let name = Self::var_name(&g, l.var);
        if factors.len() < 2 {
            return Err(ScheduleError::TooFew { primitive: P, min: 2, what: "factors", got: factors.len() });
        }
        if let Some(&f) = factors.iter().flatten().find(|&&f| f <= 0) {
            return Err(ScheduleError::NonPositiveFactor { factor: f });
        }
        let nones = factors.iter().filter(|f| f.is_none()).count();
        if nones > 1 {
            return Err(ScheduleError::MoreThanOneInferred { count: nones });
        }
        if l.kind != ForKind::Serial {
            return Err(ScheduleError::AlreadyBound { loop_var: name, kind: l.kind.name().to_string() });
        }
        let d = g.vars[l.var].dtype;
        let product = factors.iter().flatten().try_fold(1i64, |p, &f| p.checked_mul(f));
        let extent = simplify_expr(l.extent.clone());
        let mismatch = |product: i64| ScheduleError::FactorsMismatch {
            loop_var: name.clone(),
            extent: sparsec_ir::text::print_expr(&g, &l.extent),
            product,
        };
        let Some(product) = product else { return Err(mismatch(i64::MAX)) };
        // The factor to infer (if any) and whether a guard is needed.
        let (inferred, guard) = match (nones, extent.as_int()) {
            (0, Some(e)) if product < e => return Err(mismatch(product)),
            (0, Some(e)) => (None, product != e),
            (0, None) => return Err(mismatch(product)),
            (_, Some(e)) => {
                let e = e.max(0);
                let f = e / product + i64::from(e % product != 0);
                (Some(int(f, d)), f.checked_mul(product) != Some(e))
            }
            (_, None) if product == 1 => (Some(extent.clone()), false),
            (_, None) => {
                let up = bin(BinOp::Add, extent.clone(), int(product - 1, d));
                (Some(simplify_expr(bin(BinOp::FloorDiv, up, int(product, d)))), true)
            }
        };
        let extents: Vec<Expr> =
            factors.iter().map(|f| f.map_or_else(|| inferred.clone().unwrap_or(int(1, d)), |f| int(f, d))).collect();
        let mut fresh = Fresh::at(&g, &path);
        let vars: Vec<VarId> = (0..factors.len()).map(|k| g.add_var(fresh.name(&format!("{name}_{k}")), d)).collect();
        // fused = ((v0 * e1 + v1) * e2 + v2) ...
        let mut fused = Expr::Var(vars[0]);
        for (v, e) in vars.iter().zip(&extents).skip(1) {
            fused = bin(BinOp::Add, bin(BinOp::Mul, fused, e.clone()), Expr::Var(*v));
        }
        let fused = simplify_expr(fused);
        let value = simplify_expr(bin(BinOp::Add, l.min.clone(), fused.clone()));
        let mut body = l.body.clone();
        sparsec_passes::simplify::substitute_stmts(&mut body, &HashMap::from([(l.var, value)]));
        if guard {
            let cond = bin(BinOp::Lt, fused, l.extent.clone());
            body = vec![Stmt::new(StmtKind::If { cond, then_body: body, else_body: vec![] })];
        }
        for (k, (v, e)) in vars.iter().zip(&extents).enumerate().rev() {
            let attrs = if k == 0 { l.attrs.clone() } else { Attrs::new() };
            body = vec![for_stmt(*v, int(0, d), e.clone(), ForKind::Serial, body, attrs)];
        }
        let mut new = body.pop().ok_or_else(|| stale(lp.0, "loop"))?;
        let slot = tree::get_mut(&mut g.body, &path).ok_or_else(|| stale(lp.0, "loop"))?;
        new.span = slot.span;
        *slot = new;
        self.commit(P, g)?;
        let outs: Vec<u32> = vars.iter().map(|v| self.new_rv(Target::Loop(*v))).collect();
        self.record(Step::Split { r#loop: lp, factors: factors.to_vec() }, outs.clone());
        Ok(outs.into_iter().map(LoopRv).collect())
    }

    /// Checks that `loops` (outermost first) are a perfectly nested chain: each loop is the
    /// only statement of the previous one's body.
    fn check_chain(g: &Func, loops: &[(Path, For)]) -> Result<()> {
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

    /// Fuses perfectly nested loops (outermost first) into one loop whose extent is the
    /// product of theirs. No loop's bounds may use the variable of another fused loop.
    pub fn fuse(&mut self, loops: &[LoopRv]) -> Result<LoopRv> {
        const P: &str = "fuse";
        self.need_loop_stage(P)?;
        if loops.len() < 2 {
            return Err(ScheduleError::TooFew { primitive: P, min: 2, what: "loops", got: loops.len() });
        }
        let mut g = self.func.clone();
        let ls = self.resolve_loops(&g, loops)?;
        Self::check_chain(&g, &ls)?;
        for (k, (_, l)) in ls.iter().enumerate() {
            if l.kind != ForKind::Serial {
                return Err(ScheduleError::AlreadyBound {
                    loop_var: Self::var_name(&g, l.var),
                    kind: l.kind.name().to_string(),
                });
            }
            for (_, o) in &ls[..k] {
                if l.min.uses_var(o.var) || l.extent.uses_var(o.var) {
                    return Err(ScheduleError::DependentExtent {
                        loop_var: Self::var_name(&g, l.var),
                        depends_on: Self::var_name(&g, o.var),
                    });
                }
            }
        }
        let outer = &ls[0].1;
        let d = g.vars[outer.var].dtype;
        let extents: Vec<Expr> = ls.iter().map(|(_, l)| cast_to(&g, l.extent.clone(), d)).collect();
        let total = simplify_expr(extents[1..].iter().fold(extents[0].clone(), |a, e| bin(BinOp::Mul, a, e.clone())));
        let name = ls.iter().map(|(_, l)| Self::var_name(&g, l.var)).collect::<Vec<_>>().join("_");
        let v = g.add_var(Fresh::at(&g, &ls[0].0).name(&format!("{name}_fused")), d);
        // Old variable k = min_k + (v // (e_{k+1} * ... * e_n)) % e_k (no `%` for the first).
        let mut map = HashMap::new();
        let n = ls.len();
        for (k, (_, l)) in ls.iter().enumerate() {
            let mut e = Expr::Var(v);
            if k + 1 < n {
                let stride = extents[k + 2..].iter().fold(extents[k + 1].clone(), |a, x| bin(BinOp::Mul, a, x.clone()));
                e = bin(BinOp::FloorDiv, e, stride);
            }
            if k > 0 {
                e = bin(BinOp::FloorMod, e, extents[k].clone());
            }
            let ld = g.vars[l.var].dtype;
            let e = cast_to(&g, simplify_expr(e), ld);
            map.insert(l.var, simplify_expr(bin(BinOp::Add, l.min.clone(), e)));
        }
        let mut body = ls[n - 1].1.body.clone();
        sparsec_passes::simplify::substitute_stmts(&mut body, &map);
        let mut new = for_stmt(v, int(0, d), total, ForKind::Serial, body, outer.attrs.clone());
        let slot = tree::get_mut(&mut g.body, &ls[0].0).ok_or_else(|| stale(loops[0].0, "loop"))?;
        new.span = slot.span;
        *slot = new;
        self.commit(P, g)?;
        let out = self.new_rv(Target::Loop(v));
        self.record(Step::Fuse { loops: loops.to_vec() }, vec![out]);
        Ok(LoopRv(out))
    }

    /// Reorders perfectly nested loops: `order` lists every loop of a contiguous perfectly
    /// nested chain, in the new order (outermost first). A loop whose bounds use another
    /// chain loop's variable must stay inside that loop.
    pub fn reorder(&mut self, order: &[LoopRv]) -> Result<()> {
        const P: &str = "reorder";
        self.need_loop_stage(P)?;
        if order.len() < 2 {
            return Err(ScheduleError::TooFew { primitive: P, min: 2, what: "loops", got: order.len() });
        }
        let mut g = self.func.clone();
        let given = self.resolve_loops(&g, order)?;
        let mut nest = given.clone();
        nest.sort_by_key(|(p, _)| p.len());
        Self::check_chain(&g, &nest)?;
        for (p, (_, l)) in given.iter().enumerate() {
            if let Some((_, o)) = given[p + 1..].iter().find(|(_, o)| l.min.uses_var(o.var) || l.extent.uses_var(o.var))
            {
                return Err(ScheduleError::DependentExtent {
                    loop_var: Self::var_name(&g, l.var),
                    depends_on: Self::var_name(&g, o.var),
                });
            }
        }
        let mut body = nest[nest.len() - 1].1.body.clone();
        let mut spans = HashMap::new();
        for (p, _) in &nest {
            if let Some(s) = tree::get(&g.body, p) {
                spans.insert(p.len(), s.span);
            }
        }
        for (k, (_, l)) in given.iter().enumerate().rev() {
            let mut s = for_stmt(l.var, l.min.clone(), l.extent.clone(), l.kind, body, l.attrs.clone());
            s.span = spans.get(&nest[k].0.len()).copied().unwrap_or(s.span);
            body = vec![s];
        }
        let new = body.pop().ok_or_else(|| stale(order[0].0, "loop"))?;
        *tree::get_mut(&mut g.body, &nest[0].0).ok_or_else(|| stale(order[0].0, "loop"))? = new;
        self.commit(P, g)?;
        self.record(Step::Reorder { loops: order.to_vec() }, vec![]);
        Ok(())
    }

    /// Binds a serial loop to a GPU thread index. The tag must not be bound by a loop
    /// around or inside it, and its iterations must be proven independent (see
    /// [`Schedule::parallel`]).
    pub fn bind(&mut self, lp: LoopRv, tag: ThreadTag) -> Result<()> {
        self.set_kind(lp, ForKind::Thread(tag), Step::Bind { r#loop: lp, tag })
    }

    /// Marks a serial loop parallel. Its iterations must be proven independent: it drives no
    /// reduction iterator of a block, and every store or `atomic_add` under it writes a
    /// buffer allocated inside it, or lies in a block that the loop drives through a spatial
    /// iterator (the first block under the loop on the way; its kinds and its bindings'
    /// injectivity are verified), or is an `atomic_add` to a buffer nothing else under the
    /// loop reads or stores. A buffer written under the loop and touched by more than one
    /// block must be indexed so that the indices show the iteration (`C[i * n + k]`).
    pub fn parallel(&mut self, lp: LoopRv) -> Result<()> {
        self.set_kind(lp, ForKind::Parallel, Step::Parallel { r#loop: lp })
    }

    /// Marks a serial loop vectorized. It must contain no loop, and its iterations must be
    /// proven independent (see [`Schedule::parallel`]).
    pub fn vectorize(&mut self, lp: LoopRv) -> Result<()> {
        self.set_kind(lp, ForKind::Vectorized, Step::Vectorize { r#loop: lp })
    }

    /// Marks a serial loop to be unrolled.
    pub fn unroll(&mut self, lp: LoopRv) -> Result<()> {
        self.set_kind(lp, ForKind::Unrolled, Step::Unroll { r#loop: lp })
    }

    /// Sets the kind of a serial loop after the checks of the primitive `step` records.
    fn set_kind(&mut self, lp: LoopRv, kind: ForKind, step: Step) -> Result<()> {
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
        // A body that writes only through `atomic_add` (and into buffers it allocates) may
        // drive reduce iterators: its additions commute.
        if kind != ForKind::Unrolled && !(kind != ForKind::Vectorized && only_atomic_writes(&g, &l.body)) {
            let action = match kind {
                ForKind::Parallel => "parallelized",
                ForKind::Vectorized => "vectorized",
                _ => "bound",
            };
            let mut found = None;
            walk_stmts(&l.body, &mut |s| {
                if let StmtKind::Block(b) = &s.kind {
                    for it in &b.iters {
                        if found.is_none() && it.kind == IterKind::Reduce && it.binding.uses_var(l.var) {
                            found = Some((b.name.clone(), Self::var_name(&g, it.var)));
                        }
                    }
                }
            });
            if let Some((block, iter)) = found {
                return Err(ScheduleError::ReductionLoop { loop_var: name, block, iter, action });
            }
            check_independent(&g, l, action)?;
        }
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
