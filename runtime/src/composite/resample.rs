//! 1-d pooling and 2-d upsampling written over other operators: `avg_pool1d` and
//! `adaptive_avg_pool1d` (the 2-d pools over a height-1 view), the `.vec`
//! upsampling overloads (output size from `output_size` or `scale_factors`), and
//! `upsample_bilinear2d`, which is separable: `A_h @ x @ A_w^T` with one
//! interpolation matrix per dim, so autograd differentiates it through `matmul`.
//!
//! Owns: these decompositions, the `.vec` output-size rule and the bilinear
//! weights. Must not: read or write tensor data itself.

use crate::dispatch::DispatchKeySet;
use crate::error::{OpalError, Result};
use crate::ops;
use crate::rules::pool::pool_param;
use crate::{DType, Tensor};

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

/// The `(out x n)` row-major matrix of linear interpolation along one dim. The
/// source position is computed in f32 unless the input is f64, as PyTorch's CPU
/// kernel computes it in the input's accumulation type.
fn linear_weights(
    n: i64,
    out: i64,
    align_corners: bool,
    scale: Option<f64>,
    f64_math: bool,
) -> Vec<f64> {
    let round = |v: f64| if f64_math { v } else { v as f32 as f64 };
    let step = if align_corners {
        if out > 1 {
            round((n - 1) as f64 / (out - 1) as f64)
        } else {
            0.0
        }
    } else {
        match scale {
            Some(s) if s > 0.0 => round(1.0 / s),
            _ => round(n as f64 / out as f64),
        }
    };
    let mut a = vec![0.0; (out * n) as usize];
    for o in 0..out {
        let src = if align_corners {
            round(step * o as f64)
        } else {
            round(round(step * round(o as f64 + 0.5)) - 0.5).max(0.0)
        };
        let i0 = (src as i64).min(n - 1);
        let i1 = if i0 < n - 1 { i0 + 1 } else { i0 };
        let l1 = round(src - i0 as f64).clamp(0.0, 1.0);
        let l0 = round(1.0 - l1);
        a[(o * n + i0) as usize] += l0;
        a[(o * n + i1) as usize] += l1;
    }
    a
}

pub(super) fn upsample_bilinear2d(
    _ks: DispatchKeySet,
    x: &Tensor,
    output_size: &[i64],
    align_corners: bool,
    scales_h: Option<f64>,
    scales_w: Option<f64>,
) -> Result<Tensor> {
    const OP: &str = "upsample_bilinear2d";
    let s = x.sizes();
    if output_size.len() != 2 {
        return Err(OpalError::msg(format!(
            "{OP}: It is expected output_size equals to 2, but got output_size={output_size:?}"
        )));
    }
    if s.len() != 4 {
        return Err(OpalError::shape(format!(
            "{OP}: It is expected input to be a 4-D tensor, but got input of size {s:?}"
        )));
    }
    if s[1..].contains(&0) || output_size.iter().any(|&o| o <= 0) {
        return Err(OpalError::shape(format!(
            "{OP}: Input and output sizes should be greater than 0, but got input (H: {}, W: {}) output (H: {}, W: {})",
            s[2], s[3], output_size[0], output_size[1]
        )));
    }
    let d = x.dtype();
    if !d.is_floating_point() {
        return Err(OpalError::msg(format!(
            "{OP}: \"upsample_bilinear2d\" not implemented for input dtype {d:?}"
        )));
    }
    let f64_math = d == DType::F64;
    let (h, w, oh, ow) = (s[2], s[3], output_size[0], output_size[1]);
    let matrix = |vals: Vec<f64>, rows: i64, cols: i64| -> Result<Tensor> {
        crate::derivatives::host_constant(&Tensor::from_vec(vals, &[rows, cols])?, d, x.device())
    };
    let a_h = matrix(
        linear_weights(h, oh, align_corners, scales_h, f64_math),
        oh,
        h,
    )?;
    let a_w = matrix(
        linear_weights(w, ow, align_corners, scales_w, f64_math),
        ow,
        w,
    )?;
    let rows = ops::matmul(&a_h, x)?;
    ops::matmul(&rows, &ops::transpose_int(&a_w, 0, 1)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bilinear_weights() {
        // 2 -> 4 without corners aligned: sources -0.25 (clamped), 0.25, 0.75, 1.25.
        let a = linear_weights(2, 4, false, None, true);
        assert_eq!(a, vec![1.0, 0.0, 0.75, 0.25, 0.25, 0.75, 0.0, 1.0]);
        // Corners aligned: the ends map to the ends.
        let a = linear_weights(3, 5, true, None, true);
        assert_eq!(&a[..3], &[1.0, 0.0, 0.0]);
        assert_eq!(&a[12..], &[0.0, 0.0, 1.0]);
        for row in a.chunks(3) {
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        }
    }
}
