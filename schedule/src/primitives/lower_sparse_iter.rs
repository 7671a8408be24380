//! `lower_sparse_iter`: lowers Stage I to Stage II.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::Schedule;
use serde::{Deserialize, Serialize};

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::lower_sparse_iter`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LowerSparseIter {}

impl Primitive for LowerSparseIter {
    const LOWERING: bool = true;

    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        s.lower_sparse_iter().map(|()| vec![])
    }
}

impl Schedule {
    /// Lowers the function from Stage I to Stage II (`lower_sparse_iter`). References to
    /// sparse iterations and their iterators become stale; blocks and loops of the result
    /// can then be scheduled.
    pub fn lower_sparse_iter(&mut self) -> Result<()> {
        const P: &str = "lower_sparse_iter";
        self.need_stage_i(P)?;
        let g = sparsec_passes::lower_sparse_iter(&self.func)?;
        self.commit(P, g)?;
        self.record(LowerSparseIter {}, vec![]);
        Ok(())
    }
}
