//! `bind` (Stage II/III): binds a loop to a GPU thread index.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::{LoopRv, Schedule};
use crate::trace::tag_name;
use serde::{Deserialize, Serialize};
use sparsec_ir::{ForKind, ThreadTag};

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::bind`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Bind {
    /// The loop.
    pub r#loop: LoopRv,
    /// The thread index, as written in CUDA (`threadIdx.x`).
    #[serde(with = "tag_name")]
    #[schemars(schema_with = "crate::trace::tag_schema")]
    pub tag: ThreadTag,
}

impl Primitive for Bind {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![&mut self.r#loop.0]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        s.bind(self.r#loop, self.tag).map(|()| vec![])
    }
}

impl Schedule {
    /// Binds a serial loop to a GPU thread index. The tag must not be bound by a loop
    /// around or inside it, and its iterations must be proven independent (see
    /// [`Schedule::parallel`]).
    pub fn bind(&mut self, lp: LoopRv, tag: ThreadTag) -> Result<()> {
        self.set_kind(lp, ForKind::Thread(tag), Bind { r#loop: lp, tag }.into())
    }
}
