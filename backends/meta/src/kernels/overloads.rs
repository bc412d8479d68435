//! Meta kernels of the core opset's last group of overloads: `fmod` (Tensor and
//! Scalar divisors), `pow.Scalar`, `clamp.Tensor`, `mean` over every element,
//! `prod.dim_int` and `any.dims`, with their `out=` and in-place forms.
//!
//! Owns: these overloads' dtype choice and argument checks. Must not: compute
//! geometry itself (the `pointwise` / `reduce` builders and `shape` do).

use super::pointwise::{common_dtype, elementwise};
use super::reduce::{mean_dim, mean_out, reduction, reduction_out};
use super::{check_inputs, inplace_variants, new_contiguous, out_variants};
use crate::shape::fail;
use crate::shape::promote::{accumulate_dtype, require};
use opal::{DType, Result, Scalar, Tensor};

/// `fmod.Tensor`: the common dtype; bool is refused, as by the CPU kernel.
pub fn fmod_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    let d = common_dtype(&[self_, other], &[])?;
    require("fmod", d, d != DType::Bool && !d.is_complex(), "fmod")?;
    elementwise("fmod", &[self_, other], d)
}

/// `fmod.Scalar`: the divisor as a 0-dim tensor of the promoted dtype.
pub fn fmod_scalar(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    let wrapped = new_contiguous(&[], common_dtype(&[self_], &[other])?)?;
    fmod_tensor(self_, &wrapped)
}

/// `pow.Scalar`: the base takes part in promotion as a wrapped number.
pub fn pow_scalar(self_: &Scalar, exponent: &Tensor) -> Result<Tensor> {
    let d = common_dtype(&[exponent], &[self_])?;
    require("pow", d, d != DType::Bool, "pow")?;
    elementwise("pow", &[exponent], d)
}

/// `clamp.Tensor`: the bounds broadcast with `self` and take part in promotion.
pub fn clamp_tensor(self_: &Tensor, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<Tensor> {
    if min.is_none() && max.is_none() {
        return Err(fail(
            "clamp",
            "At least one of 'min' or 'max' must not be None",
        ));
    }
    let inputs: Vec<&Tensor> = [Some(self_), min, max].into_iter().flatten().collect();
    let d = common_dtype(&inputs, &[])?;
    require("clamp", d, d != DType::Bool && !d.is_complex(), "clamp")?;
    elementwise("clamp", &inputs, d)
}

/// `mean`: every element, floating or complex input (or an explicit dtype) only.
pub fn mean(self_: &Tensor, dtype: Option<DType>) -> Result<Tensor> {
    mean_dim(self_, None, false, dtype)
}

/// `mean.dtype_out`.
pub fn mean_dtype_out(self_: &Tensor, dtype: Option<DType>, out: &Tensor) -> Result<Tensor> {
    mean_out(self_, None, false, dtype, out)
}

/// `prod.dim_int`: integers and bool accumulate in int64.
pub fn prod_dim_int(
    self_: &Tensor,
    dim: i64,
    keepdim: bool,
    dtype: Option<DType>,
) -> Result<Tensor> {
    let d = accumulate_dtype(self_.dtype(), dtype);
    reduction("prod", self_, Some(&[dim]), keepdim, d, false)
}

/// `prod.int_out`.
pub fn prod_int_out(
    self_: &Tensor,
    dim: i64,
    keepdim: bool,
    dtype: Option<DType>,
    out: &Tensor,
) -> Result<Tensor> {
    let r = prod_dim_int(self_, dim, keepdim, dtype)?;
    reduction_out("prod.int_out", &r, dtype, out)
}

/// `any.dims`: `None` reduces every dim, an empty list none (unlike `sum`);
/// uint8 input keeps uint8, everything else gives bool.
pub fn any_dims(self_: &Tensor, dim: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
    let d = if self_.dtype() == DType::U8 {
        DType::U8
    } else {
        DType::Bool
    };
    match dim {
        // `reduction` reads an empty list as "all dims"; here it reduces nothing.
        Some([]) => {
            check_inputs("any.dims", &[self_])?;
            new_contiguous(self_.sizes(), d)
        }
        dims => reduction("any.dims", self_, dims, keepdim, d, false),
    }
}

out_variants! {
    fmod_tensor_out = "fmod.Tensor_out" from fmod_tensor(self_: &Tensor, other: &Tensor);
    fmod_scalar_out = "fmod.Scalar_out" from fmod_scalar(self_: &Tensor, other: &Scalar);
    pow_scalar_out = "pow.Scalar_out" from pow_scalar(self_: &Scalar, exponent: &Tensor);
    clamp_tensor_out = "clamp.Tensor_out" from clamp_tensor(self_: &Tensor, min: Option<&Tensor>, max: Option<&Tensor>);
}

inplace_variants! {
    fmod_tensor_ = "fmod_.Tensor" from fmod_tensor(other: &Tensor);
    fmod_scalar_ = "fmod_.Scalar" from fmod_scalar(other: &Scalar);
    clamp_tensor_ = "clamp_.Tensor" from clamp_tensor(min: Option<&Tensor>, max: Option<&Tensor>);
}
