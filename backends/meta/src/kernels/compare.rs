//! Meta kernels of the Scalar comparisons (`lt le gt`), the bitwise ops
//! (`bitwise_and / or / xor`, `bitwise_not`), `logical_xor` and `isinf`, with their
//! out= and in-place forms.
//!
//! Owns: each op's dtype rule (bool result, or the promoted integral dtype).
//! Must not: compute geometry itself (`pointwise::elementwise` does).

use super::pointwise::{common_dtype, compare_scalar, elementwise};
use super::{inplace_variants, out_variants};
use crate::shape::promote::require;
use opal::{DType, Result, Scalar, Tensor};

/// `lt.Scalar`.
pub fn lt_scalar(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    compare_scalar("lt", self_, other)
}
/// `le.Scalar`.
pub fn le_scalar(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    compare_scalar("le", self_, other)
}
/// `gt.Scalar`.
pub fn gt_scalar(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    compare_scalar("gt", self_, other)
}

fn integral(op: &str, d: DType) -> Result<DType> {
    require(
        op,
        d,
        d.is_integral(true),
        "bitwise ops need integer or bool tensors",
    )?;
    Ok(d)
}

fn bitwise(op: &str, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let d = integral(op, common_dtype(&[a, b], &[])?)?;
    elementwise(op, &[a, b], d)
}

fn bitwise_scalar(op: &str, a: &Tensor, s: &Scalar) -> Result<Tensor> {
    let d = integral(op, common_dtype(&[a], &[s])?)?;
    elementwise(op, &[a], d)
}

/// `bitwise_and.Scalar`.
pub fn bitwise_and_scalar(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    bitwise_scalar("bitwise_and", self_, other)
}
/// `bitwise_or.Tensor`.
pub fn bitwise_or_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    bitwise("bitwise_or", self_, other)
}
/// `bitwise_or.Scalar`.
pub fn bitwise_or_scalar(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    bitwise_scalar("bitwise_or", self_, other)
}
/// `bitwise_xor.Tensor`.
pub fn bitwise_xor_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    bitwise("bitwise_xor", self_, other)
}
/// `bitwise_xor.Scalar`.
pub fn bitwise_xor_scalar(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    bitwise_scalar("bitwise_xor", self_, other)
}
/// `bitwise_not`: same integral dtype.
pub fn bitwise_not(self_: &Tensor) -> Result<Tensor> {
    let d = integral("bitwise_not", self_.dtype())?;
    elementwise("bitwise_not", &[self_], d)
}
/// `logical_xor`: a bool result over the broadcast shape.
pub fn logical_xor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    elementwise("logical_xor", &[self_, other], DType::Bool)
}
/// `isinf`.
pub fn isinf(self_: &Tensor) -> Result<Tensor> {
    elementwise("isinf", &[self_], DType::Bool)
}

out_variants! {
    lt_scalar_out = "lt.Scalar_out" from lt_scalar(self_: &Tensor, other: &Scalar);
    le_scalar_out = "le.Scalar_out" from le_scalar(self_: &Tensor, other: &Scalar);
    gt_scalar_out = "gt.Scalar_out" from gt_scalar(self_: &Tensor, other: &Scalar);
    bitwise_and_scalar_out = "bitwise_and.Scalar_out" from bitwise_and_scalar(self_: &Tensor, other: &Scalar);
    bitwise_or_tensor_out = "bitwise_or.Tensor_out" from bitwise_or_tensor(self_: &Tensor, other: &Tensor);
    bitwise_or_scalar_out = "bitwise_or.Scalar_out" from bitwise_or_scalar(self_: &Tensor, other: &Scalar);
    bitwise_xor_tensor_out = "bitwise_xor.Tensor_out" from bitwise_xor_tensor(self_: &Tensor, other: &Tensor);
    bitwise_xor_scalar_out = "bitwise_xor.Scalar_out" from bitwise_xor_scalar(self_: &Tensor, other: &Scalar);
    bitwise_not_out = "bitwise_not.out" from bitwise_not(self_: &Tensor);
    logical_xor_out = "logical_xor.out" from logical_xor(self_: &Tensor, other: &Tensor);
}

inplace_variants! {
    lt_scalar_ = "lt_.Scalar" from lt_scalar(other: &Scalar);
    le_scalar_ = "le_.Scalar" from le_scalar(other: &Scalar);
    gt_scalar_ = "gt_.Scalar" from gt_scalar(other: &Scalar);
    bitwise_and_scalar_ = "bitwise_and_.Scalar" from bitwise_and_scalar(other: &Scalar);
    bitwise_or_tensor_ = "bitwise_or_.Tensor" from bitwise_or_tensor(other: &Tensor);
    bitwise_or_scalar_ = "bitwise_or_.Scalar" from bitwise_or_scalar(other: &Scalar);
    bitwise_xor_tensor_ = "bitwise_xor_.Tensor" from bitwise_xor_tensor(other: &Tensor);
    bitwise_xor_scalar_ = "bitwise_xor_.Scalar" from bitwise_xor_scalar(other: &Scalar);
    bitwise_not_ = "bitwise_not_" from bitwise_not();
    logical_xor_ = "logical_xor_" from logical_xor(other: &Tensor);
}
