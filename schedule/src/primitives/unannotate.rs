//! `unannotate` (any stage): removes an annotation of a sparse iteration, block or loop.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::{AnnotTarget, Schedule};
use serde::{Deserialize, Serialize};

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::unannotate`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Unannotate {
    /// The sparse iteration, block or loop.
    pub target: u32,
    /// The key.
    pub key: String,
}

impl Primitive for Unannotate {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![&mut self.target]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        s.unannotate_id(self.target, &self.key).map(|()| vec![])
    }
}

impl Schedule {
    /// Removes annotation `key` of a sparse iteration, block or loop.
    pub fn unannotate(&mut self, target: impl Into<AnnotTarget>, key: &str) -> Result<()> {
        self.unannotate_id(target.into().id(), key)
    }

    pub(crate) fn unannotate_id(&mut self, rv: u32, key: &str) -> Result<()> {
        let mut g = self.func.clone();
        let (attrs, what) = self.attrs_mut(&mut g, rv)?;
        if attrs.shift_remove(key).is_none() {
            return Err(ScheduleError::NoSuchAnnotation { target: what, key: key.to_string() });
        }
        self.commit("unannotate", g)?;
        self.record(Unannotate { target: rv, key: key.to_string() }, vec![]);
        Ok(())
    }
}
