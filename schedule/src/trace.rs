//! Traces: the record of a schedule's primitives, serialisable and replayable.
//!
//! Every successful primitive appends one [`Instruction`]: a typed [`Step`] (the primitive
//! and its arguments, references as ids) and the ids of the references it returned.
//! [`Trace::replay`] runs the same steps through [`Step::apply`], the one decoder, mapping
//! recorded ids to fresh ones. The JSON form is documented in `docs/trace-format.md`; the
//! steps themselves are built from the primitives in `primitives/`.

use crate::error::ScheduleError;
use crate::primitives::Step;
use crate::schedule::Schedule;
use serde::{Deserialize, Serialize};
use sparsec_ir::Func;
use std::collections::HashMap;

/// One successful primitive call: the step and the ids of the references it returned.
#[derive(Clone, Debug, PartialEq)]
pub struct Instruction {
    /// The primitive and its arguments.
    pub step: Step,
    /// The ids of the references it returned.
    pub outputs: Vec<u32>,
}

impl Serialize for Instruction {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Flat<'a> {
            #[serde(flatten)]
            step: &'a Step,
            #[serde(skip_serializing_if = "<[u32]>::is_empty")]
            outputs: &'a [u32],
        }
        Flat { step: &self.step, outputs: &self.outputs }.serialize(ser)
    }
}

impl<'de> Deserialize<'de> for Instruction {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut map = serde_json::Map::deserialize(de)?;
        let outputs = match map.remove("outputs") {
            Some(v) => serde_json::from_value(v).map_err(|e| D::Error::custom(format!("`outputs`: {e}")))?,
            None => Vec::new(),
        };
        let step = serde_json::from_value(map.into()).map_err(D::Error::custom)?;
        Ok(Instruction { step, outputs })
    }
}

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The text is not a JSON trace object.
    #[error("not a trace (expected {{\"insts\": [...]}}): {0}")]
    NotATrace(serde_json::Error),
    /// One instruction does not decode.
    #[error("instruction {index}: {source}")]
    Instruction {
        /// Its position, from 0.
        index: usize,
        /// What is wrong.
        source: serde_json::Error,
    },
}

/// The primitives applied to a function, in order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trace {
    /// The instructions.
    pub insts: Vec<Instruction>,
}

impl Trace {
    /// The trace as JSON, one instruction per line.
    pub fn to_json(&self) -> String {
        // Serialising steps of plain enums, strings and numbers cannot fail.
        let lines: Vec<String> = self.insts.iter().map(|i| serde_json::to_string(i).unwrap_or_default()).collect();
        if lines.is_empty() {
            return "{\"insts\": []}".into();
        }
        format!("{{\"insts\": [\n  {}\n]}}", lines.join(",\n  "))
    }

    /// Reads a trace written by [`Trace::to_json`]; an error names the instruction.
    pub fn from_json(s: &str) -> Result<Trace, TraceError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            insts: Vec<serde_json::Value>,
        }
        let raw: Raw = serde_json::from_str(s).map_err(TraceError::NotATrace)?;
        let insts = raw.insts.into_iter().enumerate().map(|(index, v)| {
            serde_json::from_value(v).map_err(|source| TraceError::Instruction { index, source })
        });
        Ok(Trace { insts: insts.collect::<Result<_, _>>()? })
    }

    /// Re-executes every instruction on `func` (the unscheduled program), mapping the
    /// reference ids of the trace to fresh ones.
    pub fn replay(&self, func: &Func) -> Result<Schedule, ScheduleError> {
        self.replay_with(func, |_, _| {})
    }

    /// [`Trace::replay`], calling `after(step, schedule)` after every step.
    pub fn replay_with(&self, func: &Func, mut after: impl FnMut(&Step, &Schedule)) -> Result<Schedule, ScheduleError> {
        let mut sch = Schedule::new(func.clone())?;
        let mut map: HashMap<u32, u32> = HashMap::new();
        for (index, inst) in self.insts.iter().enumerate() {
            let bad = |reason: String| ScheduleError::BadTrace { index, inst: inst.step.name(), reason };
            let mut step = inst.step.clone();
            for id in step.refs_mut() {
                *id = *map.get(id).ok_or_else(|| bad(format!("reference #{id} is not an output of an earlier instruction")))?;
            }
            let outs = step.apply(&mut sch)?;
            if outs.len() != inst.outputs.len() {
                return Err(bad(format!("{} outputs recorded, {} produced", inst.outputs.len(), outs.len())));
            }
            map.extend(inst.outputs.iter().copied().zip(outs));
            after(&step, &sch);
        }
        Ok(sch)
    }
}

/// A thread tag as its CUDA name.
pub(crate) mod tag_name {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};
    use sparsec_ir::ThreadTag;

    pub fn serialize<S: Serializer>(t: &ThreadTag, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(t.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ThreadTag, D::Error> {
        let name = String::deserialize(d)?;
        ThreadTag::from_name(&name).ok_or_else(|| {
            let known: Vec<&str> = ThreadTag::ALL.iter().map(|t| t.name()).collect();
            D::Error::custom(format!("unknown thread tag `{name}` (expected one of {})", known.join(", ")))
        })
    }
}

/// A memory scope as its `.sptir` keyword.
pub(crate) mod scope_name {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};
    use sparsec_ir::Scope;

    pub fn serialize<S: Serializer>(t: &Scope, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(t.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Scope, D::Error> {
        let name = String::deserialize(d)?;
        Scope::from_name(&name)
            .ok_or_else(|| D::Error::custom(format!("unknown scope `{name}` (expected global, shared or local)")))
    }
}

/// The schema of a thread tag: its CUDA name.
pub(crate) fn tag_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let names: Vec<&str> = sparsec_ir::ThreadTag::ALL.iter().map(|t| t.name()).collect();
    schemars::json_schema!({"type": "string", "enum": names})
}

/// The schema of a memory scope: its `.sptir` keyword.
pub(crate) fn scope_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "enum": ["global", "shared", "local"]})
}

/// The schema of an annotation's value.
pub(crate) fn attr_value_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": ["boolean", "integer", "number", "string"]})
}

impl Trace {
    /// The JSON schema of a trace (checked in as `docs/trace.schema.json`): an object with
    /// `insts`, each an instruction — `op`, the primitive's arguments (described by their Rust
    /// documentation) and `outputs`.
    pub fn json_schema() -> serde_json::Value {
        use serde_json::{json, Value};
        let mut step = Value::from(schemars::schema_for!(Step));
        let outputs = json!({
            "description": "The ids of the references the primitive returned, in order (omitted when it returns none).",
            "type": "array",
            "items": {"type": "integer", "minimum": 0}
        });
        let defs = step.get_mut("$defs").map(Value::take).unwrap_or_else(|| json!({}));
        let mut variants = step.get_mut("oneOf").map(Value::take).unwrap_or_else(|| json!([]));
        for v in variants.as_array_mut().into_iter().flatten() {
            if let Some(props) = v.get_mut("properties").and_then(Value::as_object_mut) {
                props.insert("outputs".into(), outputs.clone());
            }
            // "[`Schedule::split`]." -> "Schedule::split", the method documenting the primitive.
            if let Some(Value::String(d)) = v.get_mut("description") {
                *d = format!("The primitive {}; see docs/trace-format.md.", d.trim_end_matches('.').trim_matches(['[', ']', '`']));
            }
        }
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "sparsec schedule trace",
            "description": "A schedule's primitives in order, replayed by `sparsec lower|run --schedule` (docs/trace-format.md).",
            "type": "object",
            "properties": {
                "insts": {
                    "description": "The instructions, in order.",
                    "type": "array",
                    "items": {"oneOf": variants}
                }
            },
            "required": ["insts"],
            "additionalProperties": false,
            "$defs": defs
        })
    }
}
