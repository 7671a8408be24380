//! Helpers of the Stage-I primitives `sparse_reorder` and `sparse_fuse`.

use crate::error::ScheduleError;
use crate::schedule::{stale, IterRv, Schedule, Target};
use crate::tree::{self, Path};
use sparsec_ir::func::{AxisId, Func, SpIter, StmtKind};

type Result<T> = std::result::Result<T, ScheduleError>;

/// The sparse iteration at `path`.
pub(crate) fn sp_iter_at<'f>(g: &'f Func, path: &Path, rv: u32) -> Result<&'f SpIter> {
    match tree::get(&g.body, path).map(|s| &s.kind) {
        Some(StmtKind::SpIter(it)) => Ok(it),
        _ => Err(stale(rv, "sparse iteration")),
    }
}

/// The sparse iteration at `path`, mutably.
pub(crate) fn sp_iter_at_mut<'f>(g: &'f mut Func, path: &Path, rv: u32) -> Result<&'f mut SpIter> {
    match tree::get_mut(&mut g.body, path).map(|s| &mut s.kind) {
        Some(StmtKind::SpIter(it)) => Ok(it),
        _ => Err(stale(rv, "sparse iteration")),
    }
}

/// For each iterator index: (entry index, offset in the entry).
pub(crate) fn entry_of(it: &SpIter) -> Vec<(usize, usize)> {
    it.axes.iter().enumerate().flat_map(|(e, spec)| (0..spec.axes().len()).map(move |k| (e, k))).collect()
}

/// The name of axis `a`.
pub(crate) fn axis_name(g: &Func, a: AxisId) -> String {
    g.axes.try_get(a).map_or_else(|| format!("#{}", a.index()), |x| x.name.clone())
}

impl Schedule {
    /// Indices (in the sparse iteration's variables) of the iterators `iters`.
    pub(crate) fn iter_indices(&self, g: &Func, it: &SpIter, iters: &[IterRv]) -> Result<Vec<usize>> {
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
}
