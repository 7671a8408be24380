//! `workspace` (Stage I): gives a sparse axis's lookups in a sparse iteration a workspace.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::{Schedule, SpIterRv};
use crate::sparse::sp_iter_at_mut;
use serde::{Deserialize, Serialize};
use sparsec_ir::verify::VerifyErrorKind;
use sparsec_ir::{AttrValue, POSITION_MAP, WORKSPACE_ATTR};

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::workspace`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Workspace {
    /// The sparse iteration.
    pub sp_iter: SpIterRv,
    /// The sparse axis whose coordinates it looks up.
    pub axis: String,
}

impl Primitive for Workspace {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![&mut self.sp_iter.0]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        s.workspace(self.sp_iter, &self.axis).map(|()| vec![])
    }
}

impl Schedule {
    /// Has the sparse iteration find the positions of sparse axis `axis`'s coordinates (its
    /// accesses such as SpGEMM's `C[i, k]`, where `k` comes from another axis) through a
    /// position map instead of a search per access: an array over the axis's coordinates,
    /// filled with each coordinate's position once per row in the loop of the axis's parent,
    /// then read once per access and checked against the row (`sparsec_ir::WORKSPACE_ATTR`).
    /// It costs the axis's length in memory and the row's length per row, and makes the
    /// parent's loop serial (every row writes the one map). The iteration must look the axis
    /// up rather than iterate it, and iterate its parent as an entry of its own.
    pub fn workspace(&mut self, sp: SpIterRv, axis: &str) -> Result<()> {
        const P: &str = "workspace";
        self.need_stage_i(P)?;
        let mut g = self.func.clone();
        let path = self.sp_iter_path(&g, sp.0)?;
        let it = sp_iter_at_mut(&mut g, &path, sp.0)?;
        let name = it.name.clone();
        it.attrs.insert(format!("{WORKSPACE_ATTR}{axis}"), AttrValue::Str(POSITION_MAP.into()));
        let refused = sparsec_ir::verify::verify_func(&g).err().and_then(|errors| {
            errors.into_iter().find_map(|e| match e.kind {
                VerifyErrorKind::BadWorkspace { why, .. } => Some(why),
                _ => None,
            })
        });
        if let Some(why) = refused {
            return Err(ScheduleError::NoWorkspace { sp_iter: name, axis: axis.to_string(), why });
        }
        self.commit(P, g)?;
        self.record(Workspace { sp_iter: sp, axis: axis.to_string() }, vec![]);
        Ok(())
    }
}
