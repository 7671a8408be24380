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

pub mod assemble;
mod atomic;
pub mod build;
mod contract;
pub mod decompose;
mod guard;
mod hfusion;
mod lower_buffer;
mod lower_iter;
pub mod scope;
pub mod simplify;

pub use assemble::count_function;
pub use atomic::{accumulates_only, accumulation, lower_atomic, ATOMIC_ATTR};
pub use decompose::{
    block_group_coo_rule, bsr_rule, decompose_format, ell3d_rule, ell_rule, extract_preprocess,
    group_coo_rule, hyb_rules, nm_2_4_rule, padding_rule, rcm_rule, remove_preprocess, row_segments_rule, sr_bcrs_rule,
    DecomposeError, FormatRewriteRule, IndexMap,
};
pub use guard::{insert_checks, insert_checks_with, Fault, Site, SiteKind, FAULT_PARAM};
pub use contract::contract;
pub use hfusion::horizontal_fusion;
pub use lower_buffer::lower_sparse_buffer;
pub use lower_iter::lower_sparse_iter;

use sparsec_ir::verify::{verified, Verified, VerifyError};
use sparsec_ir::{Func, Stage};

/// Why a pass could not run, or what it broke.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
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

/// The proof that `f` verifies, or the pass's `InvalidInput` error: every pass takes its input
/// through this, so what it assumes of verified IR holds by type.
pub(crate) fn verified_input<'f>(pass: &'static str, f: &'f Func) -> Result<sparsec_ir::verify::Verified<'f>, PassError> {
    sparsec_ir::verify::verified(f).map_err(|errors| PassError::InvalidInput { pass, errors })
}

/// A function-to-function pass on verified input (the proof comes from the pass manager,
/// which verifies every function once: the input, then each pass's output).
pub type PassFn = for<'a> fn(Verified<'a>) -> Result<Func, PassError>;

/// A registered pass: its name, the stages it takes and gives, and the function.
#[derive(Clone, Copy, Debug)]
pub struct Pass {
    /// The name (`lower_sparse_iter`), as in `--print-after` and traces.
    pub name: &'static str,
    /// The stages it accepts.
    pub input: &'static [Stage],
    /// The stage it produces (`None`: the input's).
    pub output: Option<Stage>,
    /// What it does, in one line.
    pub about: &'static str,
    /// The pass.
    pub run: PassFn,
}

/// Every function-to-function pass (`sparsec passes` prints them). `decompose_format` is
/// not among them: it takes rewrite rules besides the function.
pub const PASSES: &[Pass] = &[
    Pass {
        name: "lower_sparse_iter",
        input: &[Stage::I],
        output: Some(Stage::II),
        about: "sparse iterations become loops and blocks in position space",
        run: lower_iter::run,
    },
    Pass {
        name: "lower_sparse_buffer",
        input: &[Stage::II],
        output: Some(Stage::III),
        about: "sparse buffers become flat buffers, accesses offsets by the storage rule",
        run: lower_buffer::run,
    },
    Pass {
        name: "lower_atomic",
        input: &[Stage::II, Stage::III],
        output: None,
        about: "accumulations annotated `atomic` or shared between GPU threads become atomic_add",
        run: atomic::run,
    },
    Pass {
        name: "horizontal_fusion",
        input: &[Stage::II, Stage::III],
        output: None,
        about: "runs of independent blockIdx.x kernels become one launch",
        run: hfusion::run,
    },
    Pass {
        name: "contract",
        input: &[Stage::I, Stage::II, Stage::III],
        output: None,
        about: "float a * b + c becomes fma(a, b, c), rounded once",
        run: contract::run,
    },
    Pass {
        name: "simplify",
        input: &[Stage::I, Stage::II, Stage::III],
        output: None,
        about: "arithmetic simplification of index expressions and shapes",
        run: |f| {
            let mut g = f.func().clone();
            simplify::simplify_func(&mut g);
            Ok(g)
        },
    },
    Pass {
        name: "extract_preprocess",
        input: &[Stage::I, Stage::II, Stage::III],
        output: None,
        about: "keeps only the preprocess statements of a decomposed program (the format conversion)",
        run: |f| Ok(extract_preprocess(&f)),
    },
    Pass {
        name: "remove_preprocess",
        input: &[Stage::I, Stage::II, Stage::III],
        output: None,
        about: "drops the preprocess statements of a decomposed program (the compute alone)",
        run: |f| Ok(remove_preprocess(&f)),
    },
];

/// Runs passes in order, verifying the input and the output of every pass, each function
/// once: the proof of one pass's output is the next pass's input.
#[derive(Default)]
pub struct PassManager {
    passes: Vec<&'static Pass>,
}

impl PassManager {
    /// An empty pipeline.
    pub fn new() -> Self {
        Self::default()
    }

    /// The standard pipeline from Stage `from` down to Stage `to` (empty when `to` is not
    /// below `from`): the one place that knows which pass lowers which stage.
    pub fn lowering(from: Stage, to: Stage) -> Self {
        let mut pm = Self::new();
        for p in PASSES.iter().filter(|p| p.output.is_some_and(|o| o > from && o <= to)) {
            pm.add(p);
        }
        pm
    }

    /// The standard pipeline from Stage I down to `stage`.
    pub fn lowering_to(stage: Stage) -> Self {
        Self::lowering(Stage::I, stage)
    }

    /// Appends a registered pass.
    pub fn add(&mut self, pass: &'static Pass) -> &mut Self {
        self.passes.push(pass);
        self
    }

    /// The names of the passes, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.passes.iter().map(|p| p.name).collect()
    }

    /// Runs every pass; returns the function after each pass, in order.
    pub fn run_all(&self, f: &Func) -> Result<Vec<Func>, PassError> {
        let mut out: Vec<Func> = Vec::new();
        let mut made_by: Option<&'static str> = None;
        for p in &self.passes {
            let input = out.last().unwrap_or(f);
            let proof = verified(input).map_err(|errors| match made_by {
                Some(pass) => PassError::InvalidOutput { pass, errors },
                None => PassError::InvalidInput { pass: p.name, errors },
            })?;
            out.push((p.run)(proof)?);
            made_by = Some(p.name);
        }
        if let (Some(last), Some(pass)) = (out.last(), made_by) {
            verified(last).map_err(|errors| PassError::InvalidOutput { pass, errors })?;
        }
        Ok(out)
    }

    /// Runs every pass and returns the final function.
    pub fn run(&self, f: &Func) -> Result<Func, PassError> {
        Ok(self.run_all(f)?.pop().unwrap_or_else(|| f.clone()))
    }
}
