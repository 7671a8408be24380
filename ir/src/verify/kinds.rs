//! Iterator kinds are checked against the body, not trusted.
//!
//! A sparse iteration's spatial iterators name the points it writes: every store of its
//! `init` and body (to a buffer that outlives it) must depend on each spatial iterator
//! through its indices, else the store reduces over that iterator and the declared kind
//! lies. The `init` runs once per spatial point, so it may not depend on a reduction
//! iterator at all.

use super::{Verifier, VerifyErrorKind as K};
use crate::expr::Expr;
use crate::func::{walk_stmts, BufferId, SpIter, Stmt, StmtKind, VarId};
use crate::types::IterKind;
use std::collections::HashMap;

/// Which iterators of one sparse iteration an expression depends on, as a bit set.
type Deps = u128;

/// Dependences of the variables bound by `let`s met so far, on the sp_iter's iterators.
struct Tracker<'a> {
    /// Bit of each iterator variable.
    bit: HashMap<VarId, Deps>,
    /// Dependences of `let`-bound variables.
    lets: HashMap<VarId, Deps>,
    /// Buffers allocated inside the sparse iteration (scratch, not outputs).
    local: &'a [BufferId],
}

impl Tracker<'_> {
    fn deps(&self, e: &Expr) -> Deps {
        let mut d = 0;
        e.walk(&mut |x| {
            if let Expr::Var(v) = x {
                d |= self.bit.get(v).or_else(|| self.lets.get(v)).copied().unwrap_or(0);
            }
        });
        d
    }

    fn indices(&self, idx: &[Expr]) -> Deps {
        idx.iter().fold(0, |d, e| d | self.deps(e))
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
        let Some(kinds) = it.iter_kinds() else { return };
        if kinds.len() != it.vars.len() || it.vars.len() > Deps::BITS as usize {
            return; // reported elsewhere, or too wide to check
        }
        let spatial: Deps =
            kinds.iter().enumerate().filter(|(_, k)| **k == IterKind::Spatial).fold(0, |d, (k, _)| d | 1 << k);
        let mut local = Vec::new();
        for list in it.init.iter().chain(std::iter::once(&it.body)) {
            walk_stmts(list, &mut |s| {
                if let StmtKind::Alloc(b) = s.kind {
                    local.push(b);
                }
            });
        }
        let bit = it.vars.iter().enumerate().map(|(k, &v)| (v, 1 << k)).collect();
        let mut t = Tracker { bit, lets: HashMap::new(), local: &local };

        if let Some(init) = &it.init {
            let mut reads = 0;
            let mut stmts = Vec::new();
            collect(init, &mut stmts);
            for s in &stmts {
                // A store indexed by a reduction iterator is reported as such elsewhere.
                let d = match &s.kind {
                    StmtKind::Store { value, .. } => t.deps(value),
                    _ => stmt_deps(&mut t, s),
                } & !spatial;
                if d != 0 && reads == 0 {
                    self.span = s.span;
                    let var = self.var_name(it.vars[d.trailing_zeros() as usize]);
                    self.err(K::InitReadsReduction { sp_iter: it.name.clone(), var });
                }
                reads |= d;
            }
        }
        let mut misses = Vec::new();
        let mut stmts = Vec::new();
        for list in it.init.iter().chain(std::iter::once(&it.body)) {
            collect(list, &mut stmts);
        }
        for (k, s) in stmts.iter().enumerate() {
            stmt_deps(&mut t, s);
            let (buffer, idx) = match &s.kind {
                StmtKind::Store { buffer, indices, .. } => (*buffer, indices.as_slice()),
                StmtKind::Evaluate(Expr::AtomicAdd(buffer, indices, _)) => (*buffer, indices.as_slice()),
                _ => continue,
            };
            if t.local.contains(&buffer) {
                continue;
            }
            let written = t.indices(idx);
            let missing = spatial & !written;
            // A store indexed by a reduction iterator is reported as such elsewhere.
            if missing != 0 && written & !spatial == 0 {
                misses.push(Miss { stmt: k, buffer, missing });
            }
        }
        // A mislabelled iterator is reported as such, not as a dependence.
        if spatial != 0 && misses.is_empty() {
            let vars: Vec<VarId> = it.vars.iter().enumerate().filter(|(k, _)| spatial >> k & 1 == 1).map(|(_, v)| *v).collect();
            self.check_independent(it, &vars, &stmts, &local);
        }
        let mut reported: Deps = 0;
        for m in misses {
            if m.missing & !reported == 0 {
                continue; // one error per iterator
            }
            reported |= m.missing;
            self.span = stmts[m.stmt].span;
            let k = m.missing.trailing_zeros() as usize;
            let mut fixed: Vec<char> = it.kinds.chars().collect();
            for (j, c) in fixed.iter_mut().enumerate() {
                if m.missing >> j & 1 == 1 {
                    *c = 'R';
                }
            }
            self.err(K::SpatialNotWritten {
                sp_iter: it.name.clone(),
                var: self.var_name(it.vars[k]),
                buffer: self.buffer_name(m.buffer),
                kinds: fixed.into_iter().collect(),
            });
        }
    }
}

impl<'f> Verifier<'f> {
    /// Spatial points must be independent: a buffer the iteration writes is read only where
    /// a store writes it with every spatial iterator pinning the same dimension (`D[i, j]`
    /// read and `D[i, j2]` written are both row `i`'s), never at another point's element.
    fn check_independent(&mut self, it: &'f SpIter, spatial: &[VarId], stmts: &[&'f Stmt], local: &[BufferId]) {
        let pinned = |r: &[Expr], w: &[Expr]| {
            spatial.iter().all(|s| r.iter().zip(w).any(|(a, b)| *a == Expr::Var(*s) && *b == Expr::Var(*s)))
        };
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
                        if bad.is_none() && written.peek().is_some() && !written.any(|(_, w)| *w == idx.as_slice() || pinned(idx, w)) {
                            bad = Some((*b, idx.clone()));
                        }
                    }
                });
            }
            if let Some((b, idx)) = bad {
                let idx = idx.as_slice();
                self.span = s.span;
                let show = |idx: &[Expr]| idx.iter().map(|e| crate::text::print_expr(self.f, e)).collect::<Vec<_>>().join(", ");
                let written = writes.iter().find(|(w, _)| *w == b).map(|(_, w)| show(w)).unwrap_or_default();
                self.err(K::DependentPoints {
                    sp_iter: it.name.clone(),
                    buffer: self.buffer_name(b),
                    read: show(idx),
                    written,
                });
                return;
            }
        }
    }
}

/// Every statement of `list`, recursively, parents first.
fn collect<'s>(list: &'s [Stmt], out: &mut Vec<&'s Stmt>) {
    for s in list {
        out.push(s);
        for child in s.kind.child_lists() {
            collect(child, out);
        }
    }
}

/// Records what a `let` binds and returns the iterators the statement's own expressions
/// (not its children's) depend on.
fn stmt_deps(t: &mut Tracker, s: &Stmt) -> Deps {
    match &s.kind {
        StmtKind::Let { var, value } => {
            let d = t.deps(value);
            t.lets.insert(*var, d);
            d
        }
        StmtKind::Store { indices, value, .. } => t.indices(indices) | t.deps(value),
        StmtKind::Evaluate(e) => t.deps(e),
        StmtKind::If { cond, .. } | StmtKind::While { cond, .. } => t.deps(cond),
        StmtKind::For(l) => t.deps(&l.min) | t.deps(&l.extent),
        StmtKind::SpIter(_) | StmtKind::Block(_) | StmtKind::Alloc(_) => 0,
    }
}
