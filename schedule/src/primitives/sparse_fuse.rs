//! `sparse_fuse` (Stage I): fuses iterators of a sparse iteration into one entry.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::{IterRv, Schedule, SpIterRv};
use crate::sparse::{axis_name, entry_of, sp_iter_at, sp_iter_at_mut};
use serde::{Deserialize, Serialize};
use sparsec_ir::func::{AxisId, SpIterAxis};

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::sparse_fuse`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SparseFuse {
    /// The sparse iteration.
    pub sp_iter: SpIterRv,
    /// The iterators fused.
    pub iters: Vec<IterRv>,
}

impl Primitive for SparseFuse {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        std::iter::once(&mut self.sp_iter.0).chain(self.iters.iter_mut().map(|r| &mut r.0)).collect()
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        s.sparse_fuse(self.sp_iter, &self.iters).map(|()| vec![])
    }
}

impl Schedule {
    /// Fuses iterators of a sparse iteration into one `fuse(...)` entry, iterated as one
    /// loop over the positions of the innermost axis. The iterators must be contiguous in
    /// the current order, cover whole entries, form a parent chain starting at a
    /// `dense_fixed` root axis, and be all spatial or all reductions.
    pub fn sparse_fuse(&mut self, sp: SpIterRv, iters: &[IterRv]) -> Result<()> {
        const P: &str = "sparse_fuse";
        self.need_stage_i(P)?;
        let mut g = self.func.clone();
        let path = self.sp_iter_path(&g, sp.0)?;
        let it = sp_iter_at(&g, &path, sp.0)?;
        let idx = self.iter_indices(&g, it, iters)?;
        let names: Vec<String> = it.vars.iter().map(|v| Self::var_name(&g, *v)).collect();
        let given: Vec<String> = idx.iter().map(|&i| names[i].clone()).collect();
        if idx.len() < 2 {
            return Err(ScheduleError::TooFew { primitive: P, min: 2, what: "iterators", got: idx.len() });
        }
        let mut sorted = idx.clone();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(ScheduleError::Duplicate { name: names[w[0]].clone() });
        }
        if sorted.windows(2).any(|w| w[1] != w[0] + 1) {
            return Err(ScheduleError::NotContiguous { iters: given });
        }
        let (lo, hi) = (sorted[0], sorted[sorted.len() - 1]);
        let owner = entry_of(it);
        let (first_entry, last_entry) = (owner[lo].0, owner[hi].0);
        let all_axes: Vec<AxisId> = it.axes.iter().flat_map(SpIterAxis::axes).collect();
        // Whole entries only.
        for e in [first_entry, last_entry] {
            let members: Vec<usize> = (0..owner.len()).filter(|&i| owner[i].0 == e).collect();
            if members.iter().any(|i| !sorted.contains(i)) {
                return Err(ScheduleError::SplitsFusedGroup {
                    group: members.iter().map(|&i| names[i].clone()).collect(),
                });
            }
        }
        for &i in &idx {
            if matches!(it.axes[owner[i].0], SpIterAxis::Attach { .. }) {
                return Err(ScheduleError::CannotFuseAttach { iter: names[i].clone() });
            }
            if it.axes[owner[i].0].is_merge() {
                return Err(ScheduleError::CannotFuseMerge { iter: names[i].clone() });
            }
        }
        // A parent chain, in the order given, from a root axis.
        let chain: Vec<AxisId> = idx.iter().map(|&i| all_axes[i]).collect();
        for w in chain.windows(2) {
            if g.axes.try_get(w[1]).and_then(|a| a.parent) != Some(w[0]) {
                return Err(ScheduleError::NotAParentChain { axis: axis_name(&g, w[1]), parent: axis_name(&g, w[0]) });
            }
        }
        if g.axes.try_get(chain[0]).is_none_or(|a| a.parent.is_some()) {
            return Err(ScheduleError::NotARoot { axis: axis_name(&g, chain[0]) });
        }
        let kinds: String = idx.iter().filter_map(|&i| it.kinds.chars().nth(i)).collect();
        // A scatter (no init) may fuse a reduction with the spatial iterator below it: the
        // fused loop reduces. With an init, the init's spatial loops would be lost.
        if it.init.is_some() && kinds.chars().any(|c| !kinds.starts_with(c)) {
            return Err(ScheduleError::MixedKinds { iters: given, kinds });
        }
        let mut axes: Vec<SpIterAxis> = it.axes[..first_entry].to_vec();
        axes.push(SpIterAxis::Fuse(chain));
        axes.extend(it.axes[last_entry + 1..].iter().cloned());
        sp_iter_at_mut(&mut g, &path, sp.0)?.axes = axes;
        self.commit(P, g)?;
        self.record(SparseFuse { sp_iter: sp, iters: iters.to_vec() }, vec![]);
        Ok(())
    }
}
