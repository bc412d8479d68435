//! The Scalar overloads of `div` (with and without `rounding_mode`), `sub` and
//! `remainder`.
//!
//! Owns: turning the Python-scalar operand into a 0-dim tensor of the promoted
//! dtype (so it takes part in promotion as a wrapped number) and running the Tensor
//! kernel of `binary`. Must not: compute anything itself.

use super::binary::{div_impl, remainder_impl, sub_impl};
use super::{float_result, result_type_scalar, scalar_tensor};
use crate::out::Dest;
use opal::{Result, Scalar, Tensor};

/// `other` as a 0-dim tensor of the dtype `self_ (op) other` promotes to.
pub(super) fn wrapped(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    scalar_tensor(other, result_type_scalar(self_, other)?)
}

/// The divisor of `div`: true division computes in a float dtype, so the scalar
/// goes there directly (a negative divisor of a `uint8` tensor stays negative);
/// rounded division keeps the promoted dtype.
fn divisor(
    self_: &Tensor,
    other: &Scalar,
    rounding_mode: Option<&str>,
    op: &str,
) -> Result<Tensor> {
    let rt = result_type_scalar(self_, other)?;
    let dt = match rounding_mode {
        None => float_result(rt, op)?,
        Some(_) => rt,
    };
    scalar_tensor(other, dt)
}

/// `div.Scalar`: true division by a scalar.
pub fn div_scalar(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    div_scalar_mode(self_, other, None)
}
/// `div_.Scalar`.
pub fn div_scalar_(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    div_scalar_mode_(self_, other, None)
}
/// `div.Scalar_mode`: division by a scalar rounded per `rounding_mode`.
pub fn div_scalar_mode(
    self_: &Tensor,
    other: &Scalar,
    rounding_mode: Option<&str>,
) -> Result<Tensor> {
    let op = "div.Scalar_mode";
    let b = divisor(self_, other, rounding_mode, op)?;
    div_impl(self_, &b, rounding_mode, Dest::New, op)
}
/// `div_.Scalar_mode`.
pub fn div_scalar_mode_(
    self_: &Tensor,
    other: &Scalar,
    rounding_mode: Option<&str>,
) -> Result<Tensor> {
    let op = "div_.Scalar_mode";
    let b = divisor(self_, other, rounding_mode, op)?;
    div_impl(self_, &b, rounding_mode, Dest::InPlace(self_), op)
}
/// `sub.Scalar`: `self - alpha * other`.
pub fn sub_scalar(self_: &Tensor, other: &Scalar, alpha: &Scalar) -> Result<Tensor> {
    sub_impl(
        self_,
        &wrapped(self_, other)?,
        alpha,
        Dest::New,
        "sub.Scalar",
    )
}
/// `sub_.Scalar`.
pub fn sub_scalar_(self_: &Tensor, other: &Scalar, alpha: &Scalar) -> Result<Tensor> {
    let b = wrapped(self_, other)?;
    sub_impl(self_, &b, alpha, Dest::InPlace(self_), "sub_.Scalar")
}
/// `remainder.Scalar`: Python's modulus (the sign of the divisor).
pub fn remainder_scalar(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    remainder_impl(
        self_,
        &wrapped(self_, other)?,
        Dest::New,
        "remainder.Scalar",
    )
}
/// `remainder_.Scalar`.
pub fn remainder_scalar_(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    let b = wrapped(self_, other)?;
    remainder_impl(self_, &b, Dest::InPlace(self_), "remainder_.Scalar")
}
