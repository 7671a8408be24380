//! `set_scope` (Stage II/III): moves an allocated buffer to another memory scope.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::Schedule;
use crate::trace::scope_name;
use serde::{Deserialize, Serialize};
use sparsec_ir::func::Storage;
use sparsec_ir::Scope;

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::set_scope`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetScope {
    /// The allocated buffer.
    pub buffer: String,
    /// Its new memory scope.
    #[serde(with = "scope_name")]
    #[schemars(schema_with = "crate::trace::scope_schema")]
    pub scope: Scope,
}

impl Primitive for SetScope {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        s.set_scope(&self.buffer, self.scope).map(|()| vec![])
    }
}

impl Schedule {
    /// Moves an allocated buffer to another memory scope.
    pub fn set_scope(&mut self, buffer: &str, scope: Scope) -> Result<()> {
        let mut g = self.func.clone();
        let buf = g.buffer_by_name(buffer).ok_or_else(|| ScheduleError::UnknownBuffer { name: buffer.to_string() })?;
        match &mut g.buffers[buf].storage {
            Storage::Alloc(s) => *s = scope,
            Storage::Param(_) => return Err(ScheduleError::NotAllocated { buffer: buffer.to_string() }),
        }
        self.commit("set_scope", g)?;
        self.record(SetScope { buffer: buffer.into(), scope }, vec![]);
        Ok(())
    }
}
