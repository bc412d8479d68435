//! Backward formulas of element-wise arithmetic: products, quotients, powers,
//! `atan2`, `clamp` and the activations `derivatives.yaml` names a helper for.
//!
//! Owns: these formulas. Must not: record graph nodes (see the module docs of
//! [`crate::derivatives`]).

use super::{cmp, is_one, zeros_as};
use crate::error::Result;
use crate::{ops, DType, Scalar, Tensor};

/// `t * s`, skipping the multiplication when `s` is 1.
pub fn maybe_multiply(t: &Tensor, s: &Scalar) -> Result<Tensor> {
    if is_one(s) {
        Ok(t.clone())
    } else {
        ops::mul_scalar(t, s)
    }
}

pub fn mul_tensor_backward(grad: &Tensor, other: &Tensor, _self_st: DType) -> Result<Tensor> {
    ops::mul_tensor(grad, other)
}

pub fn mul_tensor_backward_scalar(
    grad: &Tensor,
    other: &Scalar,
    _self_st: DType,
) -> Result<Tensor> {
    ops::mul_scalar(grad, other)
}

pub fn div_tensor_self_backward(
    grad: &Tensor,
    other: &Tensor,
    _self_st: DType,
    rounding_mode: &Option<String>,
) -> Result<Tensor> {
    if rounding_mode.is_some() {
        return zeros_as(grad);
    }
    ops::div_tensor(grad, other)
}

pub fn div_tensor_self_backward_scalar(
    grad: &Tensor,
    other: &Scalar,
    _self_st: DType,
    rounding_mode: &Option<String>,
) -> Result<Tensor> {
    if rounding_mode.is_some() {
        return zeros_as(grad);
    }
    ops::div_scalar(grad, other)
}

pub fn div_tensor_other_backward(
    grad: &Tensor,
    self_: &Tensor,
    other: &Tensor,
    rounding_mode: &Option<String>,
) -> Result<Tensor> {
    if rounding_mode.is_some() {
        return zeros_as(grad);
    }
    let q = ops::div_tensor(&ops::div_tensor(self_, other)?, other)?;
    ops::neg(&ops::mul_tensor(grad, &q)?)
}

pub fn pow_backward(grad: &Tensor, self_: &Tensor, exponent: &Scalar) -> Result<Tensor> {
    let e = exponent.to_f64();
    if e == 0.0 {
        return zeros_as(self_);
    }
    let p = ops::pow_tensor_scalar(self_, &Scalar::Float(e - 1.0))?;
    ops::mul_tensor(grad, &ops::mul_scalar(&p, &Scalar::Float(e))?)
}

pub fn pow_backward_self(grad: &Tensor, self_: &Tensor, exponent: &Tensor) -> Result<Tensor> {
    let p = ops::pow_tensor_tensor(self_, &cmp(ops::sub_tensor, exponent, &Scalar::Int(1))?)?;
    let g = ops::mul_tensor(grad, &ops::mul_tensor(exponent, &p)?)?;
    let zero = ops::eq_scalar(exponent, &Scalar::Float(0.0))?;
    ops::masked_fill_scalar(&g, &zero, &Scalar::Int(0))
}

pub fn pow_backward_exponent(
    grad: &Tensor,
    self_: &Tensor,
    exponent: &Tensor,
    result: &Tensor,
) -> Result<Tensor> {
    let at_zero = ops::logical_and(
        &cmp(ops::ge_tensor, exponent, &Scalar::Int(0))?,
        &ops::eq_scalar(self_, &Scalar::Int(0))?,
    )?;
    let g = ops::mul_tensor(grad, &ops::mul_tensor(result, &ops::log(self_)?)?)?;
    ops::masked_fill_scalar(&g, &at_zero, &Scalar::Int(0))
}

pub fn masked_fill_inplace_if_safe(t: &Tensor, mask: &Tensor, value: &Scalar) -> Result<Tensor> {
    ops::masked_fill_scalar(t, mask, value)
}

pub fn atan2_backward(
    grad: &Tensor,
    self_: &Tensor,
    other: &Tensor,
    mask: &[bool],
) -> Result<(Tensor, Tensor)> {
    let denom = ops::add_tensor(
        &ops::mul_tensor(self_, self_)?,
        &ops::mul_tensor(other, other)?,
    )?;
    let recip = ops::reciprocal(&denom)?;
    let gs = if mask.first() == Some(&true) {
        ops::mul_tensor(&ops::mul_tensor(grad, other)?, &recip)?
    } else {
        Tensor::undefined()
    };
    let go = if mask.get(1) == Some(&true) {
        ops::mul_tensor(&ops::mul_tensor(grad, &ops::neg(self_)?)?, &recip)?
    } else {
        Tensor::undefined()
    };
    Ok((gs, go))
}

pub fn clamp_backward(
    grad: &Tensor,
    self_: &Tensor,
    min: &Option<Scalar>,
    max: &Option<Scalar>,
) -> Result<Tensor> {
    let keep = match (min, max) {
        (Some(lo), Some(hi)) => ops::logical_and(
            &cmp(ops::ge_tensor, self_, lo)?,
            &cmp(ops::le_tensor, self_, hi)?,
        )?,
        (Some(lo), None) => cmp(ops::ge_tensor, self_, lo)?,
        (None, Some(hi)) => cmp(ops::le_tensor, self_, hi)?,
        (None, None) => return Ok(grad.clone()),
    };
    ops::where_self(&keep, grad, &zeros_as(grad)?)
}

pub fn log1p_backward(grad: &Tensor, self_: &Tensor) -> Result<Tensor> {
    ops::div_tensor(grad, &ops::add_scalar(self_, &Scalar::Int(1))?)
}

pub fn infinitely_differentiable_silu_backward(grad: &Tensor, self_: &Tensor) -> Result<Tensor> {
    let s = ops::sigmoid(self_)?;
    // grad * s * (1 + x * (1 - s))
    let one_minus = ops::add_scalar(&ops::neg(&s)?, &Scalar::Int(1))?;
    let inner = ops::add_scalar(&ops::mul_tensor(self_, &one_minus)?, &Scalar::Int(1))?;
    ops::mul_tensor(&ops::mul_tensor(grad, &s)?, &inner)
}
