//! Meta kernel of the real FFTs (`_fft_r2c`, `_fft_c2r`), from the arguments
//! `opal::rules::spectral` checked (`rule | kernel` in `backend.yaml`, as in the
//! CPU backend's).
//!
//! Owns: nothing but the allocation. Must not: check an argument or compute a
//! shape (the rules do).

use super::{check_inputs, new_contiguous};
use opal::rules::spectral::Fft;
use opal::{Result, Tensor};

/// `_fft_r2c` (complex, the last transformed dim halved when one-sided) or
/// `_fft_c2r` (real, `last_dim_size` points in the last transformed dim).
pub fn fft(f: Fft) -> Result<Tensor> {
    check_inputs(f.op, &[f.input])?;
    new_contiguous(&f.shape, f.dtype)
}
