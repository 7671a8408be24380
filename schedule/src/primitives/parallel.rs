//! `parallel` (Stage II/III): marks a loop parallel.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::{LoopRv, Schedule};
use serde::{Deserialize, Serialize};
use sparsec_ir::ForKind;

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::parallel`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Parallel {
    /// The loop.
    pub r#loop: LoopRv,
}

impl Primitive for Parallel {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![&mut self.r#loop.0]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        s.parallel(self.r#loop).map(|()| vec![])
    }
}

impl Schedule {
    /// Marks a serial loop parallel. Its iterations must be proven independent: it drives no
    /// reduction iterator of a block, and every store or `atomic_add` under it writes a
    /// buffer allocated inside it, or lies in a block that the loop drives through a spatial
    /// iterator (the first block under the loop on the way; its kinds and its bindings'
    /// injectivity are verified), or is an `atomic_add` to a buffer nothing else under the
    /// loop reads or stores. A buffer written under the loop and touched by more than one
    /// block must be indexed so that the indices show the iteration (`C[i * n + k]`).
    pub fn parallel(&mut self, lp: LoopRv) -> Result<()> {
        self.set_kind(lp, ForKind::Parallel, Parallel { r#loop: lp }.into())
    }
}
