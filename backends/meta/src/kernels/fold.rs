//! Meta kernels of the sliding-block ops `col2im` and `im2col`: the input's
//! floating dtype, shaped by the shared block rule.
//!
//! Owns: these kernels' dtype checks. Must not: compute block counts itself
//! (`opal::rules::fold`).

use super::{check_inputs, new_contiguous};
use crate::shape::fail;
use opal::rules::fold::{col2im_shape, im2col_shape};
use opal::{Result, Tensor};

fn check_float(op: &str, t: &Tensor) -> Result<()> {
    check_inputs(op, &[t])?;
    if t.dtype().is_floating_point() {
        Ok(())
    } else {
        Err(fail(
            op,
            format!("expected a floating point tensor, got {}", t.dtype()),
        ))
    }
}

/// `col2im`: `[N, C * kh * kw, L]` or unbatched -> `[N, C, H, W]` or `[C, H, W]`.
pub fn col2im(
    self_: &Tensor,
    output_size: &[i64],
    kernel_size: &[i64],
    dilation: &[i64],
    padding: &[i64],
    stride: &[i64],
) -> Result<Tensor> {
    let op = "col2im";
    check_float(op, self_)?;
    let (shape, _) = col2im_shape(
        op,
        self_.sizes(),
        output_size,
        kernel_size,
        dilation,
        padding,
        stride,
    )?;
    new_contiguous(&shape, self_.dtype())
}

/// `im2col`: `[N, C, H, W]` or unbatched -> `[N, C * kh * kw, L]` or unbatched.
pub fn im2col(
    self_: &Tensor,
    kernel_size: &[i64],
    dilation: &[i64],
    padding: &[i64],
    stride: &[i64],
) -> Result<Tensor> {
    let op = "im2col";
    check_float(op, self_)?;
    let (shape, _) = im2col_shape(op, self_.sizes(), kernel_size, dilation, padding, stride)?;
    new_contiguous(&shape, self_.dtype())
}
