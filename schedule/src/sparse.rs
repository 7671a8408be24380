//! Stage-I primitives: `sparse_reorder` and `sparse_fuse`, and the lowering steps.

use crate::error::ScheduleError;
use crate::schedule::{stale, IterRv, Schedule, SpIterRv, Target};
use crate::trace::Step;
use crate::tree::{self, Path};
use sparsec_ir::func::{AxisId, Func, SpIter, SpIterAxis, StmtKind};
use sparsec_ir::Stage;

type Result<T> = std::result::Result<T, ScheduleError>;

/// The sparse iteration at `path`.
fn sp_iter_at<'f>(g: &'f Func, path: &Path, rv: u32) -> Result<&'f SpIter> {
    match tree::get(&g.body, path).map(|s| &s.kind) {
        Some(StmtKind::SpIter(it)) => Ok(it),
        _ => Err(stale(rv, "sparse iteration")),
    }
}

/// The sparse iteration at `path`, mutably.
fn sp_iter_at_mut<'f>(g: &'f mut Func, path: &Path, rv: u32) -> Result<&'f mut SpIter> {
    match tree::get_mut(&mut g.body, path).map(|s| &mut s.kind) {
        Some(StmtKind::SpIter(it)) => Ok(it),
        _ => Err(stale(rv, "sparse iteration")),
    }
}

/// For each iterator index: (entry index, offset in the entry).
fn entry_of(it: &SpIter) -> Vec<(usize, usize)> {
    it.axes.iter().enumerate().flat_map(|(e, spec)| (0..spec.axes().len()).map(move |k| (e, k))).collect()
}

/// The parent the iterators of an entry need iterated first (declared or attach target).
fn entry_parent(g: &Func, spec: &SpIterAxis) -> Option<AxisId> {
    match spec {
        SpIterAxis::Axis(a) => g.axes.try_get(*a).and_then(|x| x.parent),
        SpIterAxis::Fuse(group) => group.first().and_then(|a| g.axes.try_get(*a)).and_then(|x| x.parent),
        SpIterAxis::Attach { parent, .. } => Some(*parent),
    }
}

fn axis_name(g: &Func, a: AxisId) -> String {
    g.axes.try_get(a).map_or_else(|| format!("#{}", a.index()), |x| x.name.clone())
}

impl Schedule {
    /// Indices (in the sparse iteration's variables) of the iterators `iters`.
    fn iter_indices(&self, g: &Func, it: &SpIter, iters: &[IterRv]) -> Result<Vec<usize>> {
        iters
            .iter()
            .map(|r| {
                let Target::Iter { sp_iter, var } = self.target(r.0, "iterator")? else {
                    return Err(ScheduleError::WrongRefKind { rv: r.0, expected: "iterator" });
                };
                if *sp_iter != it.name {
                    return Err(ScheduleError::UnknownIter { sp_iter: it.name.clone(), iter: var.clone() });
                }
                it.vars
                    .iter()
                    .position(|v| Self::var_name(g, *v) == *var)
                    .ok_or_else(|| ScheduleError::StaleRef { rv: r.0, what: format!("iterator `{var}` of `{sp_iter}`") })
            })
            .collect()
    }

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
        self.record(Step::SparseReorder { sp_iter: sp, order: order.to_vec() }, vec![]);
        Ok(())
    }

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
        self.record(Step::SparseFuse { sp_iter: sp, iters: iters.to_vec() }, vec![]);
        Ok(())
    }

    /// Lowers the function from Stage I to Stage II (`lower_sparse_iter`). References to
    /// sparse iterations and their iterators become stale; blocks and loops of the result
    /// can then be scheduled.
    pub fn lower_sparse_iter(&mut self) -> Result<()> {
        const P: &str = "lower_sparse_iter";
        self.need_stage_i(P)?;
        let g = sparsec_passes::lower_sparse_iter(&self.func)?;
        self.commit(P, g)?;
        self.record(Step::LowerSparseIter, vec![]);
        Ok(())
    }

    /// Lowers the function from Stage II to Stage III (`lower_sparse_buffer`). Loops and
    /// blocks keep their variables and names, so their references stay valid.
    pub fn lower_sparse_buffer(&mut self) -> Result<()> {
        const P: &str = "lower_sparse_buffer";
        if self.func.stage != Stage::II {
            return Err(ScheduleError::WrongStage { primitive: P, stage: self.func.stage });
        }
        let g = sparsec_passes::lower_sparse_buffer(&self.func)?;
        self.commit(P, g)?;
        self.record(Step::LowerSparseBuffer, vec![]);
        Ok(())
    }

    /// Applies `lower_atomic` (Stage II/III): accumulations in blocks annotated
    /// `atomic = true`, or provably shared between GPU threads, become `atomic_add`.
    pub fn lower_atomic(&mut self) -> Result<()> {
        const P: &str = "lower_atomic";
        self.need_loop_stage(P)?;
        let g = sparsec_passes::lower_atomic(&self.func)?;
        self.commit(P, g)?;
        self.record(Step::LowerAtomic, vec![]);
        Ok(())
    }

    /// Applies `horizontal_fusion` (Stage II/III): runs of independent `blockIdx.x` kernels
    /// become one launch. Loops outside the fused kernels keep their references.
    pub fn horizontal_fusion(&mut self) -> Result<()> {
        const P: &str = "horizontal_fusion";
        self.need_loop_stage(P)?;
        let g = sparsec_passes::horizontal_fusion(&self.func)?;
        self.commit(P, g)?;
        self.record(Step::HorizontalFusion, vec![]);
        Ok(())
    }
}
