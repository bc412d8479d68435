//! Average pooling that is separable, written over `matmul`: `avg_pool3d`,
//! `_adaptive_avg_pool3d` (each output averages a box, i.e. one averaging matrix
//! per spatial dim applied in turn), and the backward ops `avg_pool2d_backward`
//! and `_adaptive_avg_pool2d_backward` (the transposed matrices, which the backward
//! formulas in `crate::derivatives` already build). They run on every backend, and autograd
//! differentiates them through `matmul`.
//!
//! Owns: these ops' argument checks and averaging matrices. Must not: read or
//! write tensor data itself, or restate the pooling window rules
//! (`rules::pool` has them).

use crate::derivatives;
use crate::dispatch::DispatchKeySet;
use crate::error::{OpalError, Result};
use crate::ops;
use crate::rules::pool::{adaptive_window, avg_pool_windows, pool_window};
use crate::{DType, Tensor};

/// Multiplies dim `dim` of `x` by `a` (`out x n`, row-major):
/// `y[.., o, ..] = sum_i a[o, i] * x[.., i, ..]`.
fn along(x: &Tensor, dim: i64, a: Vec<f64>, out: i64, n: i64) -> Result<Tensor> {
    let m =
        crate::derivatives::host_constant(&Tensor::from_vec(a, &[out, n])?, x.dtype(), x.device())?;
    let moved = ops::transpose_int(x, dim, -1)?;
    let y = ops::matmul(&moved, &ops::transpose_int(&m, 0, 1)?)?;
    ops::transpose_int(&y, dim, -1)
}

/// Checks a 3-d pooling input: `[C, D, H, W]` or `[N, C, D, H, W]`, floating (f16
/// and bf16 only when `half_ok`, as PyTorch's CPU kernels; int64 for
/// `avg_pool3d` too), with non-empty non-batch dims; gives its `[D, H, W]`.
fn input_3d(op: &str, x: &Tensor, half_ok: bool) -> Result<[i64; 3]> {
    let s = x.sizes();
    if !(s.len() == 4 || s.len() == 5) || s[s.len() - 4..].contains(&0) {
        return Err(OpalError::shape(format!(
            "{op}: expected 4D or 5D (batch mode) tensor with non-zero sizes for non-batch dims for input, but got input of size {s:?}"
        )));
    }
    let half = matches!(x.dtype(), DType::F16 | DType::BF16);
    let int64_ok = op == "avg_pool3d" && x.dtype() == DType::I64;
    if !(x.dtype().is_floating_point() || int64_ok) || (half && !half_ok) {
        return Err(OpalError::msg(format!(
            "{op}: not implemented for input dtype {:?}",
            x.dtype()
        )));
    }
    let n = s.len();
    Ok([s[n - 3], s[n - 2], s[n - 1]])
}

/// Applies one `(out x n)` matrix per trailing dim (the last `mats.len()` dims).
fn separable(x: &Tensor, mats: Vec<(Vec<f64>, i64, i64)>) -> Result<Tensor> {
    let k = mats.len() as i64;
    let mut y = x.clone();
    for (i, (a, out, n)) in mats.into_iter().enumerate() {
        y = along(&y, i as i64 - k, a, out, n)?;
    }
    ops::contiguous(&y)
}

/// A divisor override of 0 is refused, as PyTorch does.
fn check_divisor(op: &str, divisor_override: Option<i64>) -> Result<()> {
    if divisor_override == Some(0) {
        return Err(OpalError::msg(format!(
            "{op}: divisor must be not zero, but got divisor_override=0"
        )));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(super) fn avg_pool3d(
    _ks: DispatchKeySet,
    x: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<i64>,
) -> Result<Tensor> {
    const OP: &str = "avg_pool3d";
    let dims = input_3d(OP, x, false)?;
    check_divisor(OP, divisor_override)?;
    let g = pool_window::<3>(OP, dims, kernel_size, stride, padding, &[1], ceil_mode)?;
    let integer = x.dtype() == DType::I64;
    let mut mats = Vec::with_capacity(3);
    let mut divisors = Vec::with_capacity(3);
    for (i, (&n, &out)) in dims.iter().zip(&g.out).enumerate() {
        let mut a = vec![0.0; (out * n) as usize];
        let windows = avg_pool_windows(
            n,
            out,
            g.kernel[i],
            g.stride[i],
            g.padding[i],
            count_include_pad,
        );
        let mut dim_divisors = Vec::with_capacity(windows.len());
        for (o, (s, e, div)) in windows.into_iter().enumerate() {
            // An override divides once, so it goes into the first dim's weights only.
            let w = match divisor_override {
                _ if integer => 1.0,
                Some(d) if i == 0 => 1.0 / d as f64,
                Some(_) => 1.0,
                None => 1.0 / div as f64,
            };
            for j in s..e {
                a[o * n as usize + j as usize] = w;
            }
            dim_divisors.push(div as f64);
        }
        mats.push((a, out, n));
        divisors.push(dim_divisors);
    }
    if integer {
        return integer_average(x, mats, &divisors, divisor_override);
    }
    separable(x, mats)
}

/// int64 average pooling as PyTorch's CPU kernel does it: each window's sum in
/// integers, divided by the window's divisor (the product of the per-dim ones, or
/// the override) with the quotient truncated toward zero. The sums run through
/// the f64 matrices, exact while a window's sum stays below 2^53 in magnitude.
fn integer_average(
    x: &Tensor,
    ones: Vec<(Vec<f64>, i64, i64)>,
    divisors: &[Vec<f64>],
    divisor_override: Option<i64>,
) -> Result<Tensor> {
    let sums = separable(&x.to_dtype(DType::F64)?, ones)?;
    let divisor: Vec<f64> = match divisor_override {
        Some(d) => vec![d as f64],
        None => divisors[0]
            .iter()
            .flat_map(|&a| {
                divisors[1]
                    .iter()
                    .flat_map(move |&b| divisors[2].iter().map(move |&c| a * b * c))
            })
            .collect(),
    };
    let shape: Vec<i64> = match divisor_override {
        Some(_) => vec![1],
        None => divisors.iter().map(|d| d.len() as i64).collect(),
    };
    let divisor =
        derivatives::host_constant(&Tensor::from_vec(divisor, &shape)?, DType::F64, x.device())?;
    ops::div_tensor_mode(&sums, &divisor, Some("trunc"))?.to_dtype(DType::I64)
}

pub(super) fn adaptive_avg_pool3d(
    _ks: DispatchKeySet,
    x: &Tensor,
    output_size: &[i64],
) -> Result<Tensor> {
    const OP: &str = "_adaptive_avg_pool3d";
    let dims = input_3d(OP, x, true)?;
    if output_size.len() != 3 || output_size.iter().any(|&o| o < 0) {
        return Err(OpalError::msg(format!(
            "{OP}: output_size must be 3 non-negative ints, but got output_size={output_size:?}"
        )));
    }
    let mats = (0..3)
        .map(|i| {
            let (n, out) = (dims[i], output_size[i]);
            let mut a = vec![0.0; (out * n) as usize];
            for o in 0..out {
                let (s, e) = adaptive_window(o, n, out);
                for j in s..e {
                    a[(o * n + j) as usize] = 1.0 / (e - s) as f64;
                }
            }
            (a, out, n)
        })
        .collect();
    separable(x, mats)
}

/// Checks that `grad_output` has the forward output's sizes: `self`'s leading dims
/// and `spatial` pooled sizes.
fn check_grad_output(
    op: &str,
    grad_output: &Tensor,
    self_: &Tensor,
    spatial: &[i64],
) -> Result<()> {
    let s = self_.sizes();
    let mut expected = s[..s.len() - spatial.len()].to_vec();
    expected.extend_from_slice(spatial);
    if grad_output.sizes() != expected.as_slice() {
        return Err(OpalError::shape(format!(
            "{op}: expected grad_output of size {expected:?}, but got grad_output of size {:?}",
            grad_output.sizes()
        )));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(super) fn avg_pool2d_backward(
    _ks: DispatchKeySet,
    grad_output: &Tensor,
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<i64>,
) -> Result<Tensor> {
    const OP: &str = "avg_pool2d_backward";
    let s = self_.sizes();
    if !(s.len() == 3 || s.len() == 4) || s[s.len() - 3..].contains(&0) {
        return Err(OpalError::shape(format!(
            "{OP}: expected 3D or 4D (batch mode) tensor with non-zero sizes for non-batch dims for self, but got self of size {s:?}"
        )));
    }
    check_divisor(OP, divisor_override)?;
    let n = s.len();
    let g = pool_window::<2>(
        OP,
        [s[n - 2], s[n - 1]],
        kernel_size,
        stride,
        padding,
        &[1],
        ceil_mode,
    )?;
    check_grad_output(OP, grad_output, self_, &g.out)?;
    derivatives::avg_pool2d_backward(
        grad_output,
        self_,
        &g.kernel,
        &g.stride,
        &g.padding,
        ceil_mode,
        count_include_pad,
        &divisor_override,
    )
}

pub(super) fn adaptive_avg_pool2d_backward(
    _ks: DispatchKeySet,
    grad_output: &Tensor,
    self_: &Tensor,
) -> Result<Tensor> {
    const OP: &str = "_adaptive_avg_pool2d_backward";
    let (gs, s) = (grad_output.sizes(), self_.sizes());
    if !(s.len() == 3 || s.len() == 4)
        || gs.len() != s.len()
        || gs[..s.len() - 2] != s[..s.len() - 2]
    {
        return Err(OpalError::shape(format!(
            "{OP}: expected a 3D or 4D self and a grad_output with its leading dims, but got grad_output of size {gs:?} and self of size {s:?}"
        )));
    }
    derivatives::_adaptive_avg_pool2d_backward(grad_output, self_)
}

/// `max_pool3d_with_indices_backward`: each output gradient added at its recorded
/// argmax, one `scatter_add` over the flattened volumes.
#[allow(clippy::too_many_arguments)]
pub(super) fn max_pool3d_with_indices_backward(
    _ks: DispatchKeySet,
    grad_output: &Tensor,
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
    indices: &Tensor,
) -> Result<Tensor> {
    const OP: &str = "max_pool3d_with_indices_backward";
    let dims = input_3d(OP, self_, true)?;
    let g = pool_window::<3>(OP, dims, kernel_size, stride, padding, dilation, ceil_mode)?;
    check_grad_output(OP, grad_output, self_, &g.out)?;
    if indices.sizes() != grad_output.sizes() || indices.dtype() != DType::I64 {
        return Err(OpalError::msg(format!(
            "{OP}: expected int64 indices of size {:?}, but got indices of size {:?} and dtype {:?}",
            grad_output.sizes(),
            indices.sizes(),
            indices.dtype()
        )));
    }
    let volume: i64 = dims.iter().product();
    let pooled: i64 = g.out.iter().product();
    let zeros = ops::reshape(&ops::zeros_like(self_)?, &[-1, volume])?;
    let idx = ops::reshape(indices, &[-1, pooled])?;
    let src = ops::reshape(grad_output, &[-1, pooled])?;
    ops::reshape(&ops::scatter_add(&zeros, 1, &idx, &src)?, self_.sizes())
}
