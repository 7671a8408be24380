//! The interpreter's error type.

use sparsec_ir::{DType, Span};

/// Why a run failed.
///
/// Every variant carries a `span`: the statement being executed, or the declaration (axis,
/// buffer, parameter) whose setup failed; [`Span::NONE`] when there is none.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum InterpError {
    /// No array was given for a handle parameter that a buffer or axis binds.
    #[error("missing array for handle parameter `{param}`")]
    MissingArray {
        /// Parameter name.
        param: String,
        /// The parameter's declaration.
        span: Span,
    },
    /// No value was given for a scalar parameter.
    #[error("missing value for scalar parameter `{param}`")]
    MissingScalar {
        /// Parameter name.
        param: String,
        /// The parameter's declaration.
        span: Span,
    },
    /// An array has the wrong element type.
    #[error("array `{param}` has dtype {found}, expected {expected}")]
    ArrayDType {
        /// Parameter name.
        param: String,
        /// What was expected (`f32`, or `i32 or i64` for index arrays).
        expected: String,
        /// What was given.
        found: DType,
        /// The declaration that binds the parameter.
        span: Span,
    },
    /// A scalar argument does not fit its parameter's type.
    #[error("scalar parameter `{param}`: {message}")]
    BadScalar {
        /// Parameter name.
        param: String,
        /// What is wrong.
        message: String,
        /// The parameter's declaration.
        span: Span,
    },
    /// An array is shorter than the storage of a buffer bound to it.
    #[error("array `{param}` has {len} elements, but buffer `{buffer}` needs {needed}")]
    ArrayTooShort {
        /// Parameter name.
        param: String,
        /// The buffer.
        buffer: String,
        /// Elements given.
        len: usize,
        /// Elements needed.
        needed: usize,
        /// The buffer's declaration.
        span: Span,
    },
    /// A flat storage offset is outside a buffer's array.
    #[error("index {index} is out of bounds for buffer `{buffer}` of length {len}")]
    OutOfBounds {
        /// The buffer.
        buffer: String,
        /// Flat offset.
        index: i64,
        /// Array length.
        len: usize,
        /// The statement.
        span: Span,
    },
    /// One index of an access is outside its dimension (a dense extent, or a position
    /// outside its row).
    #[error("index {index} of dimension {dim} of `{buffer}` is outside 0..{extent}")]
    IndexOutOfRange {
        /// The buffer.
        buffer: String,
        /// Dimension, from 0.
        dim: usize,
        /// The index value.
        index: i64,
        /// The dimension's extent (or the row length).
        extent: i64,
        /// The statement.
        span: Span,
    },
    /// A Stage-I store to a coordinate that the buffer does not store.
    #[error("store to a coordinate outside the sparsity structure: `{buffer}{coords:?}`")]
    AbsentStore {
        /// The buffer.
        buffer: String,
        /// The coordinates.
        coords: Vec<i64>,
        /// The statement.
        span: Span,
    },
    /// An `indptr` or `indices` array of an axis is read past its end.
    #[error("`{param}` ({role} of axis `{axis}`): index {index} is out of bounds for length {len}")]
    AxisArrayOutOfBounds {
        /// The axis.
        axis: String,
        /// Parameter name of the array.
        param: String,
        /// `indptr` or `indices`.
        role: &'static str,
        /// The index read.
        index: i64,
        /// Array length.
        len: usize,
        /// The statement (or the declaration, during setup).
        span: Span,
    },
    /// An `indptr` array is negative or decreasing.
    #[error("malformed indptr `{param}` of axis `{axis}`: {message}")]
    MalformedIndptr {
        /// The axis.
        axis: String,
        /// Parameter name of the array.
        param: String,
        /// What is wrong.
        message: String,
        /// The statement (or the declaration, during setup).
        span: Span,
    },
    /// A Stage-I iterator over an axis with a parent, but no iterator over the parent is active.
    #[error("axis `{axis}` is iterated without an enclosing iterator over its parent `{parent}`")]
    ParentNotIterated {
        /// The axis.
        axis: String,
        /// Its (declared or attached) parent.
        parent: String,
        /// The sparse iteration.
        span: Span,
    },
    /// A block iterator's binding is outside `0..extent`.
    #[error("block `{block}`: iterator `{var}` is bound to {value}, outside 0..{extent}")]
    BindingOutOfRange {
        /// The block.
        block: String,
        /// The iterator.
        var: String,
        /// Its value.
        value: i64,
        /// Its extent.
        extent: i64,
        /// The block statement.
        span: Span,
    },
    /// Integer division or remainder by zero.
    #[error("integer division by zero")]
    DivisionByZero {
        /// The statement.
        span: Span,
    },
    /// Operands of the wrong type (the verifier normally rejects these programs).
    #[error("type error: {message}")]
    Type {
        /// What is wrong.
        message: String,
        /// The statement.
        span: Span,
    },
    /// A variable is read where it has no value.
    #[error("variable `{var}` is used outside its scope")]
    UnboundVar {
        /// The variable.
        var: String,
        /// The statement.
        span: Span,
    },
    /// The run took more loop steps than [`Options::max_steps`](crate::Options::max_steps).
    #[error("out of fuel: more than {max_steps} loop steps")]
    FuelExhausted {
        /// The limit.
        max_steps: u64,
        /// The loop that ran out.
        span: Span,
    },
    /// A `while` whose condition still held after [`sparsec_ir::MAX_WHILE_ITERATIONS`]
    /// iterations of one execution.
    #[error("the `while` loop ran {limit} iterations and its condition still holds (a runaway loop)")]
    WhileLimit {
        /// The limit.
        limit: i64,
        /// The loop.
        span: Span,
    },
    /// A size or offset computation overflowed, or an extent is negative.
    #[error("bad size: {message}")]
    BadSize {
        /// What is wrong.
        message: String,
        /// The statement or declaration.
        span: Span,
    },
    /// The pattern of an assembled axis could not be computed from the arguments.
    #[error("assembling axis `{axis}`: {message}")]
    Assembly {
        /// The assembled axis.
        axis: String,
        /// What is wrong.
        message: String,
        /// Its declaration.
        span: Span,
    },
    /// The IR is malformed in a way the verifier should have caught.
    #[error("invalid IR: {message}")]
    Invalid {
        /// What is wrong.
        message: String,
        /// The statement or declaration.
        span: Span,
    },
}

impl InterpError {
    /// Where the error happened ([`Span::NONE`] when unknown).
    pub fn span(&self) -> Span {
        match self {
            InterpError::MissingArray { span, .. }
            | InterpError::MissingScalar { span, .. }
            | InterpError::ArrayDType { span, .. }
            | InterpError::BadScalar { span, .. }
            | InterpError::ArrayTooShort { span, .. }
            | InterpError::OutOfBounds { span, .. }
            | InterpError::IndexOutOfRange { span, .. }
            | InterpError::AbsentStore { span, .. }
            | InterpError::AxisArrayOutOfBounds { span, .. }
            | InterpError::MalformedIndptr { span, .. }
            | InterpError::ParentNotIterated { span, .. }
            | InterpError::BindingOutOfRange { span, .. }
            | InterpError::DivisionByZero { span }
            | InterpError::Type { span, .. }
            | InterpError::UnboundVar { span, .. }
            | InterpError::FuelExhausted { span, .. }
            | InterpError::WhileLimit { span, .. }
            | InterpError::BadSize { span, .. }
            | InterpError::Assembly { span, .. }
            | InterpError::Invalid { span, .. } => *span,
        }
    }
}
