//! Meta kernels of bilinear 2-d upsampling (`upsample_bilinear2d`, its backward and
//! their out= forms): the input's dtype, shaped by the shared rules.
//!
//! Owns: nothing but the calls. Must not: restate a check or a shape
//! (`opal::rules::upsample`).

use super::{check_inputs, new_contiguous};
use opal::rules::upsample::{
    check_upsample_dtype, upsample_bilinear2d_backward_sizes, upsample_bilinear2d_sizes,
};
use opal::{Result, Tensor};

/// `upsample_bilinear2d`: `[N, C, H_out, W_out]`, contiguous like the CPU result.
pub fn upsample_bilinear2d(
    self_: &Tensor,
    output_size: &[i64],
    _align_corners: bool,
    _scales_h: Option<f64>,
    _scales_w: Option<f64>,
) -> Result<Tensor> {
    let op = "upsample_bilinear2d";
    check_inputs(op, &[self_])?;
    let sizes = upsample_bilinear2d_sizes(op, self_.sizes(), output_size)?;
    check_upsample_dtype(op, self_.dtype())?;
    new_contiguous(&sizes, self_.dtype())
}

/// `upsample_bilinear2d_backward`: a gradient of `input_size`.
pub fn upsample_bilinear2d_backward(
    grad_output: &Tensor,
    output_size: &[i64],
    input_size: &[i64],
    _align_corners: bool,
    _scales_h: Option<f64>,
    _scales_w: Option<f64>,
) -> Result<Tensor> {
    let op = "upsample_bilinear2d_backward";
    check_inputs(op, &[grad_output])?;
    let sizes =
        upsample_bilinear2d_backward_sizes(op, grad_output.sizes(), output_size, input_size)?;
    check_upsample_dtype(op, grad_output.dtype())?;
    new_contiguous(&sizes, grad_output.dtype())
}
