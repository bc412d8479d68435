//! Real FFTs (`_fft_r2c`, `_fft_c2r`): the argument checks and the result shapes
//! and dtypes, the same for every backend. [`_fft_r2c`] and [`_fft_c2r`] take the
//! schema's arguments and return an [`Fft`], from which the CPU kernels compute and
//! the Meta kernel shapes its result (`rule | kernel` in both backend YAMLs).
//!
//! Owns: these rules and their errors. Must not: allocate tensors, read tensor
//! data, or know any backend.

use crate::{DType, OpalError, Result, Tensor};

/// The checked transform: wrapped dims (the last one is the real / half one),
/// the result shape and dtype, and the normalization's divisor.
#[derive(Clone, Debug)]
pub struct Fft<'a> {
    /// The op's name, for errors.
    pub op: &'static str,
    /// The signal (`self`).
    pub input: &'a Tensor,
    /// `_fft_r2c`'s `onesided` (false for `_fft_c2r`).
    pub onesided: bool,
    /// Dims to transform, in the caller's order.
    pub dims: Vec<usize>,
    /// Result sizes.
    pub shape: Vec<i64>,
    /// Result dtype.
    pub dtype: DType,
    /// What every result element is divided by: 1, the square root of the
    /// transformed size, or the transformed size (`normalization` 0, 1, 2).
    pub scale: f64,
}

fn dims_of(op: &str, sizes: &[i64], dim: &[i64]) -> Result<Vec<usize>> {
    if dim.is_empty() {
        return Err(OpalError::msg(format!(
            "{op}: expected at least one dim to transform"
        )));
    }
    let mut out = Vec::with_capacity(dim.len());
    for &d in dim {
        let w = crate::tensor::wrap_dim(op, d, sizes.len())?;
        if out.contains(&w) {
            return Err(OpalError::msg(format!(
                "{op}: FFT dims must be unique, got {dim:?}"
            )));
        }
        out.push(w);
    }
    Ok(out)
}

fn scale(op: &str, normalization: i64, n: f64) -> Result<f64> {
    match normalization {
        0 => Ok(1.0),
        1 => Ok(n.sqrt()),
        2 => Ok(n),
        m => Err(OpalError::msg(format!(
            "{op}: normalization must be 0 (none), 1 (by root n) or 2 (by n), got {m}"
        ))),
    }
}

fn signal_size(op: &str, n: i64) -> Result<()> {
    if n < 1 {
        return Err(OpalError::msg(format!(
            "{op}: Invalid number of data points ({n}) specified"
        )));
    }
    Ok(())
}

/// `_fft_r2c(self, dim, normalization, onesided)`: f32 / f64 in, C64 / C128 out;
/// with `onesided` the last transformed dim keeps `n / 2 + 1` bins.
pub fn _fft_r2c<'a>(
    self_: &'a Tensor,
    dim: &[i64],
    normalization: i64,
    onesided: bool,
) -> Result<Fft<'a>> {
    let (op, sizes) = ("_fft_r2c", self_.sizes());
    let out_dtype = match self_.dtype() {
        DType::F32 => DType::C64,
        DType::F64 => DType::C128,
        d if d.is_floating_point() => {
            return Err(OpalError::msg(format!(
                "{op}: FFT doesn't support tensors of type: {d:?}"
            )))
        }
        d => {
            return Err(OpalError::msg(format!(
                "{op}: Only supports floating-point dtypes, but found: {d:?}"
            )))
        }
    };
    let dims = dims_of(op, sizes, dim)?;
    for &d in &dims {
        signal_size(op, sizes[d])?;
    }
    let n: i64 = dims.iter().map(|&d| sizes[d]).product();
    let mut shape = sizes.to_vec();
    if onesided {
        let last = dims[dims.len() - 1];
        shape[last] = sizes[last] / 2 + 1;
    }
    Ok(Fft {
        op,
        input: self_,
        onesided,
        scale: scale(op, normalization, n as f64)?,
        dims,
        shape,
        dtype: out_dtype,
    })
}

/// `_fft_c2r(self, dim, normalization, last_dim_size)`: C64 / C128 in (the last
/// transformed dim holding `last_dim_size / 2 + 1` bins of a Hermitian signal),
/// f32 / f64 out with `last_dim_size` points there. A last dim of all
/// `last_dim_size` bins is accepted too; its redundant half is not read.
pub fn _fft_c2r<'a>(
    self_: &'a Tensor,
    dim: &[i64],
    normalization: i64,
    last_dim_size: i64,
) -> Result<Fft<'a>> {
    let (op, sizes) = ("_fft_c2r", self_.sizes());
    let out_dtype = match self_.dtype() {
        DType::C64 => DType::F32,
        DType::C128 => DType::F64,
        d => {
            return Err(OpalError::msg(format!(
                "{op}: Only supports complex dtypes, but found: {d:?}"
            )))
        }
    };
    let dims = dims_of(op, sizes, dim)?;
    signal_size(op, last_dim_size)?;
    let last = dims[dims.len() - 1];
    // The half spectrum, or the whole one (whose redundant half is not read).
    if sizes[last] != last_dim_size / 2 + 1 && sizes[last] != last_dim_size {
        return Err(OpalError::shape(format!(
            "{op}: expected {} (or {last_dim_size}) bins in dim {last} for last_dim_size={last_dim_size}, got {}",
            last_dim_size / 2 + 1,
            sizes[last]
        )));
    }
    let mut shape = sizes.to_vec();
    shape[last] = last_dim_size;
    for &d in &dims {
        signal_size(op, shape[d])?;
    }
    let n: i64 = dims.iter().map(|&d| shape[d]).product();
    Ok(Fft {
        op,
        input: self_,
        onesided: false,
        scale: scale(op, normalization, n as f64)?,
        dims,
        shape,
        dtype: out_dtype,
    })
}
