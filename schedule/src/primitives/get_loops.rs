//! `get_loops` (Stage II/III): the loops around a block.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::{BlockRv, LoopRv, Schedule, Target};
use crate::tree;
use serde::{Deserialize, Serialize};
use sparsec_ir::func::StmtKind;

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::get_loops`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetLoops {
    /// The block.
    pub block: BlockRv,
}

impl Primitive for GetLoops {
    const QUERY: bool = true;

    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![&mut self.block.0]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        Ok(s.get_loops(self.block)?.into_iter().map(LoopRv::id).collect())
    }
}

impl Schedule {
    /// The loops around a block, outermost first, up to the enclosing block.
    pub fn get_loops(&mut self, block: BlockRv) -> Result<Vec<LoopRv>> {
        self.need_loop_stage("get_loops")?;
        let path = self.block_path(&self.func, block.0)?;
        let mut vars = Vec::new();
        for s in tree::ancestors(&self.func.body, &path).into_iter().rev() {
            match &s.kind {
                StmtKind::Block(_) => break,
                StmtKind::For(l) => vars.push(l.var),
                _ => {}
            }
        }
        vars.reverse();
        let outs: Vec<u32> = vars.into_iter().map(|v| self.new_rv(Target::Loop(v))).collect();
        self.record(GetLoops { block }, outs.clone());
        Ok(outs.into_iter().map(LoopRv).collect())
    }
}
