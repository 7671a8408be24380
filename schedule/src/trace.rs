//! Traces: the record of a schedule's primitives, serialisable and replayable.

use crate::error::ScheduleError;
use crate::schedule::{BlockRv, IterRv, LoopRv, Schedule, SpIterRv};
use serde::{Deserialize, Serialize};
use sparsec_ir::{AttrValue, Func, ThreadTag};
use std::collections::HashMap;

/// One argument of an instruction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum TraceArg {
    /// A reference id (an output of an earlier instruction).
    Rv(u32),
    /// An integer.
    Int(i64),
    /// An optional integer (a split factor; `None` is inferred).
    OptInt(Option<i64>),
    /// A string (a name or key).
    Str(String),
    /// Strings.
    Strs(Vec<String>),
    /// Integers.
    Ints(Vec<i64>),
    /// An annotation value.
    Value(AttrValue),
    /// A thread tag, as written in CUDA (`threadIdx.x`).
    ThreadTag(String),
}

/// One successful primitive call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Instruction {
    /// The primitive (`split`, `get_block`, ...).
    pub name: String,
    /// Its arguments, in call order.
    pub inputs: Vec<TraceArg>,
    /// The ids of the references it returned.
    pub outputs: Vec<u32>,
}

/// The primitives applied to a function, in order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// The instructions.
    pub insts: Vec<Instruction>,
}

impl Trace {
    /// The trace as JSON.
    pub fn to_json(&self) -> String {
        // Serialising plain enums, strings and numbers into a String cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Reads a trace written by [`Trace::to_json`].
    pub fn from_json(s: &str) -> Result<Trace, serde_json::Error> {
        serde_json::from_str(s)
    }

    /// Re-executes every instruction on `func` (the unscheduled program), mapping the
    /// reference ids of the trace to fresh ones.
    pub fn replay(&self, func: &Func) -> Result<Schedule, ScheduleError> {
        let mut sch = Schedule::new(func.clone())?;
        let mut map: HashMap<u32, u32> = HashMap::new();
        for inst in &self.insts {
            let outs = Replayer { inst, map: &map }.apply(&mut sch)?;
            if outs.len() != inst.outputs.len() {
                return Err(bad(inst, format!("{} outputs recorded, {} produced", inst.outputs.len(), outs.len())));
            }
            map.extend(inst.outputs.iter().copied().zip(outs));
        }
        Ok(sch)
    }
}

fn bad(inst: &Instruction, reason: impl Into<String>) -> ScheduleError {
    ScheduleError::BadTrace { inst: inst.name.clone(), reason: reason.into() }
}

/// Decodes the arguments of one instruction.
struct Replayer<'a> {
    inst: &'a Instruction,
    map: &'a HashMap<u32, u32>,
}

impl Replayer<'_> {
    fn arg(&self, k: usize) -> Result<&TraceArg, ScheduleError> {
        self.inst.inputs.get(k).ok_or_else(|| bad(self.inst, format!("missing argument {k}")))
    }

    fn rv(&self, k: usize) -> Result<u32, ScheduleError> {
        match self.arg(k)? {
            TraceArg::Rv(id) => {
                self.map.get(id).copied().ok_or_else(|| bad(self.inst, format!("reference #{id} is not defined earlier")))
            }
            other => Err(bad(self.inst, format!("argument {k} should be a reference, found {other:?}"))),
        }
    }

    fn rvs_from(&self, k: usize) -> Result<Vec<u32>, ScheduleError> {
        (k..self.inst.inputs.len()).map(|i| self.rv(i)).collect()
    }

    fn str(&self, k: usize) -> Result<&str, ScheduleError> {
        match self.arg(k)? {
            TraceArg::Str(s) => Ok(s),
            other => Err(bad(self.inst, format!("argument {k} should be a string, found {other:?}"))),
        }
    }

    fn scope(&self, k: usize) -> Result<sparsec_ir::Scope, ScheduleError> {
        let name = self.str(k)?;
        sparsec_ir::Scope::from_name(name).ok_or_else(|| bad(self.inst, format!("unknown scope {name:?}")))
    }

    fn arity(&self, n: usize) -> Result<(), ScheduleError> {
        if self.inst.inputs.len() == n {
            Ok(())
        } else {
            Err(bad(self.inst, format!("expected {n} arguments, found {}", self.inst.inputs.len())))
        }
    }

    /// Runs the instruction; returns the ids of the references it produced.
    fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>, ScheduleError> {
        let none = Ok(vec![]);
        match self.inst.name.as_str() {
            "get_sparse_iteration" => {
                self.arity(1)?;
                Ok(vec![s.get_sparse_iteration(self.str(0)?)?.id()])
            }
            "get_sp_iters" => {
                self.arity(1)?;
                Ok(s.get_sp_iters(SpIterRv(self.rv(0)?))?.into_iter().map(IterRv::id).collect())
            }
            "sparse_reorder" | "sparse_fuse" => {
                let sp = SpIterRv(self.rv(0)?);
                let iters: Vec<IterRv> = self.rvs_from(1)?.into_iter().map(IterRv).collect();
                if self.inst.name == "sparse_reorder" {
                    s.sparse_reorder(sp, &iters)?;
                } else {
                    s.sparse_fuse(sp, &iters)?;
                }
                none
            }
            "lower_sparse_iter" => {
                self.arity(0)?;
                s.lower_sparse_iter()?;
                none
            }
            "lower_atomic" => {
                self.arity(0)?;
                s.lower_atomic()?;
                none
            }
            "horizontal_fusion" => {
                self.arity(0)?;
                s.horizontal_fusion()?;
                none
            }
            "lower_sparse_buffer" => {
                self.arity(0)?;
                s.lower_sparse_buffer()?;
                none
            }
            "get_block" => {
                self.arity(1)?;
                Ok(vec![s.get_block(self.str(0)?)?.id()])
            }
            "get_loops" => {
                self.arity(1)?;
                Ok(s.get_loops(BlockRv(self.rv(0)?))?.into_iter().map(LoopRv::id).collect())
            }
            "split" => {
                let lp = LoopRv(self.rv(0)?);
                let factors = self.inst.inputs[1..]
                    .iter()
                    .map(|a| match a {
                        TraceArg::OptInt(f) => Ok(*f),
                        other => Err(bad(self.inst, format!("a split factor should be OptInt, found {other:?}"))),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(s.split(lp, &factors)?.into_iter().map(LoopRv::id).collect())
            }
            "fuse" => {
                let loops: Vec<LoopRv> = self.rvs_from(0)?.into_iter().map(LoopRv).collect();
                Ok(vec![s.fuse(&loops)?.id()])
            }
            "reorder" => {
                let loops: Vec<LoopRv> = self.rvs_from(0)?.into_iter().map(LoopRv).collect();
                s.reorder(&loops)?;
                none
            }
            "bind" => {
                self.arity(2)?;
                let lp = LoopRv(self.rv(0)?);
                let tag = match self.arg(1)? {
                    TraceArg::ThreadTag(t) => {
                        ThreadTag::from_name(t).ok_or_else(|| bad(self.inst, format!("unknown thread tag {t:?}")))?
                    }
                    other => return Err(bad(self.inst, format!("argument 1 should be a thread tag, found {other:?}"))),
                };
                s.bind(lp, tag)?;
                none
            }
            name @ ("parallel" | "vectorize" | "unroll") => {
                self.arity(1)?;
                let lp = LoopRv(self.rv(0)?);
                match name {
                    "parallel" => s.parallel(lp)?,
                    "vectorize" => s.vectorize(lp)?,
                    _ => s.unroll(lp)?,
                }
                none
            }
            "cache_read" | "cache_write" => {
                self.arity(4)?;
                let block = BlockRv(self.rv(0)?);
                let scope = self.scope(2)?;
                let at = s.cache_at_from_rv(self.rv(3)?)?;
                let b = if self.inst.name == "cache_read" {
                    s.cache_read(block, self.str(1)?, scope, at)?
                } else {
                    s.cache_write(block, self.str(1)?, scope, at)?
                };
                Ok(vec![b.id()])
            }
            "set_scope" => {
                self.arity(2)?;
                s.set_scope(self.str(0)?, self.scope(1)?)?;
                none
            }
            "annotate" => {
                self.arity(3)?;
                let value = match self.arg(2)? {
                    TraceArg::Value(v) => v.clone(),
                    other => return Err(bad(self.inst, format!("argument 2 should be a value, found {other:?}"))),
                };
                s.annotate_id(self.rv(0)?, self.str(1)?, value)?;
                none
            }
            "unannotate" => {
                self.arity(2)?;
                s.unannotate_id(self.rv(0)?, self.str(1)?)?;
                none
            }
            "decompose_reduction" => {
                self.arity(2)?;
                Ok(vec![s.decompose_reduction(BlockRv(self.rv(0)?), LoopRv(self.rv(1)?))?.id()])
            }
            "rfactor" => {
                self.arity(2)?;
                let axis = match self.arg(1)? {
                    TraceArg::Int(a) => usize::try_from(*a).map_err(|_| bad(self.inst, format!("bad factor axis {a}")))?,
                    other => return Err(bad(self.inst, format!("argument 1 should be an integer, found {other:?}"))),
                };
                Ok(vec![s.rfactor(LoopRv(self.rv(0)?), axis)?.id()])
            }
            "compute_at" | "reverse_compute_at" => {
                self.arity(2)?;
                let (b, l) = (BlockRv(self.rv(0)?), LoopRv(self.rv(1)?));
                if self.inst.name == "compute_at" {
                    s.compute_at(b, l)?;
                } else {
                    s.reverse_compute_at(b, l)?;
                }
                none
            }
            other => Err(bad(self.inst, format!("unknown primitive `{other}`"))),
        }
    }
}
