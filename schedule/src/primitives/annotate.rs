//! `annotate` (any stage): sets an annotation of a sparse iteration, block or loop.

use super::Primitive;
use crate::error::ScheduleError;
use crate::schedule::{AnnotTarget, Schedule};
use serde::{Deserialize, Serialize};
use sparsec_ir::AttrValue;

type Result<T> = std::result::Result<T, ScheduleError>;

/// The arguments of [`Schedule::annotate`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Annotate {
    /// The sparse iteration, block or loop.
    pub target: u32,
    /// The key.
    pub key: String,
    /// The value.
    #[schemars(schema_with = "crate::trace::attr_value_schema")]
    pub value: AttrValue,
}

impl Primitive for Annotate {
    fn refs_mut(&mut self) -> Vec<&mut u32> {
        vec![&mut self.target]
    }

    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>> {
        s.annotate_id(self.target, &self.key, self.value.clone()).map(|()| vec![])
    }
}

impl Schedule {
    /// Sets annotation `key` of a sparse iteration, block or loop (replacing an earlier value).
    pub fn annotate(&mut self, target: impl Into<AnnotTarget>, key: &str, value: AttrValue) -> Result<()> {
        self.annotate_id(target.into().id(), key, value)
    }

    pub(crate) fn annotate_id(&mut self, rv: u32, key: &str, value: AttrValue) -> Result<()> {
        if key.is_empty() {
            return Err(ScheduleError::InvalidKey { key: key.to_string() });
        }
        if let AttrValue::Float(x) = value {
            if !x.is_finite() {
                return Err(ScheduleError::InvalidValue { value: x.to_string() });
            }
        }
        let mut g = self.func.clone();
        let (attrs, _) = self.attrs_mut(&mut g, rv)?;
        attrs.insert(key.to_string(), value.clone());
        self.commit("annotate", g)?;
        self.record(Annotate { target: rv, key: key.to_string(), value }, vec![]);
        Ok(())
    }
}
