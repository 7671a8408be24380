//! Traces: the record of a schedule's primitives, serialisable and replayable.
//!
//! Every successful primitive appends one [`Instruction`]: a typed [`Step`] (the primitive
//! and its arguments, references as ids) and the ids of the references it returned.
//! [`Trace::replay`] runs the same steps through [`Step::apply`], the one decoder, mapping
//! recorded ids to fresh ones. The JSON form is documented in `docs/trace-format.md`.

use crate::cache::CacheAt;
use crate::error::ScheduleError;
use crate::schedule::{BlockRv, IterRv, LoopRv, Schedule, SpIterRv};
use serde::{Deserialize, Serialize};
use sparsec_ir::{AttrValue, Func, Scope, ThreadTag};
use std::collections::HashMap;

/// One primitive call with its arguments. References are the ids the trace gave them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// [`Schedule::get_sparse_iteration`].
    GetSparseIteration {
        /// The sparse iteration's name.
        name: String,
    },
    /// [`Schedule::get_sp_iters`].
    GetSpIters {
        /// The sparse iteration.
        sp_iter: SpIterRv,
    },
    /// [`Schedule::sparse_reorder`].
    SparseReorder {
        /// The sparse iteration.
        sp_iter: SpIterRv,
        /// Its iterators in the new order.
        order: Vec<IterRv>,
    },
    /// [`Schedule::sparse_fuse`].
    SparseFuse {
        /// The sparse iteration.
        sp_iter: SpIterRv,
        /// The iterators fused.
        iters: Vec<IterRv>,
    },
    /// [`Schedule::lower_sparse_iter`].
    LowerSparseIter,
    /// [`Schedule::lower_sparse_buffer`].
    LowerSparseBuffer,
    /// [`Schedule::lower_atomic`].
    LowerAtomic,
    /// [`Schedule::horizontal_fusion`].
    HorizontalFusion,
    /// [`Schedule::get_block`].
    GetBlock {
        /// The block's name.
        name: String,
    },
    /// [`Schedule::get_loops`].
    GetLoops {
        /// The block.
        block: BlockRv,
    },
    /// [`Schedule::split`].
    Split {
        /// The loop.
        r#loop: LoopRv,
        /// The factors, outermost first; `null` is inferred.
        factors: Vec<Option<i64>>,
    },
    /// [`Schedule::fuse`].
    Fuse {
        /// The loops, outermost first.
        loops: Vec<LoopRv>,
    },
    /// [`Schedule::reorder`].
    Reorder {
        /// The loops in their new order.
        loops: Vec<LoopRv>,
    },
    /// [`Schedule::bind`].
    Bind {
        /// The loop.
        r#loop: LoopRv,
        /// The thread index, as written in CUDA (`threadIdx.x`).
        #[serde(with = "tag_name")]
        tag: ThreadTag,
    },
    /// [`Schedule::parallel`].
    Parallel {
        /// The loop.
        r#loop: LoopRv,
    },
    /// [`Schedule::vectorize`].
    Vectorize {
        /// The loop.
        r#loop: LoopRv,
    },
    /// [`Schedule::unroll`].
    Unroll {
        /// The loop.
        r#loop: LoopRv,
    },
    /// [`Schedule::cache_read`].
    CacheRead {
        /// The block that reads the buffer.
        block: BlockRv,
        /// The buffer.
        buffer: String,
        /// The cache's memory scope.
        #[serde(with = "scope_name")]
        scope: Scope,
        /// The loop or block whose body reads through the cache.
        at: u32,
    },
    /// [`Schedule::cache_write`].
    CacheWrite {
        /// The block that writes the buffer.
        block: BlockRv,
        /// The buffer.
        buffer: String,
        /// The cache's memory scope.
        #[serde(with = "scope_name")]
        scope: Scope,
        /// The loop or block whose body writes through the cache.
        at: u32,
    },
    /// [`Schedule::set_scope`].
    SetScope {
        /// The allocated buffer.
        buffer: String,
        /// Its new memory scope.
        #[serde(with = "scope_name")]
        scope: Scope,
    },
    /// [`Schedule::annotate`].
    Annotate {
        /// The sparse iteration, block or loop.
        target: u32,
        /// The key.
        key: String,
        /// The value.
        value: AttrValue,
    },
    /// [`Schedule::unannotate`].
    Unannotate {
        /// The sparse iteration, block or loop.
        target: u32,
        /// The key.
        key: String,
    },
    /// [`Schedule::decompose_reduction`].
    DecomposeReduction {
        /// The reduction block.
        block: BlockRv,
        /// The loop the init goes before.
        r#loop: LoopRv,
    },
    /// [`Schedule::rfactor`].
    Rfactor {
        /// The reduction loop factored out.
        r#loop: LoopRv,
        /// Where its axis goes in the factor buffer.
        axis: usize,
    },
    /// [`Schedule::compute_at`].
    ComputeAt {
        /// The producer block.
        block: BlockRv,
        /// The consumer's loop.
        r#loop: LoopRv,
    },
    /// [`Schedule::reverse_compute_at`].
    ReverseComputeAt {
        /// The consumer block.
        block: BlockRv,
        /// The producer's loop.
        r#loop: LoopRv,
    },
}

impl Step {
    /// The primitive's name (`split`, `get_block`, ...), as written in traces.
    pub fn name(&self) -> &'static str {
        match self {
            Step::GetSparseIteration { .. } => "get_sparse_iteration",
            Step::GetSpIters { .. } => "get_sp_iters",
            Step::SparseReorder { .. } => "sparse_reorder",
            Step::SparseFuse { .. } => "sparse_fuse",
            Step::LowerSparseIter => "lower_sparse_iter",
            Step::LowerSparseBuffer => "lower_sparse_buffer",
            Step::LowerAtomic => "lower_atomic",
            Step::HorizontalFusion => "horizontal_fusion",
            Step::GetBlock { .. } => "get_block",
            Step::GetLoops { .. } => "get_loops",
            Step::Split { .. } => "split",
            Step::Fuse { .. } => "fuse",
            Step::Reorder { .. } => "reorder",
            Step::Bind { .. } => "bind",
            Step::Parallel { .. } => "parallel",
            Step::Vectorize { .. } => "vectorize",
            Step::Unroll { .. } => "unroll",
            Step::CacheRead { .. } => "cache_read",
            Step::CacheWrite { .. } => "cache_write",
            Step::SetScope { .. } => "set_scope",
            Step::Annotate { .. } => "annotate",
            Step::Unannotate { .. } => "unannotate",
            Step::DecomposeReduction { .. } => "decompose_reduction",
            Step::Rfactor { .. } => "rfactor",
            Step::ComputeAt { .. } => "compute_at",
            Step::ReverseComputeAt { .. } => "reverse_compute_at",
        }
    }

    /// Whether the step only looks references up and leaves the function as it is.
    pub fn is_query(&self) -> bool {
        matches!(self, Step::GetSparseIteration { .. } | Step::GetSpIters { .. } | Step::GetBlock { .. } | Step::GetLoops { .. })
    }

    /// Whether the step lowers the function to the next stage.
    pub fn is_lowering(&self) -> bool {
        matches!(self, Step::LowerSparseIter | Step::LowerSparseBuffer)
    }

    /// Every reference id among the arguments (to renumber a trace).
    pub fn refs_mut(&mut self) -> Vec<&mut u32> {
        fn all<T>(v: &mut [T], id: impl Fn(&mut T) -> &mut u32) -> impl Iterator<Item = &mut u32> {
            v.iter_mut().map(id)
        }
        match self {
            Step::GetSparseIteration { .. }
            | Step::GetBlock { .. }
            | Step::SetScope { .. }
            | Step::LowerSparseIter
            | Step::LowerSparseBuffer
            | Step::LowerAtomic
            | Step::HorizontalFusion => vec![],
            Step::GetSpIters { sp_iter } => vec![&mut sp_iter.0],
            Step::SparseReorder { sp_iter, order: iters } | Step::SparseFuse { sp_iter, iters } => {
                std::iter::once(&mut sp_iter.0).chain(all(iters, |r| &mut r.0)).collect()
            }
            Step::GetLoops { block } => vec![&mut block.0],
            Step::Fuse { loops } | Step::Reorder { loops } => all(loops, |r| &mut r.0).collect(),
            Step::Split { r#loop, .. }
            | Step::Bind { r#loop, .. }
            | Step::Parallel { r#loop }
            | Step::Vectorize { r#loop }
            | Step::Unroll { r#loop }
            | Step::Rfactor { r#loop, .. } => vec![&mut r#loop.0],
            Step::CacheRead { block, at, .. } | Step::CacheWrite { block, at, .. } => vec![&mut block.0, at],
            Step::Annotate { target, .. } | Step::Unannotate { target, .. } => vec![target],
            Step::DecomposeReduction { block, r#loop }
            | Step::ComputeAt { block, r#loop }
            | Step::ReverseComputeAt { block, r#loop } => vec![&mut block.0, &mut r#loop.0],
        }
    }

    /// Runs the primitive on `s` (which records it again); returns the ids it produced.
    pub fn apply(&self, s: &mut Schedule) -> Result<Vec<u32>, ScheduleError> {
        fn ids<T: Copy>(v: Vec<T>, id: impl Fn(T) -> u32) -> Vec<u32> {
            v.into_iter().map(id).collect()
        }
        let none = Vec::new();
        Ok(match self {
            Step::GetSparseIteration { name } => vec![s.get_sparse_iteration(name)?.id()],
            Step::GetSpIters { sp_iter } => ids(s.get_sp_iters(*sp_iter)?, IterRv::id),
            Step::SparseReorder { sp_iter, order } => s.sparse_reorder(*sp_iter, order).map(|()| none)?,
            Step::SparseFuse { sp_iter, iters } => s.sparse_fuse(*sp_iter, iters).map(|()| none)?,
            Step::LowerSparseIter => s.lower_sparse_iter().map(|()| none)?,
            Step::LowerSparseBuffer => s.lower_sparse_buffer().map(|()| none)?,
            Step::LowerAtomic => s.lower_atomic().map(|()| none)?,
            Step::HorizontalFusion => s.horizontal_fusion().map(|()| none)?,
            Step::GetBlock { name } => vec![s.get_block(name)?.id()],
            Step::GetLoops { block } => ids(s.get_loops(*block)?, LoopRv::id),
            Step::Split { r#loop, factors } => ids(s.split(*r#loop, factors)?, LoopRv::id),
            Step::Fuse { loops } => vec![s.fuse(loops)?.id()],
            Step::Reorder { loops } => s.reorder(loops).map(|()| none)?,
            Step::Bind { r#loop, tag } => s.bind(*r#loop, *tag).map(|()| none)?,
            Step::Parallel { r#loop } => s.parallel(*r#loop).map(|()| none)?,
            Step::Vectorize { r#loop } => s.vectorize(*r#loop).map(|()| none)?,
            Step::Unroll { r#loop } => s.unroll(*r#loop).map(|()| none)?,
            Step::CacheRead { block, buffer, scope, at } => {
                let at: CacheAt = s.cache_at_from_rv(*at)?;
                vec![s.cache_read(*block, buffer, *scope, at)?.id()]
            }
            Step::CacheWrite { block, buffer, scope, at } => {
                let at: CacheAt = s.cache_at_from_rv(*at)?;
                vec![s.cache_write(*block, buffer, *scope, at)?.id()]
            }
            Step::SetScope { buffer, scope } => s.set_scope(buffer, *scope).map(|()| none)?,
            Step::Annotate { target, key, value } => s.annotate_id(*target, key, value.clone()).map(|()| none)?,
            Step::Unannotate { target, key } => s.unannotate_id(*target, key).map(|()| none)?,
            Step::DecomposeReduction { block, r#loop } => vec![s.decompose_reduction(*block, *r#loop)?.id()],
            Step::Rfactor { r#loop, axis } => vec![s.rfactor(*r#loop, *axis)?.id()],
            Step::ComputeAt { block, r#loop } => s.compute_at(*block, *r#loop).map(|()| none)?,
            Step::ReverseComputeAt { block, r#loop } => s.reverse_compute_at(*block, *r#loop).map(|()| none)?,
        })
    }
}

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
mod tag_name {
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
mod scope_name {
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
