//! Meta kernels of group norm and its backward.
//!
//! Owns: their result dtypes and layouts. Must not: compute sizes inline
//! (`opal::rules::norm::group_norm_dims`, shared with the CPU kernel).

use super::{check_inputs, new_contiguous};
use crate::shape::fail;
use opal::{Result, Tensor};

fn floating(op: &str, t: &Tensor) -> Result<()> {
    if t.dtype().is_floating_point() {
        Ok(())
    } else {
        Err(fail(
            op,
            format!("expected a floating point tensor, got {}", t.dtype()),
        ))
    }
}

/// `native_group_norm`: output like the input, `[N, group]` statistics.
#[allow(clippy::too_many_arguments)]
pub fn native_group_norm(
    input: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    n: i64,
    c: i64,
    hxw: i64,
    group: i64,
    _eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    let op = "native_group_norm";
    let mut ts = vec![input];
    ts.extend(weight);
    ts.extend(bias);
    check_inputs(op, &ts)?;
    floating(op, input)?;
    let params = [
        ("weight", weight.map(|t| t.sizes())),
        ("bias", bias.map(|t| t.sizes())),
    ];
    opal::rules::norm::group_norm_dims(op, input.sizes(), &params, (n, c, hxw, group))?;
    let d = input.dtype();
    Ok((
        new_contiguous(input.sizes(), d)?,
        new_contiguous(&[n, group], d)?,
        new_contiguous(&[n, group], d)?,
    ))
}

/// `native_group_norm_backward`: each requested gradient shaped like its input.
#[allow(clippy::too_many_arguments)]
pub fn native_group_norm_backward(
    grad_out: &Tensor,
    input: &Tensor,
    mean: &Tensor,
    rstd: &Tensor,
    weight: Option<&Tensor>,
    n: i64,
    c: i64,
    hxw: i64,
    group: i64,
    output_mask: &[bool],
) -> Result<(Tensor, Tensor, Tensor)> {
    let op = "native_group_norm_backward";
    let mut ts = vec![grad_out, input, mean, rstd];
    ts.extend(weight);
    check_inputs(op, &ts)?;
    floating(op, input)?;
    let params = [("weight", weight.map(|t| t.sizes()))];
    let (rows_n, _, _, g) =
        opal::rules::norm::group_norm_dims(op, input.sizes(), &params, (n, c, hxw, group))?;
    opal::rules::norm::group_norm_backward_check(
        op,
        grad_out.sizes(),
        input.sizes(),
        &[("mean", mean.numel()), ("rstd", rstd.numel())],
        rows_n * g,
    )?;
    let d = input.dtype();
    let mask = |i: usize| output_mask.get(i).copied().unwrap_or(false);
    let make = |on: bool, s: &[i64]| {
        if on {
            new_contiguous(s, d)
        } else {
            Ok(Tensor::undefined())
        }
    };
    Ok((
        make(mask(0), input.sizes())?,
        make(mask(1), &[c])?,
        make(mask(2), &[c])?,
    ))
}
