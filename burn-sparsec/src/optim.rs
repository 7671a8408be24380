//! Optimiser state that follows a sparse weight's pattern when the pattern changes
//! ([`SparseWeight::prune`], [`SparseWeight::rigl`], a gradual pruning step).
//!
//! Burn keys an optimiser's per-parameter state by [`ParamId`](burn::module::ParamId); a
//! weight with a new pattern is a new parameter, so without this its state would start from
//! zero and the old state would stay in the optimiser for good. [`follow_patterns`] moves
//! each changed weight's state to the new parameter, entry by entry: an entry present before
//! and after keeps its state (Adam's moments, momentum, ...), a new entry starts at zero, and
//! the old parameter's state is gone.

use crate::error::{Result, SparseError};
use crate::weight::SparseWeight;
use burn::optim::ModuleOptimizer;
use burn::tensor::{DType, TensorData};
use std::collections::HashMap;

/// The state of `optim` after each `(before, after)` weight pair changed pattern: `after`'s
/// entries take the state `before` held for the same `(row, column)` and zero where `before`
/// had none, and the state of `before` is dropped. Works for optimisers whose state tensors
/// hold one value per entry (Adam, AdamW, SGD with momentum, RMSProp, ...); scalar state (a
/// step count) is carried as it is. A pair whose `before` has no state yet is skipped.
///
/// The optimiser's whole state goes through its record once per call (as saving it would),
/// so call it once per pattern update with every changed weight, not per weight.
pub fn follow_patterns(optim: ModuleOptimizer, changes: &[(&SparseWeight, &SparseWeight)]) -> Result<ModuleOptimizer> {
    let err = |detail: String| SparseError::Optimizer(detail);
    // The old parameter id of each change, with the new id and the slot map.
    let mut moves: HashMap<u64, (u64, usize, Vec<Option<usize>>)> = HashMap::new();
    for (before, after) in changes {
        let (old, new) = (before.values_param().id.val(), after.values_param().id.val());
        if old == new {
            continue;
        }
        let slots = after.slots_in(before)?;
        if moves.insert(old, (new, before.nnz(), slots)).is_some() {
            return Err(err(format!("parameter {old} changes pattern twice in one call")));
        }
    }
    if moves.is_empty() {
        return Ok(optim);
    }
    let bytes = optim.into_bytes().map_err(|e| err(format!("writing the state: {e}")))?;
    let reader = burn_pack::Reader::from_bytes(bytes).map_err(|e| err(format!("reading the state: {e}")))?;
    let renamed = |key: &str| -> String {
        let (id, rest) = key.split_once('.').unwrap_or((key, ""));
        match id.parse::<u64>().ok().and_then(|id| moves.get(&id)) {
            Some((new, ..)) if rest.is_empty() => new.to_string(),
            Some((new, ..)) => format!("{new}.{rest}"),
            None => key.to_string(),
        }
    };
    let scalars: Vec<_> = reader.scalars().iter().map(|(k, v)| (renamed(k), *v)).collect();
    let metadata: Vec<_> = reader.metadata().iter().map(|(k, v)| (renamed(k), v.clone())).collect();
    let mut tensors = Vec::new();
    for t in reader.into_tensors().map_err(|e| err(format!("reading the state: {e}")))? {
        let (name, dtype, shape, id, bytes) = t.into_parts().map_err(|e| err(format!("reading the state: {e}")))?;
        let Some((new, nnz, slots)) = id.and_then(|id| moves.get(&id)) else {
            tensors.push(burn_pack::Tensor::new(name, dtype, shape, id, bytes));
            continue;
        };
        if shape.as_slice() != [*nnz] || dtype != DType::F32 {
            return Err(err(format!(
                "state `{name}` is {dtype:?} {:?}, not one f32 per entry of the {nnz} the weight had; it cannot follow the pattern",
                shape
            )));
        }
        let old: Vec<f32> = TensorData::from_bytes(bytes, shape, dtype)
            .try_to_vec::<f32>()
            .map_err(|e| err(format!("state `{name}`: {e:?}")))?;
        let moved: Vec<f32> = slots.iter().map(|s| s.map_or(0.0, |p| old[p])).collect();
        let (bytes, shape, dtype) = TensorData::new(moved, [slots.len()]).into_parts();
        tensors.push(burn_pack::Tensor::new(renamed(&name), dtype, shape, Some(*new), bytes));
    }
    let mut writer = burn_pack::Writer::new(tensors);
    for (k, v) in &scalars {
        writer = writer.with_scalar(k, *v);
    }
    for (k, v) in &metadata {
        writer = writer.with_metadata(k, v);
    }
    let bytes = writer.into_bytes().map_err(|e| err(format!("writing the state: {e}")))?;
    optim.from_bytes(bytes).map_err(|e| err(format!("loading the state: {e}")))
}
