//! Meta kernels of the Scalar overloads of `div` (with and without
//! `rounding_mode`), `sub` and `remainder`, with their in-place forms.
//!
//! Owns: wrapping the scalar as a 0-dim tensor of the promoted dtype and running
//! the Tensor overload's rule. Must not: restate those rules.

use super::pointwise::{common_dtype, div_tensor_mode, remainder_tensor, sub_tensor};
use super::{inplace_variants, new_contiguous};
use opal::{Result, Scalar, Tensor};

fn wrapped(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    new_contiguous(&[], common_dtype(&[self_], &[other])?)
}

/// `div.Scalar`.
pub fn div_scalar(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    div_tensor_mode(self_, &wrapped(self_, other)?, None)
}
/// `div.Scalar_mode`.
pub fn div_scalar_mode(
    self_: &Tensor,
    other: &Scalar,
    rounding_mode: Option<&str>,
) -> Result<Tensor> {
    div_tensor_mode(self_, &wrapped(self_, other)?, rounding_mode)
}
/// `sub.Scalar`.
pub fn sub_scalar(self_: &Tensor, other: &Scalar, alpha: &Scalar) -> Result<Tensor> {
    sub_tensor(self_, &wrapped(self_, other)?, alpha)
}
/// `remainder.Scalar`.
pub fn remainder_scalar(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    remainder_tensor(self_, &wrapped(self_, other)?)
}

inplace_variants! {
    div_scalar_ = "div_.Scalar" from div_scalar(other: &Scalar);
    div_scalar_mode_ = "div_.Scalar_mode" from div_scalar_mode(other: &Scalar, rounding_mode: Option<&str>);
    sub_scalar_ = "sub_.Scalar" from sub_scalar(other: &Scalar, alpha: &Scalar);
    remainder_scalar_ = "remainder_.Scalar" from remainder_scalar(other: &Scalar);
}
