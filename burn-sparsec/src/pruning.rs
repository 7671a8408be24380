//! [`GradualPruning`]: the density of a weight over training when it is pruned a little at a
//! time (Zhu & Gupta, "To prune, or not to prune", 2017).

use crate::error::{Result, SparseError};

/// A gradual pruning schedule: from `initial` density at step `begin` to `target` at step
/// `end`, pruning every `every` steps, the density following
/// `target + (initial − target) · (1 − (step − begin) / (end − begin))³` — fast while many
/// weights are redundant, slow near the target. Pair each pruning step with
/// [`SparseWeight::prune`](crate::SparseWeight::prune) (or `prune_rows`) and
/// [`follow_patterns`](crate::follow_patterns) so the optimiser keeps its state.
#[derive(Clone, Debug, PartialEq)]
pub struct GradualPruning {
    /// Density before `begin`.
    pub initial: f64,
    /// Density from `end` on.
    pub target: f64,
    /// First pruning step.
    pub begin: usize,
    /// Last pruning step (the target is reached there).
    pub end: usize,
    /// Steps between pruning steps.
    pub every: usize,
}

impl GradualPruning {
    /// A schedule, checked: densities in `[0, 1]` with `target ≤ initial`, `begin ≤ end`,
    /// `every ≥ 1`.
    pub fn new(initial: f64, target: f64, begin: usize, end: usize, every: usize) -> Result<Self> {
        let bad = |detail: String| Err(SparseError::Argument { op: "GradualPruning::new", detail });
        if !(0.0..=1.0).contains(&initial) || !(0.0..=1.0).contains(&target) || target > initial {
            return bad(format!("densities {initial} → {target} must lie in [0, 1] and not grow"));
        }
        if begin > end || every == 0 {
            return bad(format!("steps {begin}..={end} every {every} need begin ≤ end and every ≥ 1"));
        }
        Ok(GradualPruning { initial, target, begin, end, every })
    }

    /// The scheduled density at `step`.
    pub fn density_at(&self, step: usize) -> f64 {
        if step >= self.end {
            return self.target;
        }
        if step <= self.begin {
            return self.initial;
        }
        let left = 1.0 - (step - self.begin) as f64 / (self.end - self.begin) as f64;
        self.target + (self.initial - self.target) * left.powi(3)
    }

    /// The density to prune to at `step`, if `step` is a pruning step (`begin`, every
    /// `every` steps after it up to `end`, and `end` itself).
    pub fn prune_at(&self, step: usize) -> Option<f64> {
        let on = step >= self.begin
            && step <= self.end
            && ((step - self.begin).is_multiple_of(self.every) || step == self.end);
        on.then(|| self.density_at(step))
    }
}
