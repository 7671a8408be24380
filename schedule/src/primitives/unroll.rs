//! `unroll` (Stage II/III): marks a loop to be unrolled.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::{LoopRv, Schedule};
use serde::{Deserialize, Serialize};
use sparsec_ir::ForKind;

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::unroll`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Unroll {
    /// The loop.
    pub r#loop: LoopRv,
}

impl Primitive for Unroll {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![&mut self.r#loop.0]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        s.unroll(self.r#loop).map(|()| vec![])
    }
}

impl Schedule {
    /// Marks a serial loop to be unrolled.
    pub fn unroll(&mut self, lp: LoopRv) -> Result<()> {
        self.set_kind(lp, ForKind::Unrolled, Unroll { r#loop: lp }.into())
    }
}
