//! The body of `compute_at` and `reverse_compute_at` (Stage II/III): moves a block's loop
//! nest under a loop of a sibling nest, merging the loops that match.
//!
//! Supported case: the moved block sits alone in a loop nest below the statement list that
//! also holds the target loop's nest, perfect down to the loops to merge (a guard may follow
//! them); its outer loops have the same bounds
//! (syntactically, after simplification) as the loops from that list down to the target
//! loop. Those loops are merged and the rest of the moved nest goes first (`compute_at`) or
//! last (`reverse_compute_at`) in the target loop's body.
//!
//! Legality: statements between the two nests must not share a buffer with the moved nest
//! where either side writes, and every access to a buffer shared by the two nests (one side
//! writing) must be indexed, in some dimension, by exactly each merged loop variable (block
//! iterators are read through their bindings), or else every pair of such accesses across the
//! two nests must be one expression (up to renaming inner loops of equal extent) that
//! determines the merged variables (`injective::same_point`: mixed-radix `(k_0 * 4 + k_1) *
//! 32 + k_2`). Then two accesses to the same element only happen in the same iteration of the
//! merged loops, where the old order is kept. Other forms are refused.

use crate::error::ScheduleError;
use crate::reduction::{list_at, list_mut};
use crate::schedule::{stale, BlockRv, LoopRv, Schedule};
use crate::primitives::Step;
use crate::tree;
use sparsec_ir::expr::Expr;
use sparsec_ir::func::{walk_stmts, BufferId, Func, Stmt, StmtKind, Storage, VarId};
use sparsec_ir::injective::{self, Role};
use sparsec_passes::simplify::simplify_expr;
use std::collections::HashMap;

type Result<T> = std::result::Result<T, ScheduleError>;

/// One buffer access: buffer, indices (block iterators replaced by their bindings), write.
struct Access {
    buffer: BufferId,
    indices: Vec<Expr>,
    write: bool,
}

/// The accesses of `stmts`, with block iterators replaced through `map`.
fn accesses(stmts: &[Stmt], map: &HashMap<VarId, Expr>, out: &mut Vec<Access>) {
    fn loads(e: &Expr, map: &HashMap<VarId, Expr>, out: &mut Vec<Access>) {
        e.walk(&mut |x| match x {
            Expr::Load(b, idx) => out.push(Access { buffer: *b, indices: sub(idx, map), write: false }),
            Expr::AtomicAdd(b, idx, _) => {
                out.push(Access { buffer: *b, indices: sub(idx, map), write: true });
            }
            _ => {}
        });
    }
    fn sub(idx: &[Expr], map: &HashMap<VarId, Expr>) -> Vec<Expr> {
        idx.iter().map(|e| simplify_expr(sparsec_passes::simplify::substitute_simplified(e.clone(), map))).collect()
    }
    for s in stmts {
        match &s.kind {
            StmtKind::Store { buffer, indices, value } => {
                out.push(Access { buffer: *buffer, indices: sub(indices, map), write: true });
                for e in indices.iter().chain(std::iter::once(value)) {
                    loads(e, map, out);
                }
            }
            StmtKind::Block(b) => {
                let mut inner = map.clone();
                for it in &b.iters {
                    loads(&it.binding, map, out);
                    loads(&it.extent, map, out);
                    inner.insert(it.var, sparsec_passes::simplify::substitute_simplified(it.binding.clone(), map));
                }
                if let Some(init) = &b.init {
                    accesses(init, &inner, out);
                }
                accesses(&b.body, &inner, out);
            }
            other => {
                for e in other.exprs() {
                    loads(e, map, out);
                }
                for child in other.child_lists() {
                    accesses(child, map, out);
                }
            }
        }
    }
}

/// Buffers bound to the same parameter are the same storage.
fn storage_key(g: &Func, b: BufferId) -> (bool, usize) {
    match g.buffers.try_get(b).map(|x| x.storage) {
        Some(Storage::Param(p)) => (true, p),
        _ => (false, b.index()),
    }
}

/// The roles of variables in accesses of the two nests: their loops range over their
/// extents, `let` variables are unknown, everything else is fixed (bound outside both).
fn nest_roles(moved: &[Stmt], target: &Stmt) -> impl Fn(VarId) -> Role {
    let mut loops: HashMap<VarId, Expr> = HashMap::new();
    let mut lets = Vec::new();
    let mut visit = |s: &Stmt| match &s.kind {
        StmtKind::For(l) => {
            loops.insert(l.var, l.extent.clone());
        }
        StmtKind::Let { var, .. } => lets.push(*var),
        _ => {}
    };
    walk_stmts(moved, &mut visit);
    walk_stmts(std::slice::from_ref(target), &mut visit);
    move |v| match loops.get(&v) {
        Some(extent) => Role::Free(Some(extent.clone())),
        None if lets.contains(&v) => Role::Unknown,
        None => Role::Fixed,
    }
}

impl Schedule {
    /// Moves the nest of `block` under `at`, at the end of its body if `reverse` (else at the
    /// start), after the checks of the primitive `step` records.
    pub(crate) fn move_nest(&mut self, step: Step, block: BlockRv, at: LoopRv, reverse: bool) -> Result<()> {
        let p = step.name();
        self.need_loop_stage(p)?;
        let mut g = self.func.clone();
        let mp = self.block_path(&g, block.0)?;
        let (lpath, lv) = self.loop_path(&g, at.0)?;
        let bname = match tree::get(&g.body, &mp).map(|s| &s.kind) {
            Some(StmtKind::Block(b)) => b.name.clone(),
            _ => return Err(stale(block.0, "block")),
        };
        let lname = Self::var_name(&g, lv);
        let not_siblings = || ScheduleError::NotSiblingNests { primitive: p, block: bname.clone(), loop_var: lname.clone() };
        // The level where the two paths part.
        let c = mp.iter().zip(&lpath).take_while(|(x, y)| x == y).count();
        if c >= mp.len() || c >= lpath.len() || mp[c].0 != lpath[c].0 {
            return Err(not_siblings());
        }
        // The moved nest's perfect loops: each holding just the next, on the way to the block.
        let mut mloops = Vec::new();
        for k in c + 1..mp.len() {
            match tree::get(&g.body, &mp[..k]).map(|s| &s.kind) {
                Some(StmtKind::For(l)) if l.body.len() == 1 => mloops.push(l.clone()),
                _ => break,
            }
        }
        // The target chain: loops only, from the common list down to `at`.
        let mut tloops = Vec::new();
        for k in c + 1..=lpath.len() {
            match tree::get(&g.body, &lpath[..k]).map(|s| &s.kind) {
                Some(StmtKind::For(l)) => tloops.push(l.clone()),
                _ => return Err(not_siblings()),
            }
        }
        let (mi, ti) = (mp[c].1, lpath[c].1);
        if reverse != (mi > ti) {
            let expected = if reverse { "after" } else { "before" };
            return Err(ScheduleError::WrongOrder { primitive: p, block: bname, loop_var: lname, expected });
        }
        // The loops to merge must be perfect; below them the nest moves as it is (a split's guard).
        if mloops.len() < tloops.len() && mloops.len() + c + 1 < mp.len() {
            return Err(ScheduleError::NotAPerfectNest { primitive: p, block: bname });
        }
        // Merge the matching loops.
        let mut map: HashMap<VarId, Expr> = HashMap::new();
        for (k, t) in tloops.iter().enumerate() {
            let target = Self::var_name(&g, t.var);
            let Some(m) = mloops.get(k) else {
                return Err(ScheduleError::LoopMismatch {
                    primitive: p,
                    loop_var: "-".into(),
                    target,
                    reason: "the moved nest has fewer loops",
                });
            };
            let same = |a: &Expr, b: &Expr| simplify_expr(sparsec_passes::simplify::substitute_simplified(a.clone(), &map)) == simplify_expr(b.clone());
            let reason = if !same(&m.extent, &t.extent) {
                Some("different extents")
            } else if !same(&m.min, &t.min) {
                Some("different starts")
            } else if g.vars[m.var].dtype != g.vars[t.var].dtype {
                Some("different dtypes")
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(ScheduleError::LoopMismatch { primitive: p, loop_var: Self::var_name(&g, m.var), target, reason });
            }
            map.insert(m.var, Expr::Var(t.var));
        }
        let list = list_at(&g.body, &mp[..=c]).ok_or_else(|| stale(block.0, "block"))?;
        let mut moved = vec![tree::get(&g.body, &mp[..=c + tloops.len()]).cloned().ok_or_else(|| stale(block.0, "block"))?];
        sparsec_passes::simplify::substitute_stmts(&mut moved, &map);
        let mut macc = Vec::new();
        accesses(&moved, &HashMap::new(), &mut macc);
        let conflict = |a: &[Access], b: &[Access]| -> Option<BufferId> {
            a.iter()
                .find(|x| {
                    b.iter().any(|y| storage_key(&g, x.buffer) == storage_key(&g, y.buffer) && (x.write || y.write))
                })
                .map(|x| x.buffer)
        };
        let bufname = |b: BufferId| g.buffers.try_get(b).map_or_else(String::new, |x| x.name.clone());
        // Statements the nest moves across.
        let (lo, hi) = if mi < ti { (mi + 1, ti) } else { (ti + 1, mi) };
        let mut between = Vec::new();
        accesses(&list[lo..hi], &HashMap::new(), &mut between);
        if let Some(b) = conflict(&macc, &between) {
            return Err(ScheduleError::AccessConflict {
                primitive: p,
                block: bname,
                buffer: bufname(b),
                reason: "a statement between the two nests accesses it".into(),
            });
        }
        // Accesses shared with the target nest must be split by every merged loop.
        let mut tacc = Vec::new();
        accesses(std::slice::from_ref(&list[ti]), &HashMap::new(), &mut tacc);
        let key = |b: BufferId| storage_key(&g, b);
        let roles = nest_roles(&moved, &list[ti]);
        for a in macc.iter().chain(&tacc) {
            let k = key(a.buffer);
            let in_m = macc.iter().any(|x| key(x.buffer) == k);
            let in_t = tacc.iter().any(|x| key(x.buffer) == k);
            let written = macc.iter().chain(&tacc).any(|x| key(x.buffer) == k && x.write);
            if !(in_m && in_t && written) {
                continue;
            }
            let Some(t) = tloops.iter().find(|t| !a.indices.contains(&Expr::Var(t.var))) else { continue };
            // Otherwise each pair of accesses across the two nests must meet only in the same
            // iteration of the merged loops (a mixed-radix `(k_0 * 4 + k_1) * 32 + k_2`).
            let pairs = macc.iter().filter(|x| key(x.buffer) == k).flat_map(|x| {
                tacc.iter().filter(move |y| key(y.buffer) == k && (x.write || y.write)).map(move |y| (x, y))
            });
            let merged: Vec<VarId> = tloops.iter().map(|t| t.var).collect();
            if !pairs.into_iter().all(|(x, y)| injective::same_point(&x.indices, &y.indices, &merged, &roles)) {
                return Err(ScheduleError::AccessConflict {
                    primitive: p,
                    block: bname,
                    buffer: bufname(a.buffer),
                    reason: format!(
                        "an access is not indexed by the merged loop `{}`, and accesses of the two nests are not proven to meet only in the same iteration",
                        Self::var_name(&g, t.var)
                    ),
                });
            }
        }
        // Install: into `at`'s body first (deeper in the target nest), then remove the nest.
        let mut piece = moved.pop().ok_or_else(|| stale(block.0, "block"))?;
        if let Some(orig) = tree::get(&g.body, &mp[..=c]) {
            piece.span = orig.span;
        }
        match tree::get_mut(&mut g.body, &lpath).map(|s| &mut s.kind) {
            Some(StmtKind::For(l)) if reverse => l.body.push(piece),
            Some(StmtKind::For(l)) => l.body.insert(0, piece),
            _ => return Err(stale(at.0, "loop")),
        }
        let list = list_mut(&mut g.body, &mp[..=c]).ok_or_else(|| stale(block.0, "block"))?;
        list.remove(mi);
        self.commit(p, g)?;
        self.record(step, vec![]);
        Ok(())
    }
}
