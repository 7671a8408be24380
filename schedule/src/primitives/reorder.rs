//! `reorder` (Stage II/III): reorders perfectly nested loops.

use super::Primitive;
use crate::error::ScheduleError;
use crate::loops::for_stmt;
use crate::schedule::{stale, LoopRv, Schedule};
use crate::tree;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::reorder`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
}
