//! `lower_atomic` (Stage II/III): the pass of that name, as a schedule step.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::Schedule;
use serde::{Deserialize, Serialize};

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::lower_atomic`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LowerAtomic {}

impl Primitive for LowerAtomic {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        s.lower_atomic().map(|()| vec![])
    }
}

impl Schedule {
    /// Applies `lower_atomic` (Stage II/III): accumulations in blocks annotated
    /// `atomic = true`, or provably shared between GPU threads, become `atomic_add`.
    pub fn lower_atomic(&mut self) -> Result<()> {
        const P: &str = "lower_atomic";
        self.need_loop_stage(P)?;
        let g = sparsec_passes::lower_atomic(&self.func)?;
        self.commit(P, g)?;
        self.record(LowerAtomic {}, vec![]);
        Ok(())
    }
}
