//! The error type of the sparse tensors and their operations.

use crate::kernels::KernelError;
use sparsec_formats::ValidateError;

/// Why a sparse tensor cannot be built or an operation cannot run.
#[derive(Debug, thiserror::Error)]
pub enum SparseError {
    /// The matrix breaks a CSR/BSR invariant (the structure is checked before anything runs).
    #[error("invalid sparse matrix: {0}")]
    Invalid(#[from] ValidateError),
    /// A dimension, count or index does not fit the kernels' 32-bit indices.
    #[error("{what} = {value} does not fit a 32-bit index")]
    TooLarge {
        /// What overflowed.
        what: &'static str,
        /// Its value.
        value: usize,
    },
    /// Tensor shapes do not agree.
    #[error("shape mismatch in {op}: {detail}")]
    Shape {
        /// The operation.
        op: &'static str,
        /// What disagreed.
        detail: String,
    },
    /// Tensors live on different devices.
    #[error("device mismatch in {op}: {detail}")]
    Device {
        /// The operation.
        op: &'static str,
        /// The two devices.
        detail: String,
    },
    /// A tensor has an element type the kernels do not take (they are fp32).
    #[error("{op} takes f32, f16 or bf16 tensors, found {found}")]
    DType {
        /// The operation.
        op: &'static str,
        /// The type found.
        found: String,
    },
    /// The device runs none of the kernels (they run on CubeCL devices and on Flex).
    #[error("sparsec kernels run on CubeCL devices (wgpu, CUDA, ...) and on Flex (the CPU, through the MLIR JIT); found {0}")]
    UnsupportedDevice(String),
    /// A kernel could not be built.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// An argument is out of its range (a density, an N:M pattern).
    #[error("invalid argument to {op}: {detail}")]
    Argument {
        /// The operation.
        op: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// A sparse weight's loaded pattern parameters do not form a matrix.
    #[error("invalid sparse weight record: {0}")]
    Record(String),
    /// An optimiser's state could not follow a sparse weight's new pattern.
    #[error("optimiser state: {0}")]
    Optimizer(String),
    /// Reading a tensor back to the host failed.
    #[error("reading a tensor back failed: {0}")]
    ReadBack(String),
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, SparseError>;
