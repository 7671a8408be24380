//! `sparse_reorder` (Stage I): reorders the iterators of a sparse iteration.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::{IterRv, Schedule, SpIterRv};
use crate::sparse::{axis_name, entry_of, sp_iter_at, sp_iter_at_mut};
use serde::{Deserialize, Serialize};
use sparsec_ir::func::{AxisId, Func, SpIterAxis};

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::sparse_reorder`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SparseReorder {
    /// The sparse iteration.
    pub sp_iter: SpIterRv,
    /// Its iterators in the new order.
    pub order: Vec<IterRv>,
}

impl Primitive for SparseReorder {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        std::iter::once(&mut self.sp_iter.0).chain(self.order.iter_mut().map(|r| &mut r.0)).collect()
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        s.sparse_reorder(self.sp_iter, &self.order).map(|()| vec![])
    }
}

impl Schedule {
    /// Reorders the iterators of a sparse iteration. `order` must be a permutation of its
    /// iterators in which every axis comes after the iterator over its parent; fused groups
    /// move as a unit and keep their inner order.
    pub fn sparse_reorder(&mut self, sp: SpIterRv, order: &[IterRv]) -> Result<()> {
        const P: &str = "sparse_reorder";
        self.need_stage_i(P)?;
        let mut g = self.func.clone();
        let path = self.sp_iter_path(&g, sp.0)?;
        let it = sp_iter_at(&g, &path, sp.0)?;
        let idx = self.iter_indices(&g, it, order)?;
        let names: Vec<String> = it.vars.iter().map(|v| Self::var_name(&g, *v)).collect();
        let mut seen = vec![false; names.len()];
        let is_perm = idx.len() == names.len() && idx.iter().all(|&i| !std::mem::replace(&mut seen[i], true));
        if !is_perm {
            return Err(ScheduleError::NotAPermutation {
                sp_iter: it.name.clone(),
                given: idx.iter().map(|&i| names[i].clone()).collect(),
                expected: names,
            });
        }
        // Group the new order into whole entries.
        let owner = entry_of(it);
        let starts: Vec<usize> = {
            let mut s = Vec::new();
            let mut k = 0;
            for spec in &it.axes {
                s.push(k);
                k += spec.axes().len();
            }
            s
        };
        let group_names = |e: usize| -> Vec<String> {
            (starts[e]..starts[e] + it.axes[e].axes().len()).map(|i| names[i].clone()).collect()
        };
        let mut new_entries = Vec::new();
        let mut p = 0;
        while p < idx.len() {
            let (e, _) = owner[idx[p]];
            let len = it.axes[e].axes().len();
            let whole = (0..len).all(|k| idx.get(p + k) == Some(&(starts[e] + k)));
            if !whole {
                return Err(ScheduleError::SplitsFusedGroup { group: group_names(e) });
            }
            new_entries.push(e);
            p += len;
        }
        // Every entry after the entry iterating its parent (when this sp_iter iterates it).
        for (pos, &e) in new_entries.iter().enumerate() {
            let Some(parent) = entry_parent(&g, &it.axes[e]) else { continue };
            let iterated_at = new_entries.iter().position(|&o| it.axes[o].axes().contains(&parent));
            if matches!(iterated_at, Some(q) if q > pos) {
                let child = it.axes[e].axes().first().copied().unwrap_or(parent);
                return Err(ScheduleError::ParentAfterChild {
                    axis: axis_name(&g, child),
                    parent: axis_name(&g, parent),
                });
            }
        }
        let kinds: Vec<char> = it.kinds.chars().collect();
        let axes = new_entries.iter().map(|&e| it.axes[e].clone()).collect();
        let vars = idx.iter().map(|&i| it.vars[i]).collect();
        let new_kinds = idx.iter().filter_map(|&i| kinds.get(i)).collect();
        let it = sp_iter_at_mut(&mut g, &path, sp.0)?;
        it.axes = axes;
        it.vars = vars;
        it.kinds = new_kinds;
        self.commit(P, g)?;
        self.record(SparseReorder { sp_iter: sp, order: order.to_vec() }, vec![]);
        Ok(())
    }
}

/// The parent the iterators of an entry need iterated first (declared or attach target).
fn entry_parent(g: &Func, spec: &SpIterAxis) -> Option<AxisId> {
    match spec {
        SpIterAxis::Axis(a) => g.axes.try_get(*a).and_then(|x| x.parent),
        SpIterAxis::Fuse(group) => group.first().and_then(|a| g.axes.try_get(*a)).and_then(|x| x.parent),
        SpIterAxis::Attach { parent, .. } => Some(*parent),
        SpIterAxis::Merge { axes, .. } => axes.first().and_then(|a| g.axes.try_get(*a)).and_then(|x| x.parent),
    }
}
