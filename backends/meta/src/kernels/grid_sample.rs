//! Meta kernels of 2-d grid sampling (`grid_sampler_2d` and its backward), from
//! the arguments `opal::rules::sampling` checked (`rule | kernel` in
//! `backend.yaml`, as in the CPU backend's).
//!
//! Owns: nothing but the allocations. Must not: check an argument or compute a
//! shape (the rules do).

use super::{check_inputs, new_contiguous};
use opal::rules::sampling::{GridSample, GridSampleBackward};
use opal::{Result, Tensor};

/// `grid_sampler_2d`: `[N, C, Ho, Wo]`.
pub fn grid_sampler_2d(p: GridSample) -> Result<Tensor> {
    check_inputs("grid_sampler_2d", &[p.input, p.grid])?;
    new_contiguous(&p.shape, p.input.dtype())
}

/// `grid_sampler_2d_backward`: gradients shaped as `input` (undefined unless
/// `output_mask[0]`) and `grid`.
pub fn grid_sampler_2d_backward(p: GridSampleBackward) -> Result<(Tensor, Tensor)> {
    let (input, grid) = (p.forward.input, p.forward.grid);
    check_inputs("grid_sampler_2d_backward", &[p.grad_output, input, grid])?;
    let gin = if p.input_grad {
        new_contiguous(input.sizes(), input.dtype())?
    } else {
        Tensor::undefined()
    };
    Ok((gin, new_contiguous(grid.sizes(), grid.dtype())?))
}
