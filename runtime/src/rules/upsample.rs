//! Bilinear 2-d upsampling (`upsample_bilinear2d` and its backward): the argument
//! checks, the result shapes and the source taps of each output position, the
//! same for every backend (the CPU kernels read the taps, the Meta kernels the
//! shapes). The two ops' rules proper ([`upsample_bilinear2d`],
//! [`upsample_bilinear2d_backward`]) take the schema's arguments and return them
//! checked; both backends' YAML entries read `rule | kernel`.
//!
//! Owns: these rules and their errors. Must not: allocate tensors, read tensor
//! data, or know any backend.

use crate::{DType, OpalError, Result, Tensor};

/// `upsample_bilinear2d`'s or its backward's arguments, checked.
#[derive(Clone, Debug)]
pub struct Bilinear2d<'a> {
    /// `self` (forward) or `grad_output` (backward): the tensor the kernel reads.
    pub input: &'a Tensor,
    /// The input's `[N, C, H, W]` (backward: `input_size`).
    pub input_sizes: [i64; 4],
    /// The forward result's `[N, C, H_out, W_out]`.
    pub output_sizes: [i64; 4],
    /// Whether the corner pixels of input and output align.
    pub align_corners: bool,
    /// `scales_h`, `scales_w`.
    pub scales: [Option<f64>; 2],
}

/// The rule of `upsample_bilinear2d` (and of its `out=` form): the sizes of
/// [`upsample_bilinear2d_sizes`] and an interpolable dtype.
pub fn upsample_bilinear2d<'a>(
    self_: &'a Tensor,
    output_size: &[i64],
    align_corners: bool,
    scales_h: Option<f64>,
    scales_w: Option<f64>,
) -> Result<Bilinear2d<'a>> {
    const OP: &str = "upsample_bilinear2d";
    let output_sizes = upsample_bilinear2d_sizes(OP, self_.sizes(), output_size)?;
    check_upsample_dtype(OP, self_.dtype())?;
    let s = self_.sizes();
    Ok(Bilinear2d {
        input: self_,
        input_sizes: [s[0], s[1], s[2], s[3]],
        output_sizes,
        align_corners,
        scales: [scales_h, scales_w],
    })
}

/// The rule of `upsample_bilinear2d_backward` (and of its `grad_input` form): the
/// sizes of [`upsample_bilinear2d_backward_sizes`] and an interpolable dtype.
pub fn upsample_bilinear2d_backward<'a>(
    grad_output: &'a Tensor,
    output_size: &[i64],
    input_size: &[i64],
    align_corners: bool,
    scales_h: Option<f64>,
    scales_w: Option<f64>,
) -> Result<Bilinear2d<'a>> {
    const OP: &str = "upsample_bilinear2d_backward";
    let input_sizes =
        upsample_bilinear2d_backward_sizes(OP, grad_output.sizes(), output_size, input_size)?;
    check_upsample_dtype(OP, grad_output.dtype())?;
    let g = grad_output.sizes();
    Ok(Bilinear2d {
        input: grad_output,
        input_sizes,
        output_sizes: [g[0], g[1], g[2], g[3]],
        align_corners,
        scales: [scales_h, scales_w],
    })
}

/// The two input positions one output position of a linear resize reads, and
/// their weights (`i0 == i1` at the last input position).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinearTap {
    /// The lower input position.
    pub i0: usize,
    /// The upper input position (`i0 + 1`, or `i0` at the end).
    pub i1: usize,
    /// The weight of `i0`.
    pub w0: f64,
    /// The weight of `i1`.
    pub w1: f64,
}

/// The taps of a linear resize of `n` input positions to `out`, as PyTorch's CPU
/// kernel computes them: the step `(n - 1) / (out - 1)` with `align_corners`,
/// else `1 / scale` (when a positive `scale` is given) or `n / out`; the source of
/// output `o` is `step * o`, or `step * (o + 0.5) - 0.5` clamped at 0 without
/// aligned corners. Every quantity is rounded to f32 unless `f64_math` (an f64
/// input), as PyTorch computes them in the input's accumulation type; the weights
/// come back as f64 holding those values.
pub fn linear_upsample_taps(
    n: usize,
    out: usize,
    align_corners: bool,
    scale: Option<f64>,
    f64_math: bool,
) -> Vec<LinearTap> {
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
    let last = n.saturating_sub(1);
    (0..out)
        .map(|o| {
            let src = if align_corners {
                round(step * o as f64)
            } else {
                round(round(step * round(o as f64 + 0.5)) - 0.5).max(0.0)
            };
            let i0 = (src as usize).min(last);
            let i1 = if i0 < last { i0 + 1 } else { i0 };
            let w1 = round(src - i0 as f64).clamp(0.0, 1.0);
            LinearTap {
                i0,
                i1,
                w0: round(1.0 - w1),
                w1,
            }
        })
        .collect()
}

/// Refuses what PyTorch's CPU kernel does not interpolate: anything but f16, bf16,
/// f32 and f64.
pub fn check_upsample_dtype(op: &str, dtype: DType) -> Result<()> {
    match dtype {
        DType::F16 | DType::BF16 | DType::F32 | DType::F64 => Ok(()),
        d => Err(OpalError::msg(format!(
            "{op}: \"upsample_bilinear2d\" not implemented for '{d:?}'"
        ))),
    }
}

/// `[N, C, H_out, W_out]` of `upsample_bilinear2d` on a 4-d `input`, with
/// PyTorch's checks: `output_size` of 2 sizes, both positive, and a non-empty
/// input plane.
pub fn upsample_bilinear2d_sizes(op: &str, input: &[i64], output_size: &[i64]) -> Result<[i64; 4]> {
    if output_size.len() != 2 {
        return Err(OpalError::msg(format!(
            "{op}: It is expected output_size equals to 2, but got size {}",
            output_size.len()
        )));
    }
    if input.len() != 4 {
        return Err(OpalError::shape(format!(
            "{op}: It is expected input to be a 4-D tensor, but got input of size {input:?}"
        )));
    }
    let (h, w, oh, ow) = (input[2], input[3], output_size[0], output_size[1]);
    if h <= 0 || w <= 0 || oh <= 0 || ow <= 0 {
        return Err(OpalError::shape(format!(
            "{op}: Input and output sizes should be greater than 0, but got input (H: {h}, W: {w}) output (H: {oh}, W: {ow})"
        )));
    }
    if input[1] == 0 {
        return Err(OpalError::shape(format!(
            "{op}: Non-empty 4D data tensor expected but got a tensor with sizes {input:?}"
        )));
    }
    Ok([input[0], input[1], oh, ow])
}

/// The gradient's shape, `input_size`, after checking `upsample_bilinear2d_backward`'s
/// arguments: `input_size` of 4 sizes, valid forward sizes, and a `grad_output` of
/// exactly the forward result's shape.
pub fn upsample_bilinear2d_backward_sizes(
    op: &str,
    grad_output: &[i64],
    output_size: &[i64],
    input_size: &[i64],
) -> Result<[i64; 4]> {
    if input_size.len() != 4 {
        return Err(OpalError::msg(format!(
            "{op}: It is expected input_size equals to 4, but got size {}",
            input_size.len()
        )));
    }
    let full = upsample_bilinear2d_sizes(op, input_size, output_size)?;
    if grad_output != full {
        return Err(OpalError::shape(format!(
            "{op}: Expected grad_output to have the same shape as output; output.size() = {full:?} but got grad_output.size() = {grad_output:?}"
        )));
    }
    Ok([input_size[0], input_size[1], input_size[2], input_size[3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taps_without_and_with_aligned_corners() {
        // 2 -> 4 without aligned corners: sources -0.25 (clamped), 0.25, 0.75, 1.25.
        let t = linear_upsample_taps(2, 4, false, None, true);
        let w: Vec<(usize, usize, f64, f64)> = t.iter().map(|t| (t.i0, t.i1, t.w0, t.w1)).collect();
        assert_eq!(
            w,
            vec![
                (0, 1, 1.0, 0.0),
                (0, 1, 0.75, 0.25),
                (0, 1, 0.25, 0.75),
                (1, 1, 0.75, 0.25)
            ]
        );
        // Aligned corners: the ends map to the ends; weights sum to 1.
        let t = linear_upsample_taps(3, 5, true, None, false);
        assert_eq!((t[0].i0, t[0].w0), (0, 1.0));
        assert_eq!((t[4].i0, t[4].i1, t[4].w1), (2, 2, 0.0));
        assert!(t.iter().all(|t| (t.w0 + t.w1 - 1.0).abs() < 1e-7));
        // A given scale sets the step.
        let t = linear_upsample_taps(4, 4, false, Some(2.0), true);
        assert_eq!(t[3].i0, 1);
    }

    #[test]
    fn shape_checks() {
        let op = "upsample_bilinear2d";
        assert!(check_upsample_dtype(op, DType::BF16).is_ok());
        assert!(check_upsample_dtype(op, DType::I64)
            .unwrap_err()
            .to_string()
            .contains(op));
        assert_eq!(
            upsample_bilinear2d_sizes(op, &[1, 2, 3, 4], &[6, 8]).unwrap(),
            [1, 2, 6, 8]
        );
        assert!(upsample_bilinear2d_sizes(op, &[1, 2, 3, 4], &[6]).is_err());
        assert!(upsample_bilinear2d_sizes(op, &[2, 3, 4], &[6, 8]).is_err());
        let e = upsample_bilinear2d_sizes(op, &[1, 2, 3, 4], &[0, 8])
            .unwrap_err()
            .to_string();
        assert!(e.contains(op) && e.contains("greater than 0"), "{e}");
        let b = "upsample_bilinear2d_backward";
        assert_eq!(
            upsample_bilinear2d_backward_sizes(b, &[1, 2, 6, 8], &[6, 8], &[1, 2, 3, 4]).unwrap(),
            [1, 2, 3, 4]
        );
        assert!(
            upsample_bilinear2d_backward_sizes(b, &[1, 2, 6, 7], &[6, 8], &[1, 2, 3, 4]).is_err()
        );
        assert!(upsample_bilinear2d_backward_sizes(b, &[1, 2, 6, 8], &[6, 8], &[1, 2, 3]).is_err());
    }
}
