//! Meta kernels of 2-d grid sampling (`grid_sampler_2d` and its backward): the
//! inputs' dtype, shaped by the shared rules.
//!
//! Owns: nothing but the calls. Must not: restate a check or a shape
//! (`opal::rules::sampling`).

use super::{check_inputs, new_contiguous};
use opal::rules::sampling::{grid_sampler_2d_args, grid_sampler_2d_backward_args};
use opal::{Result, Tensor};

/// `grid_sampler_2d`: `[N, C, Ho, Wo]`.
pub fn grid_sampler_2d(
    input: &Tensor,
    grid: &Tensor,
    interpolation_mode: i64,
    padding_mode: i64,
    align_corners: bool,
) -> Result<Tensor> {
    let op = "grid_sampler_2d";
    check_inputs(op, &[input, grid])?;
    let _ = align_corners;
    let (a, b) = ((input.sizes(), input.dtype()), (grid.sizes(), grid.dtype()));
    let (shape, _, _) = grid_sampler_2d_args(op, a, b, interpolation_mode, padding_mode)?;
    new_contiguous(&shape, input.dtype())
}

/// `grid_sampler_2d_backward`: gradients shaped as `input` (undefined unless
/// `output_mask[0]`) and `grid`.
pub fn grid_sampler_2d_backward(
    grad_output: &Tensor,
    input: &Tensor,
    grid: &Tensor,
    interpolation_mode: i64,
    padding_mode: i64,
    align_corners: bool,
    output_mask: &[bool],
) -> Result<(Tensor, Tensor)> {
    let op = "grid_sampler_2d_backward";
    check_inputs(op, &[grad_output, input, grid])?;
    let _ = align_corners;
    let (a, b) = ((input.sizes(), input.dtype()), (grid.sizes(), grid.dtype()));
    grid_sampler_2d_backward_args(
        op,
        grad_output.sizes(),
        a,
        b,
        interpolation_mode,
        padding_mode,
    )?;
    let gin = if output_mask.first().copied().unwrap_or(true) {
        new_contiguous(input.sizes(), input.dtype())?
    } else {
        Tensor::undefined()
    };
    Ok((gin, new_contiguous(grid.sizes(), grid.dtype())?))
}
