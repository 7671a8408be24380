//! `contract` (Stage II/III): the pass of that name, as a schedule step.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::Schedule;
use serde::{Deserialize, Serialize};

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::contract`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Contract {}

impl Primitive for Contract {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        s.contract().map(|()| vec![])
    }
}

impl Schedule {
    /// Applies `contract` (Stage II/III): float `a * b + c` becomes `fma(a, b, c)`, rounded
    /// once. Results may differ from the program's in the last bits (the fused value is the
    /// more accurate one); accumulations `X = fma(a, b, X)` still count as accumulations.
    pub fn contract(&mut self) -> Result<()> {
        const P: &str = "contract";
        self.need_loop_stage(P)?;
        let g = sparsec_passes::contract(&self.func)?;
        self.commit(P, g)?;
        self.record(Contract {}, vec![]);
        Ok(())
    }
}
