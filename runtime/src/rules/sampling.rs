//! Grid sampling (`grid_sampler_2d` and its backward): the argument checks, the
//! interpolation and padding modes PyTorch encodes as integers, and the result
//! shape, the same for every backend.
//!
//! Owns: these rules and their errors. Must not: allocate tensors, read tensor
//! data, or know any backend.

use crate::{DType, OpalError, Result};

/// How a sample between pixels is computed (`interpolation_mode` 0, 1, 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interpolation {
    /// Weighted mean of the 2 x 2 nearest pixels.
    Bilinear,
    /// The nearest pixel (ties to even).
    Nearest,
    /// Cubic convolution over the 4 x 4 nearest pixels.
    Bicubic,
}

/// What a sample outside the image reads (`padding_mode` 0, 1, 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Padding {
    /// Zero.
    Zeros,
    /// The nearest border pixel.
    Border,
    /// The image mirrored at its borders.
    Reflection,
}

/// Checked `grid_sampler_2d` arguments: input `[N, C, H, W]` and grid
/// `[N, Ho, Wo, 2]` of one floating dtype; returns the output shape
/// `[N, C, Ho, Wo]` and the two modes.
pub fn grid_sampler_2d_args(
    op: &str,
    input: (&[i64], DType),
    grid: (&[i64], DType),
    interpolation_mode: i64,
    padding_mode: i64,
) -> Result<(Vec<i64>, Interpolation, Padding)> {
    let (si, sg) = (input.0, grid.0);
    if input.1 != grid.1 {
        return Err(OpalError::msg(format!(
            "{op}: grid_sampler(): expected input and grid to have same dtype, but input has {:?} and grid has {:?}",
            input.1, grid.1
        )));
    }
    if !input.1.is_floating_point() {
        return Err(OpalError::msg(format!(
            "{op}: \"grid_sampler_2d_cpu\" not implemented for '{:?}'",
            input.1
        )));
    }
    if si.len() != 4 || sg.len() != 4 {
        return Err(OpalError::shape(format!(
            "{op}: grid_sampler(): expected 4D input and grid with same number of dimensions, but got input with sizes {si:?} and grid with sizes {sg:?}"
        )));
    }
    if si[0] != sg[0] {
        return Err(OpalError::shape(format!(
            "{op}: grid_sampler(): expected grid and input to have same batch size, but got input with sizes {si:?} and grid with sizes {sg:?}"
        )));
    }
    if sg[3] != 2 {
        return Err(OpalError::shape(format!(
            "{op}: grid_sampler(): expected grid to have size 2 in last dimension, but got grid with sizes {sg:?}"
        )));
    }
    if let Some(d) = (2..4).find(|&d| si[d] == 0) {
        return Err(OpalError::shape(format!(
            "{op}: grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes {si:?} with dimension {d} being empty"
        )));
    }
    let interp = match interpolation_mode {
        0 => Interpolation::Bilinear,
        1 => Interpolation::Nearest,
        2 => Interpolation::Bicubic,
        m => {
            return Err(OpalError::msg(format!(
                "{op}: interpolation_mode must be 0 (bilinear), 1 (nearest) or 2 (bicubic), got {m}"
            )))
        }
    };
    let pad = match padding_mode {
        0 => Padding::Zeros,
        1 => Padding::Border,
        2 => Padding::Reflection,
        m => {
            return Err(OpalError::msg(format!(
                "{op}: padding_mode must be 0 (zeros), 1 (border) or 2 (reflection), got {m}"
            )))
        }
    };
    Ok((vec![si[0], si[1], sg[1], sg[2]], interp, pad))
}

/// Checked `grid_sampler_2d_backward` arguments: those of the forward, and a
/// `grad_output` of the forward's result shape.
pub fn grid_sampler_2d_backward_args(
    op: &str,
    grad_output: &[i64],
    input: (&[i64], DType),
    grid: (&[i64], DType),
    interpolation_mode: i64,
    padding_mode: i64,
) -> Result<(Interpolation, Padding)> {
    let (shape, interp, pad) =
        grid_sampler_2d_args(op, input, grid, interpolation_mode, padding_mode)?;
    if grad_output != shape.as_slice() {
        return Err(OpalError::shape(format!(
            "{op}: expected grad_output of shape {shape:?}, got {grad_output:?}"
        )));
    }
    Ok((interp, pad))
}
