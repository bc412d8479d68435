//! [`Scalar`]: a number that is not a tensor (schema type `Scalar`).
//!
//! Owns: the scalar value type, its conversions (including PyTorch's overflow check
//! for converting a scalar to a dtype) and printing. Must not: know about tensors or
//! dispatch.

#![warn(missing_docs)]

use crate::dtype::DType;
use crate::error::{OpalError, Result};
use std::fmt;

/// A Python-style number: bool, int, float or complex. `Copy`.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Scalar {
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A complex number `(re, im)`.
    Complex(f64, f64),
}

impl Scalar {
    /// The dtype this scalar has on its own: `Bool`, `I64`, `F64` or `C128`
    /// (like a PyTorch `Scalar`'s `type()`).
    pub const fn dtype(&self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::Int(_) => DType::I64,
            Scalar::Float(_) => DType::F64,
            Scalar::Complex(..) => DType::C128,
        }
    }

    /// As `f64` (complex: the real part).
    pub fn to_f64(&self) -> f64 {
        match *self {
            Scalar::Bool(b) => b as i64 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
            Scalar::Complex(r, _) => r,
        }
    }

    /// As `i64` (floats truncate toward zero, saturating).
    pub fn to_i64(&self) -> i64 {
        match *self {
            Scalar::Bool(b) => b as i64,
            Scalar::Int(i) => i,
            Scalar::Float(f) => f as i64,
            Scalar::Complex(r, _) => r as i64,
        }
    }

    /// As `bool` (non-zero is true).
    pub fn to_bool(&self) -> bool {
        match *self {
            Scalar::Bool(b) => b,
            Scalar::Int(i) => i != 0,
            Scalar::Float(f) => f != 0.0,
            Scalar::Complex(r, i) => r != 0.0 || i != 0.0,
        }
    }

    /// As `(re, im)`.
    pub fn to_complex(&self) -> (f64, f64) {
        match *self {
            Scalar::Complex(r, i) => (r, i),
            _ => (self.to_f64(), 0.0),
        }
    }

    /// True for `Float`.
    pub const fn is_floating_point(&self) -> bool {
        matches!(self, Scalar::Float(_))
    }
    /// True for `Int` (not `Bool`).
    pub const fn is_integral(&self) -> bool {
        matches!(self, Scalar::Int(_))
    }
    /// True for `Complex`.
    pub const fn is_complex(&self) -> bool {
        matches!(self, Scalar::Complex(..))
    }
    /// True for `Bool`.
    pub const fn is_bool(&self) -> bool {
        matches!(self, Scalar::Bool(_))
    }

    /// True when the value converts to `dtype` without overflow, by PyTorch's rule
    /// for a scalar stored into a tensor (`fill_`, `full`, `alpha`, ...):
    /// - anything converts to bool (non-zero is true), and a bool to anything;
    /// - a complex value with a non-zero imaginary part does not fit a real dtype;
    /// - integers fit integer dtypes in range, except that negative values down to
    ///   `-max` wrap into unsigned ones (`-1` is 255 as uint8);
    /// - floats fit integer dtypes when finite and in range (they truncate), and
    ///   floating dtypes when in range or infinite or NaN.
    #[inline]
    pub fn fits(&self, dtype: DType) -> bool {
        // Every op's `alpha=1` and most literals: 0..=127 fits every dtype.
        if let Scalar::Int(0..=127) = self {
            return true;
        }
        self.fits_any(dtype)
    }

    #[inline(never)]
    fn fits_any(&self, dtype: DType) -> bool {
        if dtype == DType::Bool {
            return true;
        }
        match *self {
            Scalar::Bool(_) => true,
            Scalar::Int(i) => int_fits(i, dtype),
            Scalar::Float(f) => float_fits(f, dtype),
            Scalar::Complex(re, im) => {
                (dtype.is_complex() || im == 0.0) && float_fits(re, dtype) && float_fits(im, dtype)
            }
        }
    }

    /// `Ok` when [`Scalar::fits`] `dtype`, else an error in PyTorch's words naming
    /// `op`, the value and the dtype.
    #[inline]
    pub fn check_fits(&self, dtype: DType, op: &str) -> Result<()> {
        if self.fits(dtype) {
            return Ok(());
        }
        Err(self.overflow_error(dtype, op))
    }

    #[cold]
    #[inline(never)]
    fn overflow_error(&self, dtype: DType, op: &str) -> OpalError {
        OpalError::msg(format!(
            "{op}: value {self} cannot be converted to type {dtype} without overflow"
        ))
    }
}

/// The finite range of a dtype's (real) values as f64.
fn float_range(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::Bool => (0.0, 1.0),
        DType::U8 => (0.0, u8::MAX as f64),
        DType::I8 => (i8::MIN as f64, i8::MAX as f64),
        DType::I16 => (i16::MIN as f64, i16::MAX as f64),
        DType::I32 => (i32::MIN as f64, i32::MAX as f64),
        DType::I64 => (i64::MIN as f64, i64::MAX as f64),
        DType::F16 => (half::f16::MIN.to_f64(), half::f16::MAX.to_f64()),
        DType::BF16 => (half::bf16::MIN.to_f64(), half::bf16::MAX.to_f64()),
        DType::F32 | DType::C64 => (f32::MIN as f64, f32::MAX as f64),
        DType::F64 | DType::C128 => (f64::MIN, f64::MAX),
    }
}

fn int_fits(i: i64, dtype: DType) -> bool {
    if dtype.is_integral(false) {
        let (lo, hi) = match dtype {
            DType::U8 => (-(u8::MAX as i64), u8::MAX as i64),
            DType::I8 => (i8::MIN as i64, i8::MAX as i64),
            DType::I16 => (i16::MIN as i64, i16::MAX as i64),
            DType::I32 => (i32::MIN as i64, i32::MAX as i64),
            _ => (i64::MIN, i64::MAX),
        };
        return (lo..=hi).contains(&i);
    }
    float_fits(i as f64, dtype)
}

fn float_fits(f: f64, dtype: DType) -> bool {
    let floating = dtype.is_floating_point() || dtype.is_complex();
    if floating && !f.is_finite() {
        return true;
    }
    let (lo, hi) = float_range(dtype);
    // NaN compares false both ways: it fits no integer dtype.
    f >= lo && f <= hi
}

impl Default for Scalar {
    fn default() -> Self {
        Scalar::Int(0)
    }
}

impl fmt::Display for Scalar {
    /// Prints like Python: `True`, `3`, `2.5`, `(1+2j)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Scalar::Bool(b) => f.write_str(if b { "True" } else { "False" }),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => {
                if x.is_finite() && x.fract() == 0.0 && x.abs() < 1e16 {
                    write!(f, "{x:.1}")
                } else {
                    write!(f, "{x}")
                }
            }
            Scalar::Complex(r, i) => write!(f, "({r}{i:+}j)"),
        }
    }
}

macro_rules! scalar_from {
    ($($t:ty => $v:ident as $c:ty),*) => {$(
        impl From<$t> for Scalar { fn from(x: $t) -> Self { Scalar::$v(x as $c) } }
    )*};
}
scalar_from!(i8 => Int as i64, i16 => Int as i64, i32 => Int as i64, i64 => Int as i64,
    u8 => Int as i64, u16 => Int as i64, u32 => Int as i64, f32 => Float as f64, f64 => Float as f64);

impl From<bool> for Scalar {
    fn from(b: bool) -> Self {
        Scalar::Bool(b)
    }
}
impl From<half::f16> for Scalar {
    fn from(x: half::f16) -> Self {
        Scalar::Float(x.to_f64())
    }
}
impl From<half::bf16> for Scalar {
    fn from(x: half::bf16) -> Self {
        Scalar::Float(x.to_f64())
    }
}
impl From<crate::dtype::Complex<f32>> for Scalar {
    fn from(c: crate::dtype::Complex<f32>) -> Self {
        Scalar::Complex(c.re as f64, c.im as f64)
    }
}
impl From<crate::dtype::Complex<f64>> for Scalar {
    fn from(c: crate::dtype::Complex<f64>) -> Self {
        Scalar::Complex(c.re, c.im)
    }
}
