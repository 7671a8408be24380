//! `vectorize` (Stage II/III): marks a loop vectorized.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::{LoopRv, Schedule};
use serde::{Deserialize, Serialize};
use sparsec_ir::ForKind;

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::vectorize`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Vectorize {
    /// The loop.
    pub r#loop: LoopRv,
}

impl Primitive for Vectorize {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![&mut self.r#loop.0]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        s.vectorize(self.r#loop).map(|()| vec![])
    }
}

impl Schedule {
    /// Marks a serial loop vectorized. It must contain no loop, and its iterations must be
    /// proven independent (see [`Schedule::parallel`]).
    pub fn vectorize(&mut self, lp: LoopRv) -> Result<()> {
        self.set_kind(lp, ForKind::Vectorized, Vectorize { r#loop: lp }.into())
    }
}
