//! What Rust users expect of a tensor type: `std::ops` arithmetic operators,
//! conversions with `Vec<T>` and slices, and value-equality helpers.
//!
//! Owns: the `Add`/`Sub`/`Mul`/`Div`/`Neg` impls on [`Tensor`], the
//! `TryFrom` conversions between [`Tensor`] and `Vec<T>`/`&[T]`, and
//! [`Tensor::equal`] / [`Tensor::allclose`] / [`Tensor::allclose_with`].
//!
//! Must not: compute anything itself. Every operator and helper here calls the
//! generated ops (`crate::ops`), so it runs on whatever device has kernels and
//! reports misuse as the op's own `Err`; the conversions go through
//! [`Tensor::from_slice`] / [`Tensor::to_vec`]. Handle identity (`==`,
//! [`Tensor::is_same`]) stays in `tensor/mod.rs`.
//!
//! # Operators
//!
//! The operators return [`Result<Tensor>`] (as candle's do): a shape, dtype or
//! device mismatch is an `Err` naming the op, never a panic. They are defined for
//! every combination of `Tensor` and `&Tensor`, and with an `f64` on either side:
//!
//! | expression | op |
//! |---|---|
//! | `a + b`, `a - b`, `a * b`, `a / b` | `add.Tensor`, `sub.Tensor`, `mul.Tensor`, `div.Tensor` |
//! | `a + s`, `s + a` | `add.Scalar` |
//! | `a * s`, `s * a` | `mul.Scalar` |
//! | `a - s`, `s - a`, `a / s`, `s / a` | `sub.Tensor` / `div.Tensor` with `s` as a wrapped number (as PyTorch does for `a - 2`) |
//! | `-a` | `neg` |
//!
//! ```
//! use opal::Tensor;
//! opal_cpu::init()?;
//! let a = Tensor::try_from(vec![1.0f32, 2.0, 3.0])?;
//! let b = Tensor::try_from(&[10.0f32, 20.0, 30.0][..])?;
//! let c = ((&a + &b)? * 2.0)?;
//! assert_eq!(Vec::<f32>::try_from(&c)?, vec![22.0, 44.0, 66.0]);
//! assert!((1.0 - &a)?.equal(&Tensor::try_from(vec![0.0f32, -1.0, -2.0])?)?);
//! assert!(c == c.clone()); // `==` is handle identity: a clone is the same handle
//! assert!(!c.equal(&a)?);
//! # Ok::<(), opal::OpalError>(())
//! ```
//!
//! # Equality
//!
//! `a == b` compares handles (PyTorch's `a is b`). Compare values with
//! [`Tensor::equal`] (same shape, same values) or [`Tensor::allclose`]
//! (within tolerances).

use std::ops::{Add, Div, Mul, Neg, Sub};

use crate::dtype::{DType, Element};
use crate::error::{OpalError, Result};
use crate::ops;
use crate::scalar::Scalar;
use crate::tensor::Tensor;

/// Implements one binary operator for the four owned/borrowed combinations of
/// two tensors, and for a tensor with an `f64` on either side.
macro_rules! binary_operator {
    ($trait:ident, $method:ident, $tt:expr, $ts:expr, $st:expr) => {
        impl $trait<&Tensor> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                $tt(self, rhs)
            }
        }
        impl $trait<Tensor> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                $tt(self, &rhs)
            }
        }
        impl $trait<&Tensor> for Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                $tt(&self, rhs)
            }
        }
        impl $trait<Tensor> for Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                $tt(&self, &rhs)
            }
        }
        impl $trait<f64> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: f64) -> Result<Tensor> {
                $ts(self, rhs)
            }
        }
        impl $trait<f64> for Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: f64) -> Result<Tensor> {
                $ts(&self, rhs)
            }
        }
        impl $trait<&Tensor> for f64 {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                $st(self, rhs)
            }
        }
        impl $trait<Tensor> for f64 {
            type Output = Result<Tensor>;
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                $st(self, &rhs)
            }
        }
    };
}

/// `s` as a zero-dim "wrapped number" tensor, which takes part in type promotion
/// like a scalar (an `f32` tensor minus `2.0` stays `f32`).
fn wrapped(s: f64) -> Result<Tensor> {
    Tensor::wrapped_number(&Scalar::Float(s))
}

binary_operator!(
    Add,
    add,
    ops::add_tensor,
    |t: &Tensor, s: f64| ops::add_scalar(t, &Scalar::Float(s)),
    |s: f64, t: &Tensor| ops::add_scalar(t, &Scalar::Float(s))
);
binary_operator!(
    Sub,
    sub,
    ops::sub_tensor,
    |t: &Tensor, s: f64| ops::sub_tensor(t, &wrapped(s)?),
    |s: f64, t: &Tensor| ops::sub_tensor(&wrapped(s)?, t)
);
binary_operator!(
    Mul,
    mul,
    ops::mul_tensor,
    |t: &Tensor, s: f64| ops::mul_scalar(t, &Scalar::Float(s)),
    |s: f64, t: &Tensor| ops::mul_scalar(t, &Scalar::Float(s))
);
binary_operator!(
    Div,
    div,
    ops::div_tensor,
    |t: &Tensor, s: f64| ops::div_tensor(t, &wrapped(s)?),
    |s: f64, t: &Tensor| ops::div_tensor(&wrapped(s)?, t)
);

impl Neg for &Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        ops::neg(self)
    }
}

impl Neg for Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        ops::neg(&self)
    }
}

impl<T: Element> TryFrom<Vec<T>> for Tensor {
    type Error = OpalError;
    /// A 1-d CPU tensor holding the vector's elements.
    fn try_from(v: Vec<T>) -> Result<Tensor> {
        Tensor::try_from(v.as_slice())
    }
}

impl<T: Element> TryFrom<&[T]> for Tensor {
    type Error = OpalError;
    /// A 1-d CPU tensor holding a copy of the slice.
    fn try_from(v: &[T]) -> Result<Tensor> {
        let len = i64::try_from(v.len())
            .map_err(|_| OpalError::shape(format!("{} elements do not fit i64", v.len())))?;
        Tensor::from_slice(v, &[len])
    }
}

impl<T: Element> TryFrom<&Tensor> for Vec<T> {
    type Error = OpalError;
    /// The elements in logical (row-major) order, whatever the tensor's rank;
    /// `T` must match the dtype exactly (an `Err` names both otherwise).
    fn try_from(t: &Tensor) -> Result<Vec<T>> {
        t.to_vec::<T>()
    }
}

impl<T: Element> TryFrom<Tensor> for Vec<T> {
    type Error = OpalError;
    /// As `Vec::try_from(&tensor)`.
    fn try_from(t: Tensor) -> Result<Vec<T>> {
        t.to_vec::<T>()
    }
}

/// Reads a boolean zero-dim result (of `all`) back to the host.
fn read_bool(op: &str, t: &Tensor) -> Result<bool> {
    match t.item()? {
        Scalar::Bool(b) => Ok(b),
        other => Err(OpalError::msg(format!(
            "{op}: expected a bool result from `all`, got {other:?}"
        ))),
    }
}

impl Tensor {
    /// Whether `self` and `other` have the same shape and the same values, like
    /// `torch.equal`: no broadcasting; different dtypes are compared after type
    /// promotion (`[1i64] equals [1.0f32]`); `NaN` never equals anything, so a
    /// tensor holding a `NaN` is not `equal` to itself. Two empty tensors of the
    /// same shape are equal.
    ///
    /// Runs `eq.Tensor` and `all` through the dispatcher, so it works on every
    /// device with those kernels; an undefined tensor, a device mismatch or a
    /// device whose values cannot be read (meta) is an `Err` naming `equal`.
    pub fn equal(&self, other: &Tensor) -> Result<bool> {
        let ctx = |e: OpalError| OpalError::msg(format!("equal: {e}"));
        if !self.is_defined() || !other.is_defined() {
            return Err(OpalError::msg("equal: the tensor is undefined"));
        }
        if self.sizes() != other.sizes() {
            return Ok(false);
        }
        let same = ops::eq_tensor(self, other).map_err(ctx)?;
        let all = ops::all(&same).map_err(ctx)?;
        read_bool("equal", &all).map_err(ctx)
    }

    /// `torch.allclose(self, other, rtol, atol)` with `equal_nan = false`: whether
    /// every element satisfies `|self - other| <= atol + rtol * |other|` after
    /// broadcasting, where equal infinities are close and `NaN` is close to
    /// nothing. See [`Tensor::allclose_with`].
    pub fn allclose(&self, other: &Tensor, rtol: f64, atol: f64) -> Result<bool> {
        self.allclose_with(other, rtol, atol, false)
    }

    /// `torch.allclose(self, other, rtol, atol, equal_nan)`, PyTorch's semantics:
    ///
    /// - elementwise `a == b`, or both finite-difference and
    ///   `|a - b| <= atol + rtol * |b|` (so not symmetric in `a`/`b`);
    ///   an infinity is close only to the same infinity;
    /// - `NaN` is close to `NaN` only when `equal_nan`;
    /// - the two tensors broadcast against each other;
    /// - both must have the same dtype (as PyTorch's `isclose` requires), and
    ///   `rtol`/`atol` must be non-negative (otherwise an `Err` naming `allclose`);
    /// - complex tensors are not supported (an `Err`); other dtypes are compared
    ///   in `f64` (exact for every integer up to 2^53).
    ///
    /// Runs through the dispatcher (`_to_copy`, `sub`, `abs`, `le`, ...), so it
    /// works on every device with those kernels.
    pub fn allclose_with(
        &self,
        other: &Tensor,
        rtol: f64,
        atol: f64,
        equal_nan: bool,
    ) -> Result<bool> {
        let ctx = |e: OpalError| OpalError::msg(format!("allclose: {e}"));
        if !self.is_defined() || !other.is_defined() {
            return Err(OpalError::msg("allclose: the tensor is undefined"));
        }
        if self.dtype() != other.dtype() {
            return Err(OpalError::msg(format!(
                "allclose: self and other must have the same dtype, got {} and {}",
                self.dtype(),
                other.dtype()
            )));
        }
        if matches!(self.dtype(), DType::C64 | DType::C128) {
            return Err(OpalError::msg(format!(
                "allclose: {} tensors are not supported",
                self.dtype()
            )));
        }
        // NaN tolerances are rejected too.
        let valid = |x: f64| x.is_finite() || x == f64::INFINITY;
        if !(valid(rtol) && valid(atol) && rtol >= 0.0 && atol >= 0.0) {
            return Err(OpalError::msg(format!(
                "allclose: rtol and atol must be non-negative, got rtol={rtol} and atol={atol}"
            )));
        }
        let as_f64 =
            |t: &Tensor| ops::_to_copy::call(t, Some(DType::F64), None, None, None, false, None);
        let a = as_f64(self).map_err(ctx)?;
        let b = as_f64(other).map_err(ctx)?;
        let run = || -> Result<bool> {
            let mut close = ops::eq_tensor(&a, &b)?;
            if equal_nan {
                let both_nan = ops::logical_and(&ops::isnan(&a)?, &ops::isnan(&b)?)?;
                close = ops::logical_or(&close, &both_nan)?;
            }
            let diff = ops::abs(&ops::sub_tensor(&a, &b)?)?;
            let allowed = ops::add_scalar(
                &ops::mul_scalar(&ops::abs(&b)?, &Scalar::Float(rtol))?,
                &Scalar::Float(atol),
            )?;
            // A finite x has x - x == 0; inf - inf and NaN - NaN are NaN.
            let finite = ops::logical_not(&ops::isnan(&ops::sub_tensor(&diff, &diff)?)?)?;
            let within = ops::logical_and(&finite, &ops::le_tensor(&diff, &allowed)?)?;
            close = ops::logical_or(&close, &within)?;
            read_bool("allclose", &ops::all(&close)?)
        };
        run().map_err(ctx)
    }
}
