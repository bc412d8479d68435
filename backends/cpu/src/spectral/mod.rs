//! Spectral kernels: the real FFTs (`_fft_r2c`, `_fft_c2r`) over any dims and
//! lengths.
//!
//! Owns: the ops in [`fft`]. Must not: implement an FFT algorithm (rustfft does)
//! or restate the shape rules (`opal::rules::spectral`).

pub mod fft;

pub use fft::*;
