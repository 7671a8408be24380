//! `lower_sparse_buffer`: lowers Stage II to Stage III.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::Schedule;
use serde::{Deserialize, Serialize};
use sparsec_ir::Stage;

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::lower_sparse_buffer`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LowerSparseBuffer {}

impl Primitive for LowerSparseBuffer {
    const LOWERING: bool = true;

    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        s.lower_sparse_buffer().map(|()| vec![])
    }
}

impl Schedule {
    /// Lowers the function from Stage II to Stage III (`lower_sparse_buffer`). Loops and
    /// blocks keep their variables and names, so their references stay valid.
    pub fn lower_sparse_buffer(&mut self) -> Result<()> {
        const P: &str = "lower_sparse_buffer";
        if self.func.stage != Stage::II {
            return Err(ScheduleError::WrongStage { primitive: P, stage: self.func.stage });
        }
        let g = sparsec_passes::lower_sparse_buffer(&self.func)?;
        self.commit(P, g)?;
        self.record(LowerSparseBuffer {}, vec![]);
        Ok(())
    }
}
