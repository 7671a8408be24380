//! `reverse_compute_at` (Stage II/III): moves a consumer's nest under a loop of its producer.
//!
//! The supported case and the legality rules are described in the `move_nest` module.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::{BlockRv, LoopRv, Schedule};
use serde::{Deserialize, Serialize};

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::reverse_compute_at`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReverseComputeAt {
    /// The consumer block.
    pub block: BlockRv,
    /// The producer's loop.
    pub r#loop: LoopRv,
}

impl Primitive for ReverseComputeAt {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![&mut self.block.0, &mut self.r#loop.0]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        s.reverse_compute_at(self.block, self.r#loop).map(|()| vec![])
    }
}

impl Schedule {
    /// Moves a consumer block, with the loops around it, under loop `at` of an earlier nest
    /// (its producer), merging matching loops as [`Schedule::compute_at`] does; the rest of
    /// its nest is placed at the end of `at`'s body.
    pub fn reverse_compute_at(&mut self, block: BlockRv, at: LoopRv) -> Result<()> {
        self.move_nest(ReverseComputeAt { block, r#loop: at }.into(), block, at, true)
    }
}
