//! Backward formulas of the real FFTs (`_fft_r2c`, `_fft_c2r`), in PyTorch's
//! convention for complex gradients (the conjugate Wirtinger derivative: a complex
//! gradient holds dL/d(re) + i dL/d(im)). Both are written over the FFT ops
//! themselves, so every backend with those ops differentiates them.
//!
//! The identity both use: `_fft_c2r` of a half spectrum `z` along the last
//! transformed dim (after inverse transforms of the leading dims) is the real part
//! of the inverse DFT of `z` zero-padded to full length, each bin but the zero
//! and Nyquist ones counted twice (their mirror images). So the real part of an
//! inverse DFT of a zero-padded spectrum is `_fft_c2r` of that spectrum with those
//! bins halved, and the adjoint of `_fft_c2r` is `_fft_r2c` with them doubled.
//!
//! Owns: these formulas. Must not: record graph nodes or read tensor data.

use super::{at, host_constant, wd};
use crate::error::{OpalError, Result};
use crate::{ops, Scalar, Tensor};

/// `w` as a real tensor laid along dim `d` of a rank-`ndim` tensor like `like`
/// (sizes `[w.len(), 1, ..., 1]`, broadcasting against it), in the real dtype of
/// `like`'s complex dtype and on its device.
fn along_dim(w: Vec<f64>, d: usize, ndim: usize, like: &Tensor) -> Result<Tensor> {
    let mut shape = vec![1i64; ndim - d];
    shape[0] = w.len() as i64;
    let host = Tensor::from_vec(w, &shape)?;
    host_constant(&host, like.dtype().to_real(), like.device())
}

/// The weight of bin `k` of a half spectrum of a signal of `n` points: 1 for the
/// zero bin and (for even `n`) the Nyquist bin, which have no mirror image;
/// `twice` for every other bin.
fn bin_weights(bins: i64, n: i64, twice: f64) -> Vec<f64> {
    (0..bins)
        .map(|k| if k == 0 || 2 * k == n { 1.0 } else { twice })
        .collect()
}

/// The last transformed dim, wrapped for a tensor of rank `ndim`.
fn last_dim(dim: &[i64], ndim: usize) -> Result<usize> {
    if dim.is_empty() {
        return Err(OpalError::msg(
            "backward of an FFT: expected at least one transformed dim",
        ));
    }
    wd(*at(dim, -1)?, ndim)
}

/// The gradient of `_fft_r2c(self, dim, normalization, onesided)` for the real
/// `self`, whose last transformed dim has `last_dim_size` points: the real part of
/// the adjoint transform (an inverse DFT with the same scaling) of `grad`,
/// zero-padded to the full spectrum when `onesided`.
pub fn fft_r2c_backward(
    grad: &Tensor,
    dim: &[i64],
    normalization: i64,
    onesided: bool,
    last_dim_size: i64,
) -> Result<Tensor> {
    let nd = grad.dim();
    let last = last_dim(dim, nd)?;
    let n = last_dim_size;
    if onesided {
        // Halving the mirrored bins undoes `_fft_c2r`'s doubling of them.
        let w = along_dim(bin_weights(grad.sizes()[last], n, 0.5), last, nd, grad)?;
        return ops::_fft_c2r(&ops::mul_tensor(grad, &w)?, dim, normalization, n);
    }
    // A full spectrum of n bins is the half spectrum of a signal of 2n points
    // (bin n, zero, appended) sampled at every other point: there the doubled bins
    // 1..n-1 and bin 0 (doubled by hand) give twice the real part of the inverse
    // DFT of `grad`. Unnormalized, then scaled as the forward transform was.
    let mut w = vec![1.0; n as usize];
    if let Some(first) = w.first_mut() {
        *first = 2.0;
    }
    let w = along_dim(w, last, nd, grad)?;
    let mut pad = vec![0i64; 2 * (nd - last)];
    pad[2 * (nd - 1 - last) + 1] = 1;
    let y = ops::constant_pad_nd(&ops::mul_tensor(grad, &w)?, &pad)?;
    let x = ops::_fft_c2r(&y, dim, 0, 2 * n)?;
    let x = ops::slice_tensor::call(&x, last as i64, Some(0), Some(2 * n), 2)?;
    let points: i64 = dim
        .iter()
        .map(|&d| wd(d, nd).map(|d| grad.sizes()[d]))
        .product::<Result<i64>>()?;
    let scale = match normalization {
        0 => 1.0,
        1 => (points as f64).sqrt(),
        2 => points as f64,
        m => {
            return Err(OpalError::msg(format!(
                "backward of _fft_r2c: normalization must be 0, 1 or 2, got {m}"
            )))
        }
    };
    ops::mul_scalar(&x, &Scalar::Float(0.5 / scale))
}

/// The gradient of `_fft_c2r(self, dim, normalization, last_dim_size)` for the
/// complex half spectrum `self`: the forward transform (same scaling) of the real
/// `grad`, one-sided, with the mirrored bins doubled.
pub fn fft_c2r_backward(grad: &Tensor, dim: &[i64], normalization: i64) -> Result<Tensor> {
    let nd = grad.dim();
    let last = last_dim(dim, nd)?;
    let n = grad.sizes()[last];
    let g = ops::_fft_r2c(grad, dim, normalization, true)?;
    let w = along_dim(bin_weights(g.sizes()[last], n, 2.0), last, nd, &g)?;
    ops::mul_tensor(&g, &w)
}
