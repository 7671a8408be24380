//! Iterator kinds are checked against the body, not trusted.
//!
//! The spatial iterators of a sparse iteration (Stage I) or a block (Stage II/III) name the
//! points it writes: every store of its `init` and body (to a buffer that outlives it) must
//! depend on each spatial iterator through its indices, else the store reduces over that
//! iterator and the declared kind lies. The `init` runs once per spatial point, so it may not
//! depend on a reduction iterator at all. Points are independent: a buffer written is read
//! only at the point's own element. A block's spatial bindings must also be one-to-one in the
//! loops that drive it (see [`crate::injective`]), so that no two iterations share a point.

use super::{Verifier, VerifyErrorKind as K};
use crate::expr::Expr;
use crate::func::{walk_stmts, AxisId, Block, BufferId, Func, SpIter, SpIterAxis, Stmt, StmtKind, VarId};
use crate::injective::{self, Role};
use crate::types::IterKind;
use std::collections::HashMap;

/// Which iterators of one sparse iteration or block an expression depends on, as a bit set.
type Deps = u128;

/// A construct whose iterators name points: what the kind rules need of it.
pub(super) struct Points<'f> {
    /// A sparse iteration (errors name its kind string) or a block.
    sp_iter: Option<&'f SpIter>,
    /// Its name.
    name: &'f str,
    /// Iterator variables, in order.
    vars: Vec<VarId>,
    /// Their kinds.
    kinds: Vec<IterKind>,
    /// The init, if any.
    init: Option<&'f [Stmt]>,
    /// The body.
    body: &'f [Stmt],
    /// Buffers allocated inside some of the loops that drive an iterator: per buffer, each
    /// such iterator's bit with the loops of its binding inside the allocation. A store to
    /// the buffer indexed by each of those loop variables (a whole index each) is private to
    /// every value of the iterator (registers of one lane over a serial loop).
    private: HashMap<BufferId, Vec<(Deps, Vec<VarId>)>>,
    /// Sparse iterations: the coordinate range of each iterator (its axis's length), for
    /// proving that a store's indices determine the spatial iterators. Empty for blocks,
    /// whose bindings are checked instead.
    spans: Vec<Option<Expr>>,
    /// Sparse iterations: the axis of each iterator where its rows may store a coordinate
    /// twice by design (a `sparse_fixed` axis below a parent: ELL rows are padded).
    repeating: Vec<Option<AxisId>>,
}

impl<'f> Points<'f> {
    /// The iterators to whose every value a store to `buffer` at `idx` is private.
    fn private_bits(&self, buffer: BufferId, idx: &[Expr]) -> Deps {
        let Some(entries) = self.private.get(&buffer) else { return 0 };
        entries
            .iter()
            .filter(|(_, inside)| inside.iter().all(|v| idx.iter().any(|e| *e == Expr::Var(*v))))
            .fold(0, |d, (bit, _)| d | bit)
    }

    fn of_sp_iter(it: &'f SpIter, f: &Func) -> Option<Self> {
        // The axis each iterator walks, in order.
        let axes: Vec<AxisId> = it
            .axes
            .iter()
            .flat_map(SpIterAxis::axes)
            .collect();
        let spans = axes.iter().map(|a| f.axes.try_get(*a).map(|x| x.length.clone())).collect();
        let padded = |a: &AxisId| f.axes.try_get(*a).is_some_and(|x| x.kind == crate::types::AxisKind::SparseFixed && x.parent.is_some());
        let repeating = axes.iter().map(|a| padded(a).then_some(*a)).collect();
        Some(Points {
            spans,
            repeating,
            sp_iter: Some(it),
            name: &it.name,
            vars: it.vars.clone(),
            kinds: it.iter_kinds()?,
            init: it.init.as_deref(),
            body: &it.body,
            private: HashMap::new(),
        })
    }

    /// The statement lists: init first, then the body.
    fn lists(&self) -> impl Iterator<Item = &'f [Stmt]> {
        self.init.into_iter().chain(std::iter::once(self.body))
    }
}

/// Dependences of the variables bound by `let`s and nested blocks met so far, on the
/// construct's iterators.
struct Tracker<'a> {
    /// Bit of each iterator variable.
    bit: HashMap<VarId, Deps>,
    /// Dependences of `let`-bound variables and nested block iterators.
    lets: HashMap<VarId, Deps>,
    /// Buffers allocated inside the construct (scratch, not outputs).
    local: &'a [BufferId],
    /// Dependences of what was stored so far to each scratch buffer (a `let` the checks
    /// pass turned into a one-element local carries its value's dependences).
    scratch: HashMap<BufferId, Deps>,
    /// The value of each `let` met so far.
    defs: HashMap<VarId, Expr>,
}

impl Tracker<'_> {
    fn deps(&self, e: &Expr) -> Deps {
        let mut d = 0;
        e.walk(&mut |x| match x {
            Expr::Var(v) => d |= self.bit.get(v).or_else(|| self.lets.get(v)).copied().unwrap_or(0),
            Expr::Load(b, _) => d |= self.scratch.get(b).copied().unwrap_or(0),
            _ => {}
        });
        d
    }

    fn indices(&self, idx: &[Expr]) -> Deps {
        idx.iter().fold(0, |d, e| d | self.deps(e))
    }

    /// `e` with the `let`s met so far replaced by their values (each defined before use, so
    /// as many rounds as there are `let`s reach a fixed point).
    fn expand(&self, e: &Expr) -> Expr {
        let mut e = e.clone();
        for _ in 0..=self.defs.len() {
            let mut uses = false;
            e.walk(&mut |x| uses |= matches!(x, Expr::Var(v) if self.defs.contains_key(v)));
            if !uses {
                break;
            }
            e = e.substitute(&self.defs);
        }
        e
    }
}

/// A store that does not depend on every spatial iterator: the buffer and the missing bits.
struct Miss {
    stmt: usize,
    buffer: BufferId,
    missing: Deps,
}

impl<'f> Verifier<'f> {
    /// Checks the declared kinds of `it` against what its init and body write.
    pub(super) fn check_kinds(&mut self, it: &'f SpIter) {
        if let Some(p) = Points::of_sp_iter(it, self.f) {
            self.check_points(&p);
        }
    }

    /// Checks the declared kinds of block `b` against what its init and body write, and
    /// that its spatial bindings are one-to-one in the loops that drive it: `role` makes the
    /// loops between it and the enclosing block free, with their extents as spans.
    pub(super) fn check_block_kinds(
        &mut self,
        b: &'f Block,
        role: &dyn Fn(VarId) -> Role,
        loop_allocs: &[(BufferId, Vec<VarId>)],
    ) {
        // A store to a buffer allocated inside loops that a spatial iterator's binding reads
        // is private to each of its values when every other loop of the binding (inside the
        // allocation) indexes the store directly: it need not depend on that iterator.
        let private = loop_allocs
            .iter()
            .map(|(buf, loops)| {
                let entries = b.iters.iter().enumerate().filter_map(|(k, it)| {
                    let mut any = false;
                    let mut inside: Vec<VarId> = Vec::new();
                    it.binding.walk(&mut |x| {
                        if let Expr::Var(v) = x {
                            if matches!(role(*v), Role::Free(_)) {
                                any = true;
                                if !loops.contains(v) && !inside.contains(v) {
                                    inside.push(*v);
                                }
                            }
                        }
                    });
                    any.then_some((1 << k, inside))
                });
                (*buf, entries.collect())
            })
            .collect();
        let p = Points {
            sp_iter: None,
            name: &b.name,
            vars: b.iters.iter().map(|it| it.var).collect(),
            kinds: b.iters.iter().map(|it| it.kind).collect(),
            init: b.init.as_deref(),
            body: &b.body,
            private,
            spans: Vec::new(),
            repeating: Vec::new(),
        };
        self.check_points(&p);
        // A loop that drives spatial iterators must be determined by the spatial bindings;
        // one that also drives a reduce iterator (a fused spatial and reduction loop) may
        // instead be determined by all the bindings together.
        let spatial: Vec<_> = b.iters.iter().filter(|it| it.kind == IterKind::Spatial).collect();
        let bindings: Vec<&Expr> = spatial.iter().map(|it| &it.binding).collect();
        let all: Vec<&Expr> = b.iters.iter().map(|it| &it.binding).collect();
        let reduces = |v: VarId| b.iters.iter().any(|it| it.kind == IterKind::Reduce && it.binding.uses_var(v));
        let bad = match (injective::determined(&bindings, role), injective::determined(&all, role)) {
            (Err(k), _) => Some(k),
            (Ok(known), all_known) => spatial.iter().position(|it| {
                let mut missing = false;
                it.binding.walk(&mut |x| {
                    if let Expr::Var(v) = x {
                        let ok = match role(*v) {
                            Role::Free(_) => {
                                known.contains(v) || reduces(*v) && all_known.as_ref().is_ok_and(|k| k.contains(v))
                            }
                            _ => true,
                        };
                        missing |= !ok;
                    }
                });
                missing
            }),
        };
        if let Some(k) = bad {
            self.err(K::BlockBindingNotInjective {
                block: b.name.clone(),
                var: self.var_name(spatial[k].var),
                binding: crate::text::print_expr(self.f, &spatial[k].binding),
            });
        }
    }

    /// The kind rules shared by sparse iterations and blocks.
    fn check_points(&mut self, it: &Points<'f>) {
        let kinds = &it.kinds;
        if kinds.len() != it.vars.len() || it.vars.len() > Deps::BITS as usize {
            return; // reported elsewhere, or too wide to check
        }
        let spatial: Deps =
            kinds.iter().enumerate().filter(|(_, k)| **k == IterKind::Spatial).fold(0, |d, (k, _)| d | 1 << k);
        let mut local: Vec<BufferId> = super::fault_record(self.f).into_iter().collect();
        for list in it.lists() {
            walk_stmts(list, &mut |s| {
                if let StmtKind::Alloc(b) = s.kind {
                    local.push(b);
                }
            });
        }
        let bit = it.vars.iter().enumerate().map(|(k, &v)| (v, 1 << k)).collect();
        let mut t = Tracker { bit, lets: HashMap::new(), local: &local, scratch: HashMap::new(), defs: HashMap::new() };

        if let Some(init) = it.init {
            let mut reads = 0;
            let mut stmts = Vec::new();
            collect(init, &mut stmts);
            for entry in &stmts {
                let s = entry.0;
                // A store indexed by a reduction iterator is reported as such elsewhere.
                let d = match &s.kind {
                    StmtKind::Store { value, .. } => t.deps(value),
                    _ => stmt_deps(&mut t, entry),
                } & !spatial;
                if d != 0 && reads == 0 {
                    self.span = s.span;
                    let var = self.var_name(it.vars[d.trailing_zeros() as usize]);
                    self.err(match it.sp_iter {
                        Some(_) => K::InitReadsReduction { sp_iter: it.name.to_string(), var },
                        None => K::BlockInitReadsReduce { block: it.name.to_string(), var },
                    });
                }
                reads |= d;
            }
        }
        let mut misses = Vec::new();
        let mut stmts = Vec::new();
        for list in it.lists() {
            collect(list, &mut stmts);
        }
        let inner = inner_vars(it);
        let mut shared: Option<(usize, BufferId, VarId)> = None;
        for (k, entry) in stmts.iter().enumerate() {
            stmt_deps(&mut t, entry);
            let s = entry.0;
            let (buffer, idx) = match &s.kind {
                StmtKind::Store { buffer, indices, .. } => (*buffer, indices.as_slice()),
                StmtKind::Evaluate(Expr::AtomicAdd(buffer, indices, _)) => (*buffer, indices.as_slice()),
                _ => continue,
            };
            if t.local.contains(&buffer) {
                continue;
            }
            if let Some((var, axis)) = repeated_coordinate(it, self.f, buffer, idx, spatial) {
                self.span = s.span;
                let at = idx.iter().map(|e| crate::text::print_expr(self.f, e)).collect::<Vec<_>>().join(", ");
                self.err(K::SpatialOverRepeatedCoordinates {
                    sp_iter: it.name.to_string(),
                    var: self.var_name(var),
                    axis: self.f.axes.try_get(axis).map_or_else(String::new, |a| a.name.clone()),
                    buffer: self.buffer_name(buffer),
                    at,
                });
                return;
            }
            let written = t.indices(idx) | it.private_bits(buffer, idx);
            let missing = spatial & !written;
            // A store indexed by a reduction iterator is reported as such elsewhere.
            if missing != 0 && written & !spatial == 0 {
                misses.push(Miss { stmt: k, buffer, missing });
            } else if missing == 0 && !it.spans.is_empty() && shared.is_none() && !direct_reduce(it, idx, spatial) {
                shared = undetermined(it, &t, &inner, idx, spatial).map(|v| (k, buffer, v));
            }
        }
        // A mislabelled iterator is reported as such, not as a shared point or a dependence.
        if let (Some((k, buffer, var)), true) = (shared, misses.is_empty()) {
            self.span = stmts[k].0.span;
            let (StmtKind::Store { indices, .. } | StmtKind::Evaluate(Expr::AtomicAdd(_, indices, _))) = &stmts[k].0.kind
            else {
                return;
            };
            let at = indices.iter().map(|e| crate::text::print_expr(self.f, e)).collect::<Vec<_>>().join(", ");
            self.err(K::SpatialPointsShared {
                sp_iter: it.name.to_string(),
                var: self.var_name(var),
                buffer: self.buffer_name(buffer),
                at,
            });
            return;
        }
        if spatial != 0 && misses.is_empty() {
            let vars: Vec<VarId> =
                it.vars.iter().enumerate().filter(|(k, _)| spatial >> k & 1 == 1).map(|(_, v)| *v).collect();
            let plain: Vec<&Stmt> = stmts.iter().map(|e| e.0).collect();
            self.check_independent(it, &vars, &plain, &local, &|v| inner.contains(&v));
        }
        let mut reported: Deps = 0;
        for m in misses {
            if m.missing & !reported == 0 {
                continue; // one error per iterator
            }
            reported |= m.missing;
            self.span = stmts[m.stmt].0.span;
            let k = m.missing.trailing_zeros() as usize;
            let (var, buffer) = (self.var_name(it.vars[k]), self.buffer_name(m.buffer));
            self.err(match it.sp_iter {
                Some(sp) => {
                    let mut fixed: Vec<char> = sp.kinds.chars().collect();
                    for (j, c) in fixed.iter_mut().enumerate() {
                        if m.missing >> j & 1 == 1 {
                            *c = 'R';
                        }
                    }
                    K::SpatialNotWritten {
                        sp_iter: it.name.to_string(),
                        var,
                        buffer,
                        kinds: fixed.into_iter().collect(),
                    }
                }
                None => K::BlockSpatialNotWritten { block: it.name.to_string(), var, buffer },
            });
        }
    }
}

/// Whether read indices `r` and written indices `w` lie in the same element or row of every
/// spatial iterator: each pins one dimension in both, or the two are one expression up to
/// the variables bound inside (`renamable`), or, flat (Stage III), both are `p * len + c`
/// with `c` a coordinate below `len` and the rows `p` pinned so (`D[vi * n + J0_indices[..]]`
/// and `D[vi * n + J1_indices[..]]`: row `vi` of a dense `[m, n]`, whatever the columns).
fn pinned_rows(
    f: &Func,
    lets: &HashMap<VarId, &Expr>,
    spatial: &[VarId],
    r: &[Expr],
    w: &[Expr],
    renamable: &dyn Fn(VarId, VarId) -> bool,
) -> bool {
    if spatial.iter().all(|s| r.iter().zip(w).any(|(a, b)| *a == Expr::Var(*s) && *b == Expr::Var(*s)))
        || injective::alike(r, w, renamable)
    {
        return true;
    }
    match (r, w) {
        ([x], [y]) => match (row_and_coordinate(f, lets, x), row_and_coordinate(f, lets, y)) {
            (Some((p, len)), Some((q, len2))) if len == len2 => {
                pinned_rows(f, lets, spatial, std::slice::from_ref(p), std::slice::from_ref(q), renamable)
            }
            _ => false,
        },
        _ => false,
    }
}

/// `e` as `p * len + c` where `c` lies in `0..len`: an element of the `indices` of an axis of
/// length `len` (which `args::check_structure` keeps there), a clamp `max(min(x, len - 1), 0)`
/// (a co-iteration's coordinate), or a `let` of one: `(p, len)`.
fn row_and_coordinate<'e>(f: &Func, lets: &HashMap<VarId, &Expr>, e: &'e Expr) -> Option<(&'e Expr, &'e Expr)> {
    use crate::expr::BinOp;
    let Expr::Binary(BinOp::Add, a, b) = e else { return None };
    fn coordinate(f: &Func, lets: &HashMap<VarId, &Expr>, c: &Expr, len: &Expr, depth: usize) -> bool {
        match c {
            Expr::Load(buf, _) => f.buffers.try_get(*buf).is_some_and(|x| match x.storage {
                crate::func::Storage::Param(p) => f.axes.iter().any(|(_, ax)| ax.indices == Some(p) && ax.length == *len),
                _ => false,
            }),
            Expr::Binary(BinOp::Max, m, zero) if zero.literal_value() == Some(0) => match &**m {
                Expr::Binary(BinOp::Min, _, last) => match &**last {
                    Expr::Binary(BinOp::Sub, l, one) => one.literal_value() == Some(1) && **l == *len,
                    _ => false,
                },
                _ => false,
            },
            Expr::Var(v) if depth < 8 => lets.get(v).is_some_and(|x| coordinate(f, lets, x, len, depth + 1)),
            _ => false,
        }
    }
    for (row, c) in [(a, b), (b, a)] {
        if let Expr::Binary(BinOp::Mul, p, len) = &**row {
            if coordinate(f, lets, c, len, 0) {
                return Some((p, len));
            }
        }
    }
    None
}

impl<'f> Verifier<'f> {
    /// Spatial points must be independent: a buffer the iteration writes is read only where
    /// a store writes it with every spatial iterator pinning the same dimension (`D[i, j]`
    /// read and `D[i, j2]` written are both row `i`'s), or where read and write are one
    /// expression of the point up to the variables bound inside (`C[vi * n + k]` and
    /// `C[vi * n + k2]`: the storage rule makes flat offsets one-to-one in the coordinates),
    /// never at another point's element.
    fn check_independent(
        &mut self,
        it: &Points<'f>,
        spatial: &[VarId],
        stmts: &[&'f Stmt],
        local: &[BufferId],
        inner: &dyn Fn(VarId) -> bool,
    ) {
        let f = self.f;
        let lets: HashMap<VarId, &Expr> = stmts
            .iter()
            .filter_map(|s| match &s.kind {
                StmtKind::Let { var, value } => Some((*var, value)),
                _ => None,
            })
            .collect();
        let pinned = |r: &[Expr], w: &[Expr]| pinned_rows(f, &lets, spatial, r, w, &|x, y| inner(x) && inner(y));
        let mut writes: Vec<(BufferId, &'f [Expr])> = Vec::new();
        for s in stmts {
            match &s.kind {
                StmtKind::Store { buffer, indices, .. } if !local.contains(buffer) => writes.push((*buffer, indices)),
                StmtKind::Evaluate(Expr::AtomicAdd(buffer, indices, _)) if !local.contains(buffer) => {
                    writes.push((*buffer, indices))
                }
                _ => {}
            }
        }
        for s in stmts {
            let mut bad: Option<(BufferId, Vec<Expr>)> = None;
            for e in s.kind.exprs() {
                e.walk(&mut |x| {
                    if let Expr::Load(b, idx) = x {
                        let mut written = writes.iter().filter(|(w, _)| w == b).peekable();
                        if bad.is_none()
                            && written.peek().is_some()
                            && !written.any(|(_, w)| *w == idx.as_slice() || pinned(idx, w))
                        {
                            bad = Some((*b, idx.clone()));
                        }
                    }
                });
            }
            if let Some((b, idx)) = bad {
                let idx = idx.as_slice();
                self.span = s.span;
                let show = |idx: &[Expr]| {
                    idx.iter().map(|e| crate::text::print_expr(self.f, e)).collect::<Vec<_>>().join(", ")
                };
                let written = writes.iter().find(|(w, _)| *w == b).map(|(_, w)| show(w)).unwrap_or_default();
                let (name, buffer, read) = (it.name.to_string(), self.buffer_name(b), show(idx));
                self.err(match it.sp_iter {
                    Some(_) => K::DependentPoints { sp_iter: name, buffer, read, written },
                    None => K::BlockDependentPoints { block: name, buffer, read, written },
                });
                return;
            }
        }
    }
}

/// Every statement of `list`, recursively, parents first.
fn collect<'s>(list: &'s [Stmt], out: &mut Vec<(&'s Stmt, Vec<&'s Expr>)>) {
    collect_under(list, &mut Vec::new(), out);
}

/// [`collect`], each statement with the conditions of the `if`s and `while`s around it.
fn collect_under<'s>(list: &'s [Stmt], conds: &mut Vec<&'s Expr>, out: &mut Vec<(&'s Stmt, Vec<&'s Expr>)>) {
    for s in list {
        out.push((s, conds.clone()));
        let cond = match &s.kind {
            StmtKind::If { cond, .. } | StmtKind::While { cond, .. } => Some(cond),
            _ => None,
        };
        conds.extend(cond);
        for child in s.kind.child_lists() {
            collect_under(child, conds, out);
        }
        if cond.is_some() {
            conds.pop();
        }
    }
}

/// A spatial iterator of a sparse iteration whose values the store indices `idx` are not
/// proven to tell apart (`B[i // 2]`, `B[perm[i]]`): two of its points may write one
/// element, whatever the reduction iterators are. `let`s are looked through.
fn undetermined(it: &Points<'_>, t: &Tracker, inner: &[VarId], idx: &[Expr], spatial: Deps) -> Option<VarId> {
    let role = |v: VarId| match it.vars.iter().position(|&x| x == v) {
        Some(k) if spatial >> k & 1 == 1 => Role::Free(it.spans.get(k).cloned().flatten()),
        Some(_) => Role::Varying,
        None if inner.contains(&v) && t.lets.get(&v).is_none_or(|d| *d != 0) => Role::Unknown,
        None => Role::Fixed,
    };
    let idx: Vec<Expr> = idx.iter().map(|e| t.expand(e)).collect();
    let known = injective::determined_by_indices(&idx, &role);
    it.vars.iter().enumerate().find(|(k, v)| spatial >> k & 1 == 1 && !known.contains(v)).map(|(_, v)| *v)
}

/// A spatial iterator over an axis whose rows may repeat a coordinate that indexes the store
/// of `buffer` at `idx` other than as the position of its own axis (a whole index at a
/// dimension over that axis): two of its positions may then write one element.
fn repeated_coordinate(it: &Points<'_>, f: &Func, buffer: BufferId, idx: &[Expr], spatial: Deps) -> Option<(VarId, AxisId)> {
    let axes = f.buffers.try_get(buffer).map(|b| b.axes().to_vec()).unwrap_or_default();
    for (k, (&v, a)) in it.vars.iter().zip(&it.repeating).enumerate() {
        let Some(a) = *a else { continue };
        if spatial >> k & 1 == 0 {
            continue;
        }
        let other = idx.iter().enumerate().any(|(d, e)| !(*e == Expr::Var(v) && axes.get(d) == Some(&a)) && e.uses_var(v));
        if other {
            return Some((v, a));
        }
    }
    None
}

/// Whether a reduction iterator indexes a store directly (not through a lookup): reported
/// as such elsewhere.
fn direct_reduce(it: &Points<'_>, idx: &[Expr], spatial: Deps) -> bool {
    fn walk(e: &Expr, f: &mut dyn FnMut(VarId)) {
        match e {
            Expr::Var(v) => f(*v),
            Expr::Load(..) | Expr::AtomicAdd(..) => {}
            _ => e.children().into_iter().for_each(|c| walk(c, f)),
        }
    }
    let mut found = false;
    for e in idx {
        walk(e, &mut |v| found |= it.vars.iter().position(|x| *x == v).is_some_and(|k| spatial >> k & 1 == 0));
    }
    found
}

/// Records what a `let` or nested block binds and returns the iterators the statement's own expressions
/// (not its children's) depend on.
fn stmt_deps(t: &mut Tracker, (s, conds): &(&Stmt, Vec<&Expr>)) -> Deps {
    match &s.kind {
        StmtKind::Let { var, value } => {
            let d = t.deps(value);
            t.lets.insert(*var, d);
            t.defs.insert(*var, value.clone());
            d
        }
        StmtKind::Store { buffer, indices, value } => {
            let d = t.indices(indices) | t.deps(value);
            if t.local.contains(buffer) {
                // What a scratch element holds also depends on whether it was stored (a
                // search's bound moves where a probe is below the coordinate sought).
                let control = conds.iter().fold(0, |c, e| c | t.deps(e));
                *t.scratch.entry(*buffer).or_insert(0) |= d | control;
            }
            d
        }
        StmtKind::Evaluate(e) => t.deps(e),
        StmtKind::If { cond, .. } | StmtKind::While { cond, .. } => t.deps(cond),
        StmtKind::For(l) => t.deps(&l.min) | t.deps(&l.extent),
        StmtKind::Block(b) => {
            // A nested block's iterators depend on what their bindings depend on.
            for it in &b.iters {
                let d = t.deps(&it.binding);
                t.lets.insert(it.var, d);
            }
            0
        }
        StmtKind::SpIter(_) | StmtKind::Alloc(_) => 0,
    }
}

/// The variables bound inside a construct (loops, lets, nested iterators), which a read
/// and a write of the point's own element may use differently.
fn inner_vars(it: &Points<'_>) -> Vec<VarId> {
    let mut inner = Vec::new();
    for list in it.lists() {
        walk_stmts(list, &mut |s| match &s.kind {
            StmtKind::For(l) => inner.push(l.var),
            StmtKind::Block(b) => inner.extend(b.iters.iter().map(|bi| bi.var)),
            StmtKind::Let { var, .. } => inner.push(*var),
            StmtKind::SpIter(n) => inner.extend(n.vars.iter().copied()),
            _ => {}
        });
    }
    inner
}
