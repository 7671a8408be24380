//! The semantic core: run-time scalar values and the arithmetic on them, defined once.
//!
//! The interpreter evaluates with these functions and the simplifier folds constants with
//! them, so a folded program means what the unfolded one does. Integers wrap at their
//! width; `/` truncates, `//` and `%` round towards negative infinity; an integer division
//! or remainder by zero is [`ValueError::DivisionByZero`]; floats follow IEEE 754 (a
//! division by zero gives an infinity or NaN); casts follow Rust's `as` (floats to integers
//! saturate and NaN gives 0; `x != 0` for bool). Backends translate to operations with
//! these meanings, and the differential tests hold them to it.

use crate::data::Array;
use crate::{BinOp, DType, Intrinsic, UnOp};
use half::{bf16, f16};
use std::fmt;

/// A scalar value. `f16`/`bf16` values are kept widened to `f32`, already rounded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// `i32`.
    I32(i32),
    /// `i64`.
    I64(i64),
    /// `f16`, widened.
    F16(f32),
    /// `bf16`, widened.
    BF16(f32),
    /// `f32`.
    F32(f32),
    /// `f64`.
    F64(f64),
    /// `bool`.
    Bool(bool),
}

/// Why an operation failed; the caller adds where.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ValueError {
    /// An integer division or remainder by zero.
    #[error("integer division by zero")]
    DivisionByZero,
    /// Operands of the wrong types.
    #[error("{0}")]
    Type(String),
}

fn round_f16(x: f32) -> f32 {
    f16::from_f32(x).to_f32()
}

fn round_bf16(x: f32) -> f32 {
    bf16::from_f32(x).to_f32()
}

/// Result of a binary operator on one operand type: a value of that type or a bool.
enum Out<T> {
    Val(T),
    Bool(bool),
}

macro_rules! int_binop {
    ($name:ident, $t:ty) => {
        fn $name(op: BinOp, a: $t, b: $t) -> Result<Out<$t>, ValueError> {
            let nonzero = |b: $t| if b == 0 { Err(ValueError::DivisionByZero) } else { Ok(b) };
            Ok(Out::Val(match op {
                BinOp::Add => a.wrapping_add(b),
                BinOp::Sub => a.wrapping_sub(b),
                BinOp::Mul => a.wrapping_mul(b),
                BinOp::Div => a.wrapping_div(nonzero(b)?),
                BinOp::FloorDiv => {
                    let q = a.wrapping_div(nonzero(b)?);
                    if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) {
                        q.wrapping_sub(1)
                    } else {
                        q
                    }
                }
                BinOp::FloorMod => {
                    let r = a.wrapping_rem(nonzero(b)?);
                    if r != 0 && ((r < 0) != (b < 0)) {
                        r.wrapping_add(b)
                    } else {
                        r
                    }
                }
                BinOp::Min => a.min(b),
                BinOp::Max => a.max(b),
                BinOp::Eq => return Ok(Out::Bool(a == b)),
                BinOp::Ne => return Ok(Out::Bool(a != b)),
                BinOp::Lt => return Ok(Out::Bool(a < b)),
                BinOp::Le => return Ok(Out::Bool(a <= b)),
                BinOp::Gt => return Ok(Out::Bool(a > b)),
                BinOp::Ge => return Ok(Out::Bool(a >= b)),
                BinOp::And | BinOp::Or => return Err(logic_on(stringify!($t))),
            }))
        }
    };
}

macro_rules! float_binop {
    ($name:ident, $t:ty) => {
        fn $name(op: BinOp, a: $t, b: $t) -> Result<Out<$t>, ValueError> {
            Ok(Out::Val(match op {
                BinOp::Add => a + b,
                BinOp::Sub => a - b,
                BinOp::Mul => a * b,
                BinOp::Div => a / b,
                BinOp::FloorDiv => (a / b).floor(),
                BinOp::FloorMod => {
                    let r = a % b;
                    if r != 0.0 && ((r < 0.0) != (b < 0.0)) {
                        r + b
                    } else {
                        r
                    }
                }
                // A compare and a select, the same on every backend: a NaN operand yields
                // the other one, and of equal operands (`-0.0`, `0.0`) the second.
                BinOp::Min => if a < b || b.is_nan() { a } else { b },
                BinOp::Max => if a > b || b.is_nan() { a } else { b },
                BinOp::Eq => return Ok(Out::Bool(a == b)),
                BinOp::Ne => return Ok(Out::Bool(a != b)),
                BinOp::Lt => return Ok(Out::Bool(a < b)),
                BinOp::Le => return Ok(Out::Bool(a <= b)),
                BinOp::Gt => return Ok(Out::Bool(a > b)),
                BinOp::Ge => return Ok(Out::Bool(a >= b)),
                BinOp::And | BinOp::Or => return Err(logic_on(stringify!($t))),
            }))
        }
    };
}

int_binop!(binop_i32, i32);
int_binop!(binop_i64, i64);
float_binop!(binop_f32, f32);
float_binop!(binop_f64, f64);

fn logic_on(t: &str) -> ValueError {
    ValueError::Type(format!("`&&` and `||` take bool operands, found {t}"))
}

fn op_name(op: BinOp) -> &'static str {
    match op {
        BinOp::Min => "min",
        BinOp::Max => "max",
        _ => op.symbol().unwrap_or("?"),
    }
}

impl Value {
    /// The dtype of the value.
    pub fn dtype(self) -> DType {
        match self {
            Value::I32(_) => DType::I32,
            Value::I64(_) => DType::I64,
            Value::F16(_) => DType::F16,
            Value::BF16(_) => DType::BF16,
            Value::F32(_) => DType::F32,
            Value::F64(_) => DType::F64,
            Value::Bool(_) => DType::Bool,
        }
    }

    /// Zero (or `false`) of a dtype.
    pub fn zero(dtype: DType) -> Value {
        Value::from_i64(dtype, 0)
    }

    /// The integer, if this is an integer value.
    pub fn as_int(self) -> Option<i64> {
        match self {
            Value::I32(x) => Some(x as i64),
            Value::I64(x) => Some(x),
            _ => None,
        }
    }

    /// `x as dtype`.
    pub fn from_i64(dtype: DType, x: i64) -> Value {
        match dtype {
            DType::I32 => Value::I32(x as i32),
            DType::I64 => Value::I64(x),
            DType::F16 => Value::F16(f16::from_f64(x as f64).to_f32()),
            DType::BF16 => Value::BF16(bf16::from_f64(x as f64).to_f32()),
            DType::F32 => Value::F32(x as f32),
            DType::F64 => Value::F64(x as f64),
            DType::Bool => Value::Bool(x != 0),
        }
    }

    /// `x as dtype` (floats to integers saturate, NaN gives 0).
    pub fn from_f64(dtype: DType, x: f64) -> Value {
        match dtype {
            DType::I32 => Value::I32(x as i32),
            DType::I64 => Value::I64(x as i64),
            DType::F16 => Value::F16(f16::from_f64(x).to_f32()),
            DType::BF16 => Value::BF16(bf16::from_f64(x).to_f32()),
            DType::F32 => Value::F32(x as f32),
            DType::F64 => Value::F64(x),
            DType::Bool => Value::Bool(x != 0.0),
        }
    }

    fn from_f32(dtype: DType, x: f32) -> Value {
        match dtype {
            DType::I32 => Value::I32(x as i32),
            DType::I64 => Value::I64(x as i64),
            DType::F16 => Value::F16(round_f16(x)),
            DType::BF16 => Value::BF16(round_bf16(x)),
            DType::F32 => Value::F32(x),
            DType::F64 => Value::F64(x as f64),
            DType::Bool => Value::Bool(x != 0.0),
        }
    }

    /// Conversion with the semantics of Rust's `as` (`x != 0` for conversions to bool).
    pub fn cast(self, to: DType) -> Value {
        match self {
            Value::I32(x) => Value::from_i64(to, x as i64),
            Value::I64(x) => Value::from_i64(to, x),
            Value::F16(x) | Value::BF16(x) | Value::F32(x) => Value::from_f32(to, x),
            Value::F64(x) => Value::from_f64(to, x),
            Value::Bool(b) => Value::from_i64(to, b as i64),
        }
    }

    /// `a op b`. Operands must have the same dtype; `&&`/`||` are handled by the caller
    /// (they short-circuit) but are accepted here too.
    pub fn binary(op: BinOp, a: Value, b: Value) -> Result<Value, ValueError> {
        use Value::*;
        let narrow = |o: Out<f32>, round: fn(f32) -> f32, wrap: fn(f32) -> Value| match o {
            Out::Val(x) => wrap(round(x)),
            Out::Bool(c) => Bool(c),
        };
        Ok(match (a, b) {
            (I32(x), I32(y)) => lift(binop_i32(op, x, y)?, I32),
            (I64(x), I64(y)) => lift(binop_i64(op, x, y)?, I64),
            (F32(x), F32(y)) => lift(binop_f32(op, x, y)?, F32),
            (F64(x), F64(y)) => lift(binop_f64(op, x, y)?, F64),
            (F16(x), F16(y)) => narrow(binop_f32(op, x, y)?, round_f16, F16),
            (BF16(x), BF16(y)) => narrow(binop_f32(op, x, y)?, round_bf16, BF16),
            (Bool(x), Bool(y)) => Bool(match op {
                BinOp::And => x && y,
                BinOp::Or => x || y,
                BinOp::Eq => x == y,
                BinOp::Ne => x != y,
                BinOp::Lt => !x & y,
                BinOp::Le => x <= y,
                BinOp::Gt => x & !y,
                BinOp::Ge => x >= y,
                _ => return Err(ValueError::Type(format!("`{}` does not take bool operands", op_name(op)))),
            }),
            _ => {
                return Err(ValueError::Type(format!(
                    "operands of `{}` have different types: {} and {}",
                    op_name(op),
                    a.dtype(),
                    b.dtype()
                )))
            }
        })
    }

    /// `op a`.
    pub fn unary(op: UnOp, a: Value) -> Result<Value, ValueError> {
        use Value::*;
        Ok(match (op, a) {
            (UnOp::Neg, I32(x)) => I32(x.wrapping_neg()),
            (UnOp::Neg, I64(x)) => I64(x.wrapping_neg()),
            (UnOp::Neg, F16(x)) => F16(-x),
            (UnOp::Neg, BF16(x)) => BF16(-x),
            (UnOp::Neg, F32(x)) => F32(-x),
            (UnOp::Neg, F64(x)) => F64(-x),
            (UnOp::Not, Bool(b)) => Bool(!b),
            (UnOp::Neg, Bool(_)) => return Err(ValueError::Type("`-` does not take a bool operand".into())),
            (UnOp::Not, _) => return Err(ValueError::Type(format!("`!` takes a bool operand, found {}", a.dtype()))),
        })
    }

    /// An intrinsic applied to evaluated operands.
    pub fn call(f: Intrinsic, args: &[Value]) -> Result<Value, ValueError> {
        if args.len() != f.arity() {
            return Err(ValueError::Type(format!("`{}` takes {} operands, found {}", f.name(), f.arity(), args.len())));
        }
        match f {
            Intrinsic::MaxValue(d) => return Ok(extreme(d, true)),
            Intrinsic::MinValue(d) => return Ok(extreme(d, false)),
            Intrinsic::Pow => {
                let (x, y) = (args[0], args[1]);
                if x.dtype() == y.dtype() {
                    if let (Value::F64(a), Value::F64(b)) = (x, y) {
                        return Ok(Value::F64(a.powf(b)));
                    }
                    if let (Some(a), Some(b)) = (x.as_f32(), y.as_f32()) {
                        return Ok(Value::from_f32(x.dtype(), a.powf(b)));
                    }
                }
                return Err(ValueError::Type(format!(
                    "`pow` takes two operands of the same float type, found {} and {}",
                    x.dtype(),
                    y.dtype()
                )));
            }
            Intrinsic::Fma => {
                let (x, y, z) = (args[0], args[1], args[2]);
                if x.dtype() == y.dtype() && y.dtype() == z.dtype() {
                    if let (Value::F64(a), Value::F64(b), Value::F64(c)) = (x, y, z) {
                        return Ok(Value::F64(a.mul_add(b, c)));
                    }
                    if let (Value::F32(a), Value::F32(b), Value::F32(c)) = (x, y, z) {
                        return Ok(Value::F32(a.mul_add(b, c)));
                    }
                    if let (Some(a), Some(b), Some(c)) = (x.as_f32(), y.as_f32(), z.as_f32()) {
                        // f16/bf16: the product is exact in f64; one rounding to the dtype
                        // but for ties between f64 neighbours.
                        return Ok(Value::from_f32(x.dtype(), (a as f64).mul_add(b as f64, c as f64) as f32));
                    }
                }
                return Err(ValueError::Type(format!(
                    "`fma` takes three operands of the same float type, found {}, {} and {}",
                    x.dtype(),
                    y.dtype(),
                    z.dtype()
                )));
            }
            _ => {}
        }
        let a = args[0];
        match a {
            Value::I32(x) => match f {
                Intrinsic::Abs => return Ok(Value::I32(x.wrapping_abs())),
                Intrinsic::Floor | Intrinsic::Ceil => return Ok(a),
                _ => {}
            },
            Value::I64(x) => match f {
                Intrinsic::Abs => return Ok(Value::I64(x.wrapping_abs())),
                Intrinsic::Floor | Intrinsic::Ceil => return Ok(a),
                _ => {}
            },
            Value::F64(x) => return Ok(Value::F64(unary_f64(f, x))),
            Value::F16(x) | Value::BF16(x) | Value::F32(x) => {
                return Ok(Value::from_f32(a.dtype(), unary_f32(f, x)))
            }
            Value::Bool(_) => {}
        }
        Err(ValueError::Type(format!("`{}` does not take a {} operand", f.name(), a.dtype())))
    }

    fn as_f32(self) -> Option<f32> {
        match self {
            Value::F16(x) | Value::BF16(x) | Value::F32(x) => Some(x),
            _ => None,
        }
    }
}

fn lift<T>(o: Out<T>, wrap: fn(T) -> Value) -> Value {
    match o {
        Out::Val(x) => wrap(x),
        Out::Bool(c) => Value::Bool(c),
    }
}

macro_rules! unary_float {
    ($name:ident, $t:ty) => {
        fn $name(f: Intrinsic, x: $t) -> $t {
            match f {
                Intrinsic::Exp => x.exp(),
                Intrinsic::Log => x.ln(),
                Intrinsic::Sqrt => x.sqrt(),
                Intrinsic::Abs => x.abs(),
                Intrinsic::Tanh => x.tanh(),
                Intrinsic::Sigmoid => 1.0 / (1.0 + (-x).exp()),
                Intrinsic::Floor => x.floor(),
                Intrinsic::Ceil => x.ceil(),
                // Handled by the caller.
                Intrinsic::Pow | Intrinsic::Fma | Intrinsic::MaxValue(_) | Intrinsic::MinValue(_) => x,
            }
        }
    };
}

unary_float!(unary_f32, f32);
unary_float!(unary_f64, f64);

/// Largest (`max`) or lowest finite value of a dtype.
fn extreme(d: DType, max: bool) -> Value {
    match (d, max) {
        (DType::I32, true) => Value::I32(i32::MAX),
        (DType::I32, false) => Value::I32(i32::MIN),
        (DType::I64, true) => Value::I64(i64::MAX),
        (DType::I64, false) => Value::I64(i64::MIN),
        (DType::F16, true) => Value::F16(f16::MAX.to_f32()),
        (DType::F16, false) => Value::F16(f16::MIN.to_f32()),
        (DType::BF16, true) => Value::BF16(bf16::MAX.to_f32()),
        (DType::BF16, false) => Value::BF16(bf16::MIN.to_f32()),
        (DType::F32, true) => Value::F32(f32::MAX),
        (DType::F32, false) => Value::F32(f32::MIN),
        (DType::F64, true) => Value::F64(f64::MAX),
        (DType::F64, false) => Value::F64(f64::MIN),
        (DType::Bool, m) => Value::Bool(m),
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::I32(x) => write!(f, "{x}"),
            Value::I64(x) => write!(f, "{x}i64"),
            Value::F16(x) => write!(f, "{x}f16"),
            Value::BF16(x) => write!(f, "{x}bf16"),
            Value::F32(x) => write!(f, "{x}f32"),
            Value::F64(x) => write!(f, "{x}f64"),
            Value::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// Element `i` of an array, in the array's own dtype.
pub fn array_get(a: &Array, i: usize) -> Option<Value> {
    Some(match a {
        Array::I32(v) => Value::I32(*v.get(i)?),
        Array::I64(v) => Value::I64(*v.get(i)?),
        Array::F16(v) => Value::F16(*v.get(i)?),
        Array::BF16(v) => Value::BF16(*v.get(i)?),
        Array::F32(v) => Value::F32(*v.get(i)?),
        Array::F64(v) => Value::F64(*v.get(i)?),
        Array::Bool(v) => Value::Bool(*v.get(i)?),
    })
}

/// Writes element `i`; the value is converted to the array's dtype. Returns `false` when
/// `i` is out of bounds.
pub fn array_set(a: &mut Array, i: usize, v: Value) -> bool {
    let v = if v.dtype() == a.dtype() { v } else { v.cast(a.dtype()) };
    let slot = match (a, v) {
        (Array::I32(a), Value::I32(x)) => a.get_mut(i).map(|s| *s = x),
        (Array::I64(a), Value::I64(x)) => a.get_mut(i).map(|s| *s = x),
        (Array::F16(a), Value::F16(x))
        | (Array::BF16(a), Value::BF16(x))
        | (Array::F32(a), Value::F32(x)) => a.get_mut(i).map(|s| *s = x),
        (Array::F64(a), Value::F64(x)) => a.get_mut(i).map(|s| *s = x),
        (Array::Bool(a), Value::Bool(x)) => a.get_mut(i).map(|s| *s = x),
        _ => None,
    };
    slot.is_some()
}

/// An array of `len` copies of `v`.
pub fn filled(dtype: DType, len: usize, v: Value) -> Array {
    let mut a = Array::zeros(dtype, len);
    if v != Value::zero(dtype) {
        match (&mut a, v.cast(dtype)) {
            (Array::I32(a), Value::I32(x)) => a.fill(x),
            (Array::I64(a), Value::I64(x)) => a.fill(x),
            (Array::F16(a), Value::F16(x)) | (Array::BF16(a), Value::BF16(x)) | (Array::F32(a), Value::F32(x)) => {
                a.fill(x)
            }
            (Array::F64(a), Value::F64(x)) => a.fill(x),
            (Array::Bool(a), Value::Bool(x)) => a.fill(x),
            _ => {}
        }
    }
    a
}
