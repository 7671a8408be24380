//! `reorder` (Stage II/III): reorders perfectly nested loops.

use super::Primitive;
use crate::error::ScheduleError;
use crate::loops::for_stmt;
use crate::schedule::{stale, LoopRv, Schedule};
use crate::tree;
use serde::{Deserialize, Serialize};
use sparsec_ir::func::{Block, For, Func, Stmt, StmtKind, VarId};
use sparsec_ir::injective::Role;
use sparsec_ir::{Expr, IterKind};
use std::collections::HashMap;

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::reorder`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reorder {
    /// The loops in their new order.
    pub loops: Vec<LoopRv>,
}

impl Primitive for Reorder {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        self.loops.iter_mut().map(|r| &mut r.0).collect()
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        s.reorder(&self.loops).map(|()| vec![])
    }
}

impl Schedule {
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
        Self::check_order_free(&g, &nest, &given)?;
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
        self.record(Reorder { loops: order.to_vec() }, vec![]);
        Ok(())
    }

    /// Refuses a reorder that changes the relative order of two loops (`x` outside `y`
    /// before, inside after) unless, for every block under the nest, one of them picks the
    /// block's spatial point (different values: different points, which are independent by
    /// the iterator kinds), or the block's body only accumulates (`X = X + e`), whose
    /// iterations commute. Statements outside blocks must only accumulate.
    fn check_order_free(g: &Func, nest: &[(tree::Path, For)], given: &[(tree::Path, For)]) -> Result<()> {
        let pos = |list: &[(tree::Path, For)], v: VarId| list.iter().position(|(_, l)| l.var == v).unwrap_or(0);
        let mut flipped: Vec<(VarId, VarId)> = Vec::new();
        for (a, (_, x)) in nest.iter().enumerate() {
            for (_, y) in &nest[a + 1..] {
                if pos(given, x.var) > pos(given, y.var) {
                    flipped.push((x.var, y.var));
                }
            }
        }
        if flipped.is_empty() {
            return Ok(());
        }
        let chain: HashMap<VarId, Expr> = nest.iter().map(|(_, l)| (l.var, l.extent.clone())).collect();
        let body = &nest[nest.len() - 1].1.body;
        let (inner, _) = sparsec_passes::scope::bound_inside(body);
        let role = |v: VarId| match chain.get(&v) {
            Some(extent) => Role::Free(Some(extent.clone())),
            None if inner.contains(&v) => Role::Varying,
            None => Role::Fixed,
        };
        let mut result = Ok(());
        let mut loose = false;
        visit_blocks(body, &mut |b| {
            if result.is_err() {
                return;
            }
            let spatial: Vec<Expr> = b.iters.iter().filter(|it| it.kind == IterKind::Spatial).map(|it| it.binding.clone()).collect();
            let picks = sparsec_ir::injective::determined_by_indices(&spatial, &role);
            for &(x, y) in &flipped {
                if !picks.contains(&x) && !picks.contains(&y) && !sparsec_passes::accumulates_only(g, &b.body) {
                    result = Err(ScheduleError::OrderMatters {
                        block: b.name.clone(),
                        outer: Self::var_name(g, x),
                        inner: Self::var_name(g, y),
                    });
                    return;
                }
            }
        }, &mut |_| loose = true);
        result?;
        if loose && !sparsec_passes::accumulates_only(g, body) {
            let (x, y) = flipped[0];
            return Err(ScheduleError::OrderMatters { block: "(statements outside blocks)".into(), outer: Self::var_name(g, x), inner: Self::var_name(g, y) });
        }
        Ok(())
    }
}

/// Calls `block` on every block of `list` (outermost only: a block's body is its own) and
/// `loose` on every store outside all blocks.
fn visit_blocks(list: &[Stmt], block: &mut impl FnMut(&Block), loose: &mut impl FnMut(&Stmt)) {
    for s in list {
        match &s.kind {
            StmtKind::Block(b) => block(b),
            StmtKind::Store { .. } | StmtKind::Evaluate(_) => loose(s),
            _ => {
                for child in s.kind.child_lists() {
                    visit_blocks(child, block, loose);
                }
            }
        }
    }
}
