//! Element traits: [`Index`] for index arrays (`i32`, `i64`) and [`Value`] for stored
//! values (`f32`, `f64`, `half::f16`).

use half::f16;
use sparsec_ir::DType;
use std::fmt::{Debug, Display};
use std::ops::{Add, Neg};

/// An integer type usable for `indptr`/`indices` arrays: `i32` or `i64`.
///
/// Containers only hold non-negative indices that fit the type, so the internal
/// `ix`/`from_ix` conversions never lose information on validated data.
pub trait Index:
    Copy + Ord + Eq + Debug + Display + Default + Send + Sync + std::hash::Hash + 'static
{
    /// The IR dtype of this index type.
    const DTYPE: DType;
    /// Largest value, as `usize`.
    const MAX_USIZE: usize;
    /// Zero.
    const ZERO: Self;

    /// Converts from `usize`, `None` if it does not fit.
    fn from_usize(v: usize) -> Option<Self>;
    /// Converts from `i64`, `None` if it does not fit.
    fn from_i64(v: i64) -> Option<Self>;
    /// Widens to `i64`.
    fn to_i64(self) -> i64;
    /// Converts to `usize`, `None` if negative.
    fn to_usize(self) -> Option<usize>;

    /// Index as `usize` for data already validated to be non-negative.
    #[inline]
    fn ix(self) -> usize {
        self.to_usize().unwrap_or(0)
    }
    /// From a `usize` already known to fit (saturates otherwise).
    #[inline]
    fn from_ix(v: usize) -> Self {
        Self::from_usize(v)
            .unwrap_or_else(|| Self::from_usize(Self::MAX_USIZE).unwrap_or(Self::ZERO))
    }
}

macro_rules! impl_index {
    ($t:ty, $d:expr) => {
        impl Index for $t {
            const DTYPE: DType = $d;
            const MAX_USIZE: usize = <$t>::MAX as usize;
            const ZERO: Self = 0;
            #[inline]
            fn from_usize(v: usize) -> Option<Self> {
                <$t>::try_from(v).ok()
            }
            #[inline]
            fn from_i64(v: i64) -> Option<Self> {
                <$t>::try_from(v).ok()
            }
            #[inline]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline]
            fn to_usize(self) -> Option<usize> {
                usize::try_from(self).ok()
            }
        }
    };
}
impl_index!(i32, DType::I32);
impl_index!(i64, DType::I64);

/// A stored value type: `f32`, `f64` or `half::f16`.
pub trait Value:
    Copy
    + PartialEq
    + Debug
    + Display
    + Default
    + Add<Output = Self>
    + Neg<Output = Self>
    + Send
    + Sync
    + 'static
{
    /// The IR dtype of this value type.
    const DTYPE: DType;
    /// Zero.
    fn zero() -> Self;
    /// One.
    fn one() -> Self;
    /// Rounds an `f64` to this type.
    fn from_f64(v: f64) -> Self;
    /// Widens to `f64`.
    fn to_f64(self) -> f64;
    /// Whether the value is NaN.
    fn is_nan(self) -> bool;
    /// Whether the value equals zero (either sign).
    fn is_zero(self) -> bool {
        self == Self::zero()
    }
}

impl Value for f32 {
    const DTYPE: DType = DType::F32;
    fn zero() -> Self {
        0.0
    }
    fn one() -> Self {
        1.0
    }
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
}

impl Value for f64 {
    const DTYPE: DType = DType::F64;
    fn zero() -> Self {
        0.0
    }
    fn one() -> Self {
        1.0
    }
    fn from_f64(v: f64) -> Self {
        v
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
}

impl Value for f16 {
    const DTYPE: DType = DType::F16;
    fn zero() -> Self {
        f16::ZERO
    }
    fn one() -> Self {
        f16::ONE
    }
    fn from_f64(v: f64) -> Self {
        f16::from_f64(v)
    }
    fn to_f64(self) -> f64 {
        f16::to_f64(self)
    }
    fn is_nan(self) -> bool {
        f16::is_nan(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_conversions_check_range() {
        assert_eq!(<i32 as Index>::from_usize(1 << 31), None);
        assert_eq!(<i64 as Index>::from_usize(1 << 31), Some(1 << 31));
        assert_eq!(<i32 as Index>::from_i64(-5), Some(-5));
        assert_eq!((-5i32).to_usize(), None);
        assert_eq!(<i32 as Index>::from_ix(usize::MAX), i32::MAX);
        assert_eq!(<i32 as Index>::DTYPE, DType::I32);
    }

    #[test]
    fn values_round_trip_through_f64() {
        assert_eq!(<f16 as Value>::from_f64(0.5).to_f64(), 0.5);
        assert!(<f32 as Value>::from_f64(f64::NAN).is_nan());
        assert!((-0.0f64).is_zero());
        assert_eq!(<f16 as Value>::DTYPE, DType::F16);
    }
}
