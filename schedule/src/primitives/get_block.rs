//! `get_block` (Stage II/III): a block by name.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::{BlockRv, Schedule, Target};
use serde::{Deserialize, Serialize};

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::get_block`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetBlock {
    /// The block's name.
    pub name: String,
}

impl Primitive for GetBlock {
    const QUERY: bool = true;

    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        Ok(vec![s.get_block(&self.name)?.id()])
    }
}

impl Schedule {
    /// The block called `name` (Stage II/III).
    pub fn get_block(&mut self, name: &str) -> Result<BlockRv> {
        self.need_loop_stage("get_block")?;
        match Self::block_paths(&self.func, name).len() {
            0 => return Err(ScheduleError::UnknownBlock { name: name.to_string() }),
            1 => {}
            _ => return Err(ScheduleError::AmbiguousName { what: "block", name: name.to_string() }),
        }
        let rv = self.new_rv(Target::Block(name.to_string()));
        self.record(GetBlock { name: name.to_string() }, vec![rv]);
        Ok(BlockRv(rv))
    }
}
