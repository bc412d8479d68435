//! Backward formulas of the core opset's last group of overloads and views:
//! `prod` over one dim, `clamp` with tensor bounds, `pow` with a Scalar base and
//! `diagonal`, and of `masked_scatter`'s source, under PyTorch's names (the signatures are listed in
//! `opal_codegen::derivatives::helpers::IMPLEMENTED`).
//!
//! Owns: these formulas. Must not: record graph nodes or touch tensor data other
//! than through operators.

use super::reduce::product_of_others;
use super::{cmp, wd, zeros_as, zeros_of, TensorOptions};
use crate::error::Result;
use crate::{ops, Scalar, Tensor};

pub fn prod_backward_dim(
    grad: &Tensor,
    self_: &Tensor,
    result: &Tensor,
    dim: i64,
    keepdim: bool,
) -> Result<Tensor> {
    if self_.dim() == 0 {
        return super::prod_backward(grad, self_, result);
    }
    let d = wd(dim, self_.dim())?;
    if self_.numel() == 0 {
        return zeros_as(self_);
    }
    let g = if keepdim {
        grad.clone()
    } else {
        ops::unsqueeze(grad, d as i64)?
    };
    ops::mul_tensor(&g, &product_of_others(self_, d)?)
}

/// Where `self` lies inside the given bounds (a NaN bound excludes every element).
fn inside(self_: &Tensor, min: &Option<Tensor>, max: &Option<Tensor>) -> Result<Option<Tensor>> {
    Ok(match (min, max) {
        (Some(lo), Some(hi)) => Some(ops::logical_and(
            &ops::ge_tensor(self_, lo)?,
            &ops::le_tensor(self_, hi)?,
        )?),
        (Some(lo), None) => Some(ops::ge_tensor(self_, lo)?),
        (None, Some(hi)) => Some(ops::le_tensor(self_, hi)?),
        (None, None) => None,
    })
}

pub fn clamp_backward_tensor(
    grad: &Tensor,
    self_: &Tensor,
    min: &Option<Tensor>,
    max: &Option<Tensor>,
) -> Result<Tensor> {
    match inside(self_, min, max)? {
        Some(keep) => ops::where_self(&keep, grad, &zeros_as(grad)?),
        None => Ok(grad.clone()),
    }
}

pub fn clamp_backward_min_max(
    grad: &Tensor,
    self_: &Tensor,
    min: &Option<Tensor>,
    max: &Option<Tensor>,
    mask: &[bool],
) -> Result<(Tensor, Tensor)> {
    let zeros = zeros_as(grad)?;
    let mut out = (Tensor::undefined(), Tensor::undefined());
    // The gradient flows to the bound that was taken: `max` wins where both bite
    // (`max < min`), as in the forward pass.
    match (min, max) {
        (Some(lo), Some(hi)) => {
            if mask.first() == Some(&true) {
                let min_taken =
                    ops::logical_and(&ops::lt_tensor(self_, lo)?, &ops::lt_tensor(lo, hi)?)?;
                out.0 = ops::where_self(&min_taken, grad, &zeros)?;
            }
            if mask.get(1) == Some(&true) {
                let above = ops::where_self(&ops::gt_tensor(self_, hi)?, grad, &zeros)?;
                out.1 = ops::where_self(&ops::lt_tensor(hi, lo)?, grad, &above)?;
            }
        }
        (Some(lo), None) => {
            if mask.first() == Some(&true) {
                out.0 = ops::where_self(&ops::lt_tensor(self_, lo)?, grad, &zeros)?;
            }
        }
        (None, Some(hi)) => {
            if mask.get(1) == Some(&true) {
                out.1 = ops::where_self(&ops::gt_tensor(self_, hi)?, grad, &zeros)?;
            }
        }
        (None, None) => {}
    }
    Ok(out)
}

/// `d(base ** exponent) / d exponent = result * ln(base)`; a zero base with a
/// non-negative exponent contributes zero (not `0 * -inf`).
pub fn pow_backward_exponent_scalar(
    grad: &Tensor,
    base: &Scalar,
    exponent: &Tensor,
    result: &Tensor,
) -> Result<Tensor> {
    let b = base.to_f64();
    let g = ops::mul_scalar(&ops::mul_tensor(grad, result)?, &Scalar::Float(b.ln()))?;
    if b != 0.0 {
        return Ok(g);
    }
    let at_zero = cmp(ops::ge_tensor, exponent, &Scalar::Int(0))?;
    ops::masked_fill_scalar(&g, &at_zero, &Scalar::Int(0))
}

pub fn diagonal_backward_symint(
    grad: &Tensor,
    input_sizes: &[i64],
    offset: i64,
    dim1: i64,
    dim2: i64,
) -> Result<Tensor> {
    let zeros = zeros_of(input_sizes, TensorOptions::of(grad))?;
    // Write `grad` into the diagonal view of the zeros: the view shares their storage.
    let diag = ops::diagonal::call(&zeros, offset, dim1, dim2)?;
    ops::add_tensor_::call(&diag, grad, &Scalar::Int(1))?;
    Ok(zeros)
}

pub fn masked_scatter_backward_symint(
    grad: &Tensor,
    mask: &Tensor,
    sizes: &[i64],
) -> Result<Tensor> {
    // The source elements that were written, in order, then zeros for the unused rest.
    let n: i64 = sizes.iter().product();
    let mask = ops::expand(mask, grad.sizes())?;
    let taken = ops::index_tensor(grad, &[Some(mask)])?;
    let rest = n - taken.numel();
    let flat = if rest > 0 {
        let zeros = zeros_of(&[rest], TensorOptions::of(grad))?;
        ops::cat(&[taken, zeros])?
    } else {
        taken
    };
    ops::reshape(&flat, sizes)
}
