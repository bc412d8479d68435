//! The element-wise overloads of the core opset's last group: `fmod` (Tensor and
//! Scalar divisors), `pow.Scalar` (a Scalar base raised to a tensor of exponents)
//! and `clamp.Tensor` (bounds given as tensors), with their `out=` and in-place
//! forms.
//!
//! Owns: these overloads' promotion and argument checks. Must not: restate the
//! element math of `remainder`, `pow` or `clamp` (it calls the same loops in
//! `binary` and `select`), or handle layout and out= rules itself.

use super::binary::{modulo_impl, pow_tt_impl};
use super::scalar_binary::wrapped;
use super::scalar_tensor;
use super::select::{clamp_float, clamp_ord};
use crate::copy::to_dtype;
use crate::dtype_dispatch::Float;
use crate::iter::{map2, map3};
use crate::out::{write_result, Dest};
use crate::{dispatch_float, dispatch_numeric};
use opal::dtype::ResultType;
use opal::{DType, OpalError, Result, Scalar, Tensor};

// ---------------------------------------------------------------- fmod

/// `fmod.Tensor`: the remainder of division truncated toward zero (the sign of
/// the dividend), C's `fmod`.
pub fn fmod_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    modulo_impl(self_, other, false, Dest::New, "fmod.Tensor")
}
/// `fmod.Tensor_out`.
pub fn fmod_tensor_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    modulo_impl(self_, other, false, Dest::Out(out), "fmod.Tensor_out")
}
/// `fmod_.Tensor`.
pub fn fmod_tensor_(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    modulo_impl(self_, other, false, Dest::InPlace(self_), "fmod_.Tensor")
}
/// `fmod.Scalar`: the divisor takes part in promotion as a wrapped number.
pub fn fmod_scalar(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    let b = wrapped(self_, other)?;
    modulo_impl(self_, &b, false, Dest::New, "fmod.Scalar")
}
/// `fmod.Scalar_out`.
pub fn fmod_scalar_out(self_: &Tensor, other: &Scalar, out: &Tensor) -> Result<Tensor> {
    let b = wrapped(self_, other)?;
    modulo_impl(self_, &b, false, Dest::Out(out), "fmod.Scalar_out")
}
/// `fmod_.Scalar`.
pub fn fmod_scalar_(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    let b = wrapped(self_, other)?;
    modulo_impl(self_, &b, false, Dest::InPlace(self_), "fmod_.Scalar")
}

// ---------------------------------------------------------------- pow.Scalar

fn pow_scalar_base(base: &Scalar, exponent: &Tensor, dest: Dest<'_>, op: &str) -> Result<Tensor> {
    // The base is a wrapped number: `2 ** int32` stays int32, `2.5 ** int32` is
    // the default float dtype.
    let rt = super::result_type_scalar(exponent, base)?;
    pow_tt_impl(&scalar_tensor(base, rt)?, exponent, dest, op)
}
/// `pow.Scalar`: `self ** exponent` for a Scalar base.
pub fn pow_scalar(self_: &Scalar, exponent: &Tensor) -> Result<Tensor> {
    pow_scalar_base(self_, exponent, Dest::New, "pow.Scalar")
}
/// `pow.Scalar_out`.
pub fn pow_scalar_out(self_: &Scalar, exponent: &Tensor, out: &Tensor) -> Result<Tensor> {
    pow_scalar_base(self_, exponent, Dest::Out(out), "pow.Scalar_out")
}

// ---------------------------------------------------------------- clamp.Tensor

fn no_bound(op: &str) -> OpalError {
    OpalError::msg(format!(
        "{op}: At least one of 'min' or 'max' must not be None"
    ))
}

fn clamp_tensor_impl(
    self_: &Tensor,
    min: Option<&Tensor>,
    max: Option<&Tensor>,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    if min.is_none() && max.is_none() {
        return Err(no_bound(op));
    }
    let inputs: Vec<&Tensor> = [Some(self_), min, max].into_iter().flatten().collect();
    let rt = ResultType::of_tensors(&inputs)?;
    if rt == DType::Bool || rt.is_complex() {
        return Err(OpalError::msg(format!(
            "{op}: not supported for {rt} tensors"
        )));
    }
    let sizes: Vec<&[i64]> = inputs.iter().map(|t| t.sizes()).collect();
    let shape = opal::rules::broadcast_shapes(op, &sizes)?;
    let x = to_dtype(self_, rt)?;
    let lo = min.map(|t| to_dtype(t, rt)).transpose()?;
    let hi = max.map(|t| to_dtype(t, rt)).transpose()?;
    write_result(dest, &shape, rt, op, |o| {
        if rt.is_floating_point() {
            return dispatch_float!(rt, op, |T, C| match (&lo, &hi) {
                (Some(l), Some(h)) => map3::<T, T, T, T>(o, &x, l, h, op, |v, l, h| {
                    T::down(clamp_float(v.up(), Some(l.up()), Some(h.up())))
                }),
                (Some(l), None) => map2::<T, T, T>(o, &x, l, op, |v, l| {
                    T::down(clamp_float(v.up(), Some(l.up()), None))
                }),
                (None, Some(h)) => map2::<T, T, T>(o, &x, h, op, |v, h| {
                    T::down(clamp_float(v.up(), None, Some(h.up())))
                }),
                (None, None) => Err(no_bound(op)),
            });
        }
        dispatch_numeric!(rt, op, |T| match (&lo, &hi) {
            (Some(l), Some(h)) => map3::<T, T, T, T>(o, &x, l, h, op, |v, l, h| {
                clamp_ord(v, Some(l), Some(h))
            }),
            (Some(l), None) => map2::<T, T, T>(o, &x, l, op, |v, l| clamp_ord(v, Some(l), None)),
            (None, Some(h)) => map2::<T, T, T>(o, &x, h, op, |v, h| clamp_ord(v, None, Some(h))),
            (None, None) => Err(no_bound(op)),
        })
    })
}
/// `clamp.Tensor`: `self` clamped element-wise to `[min, max]` (broadcast).
pub fn clamp_tensor(self_: &Tensor, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<Tensor> {
    clamp_tensor_impl(self_, min, max, Dest::New, "clamp.Tensor")
}
/// `clamp.Tensor_out`.
pub fn clamp_tensor_out(
    self_: &Tensor,
    min: Option<&Tensor>,
    max: Option<&Tensor>,
    out: &Tensor,
) -> Result<Tensor> {
    clamp_tensor_impl(self_, min, max, Dest::Out(out), "clamp.Tensor_out")
}
/// `clamp_.Tensor`.
pub fn clamp_tensor_(self_: &Tensor, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<Tensor> {
    clamp_tensor_impl(self_, min, max, Dest::InPlace(self_), "clamp_.Tensor")
}
