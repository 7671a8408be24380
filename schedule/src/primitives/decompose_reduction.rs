//! `decompose_reduction` (Stage II/III): moves a reduction block's `init` into a block of its own.
//!
//! Semantics kept: a block's `init` runs when all its reduction iterators are 0, i.e. at the
//! first step of the reduction of each spatial point (a point whose reduction domain is
//! empty is never initialised by the block). `decompose_reduction` keeps that exactly by
//! guarding the new init block with "the first reduction step is reached"; the guard is
//! left out where it simplifies to true (constant positive extents, no guards).

use super::Primitive;
use crate::error::ScheduleError;
use crate::reduction::{block_at, fresh_block_name, for_stmt, levels, list_mut, point, taken_names, uses_any, Level};
use crate::schedule::{stale, BlockRv, LoopRv, Schedule, Target};
use crate::tree;
use serde::{Deserialize, Serialize};
use sparsec_ir::expr::{BinOp, Expr};
use sparsec_ir::func::{Attrs, Block, BlockIter, For, Region, Stmt, StmtKind, VarId};
use sparsec_ir::IterKind;
use sparsec_passes::build::{int, zero};
use sparsec_passes::simplify::simplify_expr;
use std::collections::{HashMap, HashSet};

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::decompose_reduction`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecomposeReduction {
    /// The reduction block.
    pub block: BlockRv,
    /// The loop the init goes before.
    pub r#loop: LoopRv,
}

impl Primitive for DecomposeReduction {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![&mut self.block.0, &mut self.r#loop.0]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        Ok(vec![s.decompose_reduction(self.block, self.r#loop)?.id()])
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
        self.record(DecomposeReduction { block, r#loop: at }, vec![out]);
        Ok(BlockRv(out))
    }
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
