//! `compute_at` (Stage II/III): moves a producer's nest under a loop of its consumer.
//!
//! The supported case and the legality rules are described in the `move_nest` module.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::{BlockRv, LoopRv, Schedule};
use serde::{Deserialize, Serialize};

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::compute_at`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComputeAt {
    /// The producer block.
    pub block: BlockRv,
    /// The consumer's loop.
    pub r#loop: LoopRv,
}

impl Primitive for ComputeAt {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![&mut self.block.0, &mut self.r#loop.0]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        s.compute_at(self.block, self.r#loop).map(|()| vec![])
    }
}

impl Schedule {
    /// Moves a producer block, with the loops around it, under loop `at` of a later nest
    /// (its consumer): the producer's outer loops that match the loops from the common
    /// statement list down to `at` are merged into them, and the rest of its nest is placed
    /// at the start of `at`'s body. See the module documentation for the legality rules.
    pub fn compute_at(&mut self, block: BlockRv, at: LoopRv) -> Result<()> {
        self.move_nest(ComputeAt { block, r#loop: at }.into(), block, at, false)
    }
}
