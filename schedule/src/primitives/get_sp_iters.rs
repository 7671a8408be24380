//! `get_sp_iters` (Stage I): the iterators of a sparse iteration.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::{stale, IterRv, Schedule, SpIterRv, Target};
use crate::tree;
use serde::{Deserialize, Serialize};
use sparsec_ir::func::StmtKind;

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::get_sp_iters`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetSpIters {
    /// The sparse iteration.
    pub sp_iter: SpIterRv,
}

impl Primitive for GetSpIters {
    const QUERY: bool = true;

    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![&mut self.sp_iter.0]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        Ok(s.get_sp_iters(self.sp_iter)?.into_iter().map(IterRv::id).collect())
    }
}

impl Schedule {
    /// The iterators of a sparse iteration, in their current order.
    pub fn get_sp_iters(&mut self, sp: SpIterRv) -> Result<Vec<IterRv>> {
        self.need_stage_i("get_sp_iters")?;
        let path = self.sp_iter_path(&self.func, sp.0)?;
        let Some(StmtKind::SpIter(it)) = tree::get(&self.func.body, &path).map(|s| &s.kind) else {
            return Err(stale(sp.0, "sparse iteration"));
        };
        let name = it.name.clone();
        let vars: Vec<String> = it.vars.iter().map(|v| Self::var_name(&self.func, *v)).collect();
        let outs: Vec<u32> =
            vars.into_iter().map(|var| self.new_rv(Target::Iter { sp_iter: name.clone(), var })).collect();
        self.record(GetSpIters { sp_iter: sp }, outs.clone());
        Ok(outs.into_iter().map(IterRv).collect())
    }
}
