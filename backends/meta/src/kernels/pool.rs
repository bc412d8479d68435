//! Meta kernels of pooling and resizing: 2-d and 3-d max pooling (with indices)
//! and 2-d max pooling's backward, average and adaptive average pooling, nearest
//! and bilinear upsampling (and its backward), from the arguments
//! `opal::rules::pool` / `opal::rules::upsample` checked (`rule | kernel` in
//! `backend.yaml`, as in the CPU backend's; their `out=` forms are derived).
//!
//! Owns: these ops' result dtypes and layouts (a channels-last input gives a
//! channels-last result, except bilinear upsampling, contiguous like the CPU's).
//! Must not: check an argument or compute a size (the rules do).

use super::{check_inputs, new_contiguous, nn::new_like_format};
use opal::rules::pool::{AvgPool2d, MaxPoolBackward, Pooling, Resize2d};
use opal::rules::upsample::Bilinear2d;
use opal::{DType, Result, Tensor};

/// `max_pool2d_with_indices`, `max_pool3d_with_indices`: values in the input's
/// dtype and int64 indices.
pub fn max_pool<const N: usize>(p: Pooling<N>) -> Result<(Tensor, Tensor)> {
    let op = if N == 3 {
        "max_pool3d_with_indices"
    } else {
        "max_pool2d_with_indices"
    };
    check_inputs(op, &[p.input])?;
    Ok((
        new_like_format(&p.sizes, p.input, p.input.dtype())?,
        new_like_format(&p.sizes, p.input, DType::I64)?,
    ))
}

/// `max_pool2d_with_indices_backward`: a gradient shaped like the forward input.
pub fn max_pool_backward<const N: usize>(b: MaxPoolBackward<N>) -> Result<Tensor> {
    let input = b.pool.input;
    check_inputs(
        "max_pool2d_with_indices_backward",
        &[b.grad_output, input, b.indices],
    )?;
    new_like_format(input.sizes(), input, b.grad_output.dtype())
}

/// `avg_pool2d`.
pub fn avg_pool2d(a: AvgPool2d) -> Result<Tensor> {
    let p = a.pool;
    check_inputs("avg_pool2d", &[p.input])?;
    new_like_format(&p.sizes, p.input, p.input.dtype())
}

/// `_adaptive_avg_pool2d`, `upsample_nearest2d`.
pub fn resize2d(r: Resize2d) -> Result<Tensor> {
    check_inputs("resize2d", &[r.input])?;
    new_like_format(&r.sizes, r.input, r.input.dtype())
}

/// `upsample_bilinear2d`: `[N, C, H_out, W_out]`.
pub fn bilinear(b: Bilinear2d) -> Result<Tensor> {
    check_inputs("upsample_bilinear2d", &[b.input])?;
    new_contiguous(&b.output_sizes, b.input.dtype())
}

/// `upsample_bilinear2d_backward`: a gradient of `input_size`.
pub fn bilinear_backward(b: Bilinear2d) -> Result<Tensor> {
    check_inputs("upsample_bilinear2d_backward", &[b.input])?;
    new_contiguous(&b.input_sizes, b.input.dtype())
}
