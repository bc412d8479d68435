//! Real-input and real-output FFTs by complex transforms along each dim:
//! `_fft_r2c` transforms the real input as complex and keeps the non-redundant
//! half of the last dim when one-sided; `_fft_c2r` runs inverse transforms over
//! the leading dims, rebuilds the Hermitian last dim and keeps the real part.
//! The lines of one dim run in parallel, a block of lines per task.
//!
//! Owns: the line loops and the Hermitian extension. Must not: implement the FFT
//! itself (rustfft plans it, any length) or restate the checks and shapes
//! (`opal::rules::spectral`).

use crate::copy::to_vec_as;
use crate::parallel::fork_chunks_mut;
use opal::rules::spectral::Fft;
use opal::{Complex as OpalComplex, DType, Element, Result, Tensor};
use rustfft::num_complex::Complex;
use rustfft::{FftDirection, FftNum, FftPlanner};

/// Transforms every line of `buf` (row-major `sizes`) along `dim`.
fn along<T: FftNum + Default>(
    buf: &mut [Complex<T>],
    sizes: &[usize],
    dim: usize,
    dir: FftDirection,
) {
    let n = sizes[dim];
    let inner: usize = sizes[dim + 1..].iter().product();
    let block = n * inner;
    if block == 0 || buf.is_empty() || n == 1 {
        return;
    }
    let plan = FftPlanner::<T>::new().plan_fft(n, dir);
    fork_chunks_mut(buf, block, |_, chunk| {
        let mut line = vec![Complex::default(); n];
        let mut scratch = vec![Complex::default(); plan.get_inplace_scratch_len()];
        for i in 0..inner {
            for (k, v) in line.iter_mut().enumerate() {
                *v = chunk[k * inner + i];
            }
            plan.process_with_scratch(&mut line, &mut scratch);
            for (k, v) in line.iter().enumerate() {
                chunk[k * inner + i] = *v;
            }
        }
    });
}

/// Element type pairs: the real type and Opal's complex of it.
trait Real: FftNum + crate::dtype_dispatch::Elem {
    type C: Element;
    fn pack(c: Complex<Self>) -> Self::C;
    fn unpack(c: Self::C) -> Complex<Self>;
}

impl Real for f32 {
    type C = OpalComplex<f32>;
    fn pack(c: Complex<f32>) -> Self::C {
        OpalComplex::new(c.re, c.im)
    }
    fn unpack(c: Self::C) -> Complex<f32> {
        Complex::new(c.re, c.im)
    }
}

impl Real for f64 {
    type C = OpalComplex<f64>;
    fn pack(c: Complex<f64>) -> Self::C {
        OpalComplex::new(c.re, c.im)
    }
    fn unpack(c: Self::C) -> Complex<f64> {
        Complex::new(c.re, c.im)
    }
}

fn usizes(s: &[i64]) -> Vec<usize> {
    s.iter().map(|&d| d as usize).collect()
}

/// Keeps the first `keep` entries of dim `dim` of row-major `sizes`.
fn truncate_dim<T: Copy>(buf: &[T], sizes: &[usize], dim: usize, keep: usize) -> Vec<T> {
    let n = sizes[dim];
    let inner: usize = sizes[dim + 1..].iter().product();
    let mut out = Vec::with_capacity(buf.len() / n.max(1) * keep);
    for block in buf.chunks_exact((n * inner).max(1)) {
        out.extend_from_slice(&block[..keep * inner]);
    }
    out
}

fn r2c<T: Real>(x: &Tensor, f: &Fft, onesided: bool) -> Result<Tensor> {
    let sizes = usizes(x.sizes());
    let mut buf: Vec<Complex<T>> = to_vec_as::<T>(x)?
        .into_iter()
        .map(|v| Complex::new(v, T::default()))
        .collect();
    for &d in &f.dims {
        along(&mut buf, &sizes, d, FftDirection::Forward);
    }
    let last = f.dims[f.dims.len() - 1];
    if onesided {
        buf = truncate_dim(&buf, &sizes, last, f.shape[last] as usize);
    }
    let s = <T as crate::dtype_dispatch::Elem>::from_f64(1.0 / f.scale);
    let out: Vec<T::C> = buf.into_iter().map(|c| T::pack(c * s)).collect();
    Tensor::from_vec(out, &f.shape)
}

fn c2r<T: Real>(x: &Tensor, f: &Fft) -> Result<Tensor> {
    let half_sizes = usizes(x.sizes());
    let mut half: Vec<Complex<T>> = x.to_vec::<T::C>()?.into_iter().map(T::unpack).collect();
    let (lead, last) = f.dims.split_at(f.dims.len() - 1);
    let last = last[0];
    for &d in lead {
        along(&mut half, &half_sizes, d, FftDirection::Inverse);
    }
    // The full last dim: bins past the half are the conjugates of their mirrors.
    let sizes = usizes(&f.shape);
    let (m, n) = (half_sizes[last], sizes[last]);
    let kept = n / 2 + 1;
    let inner: usize = sizes[last + 1..].iter().product();
    let mut buf = vec![Complex::<T>::default(); sizes.iter().product()];
    if !buf.is_empty() {
        for (src, dst) in half
            .chunks_exact(m * inner)
            .zip(buf.chunks_exact_mut(n * inner))
        {
            for k in 0..n {
                for i in 0..inner {
                    dst[k * inner + i] = if k < kept {
                        src[k * inner + i]
                    } else {
                        src[(n - k) * inner + i].conj()
                    };
                }
            }
        }
    }
    along(&mut buf, &sizes, last, FftDirection::Inverse);
    let s = <T as crate::dtype_dispatch::Elem>::from_f64(1.0 / f.scale);
    let out: Vec<T> = buf.into_iter().map(|c| c.re * s).collect();
    Tensor::from_vec(out, &f.shape)
}

/// Real-to-complex FFT over `dim`, normalized by `normalization`, one-sided in
/// the last of `dim` if asked (arguments checked by
/// [`opal::rules::spectral::_fft_r2c`]).
pub fn _fft_r2c(f: Fft) -> Result<Tensor> {
    match f.input.dtype() {
        DType::F64 => r2c::<f64>(f.input, &f, f.onesided),
        _ => r2c::<f32>(f.input, &f, f.onesided),
    }
}

/// Complex-to-real (inverse) FFT over `dim` of a one-sided Hermitian signal whose
/// last transformed dim has `last_dim_size` points (arguments checked by
/// [`opal::rules::spectral::_fft_c2r`]).
pub fn _fft_c2r(f: Fft) -> Result<Tensor> {
    match f.input.dtype() {
        DType::C128 => c2r::<f64>(f.input, &f),
        _ => c2r::<f32>(f.input, &f),
    }
}
