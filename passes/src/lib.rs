//! # sparsec-passes
//!
//! The passes of sparsec. Each keeps the meaning of the program exactly; the verifier runs
//! after every pass in the [`PassManager`].
//!
//! * [`lower_sparse_iter`] — Stage I → Stage II (sparse iterations → loops and blocks);
//! * [`lower_sparse_buffer`] — Stage II → Stage III (sparse buffers → flat buffers);
//! * [`lower_atomic`] — shared accumulations become `atomic_add`;
//! * [`horizontal_fusion`] — independent GPU kernels become one launch;
//! * [`simplify`] — arithmetic simplification of index expressions;
//! * [`decompose_format`] — format decomposition (`FormatRewriteRule`): a buffer moves to
//!   new formats, with preprocess iterations that copy it there.

mod atomic;
pub mod build;
pub mod decompose;
mod guard;
mod hfusion;
mod lower_buffer;
mod lower_iter;
pub mod scope;
pub mod simplify;

pub use atomic::{accumulates_only, accumulation, lower_atomic, ATOMIC_ATTR};
pub use decompose::{
    block_group_coo_rule, bsr_rule, decompose_format, ell3d_rule, ell_rule, extract_preprocess,
    group_coo_rule, hyb_rules, nm_2_4_rule, padding_rule, remove_preprocess, sr_bcrs_rule,
    DecomposeError, FormatRewriteRule, IndexMap,
};
pub use guard::{insert_checks, insert_checks_with, Fault, Site, SiteKind, FAULT_PARAM};
pub use hfusion::horizontal_fusion;
pub use lower_buffer::lower_sparse_buffer;
pub use lower_iter::lower_sparse_iter;

use sparsec_ir::verify::{verify_func, VerifyError};
use sparsec_ir::{Func, Stage};

/// Why a pass could not run, or what it broke.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// The input is at another stage than the pass expects.
    #[error("{pass} expects a Stage {expected} function, found Stage {found}")]
    WrongStage {
        /// The pass.
        pass: &'static str,
        /// The stage it takes.
        expected: Stage,
        /// The stage it got.
        found: Stage,
    },
    /// A construct the pass cannot lower yet.
    #[error("{pass}: {what} is not supported")]
    Unsupported {
        /// The pass.
        pass: &'static str,
        /// What it met.
        what: String,
    },
    /// The input does not verify.
    #[error("input of {pass} does not verify: {}", first(.errors))]
    InvalidInput {
        /// The pass.
        pass: &'static str,
        /// Every verifier error.
        errors: Vec<VerifyError>,
    },
    /// The pass produced IR that does not verify: a compiler bug.
    #[error("compiler bug: {pass} produced IR that does not verify: {}", first(.errors))]
    InvalidOutput {
        /// The pass.
        pass: &'static str,
        /// Every verifier error.
        errors: Vec<VerifyError>,
    },
    /// An internal invariant broke: a compiler bug.
    #[error("compiler bug: {0}")]
    Internal(String),
}

fn first(errors: &[VerifyError]) -> String {
    let more = if errors.len() > 1 { format!(" (and {} more)", errors.len() - 1) } else { String::new() };
    errors.first().map_or_else(String::new, |e| format!("{e}{more}"))
}

/// A function-to-function pass.
pub type PassFn = fn(&Func) -> Result<Func, PassError>;

/// Runs passes in order, verifying the input and the output of every pass.
pub struct PassManager {
    passes: Vec<(&'static str, PassFn)>,
    verify: bool,
}

impl Default for PassManager {
    fn default() -> Self {
        PassManager { passes: Vec::new(), verify: true }
    }
}

impl PassManager {
    /// An empty pipeline that verifies after every pass.
    pub fn new() -> Self {
        Self::default()
    }

    /// The standard pipeline from Stage `from` down to Stage `to` (empty when `to` is not
    /// below `from`): the one place that knows which pass lowers which stage.
    pub fn lowering(from: Stage, to: Stage) -> Self {
        let mut pm = Self::new();
        if from == Stage::I && to >= Stage::II {
            pm.add("lower_sparse_iter", lower_sparse_iter);
        }
        if from <= Stage::II && to == Stage::III {
            pm.add("lower_sparse_buffer", lower_sparse_buffer);
        }
        pm
    }

    /// The standard pipeline from Stage I down to `stage`.
    pub fn lowering_to(stage: Stage) -> Self {
        Self::lowering(Stage::I, stage)
    }

    /// Appends a pass.
    pub fn add(&mut self, name: &'static str, pass: PassFn) -> &mut Self {
        self.passes.push((name, pass));
        self
    }

    /// Turns verification on or off (it is on by default).
    pub fn verify(&mut self, on: bool) -> &mut Self {
        self.verify = on;
        self
    }

    /// Runs every pass; returns the function after each pass, in order.
    pub fn run_all(&self, f: &Func) -> Result<Vec<Func>, PassError> {
        let mut out: Vec<Func> = Vec::new();
        for &(name, pass) in &self.passes {
            let input = out.last().unwrap_or(f);
            if self.verify && out.is_empty() {
                verify_func(input).map_err(|errors| PassError::InvalidInput { pass: name, errors })?;
            }
            let next = pass(input)?;
            if self.verify {
                verify_func(&next).map_err(|errors| PassError::InvalidOutput { pass: name, errors })?;
            }
            out.push(next);
        }
        Ok(out)
    }

    /// Runs every pass and returns the final function.
    pub fn run(&self, f: &Func) -> Result<Func, PassError> {
        Ok(self.run_all(f)?.pop().unwrap_or_else(|| f.clone()))
    }
}
