//! Grid sampling (`grid_sampler_2d` and its backward): the argument checks, the
//! interpolation and padding modes PyTorch encodes as integers, and the result
//! shape, the same for every backend. [`grid_sampler_2d`] and
//! [`grid_sampler_2d_backward`] take the schema's arguments and return them
//! checked, for the CPU kernels to compute from and the Meta kernels to shape their
//! results by (`rule | kernel` in both backend YAMLs).
//!
//! Owns: these rules and their errors. Must not: allocate tensors, read tensor
//! data, or know any backend.

use crate::{OpalError, Result, Tensor};

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

/// Checked `grid_sampler_2d` arguments.
pub struct GridSample<'a> {
    /// `[N, C, H, W]`.
    pub input: &'a Tensor,
    /// `[N, Ho, Wo, 2]`, of the input's dtype.
    pub grid: &'a Tensor,
    /// The result's shape, `[N, C, Ho, Wo]`.
    pub shape: Vec<i64>,
    /// `interpolation_mode`.
    pub interpolation: Interpolation,
    /// `padding_mode`.
    pub padding: Padding,
    /// `align_corners`.
    pub align_corners: bool,
}

/// The rule of `grid_sampler_2d`: input `[N, C, H, W]` and grid `[N, Ho, Wo, 2]` of
/// one floating dtype, and known modes.
pub fn grid_sampler_2d<'a>(
    input: &'a Tensor,
    grid: &'a Tensor,
    interpolation_mode: i64,
    padding_mode: i64,
    align_corners: bool,
) -> Result<GridSample<'a>> {
    let modes = (interpolation_mode, padding_mode, align_corners);
    checked("grid_sampler_2d", input, grid, modes)
}

fn checked<'a>(
    op: &str,
    input: &'a Tensor,
    grid: &'a Tensor,
    (interpolation_mode, padding_mode, align_corners): (i64, i64, bool),
) -> Result<GridSample<'a>> {
    let (si, sg) = (input.sizes(), grid.sizes());
    let (di, dg) = (input.dtype(), grid.dtype());
    if di != dg {
        return Err(OpalError::msg(format!(
            "{op}: grid_sampler(): expected input and grid to have same dtype, but input has {di:?} and grid has {dg:?}"
        )));
    }
    if !di.is_floating_point() {
        return Err(OpalError::msg(format!(
            "{op}: \"grid_sampler_2d_cpu\" not implemented for '{di:?}'"
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
    Ok(GridSample {
        input,
        grid,
        shape: vec![si[0], si[1], sg[1], sg[2]],
        interpolation: interp,
        padding: pad,
        align_corners,
    })
}

/// Checked `grid_sampler_2d_backward` arguments.
pub struct GridSampleBackward<'a> {
    /// The forward's arguments.
    pub forward: GridSample<'a>,
    /// Of the forward's result shape.
    pub grad_output: &'a Tensor,
    /// Whether the input's gradient is wanted (the grid's always is).
    pub input_grad: bool,
}

/// The rule of `grid_sampler_2d_backward`: the forward's, and a `grad_output` of
/// the forward's result shape.
#[allow(
    clippy::too_many_arguments,
    reason = "the schema fixes the argument list"
)]
pub fn grid_sampler_2d_backward<'a>(
    grad_output: &'a Tensor,
    input: &'a Tensor,
    grid: &'a Tensor,
    interpolation_mode: i64,
    padding_mode: i64,
    align_corners: bool,
    output_mask: &[bool],
) -> Result<GridSampleBackward<'a>> {
    let op = "grid_sampler_2d_backward";
    let modes = (interpolation_mode, padding_mode, align_corners);
    let forward = checked(op, input, grid, modes)?;
    if grad_output.sizes() != forward.shape.as_slice() {
        return Err(OpalError::shape(format!(
            "{op}: expected grad_output of shape {:?}, got {:?}",
            forward.shape,
            grad_output.sizes()
        )));
    }
    Ok(GridSampleBackward {
        forward,
        grad_output,
        input_grad: output_mask.first().copied().unwrap_or(true),
    })
}
