//! Backward formulas of the ops that write one tensor into another by position:
//! `scatter_reduce.two` (every reduction, with and without `self`) and
//! `as_strided` (a view over storage positions, possibly overlapping), under
//! PyTorch's names (the signatures are listed in
//! `opal_codegen::derivatives::helpers::IMPLEMENTED`).
//!
//! Owns: these formulas. Must not: record graph nodes or touch tensor data other
//! than through operators.

use super::{zeros_of, TensorOptions};
use crate::error::{OpalError, Result};
use crate::{ops, DType, Scalar, Tensor};

/// Where `index` sends at least one `src` value, as `self_`'s shape (bool).
fn reached(self_: &Tensor, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    let ones = ops::ones_like(src)?;
    let hits = ops::scatter_add(&ops::zeros_like(self_)?, dim, index, &ones)?;
    ops::ne_scalar(&hits, &Scalar::Int(0))
}

/// `grad` where `keep`, else zero.
fn only_where(keep: &Tensor, grad: &Tensor) -> Result<Tensor> {
    ops::where_self(keep, grad, &ops::zeros_like(grad)?)
}

/// A count with its zeros raised to one, to divide by.
fn at_least_one(count: &Tensor) -> Result<Tensor> {
    ops::maximum(count, &ops::ones_like(count)?)
}

/// `x` as 0 / 1 in `like`'s dtype.
fn as_dtype_of(x: &Tensor, like: &Tensor) -> Result<Tensor> {
    ops::_to_copy::call(x, Some(like.dtype()), None, None, None, false, None)
}

/// Gradients of `scatter_reduce.two` for `self` and `src`. Each output position
/// combines its own value (with `include_self`) and the `src` values sent there;
/// a position nothing reaches is `self`'s value unchanged.
/// - sum: every contributor receives the output's gradient;
/// - mean: each receives it divided by the number of contributors;
/// - amax / amin: the contributors equal to the result share it equally;
/// - prod: each receives it times the product of the other contributors
///   (computed without dividing by zero: one zero contributor gets the product
///   of the others, two or more zeros leave every contributor nothing).
#[allow(clippy::too_many_arguments)]
pub fn scatter_reduce_backward(
    grad: &Tensor,
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    reduce: &str,
    include_self: bool,
    result: &Tensor,
) -> Result<(Tensor, Tensor)> {
    let hit = reached(self_, dim, index, src)?;
    // Without `include_self`, a reached position's own value is forgotten.
    let self_counts = |keep: &Tensor| -> Result<Tensor> {
        if include_self {
            Ok(keep.clone())
        } else {
            ops::logical_and(keep, &ops::logical_not(&hit)?)
        }
    };
    let (grad_self, grad_src) = match reduce {
        "sum" => (
            only_where(&self_counts(&ops::ones_like(&hit)?)?, grad)?,
            ops::gather(grad, dim, index)?,
        ),
        "mean" => {
            let own = as_dtype_of(&self_counts(&ops::ones_like(&hit)?)?, grad)?;
            let count = ops::scatter_add(&own, dim, index, &ops::ones_like(src)?)?;
            let count = at_least_one(&count)?;
            let share = ops::div_tensor(grad, &count)?;
            (
                ops::mul_tensor(&share, &own)?,
                ops::gather(&share, dim, index)?,
            )
        }
        "amax" | "amin" => {
            let own = self_counts(&ops::eq_tensor(self_, result)?)?;
            let from_src = ops::eq_tensor(src, &ops::gather(result, dim, index)?)?;
            let own_f = as_dtype_of(&own, grad)?;
            let ties = ops::scatter_add(&own_f, dim, index, &as_dtype_of(&from_src, grad)?)?;
            let share = ops::div_tensor(grad, &at_least_one(&ties)?)?;
            // A position nothing reaches passes its gradient to `self` whole.
            let unreached = ops::logical_not(&hit)?;
            let grad_self = ops::where_self(&unreached, grad, &ops::mul_tensor(&share, &own_f)?)?;
            let grad_src = only_where(&from_src, &ops::gather(&share, dim, index)?)?;
            (grad_self, grad_src)
        }
        "prod" => prod_backward(grad, self_, dim, index, src, include_self, &hit)?,
        other => {
            return Err(OpalError::msg(format!(
                "scatter_reduce: reduce argument must be one of sum, prod, mean, amax, amin, got {other}"
            )))
        }
    };
    Ok((grad_self, grad_src))
}

/// The `prod` case of [`scatter_reduce_backward`].
fn prod_backward(
    grad: &Tensor,
    self_: &Tensor,
    dim: i64,
    index: &Tensor,
    src: &Tensor,
    include_self: bool,
    hit: &Tensor,
) -> Result<(Tensor, Tensor)> {
    let one = Scalar::Int(1);
    let zero = Scalar::Int(0);
    let self_zero = ops::eq_scalar(self_, &zero)?;
    let src_zero = ops::eq_scalar(src, &zero)?;
    // Per position: how many contributors are zero, and the product of the others.
    let own_zero = if include_self {
        as_dtype_of(&self_zero, grad)?
    } else {
        ops::zeros_like(grad)?
    };
    let zeros = ops::scatter_add(&own_zero, dim, index, &as_dtype_of(&src_zero, grad)?)?;
    let start = if include_self {
        ops::masked_fill_scalar(self_, &self_zero, &one)?
    } else {
        ops::ones_like(self_)?
    };
    let nonzero_src = ops::masked_fill_scalar(src, &src_zero, &one)?;
    let product = ops::scatter_reduce_two::call(&start, dim, index, &nonzero_src, "prod", true)?;
    // The product of the contributors other than `value` at its position.
    let others = |value: &Tensor, value_zero: &Tensor, product: &Tensor, zeros: &Tensor| {
        let no_zero = ops::eq_scalar(zeros, &zero)?;
        let one_zero = ops::eq_scalar(zeros, &one)?;
        let divided = ops::div_tensor(product, &ops::masked_fill_scalar(value, value_zero, &one)?)?;
        let when_nonzero = only_where(&no_zero, &divided)?;
        let when_zero = only_where(&one_zero, product)?;
        ops::where_self(value_zero, &when_zero, &when_nonzero)
    };
    let src_others = others(
        src,
        &src_zero,
        &ops::gather(&product, dim, index)?,
        &ops::gather(&zeros, dim, index)?,
    )?;
    let grad_src = ops::mul_tensor(&ops::gather(grad, dim, index)?, &src_others)?;
    let grad_self = if include_self {
        ops::mul_tensor(grad, &others(self_, &self_zero, &product, &zeros)?)?
    } else {
        only_where(&ops::logical_not(hit)?, grad)?
    };
    Ok((grad_self, grad_src))
}

/// The storage positions of a strided view: `offset + sum_k i_k * stride_k` for
/// every element `i` of `sizes`, as an int64 tensor of that shape.
fn positions(sizes: &[i64], strides: &[i64], offset: i64, o: TensorOptions) -> Result<Tensor> {
    let device = Some(o.device);
    let mut pos = ops::full::call(
        &[],
        &Scalar::Int(offset),
        Some(DType::I64),
        None,
        device,
        None,
    )?;
    for (k, (&n, &s)) in sizes.iter().zip(strides).enumerate() {
        let steps = ops::arange_start_step::call(
            &Scalar::Int(0),
            &Scalar::Int(n * s),
            &Scalar::Int(s.max(1)),
            Some(DType::I64),
            None,
            device,
            None,
        )?;
        // A zero stride repeats one position: arange cannot step by 0.
        let steps = if s == 0 {
            ops::zeros::call(&[n], Some(DType::I64), None, device, None)?
        } else {
            steps
        };
        let mut shape = vec![1i64; sizes.len()];
        shape[k] = n;
        pos = ops::add_tensor(&pos, &ops::reshape(&steps, &shape)?)?;
    }
    ops::expand(&pos, sizes)
}

/// Gradient of `as_strided`: each element of `grad` adds into the storage
/// position it viewed, and every element of `self` reads its own position back;
/// where several elements of `self` share a position (an overlapping input), they
/// split its gradient evenly.
pub fn as_strided_backward(
    grad: &Tensor,
    self_: &Tensor,
    size: &[i64],
    stride: &[i64],
    storage_offset: &Option<i64>,
) -> Result<Tensor> {
    let o = TensorOptions::of(grad);
    if self_.numel() == 0 || grad.numel() == 0 {
        return zeros_of(self_.sizes(), o);
    }
    let offset = storage_offset.unwrap_or_else(|| self_.storage_offset());
    let viewed = ops::reshape(&positions(size, stride, offset, o)?, &[-1])?;
    let own = ops::reshape(
        &positions(self_.sizes(), self_.strides(), self_.storage_offset(), o)?,
        &[-1],
    )?;
    // Storage positions run from 0 to the largest either side reaches.
    let last = |sizes: &[i64], strides: &[i64], offset: i64| -> i64 {
        offset
            + sizes
                .iter()
                .zip(strides)
                .map(|(&n, &s)| (n - 1).max(0) * s)
                .sum::<i64>()
    };
    let len = last(size, stride, offset).max(last(
        self_.sizes(),
        self_.strides(),
        self_.storage_offset(),
    )) + 1;
    let storage = ops::scatter_add(
        &zeros_of(&[len], o)?,
        0,
        &viewed,
        &ops::reshape(grad, &[-1])?,
    )?;
    let ones = as_dtype_of(&ops::ones_like(&own)?, grad)?;
    let sharing = ops::scatter_add(&zeros_of(&[len], o)?, 0, &own, &ones)?;
    let read = ops::index_select(&storage, 0, &own)?;
    let split = ops::index_select(&sharing, 0, &own)?;
    ops::reshape(&ops::div_tensor(&read, &split)?, self_.sizes())
}
