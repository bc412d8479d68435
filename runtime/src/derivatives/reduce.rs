//! Backward formulas of reductions and scans: `sum`, `mean`, `prod`, `var`/`std`,
//! `logsumexp`, vector norms and `cumsum`.
//!
//! Owns: these formulas and the scans they build on (`cumprod`, the product of the
//! others along a dim). Must not: record graph nodes.

use super::{cmp, reduced_dims, unsqueeze_reduced, wd, zeros_as};
use crate::error::Result;
use crate::{ops, DType, Scalar, Tensor};

pub fn sum_backward(
    grad: &Tensor,
    sizes: &[i64],
    dim: &Option<Vec<i64>>,
    keepdim: bool,
) -> Result<Tensor> {
    let g = unsqueeze_reduced(grad, dim.as_deref(), sizes.len(), keepdim)?;
    ops::expand(&g, sizes)
}

pub fn mean_backward(
    grad: &Tensor,
    sizes: &[i64],
    dim: &Option<Vec<i64>>,
    numel: i64,
    keepdim: bool,
) -> Result<Tensor> {
    let all = dim.as_ref().is_none_or(|d| d.is_empty());
    let n = if all {
        numel
    } else {
        reduced_dims(dim.as_deref(), sizes.len())?
            .iter()
            .map(|&d| sizes[d])
            .product()
    };
    let g = sum_backward(grad, sizes, dim, keepdim)?;
    cmp(ops::div_tensor, &g, &Scalar::Int(n))
}

pub fn prod_backward(grad: &Tensor, self_: &Tensor, result: &Tensor) -> Result<Tensor> {
    if self_.numel() == 0 {
        return zeros_as(self_);
    }
    // d prod / d x_i = prod of the others.
    let flat = ops::reshape(self_, &[-1])?;
    let others = ops::reshape(&product_of_others(&flat, 0)?, self_.sizes())?;
    let _ = result;
    ops::mul_tensor(&ops::expand(grad, self_.sizes())?, &others)
}

/// Cumulative product along `dim`, as exp(cumsum(log|x|)) with signs and zeros
/// tracked separately (no cumprod kernel is needed).
fn cumprod(x: &Tensor, dim: i64) -> Result<Tensor> {
    let zero = ops::eq_scalar(x, &Scalar::Int(0))?;
    let safe = ops::masked_fill_scalar(x, &zero, &Scalar::Int(1))?;
    let mag = ops::exp(&ops::cumsum(&ops::log(&ops::abs(&safe)?)?, dim)?)?;
    let neg = cmp(ops::lt_tensor, &safe, &Scalar::Int(0))?;
    let neg_count = ops::cumsum::call(&neg, dim, Some(DType::I64))?;
    let odd = cmp(ops::remainder_tensor, &neg_count, &Scalar::Int(2))?;
    let sign = ops::add_scalar(&ops::mul_scalar(&odd, &Scalar::Int(-2))?, &Scalar::Int(1))?;
    let zeros_seen = ops::cumsum::call(&zero, dim, Some(DType::I64))?;
    let any_zero = cmp(ops::gt_tensor, &zeros_seen, &Scalar::Int(0))?;
    let v = ops::mul_tensor(
        &mag,
        &ops::_to_copy::call(&sign, Some(x.dtype()), None, None, None, false, None)?,
    )?;
    ops::masked_fill_scalar(&v, &any_zero, &Scalar::Int(0))
}

/// The product of every element of `x` along `dim` but the one at each position:
/// the product of those before it times those after it, which needs no division
/// (zeros are fine).
pub(super) fn product_of_others(x: &Tensor, dim: usize) -> Result<Tensor> {
    let d = dim as i64;
    let n = x.sizes()[dim];
    let one = ops::ones_like(&ops::narrow(x, d, 0, 1)?)?;
    let before = ops::cat::call(&[one.clone(), ops::narrow(x, d, 0, n - 1)?], d)?;
    let after = ops::cat::call(&[ops::narrow(x, d, 1, n - 1)?, one], d)?;
    let excl_before = cumprod(&before, d)?;
    let excl_after = ops::flip(&cumprod(&ops::flip(&after, &[d])?, d)?, &[d])?;
    ops::mul_tensor(&excl_before, &excl_after)
}

pub fn restore_reduced_dims(t: &Tensor, dim: &[i64], keepdim: bool) -> Result<Tensor> {
    if keepdim {
        return Ok(t.clone());
    }
    let ndim = t.dim() + if dim.is_empty() { 0 } else { dim.len() };
    let all_dims: Option<&[i64]> = if dim.is_empty() { None } else { Some(dim) };
    unsqueeze_reduced(t, all_dims, ndim, false)
}

pub fn scale_grad_by_count(grad: &Tensor, mask: &Tensor, dim: &[i64]) -> Result<Tensor> {
    let d: Option<&[i64]> = if dim.is_empty() { None } else { Some(dim) };
    let count = ops::sum_dim_intlist::call(mask, d, true, Some(grad.dtype()))?;
    ops::mul_tensor(&ops::div_tensor(grad, &count)?, mask)
}

fn reduced_count(sizes: &[i64], dim: Option<&[i64]>) -> Result<i64> {
    Ok(reduced_dims(dim, sizes.len())?
        .iter()
        .map(|&d| sizes[d])
        .product())
}

pub fn var_backward(
    grad: &Tensor,
    self_: &Tensor,
    dim: &Option<Vec<i64>>,
    correction: &Option<Scalar>,
    keepdim: bool,
) -> Result<Tensor> {
    let n = reduced_count(self_.sizes(), dim.as_deref())? as f64;
    let c = correction.as_ref().map_or(1.0, Scalar::to_f64);
    let g = unsqueeze_reduced(grad, dim.as_deref(), self_.dim(), keepdim)?;
    let mean = ops::mean_dim::call(self_, dim.as_deref(), true, None)?;
    let centered = ops::sub_tensor(self_, &mean)?;
    let scale = 2.0 / (n - c).max(0.0);
    ops::mul_scalar(&ops::mul_tensor(&g, &centered)?, &Scalar::Float(scale))
}

pub fn std_backward(
    result: &Tensor,
    grad: &Tensor,
    self_: &Tensor,
    dim: &Option<Vec<i64>>,
    correction: &Option<Scalar>,
    keepdim: bool,
) -> Result<Tensor> {
    let g = ops::div_tensor(grad, &ops::mul_scalar(result, &Scalar::Int(2))?)?;
    let g = ops::masked_fill_scalar(
        &g,
        &ops::eq_scalar(result, &Scalar::Int(0))?,
        &Scalar::Int(0),
    )?;
    var_backward(&g, self_, dim, correction, keepdim)
}

pub fn logsumexp_backward(
    grad: &Tensor,
    self_: &Tensor,
    result: &Tensor,
    dim: &[i64],
    keepdim: bool,
) -> Result<Tensor> {
    let d: Option<&[i64]> = if dim.is_empty() { None } else { Some(dim) };
    let g = unsqueeze_reduced(grad, d, self_.dim(), keepdim)?;
    let r = unsqueeze_reduced(result, d, self_.dim(), keepdim)?;
    ops::mul_tensor(&g, &ops::exp(&ops::sub_tensor(self_, &r)?)?)
}

pub fn linalg_vector_norm_backward(
    grad: &Tensor,
    self_: &Tensor,
    ord: &Scalar,
    result: &Tensor,
    dim: &Option<Vec<i64>>,
    keepdim: bool,
) -> Result<Tensor> {
    let p = ord.to_f64();
    let g = unsqueeze_reduced(grad, dim.as_deref(), self_.dim(), keepdim)?;
    let r = unsqueeze_reduced(result, dim.as_deref(), self_.dim(), keepdim)?;
    let zero = Scalar::Int(0);
    if p == 0.0 {
        return zeros_as(self_);
    }
    if p == 1.0 {
        return ops::mul_tensor(&ops::sign(self_)?, &g);
    }
    if p.is_infinite() {
        // The gradient is shared by the entries that reach the norm.
        let hit = ops::eq_tensor(&ops::abs(self_)?, &r)?;
        let hit_f = ops::_to_copy::call(&hit, Some(self_.dtype()), None, None, None, false, None)?;
        let d: Option<&[i64]> = dim.as_deref();
        let count = ops::sum_dim_intlist::call(&hit_f, d, true, None)?;
        let share = ops::div_tensor(&ops::mul_tensor(&ops::sign(self_)?, &hit_f)?, &count)?;
        return ops::mul_tensor(&share, &g);
    }
    if p == 2.0 {
        let scale = ops::div_tensor(&g, &r)?;
        let scale = ops::masked_fill_scalar(&scale, &ops::eq_scalar(&r, &zero)?, &zero)?;
        return ops::mul_tensor(self_, &scale);
    }
    // x * |x|^(p-2) * g / r^(p-1)
    let num = ops::mul_tensor(
        self_,
        &ops::pow_tensor_scalar(&ops::abs(self_)?, &Scalar::Float(p - 2.0))?,
    )?;
    let scale = ops::div_tensor(&g, &ops::pow_tensor_scalar(&r, &Scalar::Float(p - 1.0))?)?;
    let scale = ops::masked_fill_scalar(&scale, &ops::eq_scalar(&r, &zero)?, &zero)?;
    ops::mul_tensor(&num, &scale)
}

pub fn cumsum_backward(grad: &Tensor, dim: i64) -> Result<Tensor> {
    if grad.dim() == 0 || grad.numel() <= 1 {
        return Ok(grad.clone());
    }
    let d = wd(dim, grad.dim())? as i64;
    ops::flip(&ops::cumsum(&ops::flip(grad, &[d])?, d)?, &[d])
}
