//! 1-d pooling and 2-d upsampling written over other operators: `avg_pool1d` and
//! `adaptive_avg_pool1d` (the 2-d pools over a height-1 view) and the `.vec`
//! upsampling overloads (output size from `output_size` or `scale_factors`, then
//! the backends' `upsample_nearest2d` / `upsample_bilinear2d` kernels).
//!
//! Owns: these decompositions and the `.vec` output-size rule. Must not: read or
//! write tensor data itself.

use crate::dispatch::DispatchKeySet;
use crate::error::{OpalError, Result};
use crate::ops;
use crate::rules::pool::pool_param;
use crate::Tensor;

/// Checks a 1-d pooling input: `[C, L]` or `[N, C, L]` with non-empty `C` and `L`.
fn check_1d(op: &str, x: &Tensor) -> Result<()> {
    let s = x.sizes();
    if !(s.len() == 2 || s.len() == 3) || s[s.len() - 2..].contains(&0) {
        return Err(OpalError::shape(format!(
            "{op}: expected 2D or 3D (batch mode) tensor with non-zero sizes for channels and length for input, but got input of size {s:?}"
        )));
    }
    Ok(())
}

pub(super) fn avg_pool1d(
    _ks: DispatchKeySet,
    x: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    count_include_pad: bool,
) -> Result<Tensor> {
    const OP: &str = "avg_pool1d";
    check_1d(OP, x)?;
    let [k] = pool_param::<1>(OP, "kernel_size", kernel_size, None)?;
    let [s] = pool_param(OP, "stride", stride, Some([k]))?;
    let [p] = pool_param(OP, "padding", padding, Some([0]))?;
    let y = ops::avg_pool2d::call(
        &ops::unsqueeze(x, -2)?,
        &[1, k],
        &[1, s],
        &[0, p],
        ceil_mode,
        count_include_pad,
        None,
    )?;
    ops::squeeze_dim(&y, -2)
}

pub(super) fn adaptive_avg_pool1d(
    _ks: DispatchKeySet,
    x: &Tensor,
    output_size: &[i64],
) -> Result<Tensor> {
    const OP: &str = "adaptive_avg_pool1d";
    check_1d(OP, x)?;
    if output_size.len() != 1 {
        return Err(OpalError::msg(format!(
            "{OP}: output_size must be one int, but got output_size={output_size:?}"
        )));
    }
    let y = ops::_adaptive_avg_pool2d(&ops::unsqueeze(x, -2)?, &[1, output_size[0]])?;
    ops::squeeze_dim(&y, -2)
}

/// The `(output_size, scale_h, scale_w)` of a 2-d `.vec` upsampling overload:
/// exactly one of `output_size` (2 ints) and `scale_factors` (2 floats, giving
/// `floor(input * scale)` and passed on as the scales).
fn vec_output_size(
    op: &str,
    x: &Tensor,
    output_size: Option<&[i64]>,
    scale_factors: Option<&[f64]>,
) -> Result<([i64; 2], Option<f64>, Option<f64>)> {
    let s = x.sizes();
    if s.len() < 2 {
        return Err(OpalError::shape(format!(
            "{op}: expected a 4-D input, but got input of size {s:?}"
        )));
    }
    let (h, w) = (s[s.len() - 2], s[s.len() - 1]);
    match (output_size, scale_factors) {
        (Some(o), None) if o.len() == 2 => Ok(([o[0], o[1]], None, None)),
        (Some(o), None) => Err(OpalError::msg(format!(
            "{op}: output_size must have 2 elements, but got output_size={o:?}"
        ))),
        (None, Some(f)) if f.len() == 2 => Ok((
            [(h as f64 * f[0]) as i64, (w as f64 * f[1]) as i64],
            Some(f[0]),
            Some(f[1]),
        )),
        (None, Some(f)) => Err(OpalError::msg(format!(
            "{op}: scale_factors must have 2 elements, but got scale_factors={f:?}"
        ))),
        _ => Err(OpalError::msg(format!(
            "{op}: must specify exactly one of output_size and scale_factors, but got output_size={output_size:?} and scale_factors={scale_factors:?}"
        ))),
    }
}

pub(super) fn upsample_nearest2d_vec(
    _ks: DispatchKeySet,
    input: &Tensor,
    output_size: Option<&[i64]>,
    scale_factors: Option<&[f64]>,
) -> Result<Tensor> {
    let (o, sh, sw) = vec_output_size("upsample_nearest2d.vec", input, output_size, scale_factors)?;
    ops::upsample_nearest2d::call(input, &o, sh, sw)
}

pub(super) fn upsample_bilinear2d_vec(
    _ks: DispatchKeySet,
    input: &Tensor,
    output_size: Option<&[i64]>,
    align_corners: bool,
    scale_factors: Option<&[f64]>,
) -> Result<Tensor> {
    let (o, sh, sw) =
        vec_output_size("upsample_bilinear2d.vec", input, output_size, scale_factors)?;
    ops::upsample_bilinear2d::call(input, &o, align_corners, sh, sw)
}
