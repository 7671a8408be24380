//! Concrete run-time data: arrays bound to handle parameters and scalars bound to scalar
//! parameters. Shared by the interpreter, the formats bindings and the backends.

use crate::types::DType;
use indexmap::IndexMap;

/// A typed 1-D array. `f16`/`bf16` data is kept as `f32` values already rounded to the
/// narrow type.
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    /// `i32` elements.
    I32(Vec<i32>),
    /// `i64` elements.
    I64(Vec<i64>),
    /// `f16` elements, widened.
    F16(Vec<f32>),
    /// `bf16` elements, widened.
    BF16(Vec<f32>),
    /// `f32` elements.
    F32(Vec<f32>),
    /// `f64` elements.
    F64(Vec<f64>),
    /// `bool` elements.
    Bool(Vec<bool>),
}

impl Array {
    /// A zero-filled array.
    pub fn zeros(dtype: DType, len: usize) -> Array {
        match dtype {
            DType::I32 => Array::I32(vec![0; len]),
            DType::I64 => Array::I64(vec![0; len]),
            DType::F16 => Array::F16(vec![0.0; len]),
            DType::BF16 => Array::BF16(vec![0.0; len]),
            DType::F32 => Array::F32(vec![0.0; len]),
            DType::F64 => Array::F64(vec![0.0; len]),
            DType::Bool => Array::Bool(vec![false; len]),
        }
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        match self {
            Array::I32(_) => DType::I32,
            Array::I64(_) => DType::I64,
            Array::F16(_) => DType::F16,
            Array::BF16(_) => DType::BF16,
            Array::F32(_) => DType::F32,
            Array::F64(_) => DType::F64,
            Array::Bool(_) => DType::Bool,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Array::I32(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F16(v) | Array::BF16(v) | Array::F32(v) => v.len(),
            Array::F64(v) => v.len(),
            Array::Bool(v) => v.len(),
        }
    }

    /// Whether the array has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` widened to `f64` (bools as 0/1).
    pub fn get_f64(&self, i: usize) -> Option<f64> {
        Some(match self {
            Array::I32(v) => *v.get(i)? as f64,
            Array::I64(v) => *v.get(i)? as f64,
            Array::F16(v) | Array::BF16(v) | Array::F32(v) => *v.get(i)? as f64,
            Array::F64(v) => *v.get(i)?,
            Array::Bool(v) => *v.get(i)? as u8 as f64,
        })
    }

    /// Element `i` of an integer array widened to `i64`.
    pub fn get_i64(&self, i: usize) -> Option<i64> {
        match self {
            Array::I32(v) => v.get(i).map(|x| *x as i64),
            Array::I64(v) => v.get(i).copied(),
            _ => None,
        }
    }

    /// All elements widened to `f64`.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        (0..self.len()).filter_map(|i| self.get_f64(i)).collect()
    }
}

/// A scalar argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// Integer of any width.
    Int(i64),
    /// Float of any width.
    Float(f64),
    /// Boolean.
    Bool(bool),
}

/// Arguments of one call, by parameter name: arrays for handles, scalars for scalars.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Args {
    /// Arrays bound to handle parameters.
    pub arrays: IndexMap<String, Array>,
    /// Values of scalar parameters.
    pub scalars: IndexMap<String, Scalar>,
}

impl Args {
    /// No arguments.
    pub fn new() -> Args {
        Args::default()
    }

    /// Binds an array to a handle parameter (replacing any earlier one).
    pub fn array(&mut self, name: impl Into<String>, a: Array) -> &mut Self {
        self.arrays.insert(name.into(), a);
        self
    }

    /// Binds an integer scalar.
    pub fn int(&mut self, name: impl Into<String>, v: i64) -> &mut Self {
        self.scalars.insert(name.into(), Scalar::Int(v));
        self
    }

    /// Binds a float scalar.
    pub fn float(&mut self, name: impl Into<String>, v: f64) -> &mut Self {
        self.scalars.insert(name.into(), Scalar::Float(v));
        self
    }
}

/// Where one run of compiled code spent its time (what `sparsec bench` breaks a run into).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RunTimes {
    /// Arguments into the backend's form: copies, conversions, uploads to a device.
    pub upload: std::time::Duration,
    /// The kernels, until they finished.
    pub kernel: std::time::Duration,
    /// Results back into arrays.
    pub download: std::time::Duration,
    /// A sparse output's symbolic phase: counting, prefix sums, allocation, coordinates.
    pub symbolic: std::time::Duration,
}

impl RunTimes {
    /// The whole run.
    pub fn total(&self) -> std::time::Duration {
        self.upload + self.kernel + self.download + self.symbolic
    }
}
