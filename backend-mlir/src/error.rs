//! The error type of the backend.

use sparsec_ir::Stage;

/// Everything that can go wrong in the MLIR backend.
#[derive(Debug, thiserror::Error)]
pub enum MlirError {
    /// The function is not at Stage III.
    #[error("the MLIR backend takes Stage III functions, `{func}` is at Stage {stage}")]
    NotStageIII {
        /// Function name.
        func: String,
        /// Its stage.
        stage: Stage,
    },
    /// A construct the backend does not translate.
    #[error("unsupported by the MLIR backend: {0}")]
    Unsupported(String),
    /// Wrong run-time arguments (missing, wrong dtype, too short).
    #[error("bad argument `{param}`: {message}")]
    BadArgument {
        /// Parameter name.
        param: String,
        /// What is wrong.
        message: String,
    },
    /// A buffer length could not be computed from the arguments.
    #[error("cannot size the buffers: {0}")]
    Size(String),
    /// The generated module does not verify: a compiler bug.
    #[error("compiler bug: the generated MLIR module does not verify: {diagnostics}")]
    InvalidModule {
        /// MLIR diagnostics.
        diagnostics: String,
    },
    /// A pass pipeline failed.
    #[error("MLIR pipeline `{pipeline}` failed: {diagnostics}")]
    Pipeline {
        /// The pipeline text.
        pipeline: String,
        /// MLIR diagnostics.
        diagnostics: String,
    },
    /// The JIT could not be created or the call failed.
    #[error("MLIR execution engine: {0}")]
    Jit(String),
    /// Internal inconsistency (a compiler bug).
    #[error("compiler bug in the MLIR backend: {0}")]
    Internal(String),
}

impl MlirError {
    pub(crate) fn unsupported(s: impl Into<String>) -> MlirError {
        MlirError::Unsupported(s.into())
    }

    pub(crate) fn internal(s: impl std::fmt::Display) -> MlirError {
        MlirError::Internal(s.to_string())
    }
}

/// Result alias of the backend.
pub type Result<T, E = MlirError> = std::result::Result<T, E>;
