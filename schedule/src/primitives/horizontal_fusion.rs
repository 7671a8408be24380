//! `horizontal_fusion` (Stage II/III): the pass of that name, as a schedule step.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::Schedule;
use serde::{Deserialize, Serialize};

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::horizontal_fusion`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HorizontalFusion {}

impl Primitive for HorizontalFusion {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        s.horizontal_fusion().map(|()| vec![])
    }
}

impl Schedule {
    /// Applies `horizontal_fusion` (Stage II/III): runs of independent `blockIdx.x` kernels
    /// become one launch. Loops outside the fused kernels keep their references.
    pub fn horizontal_fusion(&mut self) -> Result<()> {
        const P: &str = "horizontal_fusion";
        self.need_loop_stage(P)?;
        let g = sparsec_passes::horizontal_fusion(&self.func)?;
        self.commit(P, g)?;
        self.record(HorizontalFusion {}, vec![]);
        Ok(())
    }
}
