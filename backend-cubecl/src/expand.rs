//! The CubeCL [`Gen`]: builds kernel IR at run time through CubeCL's public expand
//! functions (what `#[cube]` generates), one typed value per IR dtype.

use crate::lower::{BufRef, Builtin, Gen, LowerError};
use cubecl::prelude::*;
use sparsec_ir::{BinOp, BufferId, DType, Intrinsic, ThreadTag, UnOp};
use std::collections::HashMap;
use std::marker::PhantomData;

type R<T> = Result<T, LowerError>;

fn err<T>(msg: impl Into<String>) -> R<T> {
    Err(LowerError::Unsupported(msg.into()))
}

/// A value of one of the IR dtypes.
#[derive(Clone)]
pub enum Val {
    /// `i32`
    I32(NativeExpand<i32>),
    /// `i64`
    I64(NativeExpand<i64>),
    /// `f16`
    F16(NativeExpand<half::f16>),
    /// `bf16`
    BF16(NativeExpand<half::bf16>),
    /// `f32`
    F32(NativeExpand<f32>),
    /// `f64`
    F64(NativeExpand<f64>),
    /// `bool`
    Bool(NativeExpand<bool>),
}

/// A CubeCL scalar type that stands for an IR dtype.
pub trait ValType: CubePrimitive + Sized {
    /// Wraps a value.
    fn wrap(v: NativeExpand<Self>) -> Val;
    /// Unwraps a value of this type.
    fn unwrap(v: Val) -> Option<NativeExpand<Self>>;
}

macro_rules! val_type {
    ($t:ty, $v:ident) => {
        impl ValType for $t {
            fn wrap(v: NativeExpand<Self>) -> Val {
                Val::$v(v)
            }
            fn unwrap(v: Val) -> Option<NativeExpand<Self>> {
                match v {
                    Val::$v(x) => Some(x),
                    _ => None,
                }
            }
        }
    };
}
val_type!(i32, I32);
val_type!(i64, I64);
val_type!(half::f16, F16);
val_type!(half::bf16, BF16);
val_type!(f32, F32);
val_type!(f64, F64);
val_type!(bool, Bool);

fn mismatch<T>(what: &str) -> R<T> {
    err(format!("operands of {what} have different or unsupported types"))
}

/// Same-type numeric binary operation.
macro_rules! num2 {
    ($a:expr, $b:expr, $x:ident, $y:ident, $body:expr, $what:expr) => {
        match ($a, $b) {
            (Val::I32($x), Val::I32($y)) => Val::I32($body),
            (Val::I64($x), Val::I64($y)) => Val::I64($body),
            (Val::F32($x), Val::F32($y)) => Val::F32($body),
            (Val::F64($x), Val::F64($y)) => Val::F64($body),
            (Val::F16($x), Val::F16($y)) => Val::F16($body),
            (Val::BF16($x), Val::BF16($y)) => Val::BF16($body),
            _ => return mismatch($what),
        }
    };
}

/// Comparison of two values of one type.
macro_rules! cmp2 {
    ($a:expr, $b:expr, $x:ident, $y:ident, $body:expr, $what:expr) => {
        match ($a, $b) {
            (Val::I32($x), Val::I32($y)) => Val::Bool($body),
            (Val::I64($x), Val::I64($y)) => Val::Bool($body),
            (Val::F32($x), Val::F32($y)) => Val::Bool($body),
            (Val::F64($x), Val::F64($y)) => Val::Bool($body),
            (Val::F16($x), Val::F16($y)) => Val::Bool($body),
            (Val::BF16($x), Val::BF16($y)) => Val::Bool($body),
            _ => return mismatch($what),
        }
    };
}

/// Float unary function, with `T` the float type.
macro_rules! float1 {
    ($a:expr, $x:ident, $T:ident, $body:expr, $what:expr) => {
        match $a {
            Val::F32($x) => {
                type $T = f32;
                Val::F32($body)
            }
            Val::F64($x) => {
                type $T = f64;
                Val::F64($body)
            }
            Val::F16($x) => {
                type $T = half::f16;
                Val::F16($body)
            }
            Val::BF16($x) => {
                type $T = half::bf16;
                Val::BF16($body)
            }
            _ => return err(format!("{} takes a float", $what)),
        }
    };
}

/// Any-type unary, with `T` the type.
macro_rules! num1 {
    ($a:expr, $x:ident, $T:ident, $body:expr) => {
        match $a {
            Val::I32($x) => {
                type $T = i32;
                Val::I32($body)
            }
            Val::I64($x) => {
                type $T = i64;
                Val::I64($body)
            }
            Val::F32($x) => {
                type $T = f32;
                Val::F32($body)
            }
            Val::F64($x) => {
                type $T = f64;
                Val::F64($body)
            }
            Val::F16($x) => {
                type $T = half::f16;
                Val::F16($body)
            }
            Val::BF16($x) => {
                type $T = half::bf16;
                Val::BF16($body)
            }
            Val::Bool(_) => return err("arithmetic on bool"),
        }
    };
}

fn lit<T: ValType + cubecl::frontend::Scalar + Into<cubecl::ir::ConstantValue>>(scope: &Scope, v: T) -> Val {
    T::wrap(NativeExpand::from_lit(scope, v))
}

/// A literal of dtype `d` from an `f64`.
fn lit_f64(scope: &Scope, v: f64, d: DType) -> Val {
    {
        // Float literals are IEEE bits reinterpreted: WGSL has no literal for inf/nan, and
        // CubeCL's optimizer would fold float constants (to inf, which it cannot print) and
        // simplify `x * 0.0` to `0.0`, which is wrong for inf and nan.
        fn bits<F: CubePrimitive, U: cubecl::frontend::Scalar + Into<cubecl::ir::ConstantValue>>(scope: &Scope, u: U) -> NativeExpand<F> {
            <F as Reinterpret>::__expand_reinterpret::<U>(scope, NativeExpand::from_lit(scope, u))
        }
        match d {
            DType::F32 => return Val::F32(bits::<f32, u32>(scope, (v as f32).to_bits())),
            DType::F64 => return Val::F64(bits::<f64, u64>(scope, v.to_bits())),
            DType::F16 => return Val::F16(bits::<half::f16, u16>(scope, half::f16::from_f64(v).to_bits())),
            DType::BF16 => return Val::BF16(bits::<half::bf16, u16>(scope, half::bf16::from_f64(v).to_bits())),
            _ => {}
        }
    }
    match d {
        DType::I32 => lit(scope, v as i32),
        DType::I64 => lit(scope, v as i64),
        DType::F16 => lit(scope, half::f16::from_f64(v)),
        DType::BF16 => lit(scope, half::bf16::from_f64(v)),
        DType::F32 => lit(scope, v as f32),
        DType::F64 => lit(scope, v),
        DType::Bool => lit(scope, v != 0.0),
    }
}

fn cast_to<F: CubePrimitive>(scope: &Scope, x: NativeExpand<F>, to: DType) -> Val {
    match to {
        DType::I32 => Val::I32(<i32 as Cast>::__expand_cast_from(scope, x)),
        DType::I64 => Val::I64(<i64 as Cast>::__expand_cast_from(scope, x)),
        DType::F16 => Val::F16(<half::f16 as Cast>::__expand_cast_from(scope, x)),
        DType::BF16 => Val::BF16(<half::bf16 as Cast>::__expand_cast_from(scope, x)),
        // Through the bits, so that CubeCL cannot fold a constant cast into a float constant
        // (and on into inf or NaN constants, which it prints as invalid WGSL).
        DType::F32 => {
            let c = <f32 as Cast>::__expand_cast_from(scope, x);
            let bits = <u32 as Reinterpret>::__expand_reinterpret::<f32>(scope, c);
            Val::F32(<f32 as Reinterpret>::__expand_reinterpret::<u32>(scope, bits))
        }
        DType::F64 => {
            let c = <f64 as Cast>::__expand_cast_from(scope, x);
            let bits = <u64 as Reinterpret>::__expand_reinterpret::<f64>(scope, c);
            Val::F64(<f64 as Reinterpret>::__expand_reinterpret::<u64>(scope, bits))
        }
        DType::Bool => Val::Bool(<bool as Cast>::__expand_cast_from(scope, x)),
    }
}

fn zero_index(scope: &Scope) -> NativeExpand<usize> {
    NativeExpand::from_lit(scope, 0usize)
}

fn to_usize(scope: &Scope, v: Val) -> R<NativeExpand<usize>> {
    Ok(match v {
        Val::I32(x) => <usize as Cast>::__expand_cast_from(scope, x),
        Val::I64(x) => <usize as Cast>::__expand_cast_from(scope, x),
        _ => return err("an index must be an integer"),
    })
}

/// A buffer as the kernel sees it, whatever its element type and memory.
pub trait DynBuf {
    /// `b[i]`
    fn load(&self, scope: &Scope, i: NativeExpand<usize>) -> R<Val>;
    /// `b[i] = v`
    fn store(&mut self, scope: &Scope, i: NativeExpand<usize>, v: Val) -> R<()>;
    /// Atomic add; the old value.
    fn atomic_add(&self, _scope: &Scope, _i: NativeExpand<usize>, _v: Val) -> R<Val> {
        err("atomic_add on a non-atomic buffer")
    }
}

/// A plain buffer: global slice, local array or shared memory.
pub struct Plain<C, B> {
    b: B,
    _c: PhantomData<C>,
}

impl<C, B> DynBuf for Plain<C, B>
where
    C: ValType,
    B: IndexMutExpand<NativeExpand<usize>, Output = NativeExpand<C>>,
{
    fn load(&self, scope: &Scope, i: NativeExpand<usize>) -> R<Val> {
        Ok(C::wrap(__expand_deref(scope, self.b.__expand_index_method(scope, i))))
    }

    fn store(&mut self, scope: &Scope, i: NativeExpand<usize>, v: Val) -> R<()> {
        let Some(v) = C::unwrap(v) else { return err("stored value has the wrong type") };
        __expand_assign(scope, self.b.__expand_index_mut_method(scope, i), v);
        Ok(())
    }
}

/// A global buffer of atomics.
pub struct AtomicBuf<C: CubePrimitive> {
    b: NativeExpand<[Atomic<C>]>,
}

impl<C: ValType> DynBuf for AtomicBuf<C>
where
    C: CubePrimitive<Scalar: Numeric>,
{
    fn load(&self, scope: &Scope, i: NativeExpand<usize>) -> R<Val> {
        Ok(C::wrap(self.b.__expand_index_method(scope, i).__expand_load_method(scope)))
    }

    fn store(&mut self, scope: &Scope, i: NativeExpand<usize>, v: Val) -> R<()> {
        let Some(v) = C::unwrap(v) else { return err("stored value has the wrong type") };
        self.b.__expand_index_method(scope, i).__expand_store_method(scope, v);
        Ok(())
    }

    fn atomic_add(&self, scope: &Scope, i: NativeExpand<usize>, v: Val) -> R<Val> {
        let Some(v) = C::unwrap(v) else { return err("added value has the wrong type") };
        Ok(C::wrap(self.b.__expand_index_method(scope, i).__expand_fetch_add_method(scope, v)))
    }
}

fn plain<C: ValType, B: IndexMutExpand<NativeExpand<usize>, Output = NativeExpand<C>> + 'static>(b: B) -> Box<dyn DynBuf> {
    Box::new(Plain { b, _c: PhantomData::<C> })
}

/// Registers a global buffer argument of dtype `d`.
pub fn global_buf(builder: &mut KernelBuilder, d: DType, atomic: bool) -> R<Box<dyn DynBuf>> {
    let arg = BufferCompilationArg { inplace: None };
    macro_rules! reg {
        ($t:ty) => {
            if atomic {
                Box::new(AtomicBuf::<$t> { b: <[Atomic<$t>] as LaunchArg>::expand(&arg, builder) }) as Box<dyn DynBuf>
            } else {
                plain::<$t, _>(<[$t] as LaunchArg>::expand(&arg, builder))
            }
        };
    }
    Ok(match d {
        DType::I32 => reg!(i32),
        DType::I64 => reg!(i64),
        DType::F32 => reg!(f32),
        DType::F64 => reg!(f64),
        DType::F16 if !atomic => plain::<half::f16, _>(<[half::f16] as LaunchArg>::expand(&arg, builder)),
        DType::BF16 if !atomic => plain::<half::bf16, _>(<[half::bf16] as LaunchArg>::expand(&arg, builder)),
        d => return err(format!("no CubeCL buffer for {}{d}", if atomic { "atomic " } else { "" })),
    })
}

/// Registers a scalar argument of dtype `d`.
pub fn scalar_arg(builder: &mut KernelBuilder, d: DType) -> R<Val> {
    Ok(match d {
        DType::I32 => Val::I32(<i32 as LaunchArg>::expand(&(), builder)),
        DType::I64 => Val::I64(<i64 as LaunchArg>::expand(&(), builder)),
        DType::F32 => Val::F32(<f32 as LaunchArg>::expand(&(), builder)),
        DType::F64 => Val::F64(<f64 as LaunchArg>::expand(&(), builder)),
        d => return err(format!("scalar parameters of type {d} are not supported")),
    })
}

/// Words of the status buffer (see [`crate::runtime::STATUS_WORDS`]).
const STATUS_CUT: usize = 0;
const STATUS_RAN: usize = 1;
const STATUS_DIV: usize = 2;
const STATUS_NONFINITE: usize = 3;
/// Always 0: read once as a zero no compiler can see through.
const STATUS_ZERO: usize = 4;

/// The expanding generator. It holds the current scope as a pointer because CubeCL hands
/// each nested scope to a closure.
pub struct ExpandGen {
    scope: *const Scope,
    /// Kernel buffer arguments, in plan order.
    pub args: Vec<Box<dyn DynBuf>>,
    allocs: HashMap<BufferId, Box<dyn DynBuf>>,
    /// The status buffer: unit 0 sets `status[1] = 1` (the kernel ran), an integer division
    /// by zero sets `status[2] = 1`; with `count_loops`,
    /// every loop counts its iterations and a loop that ran fewer than its trip count (or a
    /// `loop` left other than by `break`) sets `status[0] = 1`: a driver loop limiter
    /// (lavapipe's) cut it short; with `check_finite`, a float value computed that is inf or
    /// NaN sets `status[3] = 1`.
    status: Option<Box<dyn DynBuf>>,
    count_loops: bool,
    check_finite: bool,
    /// A run-time zero for [`ExpandGen::opaque`], with `check_finite`.
    opaque_zero: Option<NativeExpand<u32>>,
    /// Per open `loop`, the local flag its `break` sets.
    breaks: Vec<Box<dyn DynBuf>>,
}

impl ExpandGen {
    /// A generator writing into `scope` (which must outlive it).
    pub fn new(scope: &Scope, args: Vec<Box<dyn DynBuf>>) -> Self {
        ExpandGen { scope, args, allocs: HashMap::new(), status: None, count_loops: false, check_finite: false, opaque_zero: None, breaks: Vec::new() }
    }

    /// Reports into `status` (see [`crate::runtime::STATUS_WORDS`]): that the kernel ran,
    /// with `count_loops` whether a loop was cut short, with `check_finite` whether a float
    /// value computed was inf or NaN. Call before generating the body.
    pub fn set_status(&mut self, status: Box<dyn DynBuf>, count_loops: bool, check_finite: bool) -> R<()> {
        self.status = Some(status);
        self.count_loops = count_loops;
        self.check_finite = check_finite;
        if check_finite {
            let s = self.s();
            let at = NativeExpand::from_lit(s, STATUS_ZERO);
            let z = match self.status.as_ref() {
                Some(st) => st.load(s, at)?,
                None => return err("no status buffer"),
            };
            let Val::I32(z) = z else { return err("the status buffer holds i32") };
            self.opaque_zero = Some(<u32 as Cast>::__expand_cast_from(s, z));
        }
        let pos = self.builtin(Builtin::AbsolutePos, DType::I32)?;
        let z = self.int(0, DType::I32)?;
        let first = self.binary(BinOp::Eq, pos, z, DType::I32)?;
        self.flag_if(first, STATUS_RAN)
    }

    /// `tanh` to a few ulp where WGSL's (lavapipe's `(e^2x - 1) / (e^2x + 1)`) loses all
    /// relative precision near 0: an odd Taylor polynomial below |x| = 0.05, else
    /// `1 - 2e / (1 + e)` with `e = exp(-2|x|)` (no overflow), |x| capped at 10 (tanh is 1.0
    /// in f32 beyond 9.01), the sign restored.
    fn tanh_accurate(&mut self, x: Val, d: DType) -> R<Val> {
        let s = self.s();
        let (one, two, zero) = (lit_f64(s, 1.0, d), lit_f64(s, 2.0, d), lit_f64(s, 0.0, d));
        let a = self.call(Intrinsic::Abs, vec![x.clone()], d)?;
        let cap = lit_f64(self.s(), 10.0, d);
        let t = self.binary(BinOp::Min, a, cap, d)?;
        // Near 0: t (1 - t²/3 + 2t⁴/15 - 17t⁶/315).
        let t2 = self.binary(BinOp::Mul, t.clone(), t.clone(), d)?;
        let mut poly = lit_f64(self.s(), -17.0 / 315.0, d);
        for c in [2.0 / 15.0, -1.0 / 3.0, 1.0] {
            let p = self.binary(BinOp::Mul, poly, t2.clone(), d)?;
            poly = self.binary(BinOp::Add, p, lit_f64(self.s(), c, d), d)?;
        }
        let small = self.binary(BinOp::Mul, t.clone(), poly, d)?;
        let m2t = self.binary(BinOp::Mul, t.clone(), two.clone(), d)?;
        let m2t = self.unary(UnOp::Neg, m2t, d)?;
        let e = self.call(Intrinsic::Exp, vec![m2t], d)?;
        // 1 - 2e / (1 + e): near saturation the small term keeps its relative precision and
        // one rounding of `1 - small` is left.
        let den = self.binary(BinOp::Add, one.clone(), e.clone(), d)?;
        let two_e = self.binary(BinOp::Mul, two, e, d)?;
        let small_term = self.binary(BinOp::Div, two_e, den, d)?;
        let large = self.binary(BinOp::Sub, one, small_term, d)?;
        let edge = lit_f64(self.s(), 0.05, d);
        let is_small = self.binary(BinOp::Lt, t, edge, d)?;
        let r = self.select(is_small, small, large, d)?;
        let neg = self.binary(BinOp::Lt, x, zero, d)?;
        let minus = self.unary(UnOp::Neg, r.clone(), d)?;
        self.select(neg, minus, r, d)
    }

    /// `x` hidden from constant evaluation (with `check_finite`): combined with a zero loaded
    /// from the status buffer, so no expression of literals is folded by CubeCL (whose folding
    /// panics on `-MIN` or `abs(MIN)`), nor is a WGSL const-expression (which naga refuses
    /// when it is inf, NaN or overflows); the run-time checks report such values instead.
    fn opaque(&mut self, x: Val) -> R<Val> {
        let Some(z) = self.opaque_zero.clone() else { return Ok(x) };
        let s = self.s();
        Ok(match x {
            Val::I32(v) => Val::I32(v.__expand_add_method(s, <i32 as Cast>::__expand_cast_from(s, z))),
            Val::I64(v) => Val::I64(v.__expand_add_method(s, <i64 as Cast>::__expand_cast_from(s, z))),
            Val::F32(v) => {
                let b = <u32 as Reinterpret>::__expand_reinterpret::<f32>(s, v);
                Val::F32(<f32 as Reinterpret>::__expand_reinterpret::<u32>(s, b.__expand_bitxor_method(s, z)))
            }
            Val::F64(v) => {
                let b = <u64 as Reinterpret>::__expand_reinterpret::<f64>(s, v);
                let z = <u64 as Cast>::__expand_cast_from(s, z);
                Val::F64(<f64 as Reinterpret>::__expand_reinterpret::<u64>(s, b.__expand_bitxor_method(s, z)))
            }
            Val::F16(v) => {
                let w = self.opaque(Val::F32(<f32 as Cast>::__expand_cast_from(s, v)))?;
                let Val::F32(w) = w else { return err("opaque f16") };
                Val::F16(<half::f16 as Cast>::__expand_cast_from(self.s(), w))
            }
            Val::BF16(v) => {
                let w = self.opaque(Val::F32(<f32 as Cast>::__expand_cast_from(s, v)))?;
                let Val::F32(w) = w else { return err("opaque bf16") };
                Val::BF16(<half::bf16 as Cast>::__expand_cast_from(self.s(), w))
            }
            b @ Val::Bool(_) => b,
        })
    }

    /// `status[word] = 1` when `cond`.
    fn flag_if(&mut self, cond: Val, word: usize) -> R<()> {
        self.if_else(
            cond,
            &mut |g| {
                let s: *const Scope = g.scope;
                // SAFETY: see `ExpandGen::s`.
                let s = unsafe { &*s };
                let at = NativeExpand::from_lit(s, word);
                match g.status.as_mut() {
                    Some(st) => st.store(s, at, lit(s, 1i32)),
                    None => Ok(()),
                }
            },
            None,
        )
    }

    /// Integer `/`, `//` or `%` as the IR defines them (`sparsec_ir::value`): truncating
    /// quotient and remainder from the device ops, corrected toward negative infinity for
    /// `//` and `%`; wrapping, so `MIN / -1` is `MIN`. A divisor of -1 never reaches the device
    /// op (its overflow is undefined in C++), and no step forms `a - r`, which overflows.
    fn int_division(&mut self, op: BinOp, a: Val, b: Val, d: DType) -> R<Val> {
        let (zero, one, minus_one) = (self.int(0, d)?, self.int(1, d)?, self.int(-1, d)?);
        let neg1 = self.binary(BinOp::Eq, b.clone(), minus_one, d)?;
        let safe_b = self.select(neg1.clone(), one.clone(), b.clone(), d)?;
        let s = self.s();
        let q = num2!(a.clone(), safe_b.clone(), x, y, x.__expand_div_method(s, y), "/");
        // `a - q * b` rather than CubeCL's remainder, which cubecl-ir 0.11.3 simplifies as
        // `x % 1 = x` (cubecl-cuda fuzz seed 1795800000114).
        let qb = num2!(q.clone(), safe_b, x, y, x.__expand_mul_method(s, y), "*");
        let r = num2!(a.clone(), qb, x, y, x.__expand_sub_method(s, y), "-");
        let neg_a = self.binary(BinOp::Sub, zero.clone(), a, d)?;
        let q = self.select(neg1.clone(), neg_a, q, d)?;
        let r = self.select(neg1, zero.clone(), r, d)?;
        if op == BinOp::Div {
            return Ok(q);
        }
        // r != 0 and the signs of r and b differ.
        let nonzero = self.binary(BinOp::Ne, r.clone(), zero.clone(), d)?;
        let r_neg = self.binary(BinOp::Lt, r.clone(), zero.clone(), d)?;
        let b_neg = self.binary(BinOp::Lt, b.clone(), zero, d)?;
        // (CubeCL's C++ compiler has no `!=` on bools.)
        let b_pos = self.unary(UnOp::Not, b_neg.clone(), DType::Bool)?;
        let differ = self.select(r_neg, b_pos, b_neg, DType::Bool)?;
        let adjust = self.binary(BinOp::And, nonzero, differ, DType::Bool)?;
        if op == BinOp::FloorDiv {
            let q1 = self.binary(BinOp::Sub, q.clone(), one, d)?;
            self.select(adjust, q1, q, d)
        } else {
            let rb = self.binary(BinOp::Add, r.clone(), b, d)?;
            self.select(adjust, rb, r, d)
        }
    }

    /// Whether `v` is inf or NaN, read from its exponent bits: a shader compiler that assumes
    /// finite floats folds `x != x` and `isinf`, but not integer tests of the bits.
    fn nonfinite_bits(&mut self, v: Val) -> R<Val> {
        let s = self.s();
        macro_rules! bits {
            ($x:expr, $f:ty, $u:ty, $mask:expr) => {{
                let b = <$u as Reinterpret>::__expand_reinterpret::<$f>(s, $x);
                let m: NativeExpand<$u> = NativeExpand::from_lit(s, $mask);
                let e = b.__expand_bitand_method(s, m.clone());
                Val::Bool(e.__expand_eq_method(s, &m))
            }};
        }
        Ok(match v {
            Val::F32(x) => bits!(x, f32, u32, 0x7f80_0000u32),
            Val::F64(x) => bits!(x, f64, u64, 0x7ff0_0000_0000_0000u64),
            // Widening to f32 keeps inf and NaN.
            Val::F16(x) => return self.nonfinite_bits(Val::F32(<f32 as Cast>::__expand_cast_from(s, x))),
            Val::BF16(x) => return self.nonfinite_bits(Val::F32(<f32 as Cast>::__expand_cast_from(s, x))),
            _ => return err("finiteness check of a non-float"),
        })
    }

    /// A one-element local `i32` array holding `v`.
    fn local_cell(&mut self, v: i32) -> R<Box<dyn DynBuf>> {
        let s = self.s();
        let mut c = plain::<i32, _>(IntoMut::into_mut(Array::<i32>::__expand_new(s, 1usize), s));
        c.store(s, zero_index(s), lit(s, v))?;
        Ok(c)
    }

    fn s(&self) -> &Scope {
        // SAFETY: `scope` is the root scope (alive for the whole expansion) or a child scope
        // set by `nested` for the duration of the closure that owns it.
        unsafe { &*self.scope }
    }

    /// Runs `f` with `child` as the current scope.
    fn nested<T>(&mut self, child: &Scope, f: impl FnOnce(&mut Self) -> T) -> T {
        let saved = self.scope;
        self.scope = child;
        let r = f(self);
        self.scope = saved;
        r
    }

    fn buf(&mut self, b: BufRef) -> R<&mut Box<dyn DynBuf>> {
        match b {
            BufRef::Arg(i) => match self.args.get_mut(i) {
                Some(x) => Ok(x),
                None => err("unknown kernel argument"),
            },
            BufRef::Alloc(id) => match self.allocs.get_mut(&id) {
                Some(x) => Ok(x),
                None => err("buffer used before its allocation"),
            },
        }
    }
}

impl ExpandGen {
    /// Whether a float is NaN, from its bits (a WGSL compiler may fold `x != x` to false).
    fn is_nan(&mut self, v: Val) -> R<Val> {
        let s = self.s();
        Ok(Val::Bool(match v {
            Val::F32(x) => f32::__expand_is_nan(s, x),
            Val::F64(x) => f64::__expand_is_nan(s, x),
            Val::F16(x) => half::f16::__expand_is_nan(s, x),
            Val::BF16(x) => half::bf16::__expand_is_nan(s, x),
            _ => return err("is_nan of a non-float"),
        }))
    }

    /// `a.powf(b)` as the IR defines it (Rust's): GPU `pow` is undefined for a base <= 0, so
    /// it runs on `|a|` and the sign and special cases are applied here.
    fn pow(&mut self, a: Val, b: Val, d: DType) -> R<Val> {
        let abs_a = self.call(Intrinsic::Abs, vec![a.clone()], d)?;
        let s = self.s();
        let p = match (abs_a, b.clone()) {
            (Val::F32(x), Val::F32(y)) => Val::F32(f32::__expand_powf(s, x, y)),
            (Val::F64(x), Val::F64(y)) => Val::F64(f64::__expand_powf(s, x, y)),
            _ => return err("pow takes two f32 or two f64 operands"),
        };
        let lit = |g: &mut Self, v: f64| lit_f64(g.s(), v, d);
        let (zero, one, two, nan, inf) = (lit(self, 0.0), lit(self, 1.0), lit(self, 2.0), lit(self, f64::NAN), lit(self, f64::INFINITY));
        // b integral, and odd.
        let fb = self.call(Intrinsic::Floor, vec![b.clone()], d)?;
        let integral = self.binary(BinOp::Eq, fb, b.clone(), d)?;
        let half = self.binary(BinOp::Div, b.clone(), two.clone(), d)?;
        let fh = self.call(Intrinsic::Floor, vec![half], d)?;
        let twice = self.binary(BinOp::Mul, fh, two, d)?;
        let rem = self.binary(BinOp::Sub, b.clone(), twice, d)?;
        let odd = self.binary(BinOp::Eq, rem, one.clone(), d)?;
        let neg_p = self.unary(UnOp::Neg, p.clone(), d)?;
        let signed = self.select(odd, neg_p, p.clone(), d)?;
        // A negative base needs an integral exponent, except -inf.
        let abs_a0 = self.call(Intrinsic::Abs, vec![a.clone()], d)?;
        let a_inf = self.binary(BinOp::Eq, abs_a0, inf.clone(), d)?;
        let defined = self.binary(BinOp::Or, integral, a_inf, DType::Bool)?;
        let of_negative = self.select(defined, signed, nan, d)?;
        let negative = self.binary(BinOp::Lt, a.clone(), zero.clone(), d)?;
        let r = self.select(negative, of_negative, p, d)?;
        // A zero base: inf for b < 0, 0 for b > 0 (not left to `exp2(b * log2(0))`).
        let a_zero = self.binary(BinOp::Eq, a.clone(), zero.clone(), d)?;
        let b_neg = self.binary(BinOp::Lt, b.clone(), zero.clone(), d)?;
        let of_zero = self.select(b_neg, inf.clone(), zero.clone(), d)?;
        let r = self.select(a_zero, of_zero, r, d)?;
        // b == 0, a == 1, and |a| == 1 with b infinite all give 1.
        let b_zero = self.binary(BinOp::Eq, b.clone(), zero, d)?;
        let a_one = self.binary(BinOp::Eq, a.clone(), one.clone(), d)?;
        let abs_a = self.call(Intrinsic::Abs, vec![a], d)?;
        let unit = self.binary(BinOp::Eq, abs_a, one.clone(), d)?;
        let abs_b = self.call(Intrinsic::Abs, vec![b], d)?;
        let b_inf = self.binary(BinOp::Eq, abs_b, inf, d)?;
        let unit_inf = self.binary(BinOp::And, unit, b_inf, DType::Bool)?;
        let ones = self.binary(BinOp::Or, b_zero, a_one, DType::Bool)?;
        let ones = self.binary(BinOp::Or, ones, unit_inf, DType::Bool)?;
        self.select(ones, one, r, d)
    }
}

impl Gen for ExpandGen {
    type V = Val;

    fn int(&mut self, v: i64, d: DType) -> R<Val> {
        let x = match d {
            DType::I32 => lit(self.s(), v as i32),
            DType::I64 => lit(self.s(), v),
            d => lit_f64(self.s(), v as f64, d),
        };
        self.opaque(x)
    }

    fn float(&mut self, v: f64, d: DType) -> R<Val> {
        let x = lit_f64(self.s(), v, d);
        self.opaque(x)
    }

    fn boolean(&mut self, v: bool) -> R<Val> {
        Ok(lit(self.s(), v))
    }

    fn binary(&mut self, op: BinOp, a: Val, b: Val, d: DType) -> R<Val> {
        let s = self.s();
        Ok(match op {
            BinOp::Add => num2!(a, b, x, y, x.__expand_add_method(s, y), "+"),
            BinOp::Sub => num2!(a, b, x, y, x.__expand_sub_method(s, y), "-"),
            BinOp::Mul => num2!(a, b, x, y, x.__expand_mul_method(s, y), "*"),
            BinOp::Div | BinOp::FloorDiv | BinOp::FloorMod if d.is_int() => return self.int_division(op, a, b, d),
            BinOp::Div => num2!(a, b, x, y, x.__expand_div_method(s, y), "/"),
            BinOp::FloorMod => {
                // Floats: a - floor(a / b) * b.
                let q = self.binary(BinOp::Div, a.clone(), b.clone(), d)?;
                let q = self.call(Intrinsic::Floor, vec![q], d)?;
                let m = self.binary(BinOp::Mul, q, b, d)?;
                return self.binary(BinOp::Sub, a, m, d);
            }
            BinOp::FloorDiv => {
                let q = self.binary(BinOp::Div, a, b, d)?;
                return self.call(Intrinsic::Floor, vec![q], d);
            }
            BinOp::Min | BinOp::Max => {
                let lt = if op == BinOp::Min {
                    self.binary(BinOp::Lt, a.clone(), b.clone(), d)?
                } else {
                    self.binary(BinOp::Gt, a.clone(), b.clone(), d)?
                };
                // As the IR (Rust's `min`/`max`): a NaN operand yields the other one.
                let lt = if d.is_int() {
                    lt
                } else {
                    let b_nan = self.is_nan(b.clone())?;
                    self.binary(BinOp::Or, lt, b_nan, DType::Bool)?
                };
                return self.select(lt, a, b, d);
            }
            BinOp::Eq => match (a, b) {
                (Val::Bool(x), Val::Bool(y)) => Val::Bool(x.__expand_eq_method(s, &y)),
                (a, b) => cmp2!(a, b, x, y, x.__expand_eq_method(s, &y), "=="),
            },
            BinOp::Ne => match (a, b) {
                (Val::Bool(x), Val::Bool(y)) => Val::Bool(x.__expand_ne_method(s, &y)),
                (a, b) => cmp2!(a, b, x, y, x.__expand_ne_method(s, &y), "!="),
            },
            BinOp::Lt => cmp2!(a, b, x, y, x.__expand_lt_method(s, &y), "<"),
            BinOp::Le => cmp2!(a, b, x, y, x.__expand_le_method(s, &y), "<="),
            BinOp::Gt => cmp2!(a, b, x, y, x.__expand_gt_method(s, &y), ">"),
            BinOp::Ge => cmp2!(a, b, x, y, x.__expand_ge_method(s, &y), ">="),
            BinOp::And | BinOp::Or => match (a, b) {
                (Val::Bool(x), Val::Bool(y)) => Val::Bool(if op == BinOp::And {
                    x.__expand_and_method(s, y)
                } else {
                    x.__expand_or_method(s, y)
                }),
                _ => return mismatch("&&/||"),
            },
        })
    }

    fn unary(&mut self, op: UnOp, a: Val, _d: DType) -> R<Val> {
        let s = self.s();
        Ok(match (op, a) {
            (UnOp::Not, Val::Bool(x)) => Val::Bool(x.__expand_not_method(s)),
            (UnOp::Not, _) => return err("`!` takes a bool"),
            // `0 - x` wraps (`-MIN == MIN`, as the IR), also where CubeCL folds it.
            (UnOp::Neg, a @ (Val::I32(_) | Val::I64(_))) => {
                let z = self.int(0, _d)?;
                return self.binary(BinOp::Sub, z, a, _d);
            }
            (UnOp::Neg, a) => num1!(a, x, _T, x.__expand_neg_method(s)),
        })
    }

    fn select(&mut self, c: Val, a: Val, b: Val, _d: DType) -> R<Val> {
        let s = self.s();
        let Val::Bool(c) = c else { return err("select takes a bool condition") };
        Ok(match (a, b) {
            (Val::Bool(x), Val::Bool(y)) => Val::Bool(select::expand(s, c, x, y)),
            (a, b) => num2!(a, b, x, y, select::expand(s, c, x, y), "select"),
        })
    }

    fn cast(&mut self, v: Val, _from: DType, to: DType) -> R<Val> {
        if !_from.is_int() && _from != DType::Bool && to.is_int() {
            // As Rust's `as`: saturating, NaN to 0 (a GPU conversion out of range is undefined).
            let (lo, hi) = match to {
                DType::I32 => (i32::MIN as f64, i32::MAX as f64 + 1.0),
                _ => (i64::MIN as f64, i64::MAX as f64 + 1.0),
            };
            let (lo_f, hi_f) = (lit_f64(self.s(), lo, _from), lit_f64(self.s(), hi, _from));
            let below = self.binary(BinOp::Le, v.clone(), lo_f, _from)?;
            let above = self.binary(BinOp::Ge, v.clone(), hi_f, _from)?;
            let nan = self.is_nan(v.clone())?;
            let s = self.s();
            let raw = match v {
                Val::F16(x) => cast_to(s, x, to),
                Val::BF16(x) => cast_to(s, x, to),
                Val::F32(x) => cast_to(s, x, to),
                Val::F64(x) => cast_to(s, x, to),
                _ => return err("cast of a non-float"),
            };
            let (min_i, max_i, zero) = match to {
                DType::I32 => (lit(s, i32::MIN), lit(s, i32::MAX), lit(s, 0i32)),
                _ => (lit(s, i64::MIN), lit(s, i64::MAX), lit(s, 0i64)),
            };
            let r = self.select(below, min_i, raw, to)?;
            let r = self.select(above, max_i, r, to)?;
            return self.select(nan, zero, r, to);
        }
        let s = self.s();
        if to == DType::Bool {
            let z = lit_f64(s, 0.0, _from);
            return self.binary(BinOp::Ne, v, z, _from);
        }
        Ok(match v {
            Val::I32(x) => cast_to(s, x, to),
            Val::I64(x) => cast_to(s, x, to),
            Val::F16(x) => cast_to(s, x, to),
            Val::BF16(x) => cast_to(s, x, to),
            Val::F32(x) => cast_to(s, x, to),
            Val::F64(x) => cast_to(s, x, to),
            Val::Bool(c) => {
                let (one, zero) = (lit_f64(s, 1.0, to), lit_f64(s, 0.0, to));
                return self.select(Val::Bool(c), one, zero, to);
            }
        })
    }

    fn call(&mut self, f: Intrinsic, args: Vec<Val>, d: DType) -> R<Val> {
        let s = self.s();
        let mut it = args.into_iter();
        let mut next = || it.next().ok_or_else(|| LowerError::Unsupported(format!("`{}` lacks an operand", f.name())));
        Ok(match f {
            Intrinsic::Exp => float1!(next()?, x, T, T::__expand_exp(s, x), "exp"),
            Intrinsic::Log => float1!(next()?, x, T, T::__expand_ln(s, x), "log"),
            Intrinsic::Sqrt => float1!(next()?, x, T, T::__expand_sqrt(s, x), "sqrt"),
            Intrinsic::Tanh if self.check_finite => {
                let x = next()?;
                return self.tanh_accurate(x, d);
            }
            Intrinsic::Tanh => float1!(next()?, x, T, T::__expand_tanh(s, x), "tanh"),
            Intrinsic::Floor => float1!(next()?, x, T, T::__expand_floor(s, x), "floor"),
            Intrinsic::Ceil => float1!(next()?, x, T, T::__expand_ceil(s, x), "ceil"),
            Intrinsic::Abs if d.is_int() => {
                // Wrapping (`abs(MIN) == MIN`), as the IR.
                let x = next()?;
                let z = self.int(0, d)?;
                let neg = self.binary(BinOp::Lt, x.clone(), z.clone(), d)?;
                let minus = self.binary(BinOp::Sub, z, x.clone(), d)?;
                return self.select(neg, minus, x, d);
            }
            Intrinsic::Abs => num1!(next()?, x, T, T::__expand_abs(s, x)),
            Intrinsic::Sigmoid if self.check_finite => {
                // exp(-|x|) never overflows: 1 / (1 + e) for x >= 0, e / (1 + e) below.
                let x = next()?;
                let one = lit_f64(s, 1.0, d);
                let a = self.call(Intrinsic::Abs, vec![x.clone()], d)?;
                let na = self.unary(UnOp::Neg, a, d)?;
                let e = self.call(Intrinsic::Exp, vec![na], d)?;
                let den = self.binary(BinOp::Add, one.clone(), e.clone(), d)?;
                let pos = self.binary(BinOp::Div, one, den.clone(), d)?;
                let neg = self.binary(BinOp::Div, e, den, d)?;
                let z = lit_f64(self.s(), 0.0, d);
                let nonneg = self.binary(BinOp::Ge, x, z, d)?;
                return self.select(nonneg, pos, neg, d);
            }
            Intrinsic::Sigmoid => {
                let x = next()?;
                let one = lit_f64(s, 1.0, d);
                let neg = self.unary(UnOp::Neg, x, d)?;
                let e = self.call(Intrinsic::Exp, vec![neg], d)?;
                let den = self.binary(BinOp::Add, one.clone(), e, d)?;
                return self.binary(BinOp::Div, one, den, d);
            }
            Intrinsic::Pow => {
                let (a, b) = (next()?, next()?);
                return self.pow(a, b, d);
            }
            Intrinsic::Fma => match (next()?, next()?, next()?) {
                (Val::F32(a), Val::F32(b), Val::F32(c)) => Val::F32(fma::expand(s, a, b, c)),
                (Val::F64(a), Val::F64(b), Val::F64(c)) => Val::F64(fma::expand(s, a, b, c)),
                (Val::F16(a), Val::F16(b), Val::F16(c)) => Val::F16(fma::expand(s, a, b, c)),
                (Val::BF16(a), Val::BF16(b), Val::BF16(c)) => Val::BF16(fma::expand(s, a, b, c)),
                _ => return err("fma takes three operands of one float type"),
            },
            Intrinsic::MaxValue(d) => match d {
                DType::I32 => lit(s, i32::MAX),
                DType::I64 => lit(s, i64::MAX),
                DType::F32 => lit_f64(s, f32::MAX as f64, DType::F32),
                DType::F64 => lit_f64(s, f64::MAX, DType::F64),
                DType::F16 => lit(s, half::f16::MAX),
                DType::BF16 => lit(s, half::bf16::MAX),
                DType::Bool => lit(s, true),
            },
            Intrinsic::MinValue(d) => match d {
                DType::I32 => lit(s, i32::MIN),
                DType::I64 => lit(s, i64::MIN),
                DType::F32 => lit_f64(s, f32::MIN as f64, DType::F32),
                DType::F64 => lit_f64(s, f64::MIN, DType::F64),
                DType::F16 => lit(s, half::f16::MIN),
                DType::BF16 => lit(s, half::bf16::MIN),
                DType::Bool => lit(s, false),
            },
        })
    }

    fn builtin(&mut self, b: Builtin, d: DType) -> R<Val> {
        let s = self.s();
        Ok(match b {
            Builtin::Tag(t) => {
                let x = match t {
                    ThreadTag::BlockIdxX => CUBE_POS_X::expand(s),
                    ThreadTag::BlockIdxY => CUBE_POS_Y::expand(s),
                    ThreadTag::BlockIdxZ => CUBE_POS_Z::expand(s),
                    ThreadTag::ThreadIdxX => UNIT_POS_X::expand(s),
                    ThreadTag::ThreadIdxY => UNIT_POS_Y::expand(s),
                    ThreadTag::ThreadIdxZ => UNIT_POS_Z::expand(s),
                };
                cast_to(s, x, d)
            }
            Builtin::CubePos => cast_to(s, CUBE_POS::expand(s), d),
            Builtin::AbsolutePos => cast_to(s, ABSOLUTE_POS::expand(s), d),
        })
    }

    fn bind(&mut self, v: Val, _name: &str, _d: DType) -> R<Val> {
        Ok(v)
    }

    fn load(&mut self, buf: BufRef, idx: Val, _id: DType, _d: DType) -> R<Val> {
        let i = to_usize(self.s(), idx)?;
        let s: *const Scope = self.scope;
        // SAFETY: see `ExpandGen::s`.
        self.buf(buf)?.load(unsafe { &*s }, i)
    }

    fn store(&mut self, buf: BufRef, idx: Val, _id: DType, v: Val, _d: DType) -> R<()> {
        let i = to_usize(self.s(), idx)?;
        let s: *const Scope = self.scope;
        // SAFETY: see `ExpandGen::s`.
        self.buf(buf)?.store(unsafe { &*s }, i, v)
    }

    fn atomic_add(&mut self, buf: BufRef, idx: Val, _id: DType, v: Val, _d: DType) -> R<Val> {
        let i = to_usize(self.s(), idx)?;
        let s: *const Scope = self.scope;
        // SAFETY: see `ExpandGen::s`.
        self.buf(buf)?.atomic_add(unsafe { &*s }, i, v)
    }

    fn atomic_load(&mut self, buf: BufRef, idx: Val, id: DType, d: DType) -> R<Val> {
        self.load(buf, idx, id, d)
    }

    fn atomic_store(&mut self, buf: BufRef, idx: Val, id: DType, v: Val, d: DType) -> R<()> {
        self.store(buf, idx, id, v, d)
    }

    fn if_else(
        &mut self,
        c: Val,
        then: &mut dyn FnMut(&mut Self) -> R<()>,
        otherwise: Option<&mut dyn FnMut(&mut Self) -> R<()>>,
    ) -> R<()> {
        let Val::Bool(c) = c else { return err("a condition must be a bool") };
        let mut res = Ok(());
        let scope: *const Scope = self.scope;
        // SAFETY: see `ExpandGen::s`.
        let scope = unsafe { &*scope };
        match otherwise {
            None => if_expand(scope, c, |child| res = self.nested(child, |g| then(g))),
            Some(e) => {
                let mut res2 = Ok(());
                if_else_expand(scope, c, |child| res = self.nested(child, |g| then(g)))
                    .or_else(scope, |child| res2 = self.nested(child, |g| e(g)));
                res = res.and(res2);
            }
        }
        res
    }

    fn for_range(
        &mut self,
        start: Val,
        end: Val,
        _d: DType,
        _name: &str,
        body: &mut dyn FnMut(&mut Self, Val) -> R<()>,
    ) -> R<()> {
        let mut res = Ok(());
        let scope: *const Scope = self.scope;
        // SAFETY: see `ExpandGen::s`.
        let scope = unsafe { &*scope };
        // Iterations run, counted in the loop's dtype.
        let mut count = match (self.count_loops, &start) {
            (false, _) => None,
            (true, Val::I32(_)) => Some(self.local_cell(0)?),
            (true, _) => {
                let s = self.s();
                let mut c = plain::<i64, _>(IntoMut::into_mut(Array::<i64>::__expand_new(s, 1usize), s));
                c.store(s, zero_index(s), lit(s, 0i64))?;
                Some(c)
            }
        };
        let trips = match count {
            Some(_) => {
                let d = if matches!(start, Val::I32(_)) { DType::I32 } else { DType::I64 };
                let n = self.binary(BinOp::Sub, end.clone(), start.clone(), d)?;
                let z = self.int(0, d)?;
                Some((self.binary(BinOp::Max, n, z, d)?, d))
            }
            None => None,
        };
        let mut counted = |g: &mut Self, child: &Scope| -> R<()> {
            if let (Some(c), Some((_, d))) = (count.as_mut(), trips.as_ref()) {
                let k = c.load(child, zero_index(child))?;
                let one = g.nested(child, |g| g.int(1, *d))?;
                let k = g.nested(child, |g| g.binary(BinOp::Add, k, one, *d))?;
                c.store(child, zero_index(child), k)?;
            }
            Ok(())
        };
        match (start, end) {
            (Val::I32(a), Val::I32(b)) => for_expand(scope, RangeExpand::new(a, b), false, |child, i| {
                if res.is_ok() {
                    res = counted(self, child).and_then(|_| self.nested(child, |g| body(g, Val::I32(i))));
                }
            }),
            (Val::I64(a), Val::I64(b)) => for_expand(scope, RangeExpand::new(a, b), false, |child, i| {
                if res.is_ok() {
                    res = counted(self, child).and_then(|_| self.nested(child, |g| body(g, Val::I64(i))));
                }
            }),
            _ => return err("loop bounds must be two i32 or two i64"),
        }
        res?;
        if let (Some(c), Some((n, d))) = (count, trips) {
            let k = c.load(self.s(), zero_index(self.s()))?;
            let short = self.binary(BinOp::Lt, k, n, d)?;
            self.flag_if(short, STATUS_CUT)?;
        }
        Ok(())
    }

    fn infinite_loop(&mut self, body: &mut dyn FnMut(&mut Self) -> R<()>) -> R<()> {
        let mut res = Ok(());
        let scope: *const Scope = self.scope;
        // SAFETY: see `ExpandGen::s`.
        let scope = unsafe { &*scope };
        let checked = self.count_loops;
        if checked {
            let flag = self.local_cell(0)?;
            self.breaks.push(flag);
        }
        loop_expand(scope, |child| {
            if res.is_ok() {
                res = self.nested(child, |g| body(g));
            }
        });
        res?;
        if checked {
            if let Some(flag) = self.breaks.pop() {
                let s = self.s();
                let left = flag.load(s, zero_index(s))?;
                let z = self.int(0, DType::I32)?;
                let cut = self.binary(BinOp::Eq, left, z, DType::I32)?;
                self.flag_if(cut, STATUS_CUT)?;
            }
        }
        Ok(())
    }

    fn brk(&mut self) -> R<()> {
        let s: *const Scope = self.scope;
        // SAFETY: see `ExpandGen::s`.
        let s = unsafe { &*s };
        if let Some(flag) = self.breaks.last_mut() {
            flag.store(s, zero_index(s), lit(s, 1i32))?;
        }
        break_expand(s);
        Ok(())
    }

    fn alloc(&mut self, buf: BufferId, _name: &str, len: usize, d: DType, shared: bool) -> R<()> {
        let s = self.s();
        macro_rules! mk {
            ($t:ty) => {
                if shared {
                    plain::<$t, _>(IntoMut::into_mut(Shared::<[$t]>::__expand_new_slice(s, len.into()), s))
                } else {
                    plain::<$t, _>(IntoMut::into_mut(Array::<$t>::__expand_new(s, len.into()), s))
                }
            };
        }
        let b = match d {
            DType::I32 => mk!(i32),
            DType::I64 => mk!(i64),
            DType::F32 => mk!(f32),
            DType::F64 => mk!(f64),
            DType::F16 => mk!(half::f16),
            DType::BF16 => mk!(half::bf16),
            DType::Bool => return err("bool buffers are not supported; use i32"),
        };
        self.allocs.insert(buf, b);
        Ok(())
    }

    fn sync(&mut self) -> R<()> {
        sync_cube::expand(self.s());
        Ok(())
    }

    fn check_divisor(&mut self, b: Val, d: DType) -> R<Val> {
        if self.status.is_none() {
            return Ok(b);
        }
        let z = self.int(0, d)?;
        let zero = self.binary(BinOp::Eq, b.clone(), z, d)?;
        self.flag_if(zero.clone(), STATUS_DIV)?;
        let one = self.int(1, d)?;
        self.select(zero, one, b, d)
    }

    fn checks_finite(&self) -> bool {
        self.status.is_some() && self.check_finite
    }

    fn report_nonfinite(&mut self, cond: Val) -> R<()> {
        self.flag_if(cond, STATUS_NONFINITE)
    }

    fn check_finite(&mut self, v: Val, _d: DType) -> R<Val> {
        if self.status.is_none() || !self.check_finite {
            return Ok(v);
        }
        let bad = self.nonfinite_bits(v.clone())?;
        self.flag_if(bad, STATUS_NONFINITE)?;
        // WGSL lets a compiler reassociate and contract (`(a - b) + b` into `a`); an opaque
        // identity on each result keeps every operation rounded as `ir::value` rounds it.
        self.opaque(v)
    }

    fn sync_storage(&mut self) -> R<()> {
        sync_storage::expand(self.s());
        Ok(())
    }

    fn cube_units(&mut self) -> R<Val> {
        let s = self.s();
        Ok(cast_to(s, CUBE_DIM::expand(s), DType::I32))
    }

    fn unit_pos(&mut self) -> R<Val> {
        let s = self.s();
        Ok(cast_to(s, UNIT_POS::expand(s), DType::I32))
    }
}
