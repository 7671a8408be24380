//! Handles to declared entities and the expression wrapper [`E`] with its operators.

use super::error::DslError;
use crate::expr::{BinOp, Expr, Intrinsic, UnOp};
use crate::func::{AxisId, BufferId, ParamId, VarId};
use crate::types::DType;

/// Which builder an expression's handles come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// Literals only.
    Free,
    /// Handles of this builder only.
    One(u32),
    /// Handles of two different builders.
    Mixed,
}

impl Owner {
    fn merge(self, other: Owner) -> Owner {
        match (self, other) {
            (Owner::Free, o) | (o, Owner::Free) => o,
            (Owner::One(a), Owner::One(b)) if a == b => Owner::One(a),
            _ => Owner::Mixed,
        }
    }
}

/// A scalar variable: a scalar parameter, a sparse-iteration iterator or a `let`.
///
/// Converts into an [`E`]; arithmetic operators and the comparison methods work on it
/// directly (`i + 1`, `i.lt(n)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VarRef {
    pub(crate) id: VarId,
    pub(crate) dtype: DType,
    pub(crate) owner: u32,
}

impl VarRef {
    /// The variable's handle in [`Func::vars`](crate::Func::vars) (before
    /// [`func`](super::func) renumbers scalar parameters first, which only happens when a
    /// scalar parameter is declared after other variables).
    pub fn id(self) -> VarId {
        self.id
    }

    /// The variable's dtype.
    pub fn dtype(self) -> DType {
        self.dtype
    }

    /// The variable as an expression.
    pub fn e(self) -> E {
        E::from(self)
    }
}

/// A handle parameter (an array passed to the function), bound by buffers and axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HandleRef {
    pub(crate) index: ParamId,
    pub(crate) owner: u32,
}

impl HandleRef {
    /// The parameter's index in [`Func::params`](crate::Func::params).
    pub fn index(self) -> ParamId {
        self.index
    }
}

/// A declared axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AxisRef {
    pub(crate) id: AxisId,
    pub(crate) owner: u32,
}

impl AxisRef {
    /// The axis's handle in [`Func::axes`](crate::Func::axes).
    pub fn id(self) -> AxisId {
        self.id
    }
}

/// A declared buffer; [`at`](BufferRef::at) builds an element access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BufferRef {
    pub(crate) id: BufferId,
    pub(crate) dtype: DType,
    pub(crate) owner: u32,
}

impl BufferRef {
    /// The buffer's handle in [`Func::buffers`](crate::Func::buffers).
    pub fn id(self) -> BufferId {
        self.id
    }

    /// The element type.
    pub fn dtype(self) -> DType {
        self.dtype
    }

    /// The element `buf[indices]`, readable in expressions and the target of
    /// [`store`](super::Builder::store) and [`atomic_add`](super::Builder::atomic_add).
    ///
    /// `indices` is an array (`[i, k]`), a tuple for mixed kinds (`(i, 0)`) or a `Vec<E>`.
    /// A wrong number of indices is reported as [`DslError::Arity`] when the expression is
    /// used in a statement.
    pub fn at(self, indices: impl Indices) -> E {
        let idx = indices.into_indices();
        let mut owner = Owner::One(self.owner);
        let mut error = None;
        let exprs = idx
            .into_iter()
            .map(|e| {
                owner = owner.merge(e.owner);
                error = error.take().or(e.error);
                e.expr
            })
            .collect();
        E { expr: Expr::Load(self.id, exprs), dtype: self.dtype, weak: false, owner, error }
    }
}

/// The index list of a buffer access: arrays, `Vec`s and tuples (up to 8) of values that
/// convert into [`E`].
pub trait Indices {
    /// The indices, in order.
    fn into_indices(self) -> Vec<E>;
}

impl<T: Into<E>, const N: usize> Indices for [T; N] {
    fn into_indices(self) -> Vec<E> {
        self.into_iter().map(Into::into).collect()
    }
}

impl<T: Into<E>> Indices for Vec<T> {
    fn into_indices(self) -> Vec<E> {
        self.into_iter().map(Into::into).collect()
    }
}

macro_rules! tuple_indices {
    ($($T:ident $v:ident),+) => {
        impl<$($T: Into<E>),+> Indices for ($($T,)+) {
            fn into_indices(self) -> Vec<E> {
                let ($($v,)+) = self;
                vec![$($v.into()),+]
            }
        }
    };
}
tuple_indices!(A a);
tuple_indices!(A a, B b);
tuple_indices!(A a, B b, C c);
tuple_indices!(A a, B b, C c, D d);
tuple_indices!(A a, B b, C c, D d, F f);
tuple_indices!(A a, B b, C c, D d, F f, G g);
tuple_indices!(A a, B b, C c, D d, F f, G g, H h);
tuple_indices!(A a, B b, C c, D d, F f, G g, H h, I i);

/// An expression under construction: an [`Expr`] with its dtype.
///
/// # Literals
///
/// Rust values convert into `E` with [`From`], so `0.0`, `1` or `true` work wherever an
/// expression is expected. The rule, chosen so that a program reads like its text:
///
/// * an **`f64`** (which an unsuffixed Rust float literal such as `0.0` is) or an **`i32`**
///   (an unsuffixed integer literal such as `1`) is an *untyped* literal: it takes the dtype
///   of what it meets — the other operand of a binary operator, `min`/`max` or `select`, the
///   element type of the buffer it is stored to (or atomically added to, or that it is the
///   default value of). An untyped integer meeting a float operand becomes a float literal
///   of that dtype. Otherwise (a `let`, an index, an intrinsic's argument, two untyped
///   literals together) it keeps the dtype of an unsuffixed literal of the text: `f32` for
///   floats and `i32` for integers. So `C.at([i, k]) + 1.0` is `C[i, k] + 1.0f64` when `C`
///   holds `f64`, and `s.store(C.at([i, k]), 0.0)` is `C[i, k] = 0.0` when `C` holds `f32`.
/// * an **`f32`** is an `f32` literal, an **`i64`** an `i64` literal, a **`bool`** a bool;
///   [`E::int`] and [`E::float`] build a literal of any dtype. They never change dtype.
///
/// An `f32` is stored as the shortest decimal that reads back as the same `f32`
/// (`0.1f32` is the text's `0.1`, not `0.10000000149011612`).
///
/// # Operators
///
/// `+ - * /` are the IR's `Add Sub Mul Div` (`/` truncates on integers); `%` is the text's
/// `%`, i.e. [`BinOp::FloorMod`]; unary `-` negates (a literal is negated in place, like
/// `-1` in the text) and `!` is logical not; `&` and `|` are `&&` and `||` on bools.
/// Comparisons are methods ([`lt`](E::lt), [`eq_`](E::eq_), ...) because Rust's comparison
/// operators must return `bool`. A Rust literal may be the left operand (`2 * i`,
/// `1.0 - x`) when it is an unsuffixed one (`i32` or `f64`); write `E::from(2i64) * i`
/// for the others.
#[derive(Clone, Debug)]
pub struct E {
    pub(crate) expr: Expr,
    pub(crate) dtype: DType,
    /// An untyped literal (see the type docs); its `expr` holds the default dtype.
    pub(crate) weak: bool,
    pub(crate) owner: Owner,
    /// A misuse found while building (reported when the expression is used).
    pub(crate) error: Option<Box<DslError>>,
}

impl E {
    fn new(expr: Expr, dtype: DType) -> E {
        E { expr, dtype, weak: false, owner: Owner::Free, error: None }
    }

    /// An integer literal of dtype `dtype` (never retyped).
    pub fn int(v: i64, dtype: DType) -> E {
        E::new(Expr::Int(v, dtype), dtype)
    }

    /// A float literal of dtype `dtype` (never retyped).
    pub fn float(v: f64, dtype: DType) -> E {
        E::new(Expr::Float(v, dtype), dtype)
    }

    /// Wraps an IR expression; `dtype` must be its dtype.
    pub fn from_expr(expr: Expr, dtype: DType) -> E {
        E::new(expr, dtype)
    }

    /// The IR expression built so far (untyped literals carry their default dtype).
    pub fn expr(&self) -> &Expr {
        &self.expr
    }

    /// The IR expression.
    pub fn into_expr(self) -> Expr {
        self.expr
    }

    /// The dtype of the expression.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Whether this is an untyped literal (an `i32` or `f64` Rust value).
    pub fn is_untyped(&self) -> bool {
        self.weak
    }

    /// Gives an untyped literal the dtype `dtype` when it can take it (integers take any
    /// numeric dtype, floats any float dtype); other expressions are returned unchanged.
    pub fn typed_as(self, dtype: DType) -> E {
        if !self.weak {
            return self;
        }
        let expr = match self.expr {
            Expr::Int(v, _) if dtype.is_int() => Expr::Int(v, dtype),
            Expr::Int(v, _) if dtype.is_float() => Expr::Float(v as f64, dtype),
            Expr::Float(v, _) if dtype.is_float() => Expr::Float(v, dtype),
            other => return E { expr: other, ..self },
        };
        E { expr, dtype, weak: false, ..self }
    }

    fn strong(self) -> E {
        E { weak: false, ..self }
    }

    /// Builds `a op b`, typing untyped literals after the other operand.
    pub fn binary(op: BinOp, a: impl Into<E>, b: impl Into<E>) -> E {
        let (a, b) = unify(a.into(), b.into());
        let dtype = if op.is_comparison() || op.is_logical() { DType::Bool } else { a.dtype };
        let owner = a.owner.merge(b.owner);
        let error = a.error.or(b.error);
        E { expr: Expr::binary(op, a.expr, b.expr), dtype, weak: false, owner, error }
    }

    fn unary(op: UnOp, a: E) -> E {
        match (op, a.expr) {
            (UnOp::Neg, Expr::Int(v, d)) => E { expr: Expr::Int(v.wrapping_neg(), d), ..a },
            (UnOp::Neg, Expr::Float(v, d)) => E { expr: Expr::Float(-v, d), ..a },
            (op, expr) => E { expr: Expr::Unary(op, Box::new(expr)), weak: false, ..a },
        }
    }

    /// `self < rhs`
    pub fn lt(self, rhs: impl Into<E>) -> E {
        E::binary(BinOp::Lt, self, rhs)
    }
    /// `self <= rhs`
    pub fn le(self, rhs: impl Into<E>) -> E {
        E::binary(BinOp::Le, self, rhs)
    }
    /// `self > rhs`
    pub fn gt(self, rhs: impl Into<E>) -> E {
        E::binary(BinOp::Gt, self, rhs)
    }
    /// `self >= rhs`
    pub fn ge(self, rhs: impl Into<E>) -> E {
        E::binary(BinOp::Ge, self, rhs)
    }
    /// `self == rhs`
    pub fn eq_(self, rhs: impl Into<E>) -> E {
        E::binary(BinOp::Eq, self, rhs)
    }
    /// `self != rhs`
    pub fn ne_(self, rhs: impl Into<E>) -> E {
        E::binary(BinOp::Ne, self, rhs)
    }
    /// `self && rhs`
    pub fn and(self, rhs: impl Into<E>) -> E {
        E::binary(BinOp::And, self, rhs)
    }
    /// `self || rhs`
    pub fn or(self, rhs: impl Into<E>) -> E {
        E::binary(BinOp::Or, self, rhs)
    }
    /// `self // rhs`: integer division rounding toward negative infinity.
    pub fn floordiv(self, rhs: impl Into<E>) -> E {
        E::binary(BinOp::FloorDiv, self, rhs)
    }
    /// `self % rhs`: remainder with the sign of the divisor (same as the `%` operator).
    pub fn floormod(self, rhs: impl Into<E>) -> E {
        E::binary(BinOp::FloorMod, self, rhs)
    }
    /// `min(self, rhs)`
    pub fn min(self, rhs: impl Into<E>) -> E {
        E::binary(BinOp::Min, self, rhs)
    }
    /// `max(self, rhs)`
    pub fn max(self, rhs: impl Into<E>) -> E {
        E::binary(BinOp::Max, self, rhs)
    }
    /// `cast(dtype, self)`
    pub fn cast(self, dtype: DType) -> E {
        cast(dtype, self)
    }
}

/// Types untyped literals after the other operand (see [`E`]).
fn unify(a: E, b: E) -> (E, E) {
    match (a.weak, b.weak) {
        (true, false) => {
            let d = b.dtype;
            (a.typed_as(d), b)
        }
        (false, true) => {
            let d = a.dtype;
            (a, b.typed_as(d))
        }
        (true, true) => {
            // An untyped integer next to an untyped float becomes an f32.
            let float = a.dtype.is_float() || b.dtype.is_float();
            let (a, b) = if float { (a.typed_as(DType::F32), b.typed_as(DType::F32)) } else { (a, b) };
            (a.strong(), b.strong())
        }
        (false, false) => (a, b),
    }
}

impl From<VarRef> for E {
    fn from(v: VarRef) -> E {
        E { expr: Expr::Var(v.id), dtype: v.dtype, weak: false, owner: Owner::One(v.owner), error: None }
    }
}

impl From<&VarRef> for E {
    fn from(v: &VarRef) -> E {
        E::from(*v)
    }
}

impl From<&E> for E {
    fn from(e: &E) -> E {
        e.clone()
    }
}

impl From<i32> for E {
    /// An untyped integer literal (see [`E`]).
    fn from(v: i32) -> E {
        E { weak: true, ..E::int(v as i64, DType::I32) }
    }
}

impl From<i64> for E {
    /// An `i64` literal.
    fn from(v: i64) -> E {
        E::int(v, DType::I64)
    }
}

impl From<f64> for E {
    /// An untyped float literal (see [`E`]).
    fn from(v: f64) -> E {
        E { weak: true, ..E::float(v, DType::F32) }
    }
}

impl From<f32> for E {
    /// An `f32` literal, stored as the shortest decimal that reads back as `v`.
    fn from(v: f32) -> E {
        let wide = if v.is_finite() { v.to_string().parse::<f64>().unwrap_or(v as f64) } else { v as f64 };
        E::float(wide, DType::F32)
    }
}

impl From<bool> for E {
    /// A bool literal.
    fn from(v: bool) -> E {
        E::new(Expr::Bool(v), DType::Bool)
    }
}

macro_rules! binops {
    ($($Trait:ident $method:ident $op:expr;)*) => {$(
        impl<R: Into<E>> std::ops::$Trait<R> for E {
            type Output = E;
            fn $method(self, rhs: R) -> E {
                E::binary($op, self, rhs)
            }
        }
        impl<R: Into<E>> std::ops::$Trait<R> for &E {
            type Output = E;
            fn $method(self, rhs: R) -> E {
                E::binary($op, self.clone(), rhs)
            }
        }
        impl<R: Into<E>> std::ops::$Trait<R> for VarRef {
            type Output = E;
            fn $method(self, rhs: R) -> E {
                E::binary($op, self, rhs)
            }
        }
        // Only the types of unsuffixed literals, so that `2 * x` and `1.0 - x` infer.
        binops!(@prim $Trait $method $op; i32 f64);
    )*};
    (@prim $Trait:ident $method:ident $op:expr; $($P:ty)*) => {$(
        impl std::ops::$Trait<E> for $P {
            type Output = E;
            fn $method(self, rhs: E) -> E {
                E::binary($op, self, rhs)
            }
        }
        impl std::ops::$Trait<VarRef> for $P {
            type Output = E;
            fn $method(self, rhs: VarRef) -> E {
                E::binary($op, self, rhs)
            }
        }
    )*};
}

binops! {
    Add add BinOp::Add;
    Sub sub BinOp::Sub;
    Mul mul BinOp::Mul;
    Div div BinOp::Div;
    Rem rem BinOp::FloorMod;
    BitAnd bitand BinOp::And;
    BitOr bitor BinOp::Or;
}

impl std::ops::Neg for E {
    type Output = E;
    fn neg(self) -> E {
        E::unary(UnOp::Neg, self)
    }
}

impl std::ops::Neg for VarRef {
    type Output = E;
    fn neg(self) -> E {
        E::unary(UnOp::Neg, self.into())
    }
}

impl std::ops::Not for E {
    type Output = E;
    fn not(self) -> E {
        E::unary(UnOp::Not, self)
    }
}

impl std::ops::Not for VarRef {
    type Output = E;
    fn not(self) -> E {
        E::unary(UnOp::Not, self.into())
    }
}

macro_rules! var_methods {
    ($($(#[$doc:meta])* $m:ident;)*) => {
        impl VarRef {$(
            $(#[$doc])*
            pub fn $m(self, rhs: impl Into<E>) -> E {
                E::from(self).$m(rhs)
            }
        )*}
    };
}

var_methods! {
    /// `self < rhs`
    lt;
    /// `self <= rhs`
    le;
    /// `self > rhs`
    gt;
    /// `self >= rhs`
    ge;
    /// `self == rhs`
    eq_;
    /// `self != rhs`
    ne_;
    /// `self && rhs`
    and;
    /// `self || rhs`
    or;
    /// `self // rhs`
    floordiv;
    /// `self % rhs` (floor modulo)
    floormod;
    /// `min(self, rhs)`
    min;
    /// `max(self, rhs)`
    max;
}

/// `min(a, b)`
pub fn min(a: impl Into<E>, b: impl Into<E>) -> E {
    E::binary(BinOp::Min, a, b)
}

/// `max(a, b)`
pub fn max(a: impl Into<E>, b: impl Into<E>) -> E {
    E::binary(BinOp::Max, a, b)
}

/// `a // b`: integer division rounding toward negative infinity.
pub fn floordiv(a: impl Into<E>, b: impl Into<E>) -> E {
    E::binary(BinOp::FloorDiv, a, b)
}

/// `a % b`: integer remainder with the sign of the divisor.
pub fn floormod(a: impl Into<E>, b: impl Into<E>) -> E {
    E::binary(BinOp::FloorMod, a, b)
}

/// `select(cond, a, b)`: both arms are evaluated; untyped literal arms take the other
/// arm's dtype.
pub fn select(cond: impl Into<E>, a: impl Into<E>, b: impl Into<E>) -> E {
    let c = cond.into();
    let (a, b) = unify(a.into(), b.into());
    let owner = c.owner.merge(a.owner).merge(b.owner);
    let error = c.error.or(a.error).or(b.error);
    let dtype = a.dtype;
    E { expr: Expr::Select(Box::new(c.expr), Box::new(a.expr), Box::new(b.expr)), dtype, weak: false, owner, error }
}

/// `cast(dtype, x)`
pub fn cast(dtype: DType, x: impl Into<E>) -> E {
    let x = x.into();
    E { expr: Expr::Cast(dtype, Box::new(x.expr)), dtype, weak: false, ..x }
}

fn call(i: Intrinsic, args: Vec<E>) -> E {
    let dtype = args.first().map_or(DType::F32, |a| a.dtype);
    let mut owner = Owner::Free;
    let mut error = None;
    let exprs = args
        .into_iter()
        .map(|a| {
            owner = owner.merge(a.owner);
            error = error.take().or(a.error);
            a.expr
        })
        .collect();
    E { expr: Expr::Call(i, exprs), dtype, weak: false, owner, error }
}

macro_rules! unary_intrinsics {
    ($($(#[$doc:meta])* $f:ident $i:ident;)*) => {$(
        $(#[$doc])*
        pub fn $f(x: impl Into<E>) -> E {
            call(Intrinsic::$i, vec![x.into()])
        }
    )*};
}

unary_intrinsics! {
    /// `exp(x)`
    exp Exp;
    /// `log(x)`: natural logarithm.
    log Log;
    /// `sqrt(x)`
    sqrt Sqrt;
    /// `abs(x)`
    abs Abs;
    /// `tanh(x)`
    tanh Tanh;
    /// `sigmoid(x)`
    sigmoid Sigmoid;
    /// `floor(x)`
    floor Floor;
    /// `ceil(x)`
    ceil Ceil;
}

/// `pow(x, y)`; an untyped literal takes the other argument's dtype.
pub fn pow(x: impl Into<E>, y: impl Into<E>) -> E {
    let (x, y) = unify(x.into(), y.into());
    call(Intrinsic::Pow, vec![x, y])
}

/// `fma(a, b, c)`: `a * b + c` with one rounding; untyped literals take the others' dtype.
pub fn fma(a: impl Into<E>, b: impl Into<E>, c: impl Into<E>) -> E {
    let args = [a.into(), b.into(), c.into()];
    let d = args.iter().find(|x| !x.weak).map_or(DType::F32, |x| x.dtype);
    call(Intrinsic::Fma, args.into_iter().map(|x| x.typed_as(d).strong()).collect())
}

/// `max_value(dtype)`: the largest finite value of `dtype`.
pub fn max_value(dtype: DType) -> E {
    E::new(Expr::Call(Intrinsic::MaxValue(dtype), vec![]), dtype)
}

/// `min_value(dtype)`: the lowest finite value of `dtype`.
pub fn min_value(dtype: DType) -> E {
    E::new(Expr::Call(Intrinsic::MinValue(dtype), vec![]), dtype)
}

/// `atomic_add(buf[idx], value)` as an expression yielding the old value; `target` must be
/// a buffer element (`buf.at(...)`), else [`DslError::NotAnElement`] is reported when the
/// expression is used. An untyped literal `value` takes the buffer's dtype.
pub fn atomic_add(target: impl Into<E>, value: impl Into<E>) -> E {
    let t = target.into();
    let v = value.into().typed_as(t.dtype);
    let owner = t.owner.merge(v.owner);
    let error = t.error.or(v.error);
    match t.expr {
        Expr::Load(b, idx) => {
            E { expr: Expr::AtomicAdd(b, idx, Box::new(v.expr)), dtype: t.dtype, weak: false, owner, error }
        }
        other => E {
            expr: other,
            dtype: t.dtype,
            weak: false,
            owner,
            error: error.or(Some(Box::new(DslError::NotAnElement { what: "atomic_add" }))),
        },
    }
}
