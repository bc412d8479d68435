//! Meta kernels of the real FFTs (`_fft_r2c`, `_fft_c2r`): shapes and dtypes from
//! the shared rules.
//!
//! Owns: nothing but the calls. Must not: restate a check or a shape
//! (`opal::rules::spectral`).

use super::{check_inputs, new_contiguous};
use opal::rules::spectral::{fft_c2r, fft_r2c};
use opal::{Result, Tensor};

/// `_fft_r2c`: complex, the last transformed dim halved when one-sided.
pub fn _fft_r2c(self_: &Tensor, dim: &[i64], normalization: i64, onesided: bool) -> Result<Tensor> {
    check_inputs("_fft_r2c", &[self_])?;
    let f = fft_r2c(
        "_fft_r2c",
        self_.sizes(),
        self_.dtype(),
        dim,
        normalization,
        onesided,
    )?;
    new_contiguous(&f.shape, f.dtype)
}

/// `_fft_c2r`: real, `last_dim_size` points in the last transformed dim.
pub fn _fft_c2r(
    self_: &Tensor,
    dim: &[i64],
    normalization: i64,
    last_dim_size: i64,
) -> Result<Tensor> {
    check_inputs("_fft_c2r", &[self_])?;
    let f = fft_c2r(
        "_fft_c2r",
        self_.sizes(),
        self_.dtype(),
        dim,
        normalization,
        last_dim_size,
    )?;
    new_contiguous(&f.shape, f.dtype)
}
