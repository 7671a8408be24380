//! `get_sparse_iteration` (Stage I): a sparse iteration by name.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::{Schedule, SpIterRv, Target};
use serde::{Deserialize, Serialize};

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::get_sparse_iteration`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetSparseIteration {
    /// The sparse iteration's name.
    pub name: String,
}

impl Primitive for GetSparseIteration {
    const QUERY: bool = true;

    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        Ok(vec![s.get_sparse_iteration(&self.name)?.id()])
    }
}

impl Schedule {
    /// The sparse iteration called `name` (Stage I).
    pub fn get_sparse_iteration(&mut self, name: &str) -> Result<SpIterRv> {
        self.need_stage_i("get_sparse_iteration")?;
        match Self::sp_iter_paths(&self.func, name).len() {
            0 => return Err(ScheduleError::UnknownSpIter { name: name.to_string() }),
            1 => {}
            _ => return Err(ScheduleError::AmbiguousName { what: "sparse iteration", name: name.to_string() }),
        }
        let rv = self.new_rv(Target::SpIter(name.to_string()));
        self.record(GetSparseIteration { name: name.to_string() }, vec![rv]);
        Ok(SpIterRv(rv))
    }
}
