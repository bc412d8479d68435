//! Tensor <-> buffer plumbing shared by the part-2 kernels (linalg, nn, index,
//! shape, factory): borrowing contiguous inputs without copying, producing outputs
//! in a compute type, argument normalisation (`wrap_dim`) and error helpers.
//!
//! Owns: the [`Compute`] trait (f32 / f64, what float kernels compute in) and the
//! helpers below. Must not: contain op math, or bypass the runtime's borrow guards.

use crate::copy::{copy_into, to_vec_as};
use crate::dtype_dispatch::Elem;
use crate::linalg::gemm_core::GemmFloat;
use crate::nn::vecmath::RowMath;
use crate::out::{empty, empty_uninit};
use opal::{DType, OpalError, Result, Tensor};

/// A type float kernels compute in: f32 (also for f16 / bf16) or f64.
pub(crate) trait Compute: RowMath + GemmFloat + Elem + opal::Element {}
impl Compute for f32 {}
impl Compute for f64 {}

/// The compute dtype of a floating dtype (f64 stays f64, everything else floating
/// computes in f32), or an error naming `op` for non-float dtypes.
pub(crate) fn compute_dtype(d: DType, op: &str) -> Result<DType> {
    match d {
        DType::F64 => Ok(DType::F64),
        DType::F32 | DType::F16 | DType::BF16 => Ok(DType::F32),
        other => Err(err(
            op,
            format!("expected a floating point tensor, got {other}"),
        )),
    }
}

/// `f::<f64>(args)` for an f64 `dtype`, else `f::<f32>(args)`: for kernels whose
/// argument checks have already refused every dtype but f32 and f64 (or that
/// compute f16 / bf16 in f32).
macro_rules! by_f32_f64 {
    ($dt:expr, $f:ident ( $($a:expr),* )) => {
        match $dt {
            ::opal::DType::F64 => $f::<f64>($($a),*),
            _ => $f::<f32>($($a),*),
        }
    };
}
pub(crate) use by_f32_f64;

/// Error `"<op>: <text>"`.
pub(crate) fn err(op: &str, text: impl std::fmt::Display) -> OpalError {
    OpalError::msg(format!("{op}: {text}"))
}

/// Prefixes `op` to an error that does not name it yet (the runtime's allocation
/// failures, say, know the bytes but not the op): for `.map_err(in_op(OP))`.
pub(crate) fn in_op(op: &str) -> impl FnOnce(OpalError) -> OpalError + '_ {
    move |e| {
        let text = e.to_string();
        if text.starts_with(op) {
            e
        } else {
            err(op, text)
        }
    }
}

/// Refuses a shape whose bytes exceed what one allocation can be (`isize::MAX`),
/// naming `op` and the bytes, where the runtime would only say that the size
/// overflows. Smaller sizes are left to the allocator, which fails cleanly.
pub(crate) fn check_nbytes(shape: &[i64], dtype: DType, op: &str) -> Result<()> {
    let bytes = shape.iter().try_fold(dtype.size() as u128, |acc, &d| {
        acc.checked_mul(d.max(0) as u128)
    });
    match bytes {
        Some(b) if b <= isize::MAX as u128 => Ok(()),
        Some(b) => Err(err(op, format!("cannot allocate {b} bytes on cpu"))),
        None => Err(err(
            op,
            format!("cannot allocate more than 2^128 bytes on cpu (shape {shape:?})"),
        )),
    }
}

/// An empty `Vec` with room for `n` elements, or an error naming `op` and the bytes
/// when that much cannot be had (instead of the abort of `Vec::with_capacity`).
pub(crate) fn try_vec<T>(n: usize, op: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        let bytes = (n as u128) * std::mem::size_of::<T>() as u128;
        err(op, format!("cannot allocate {bytes} bytes on cpu"))
    })?;
    Ok(v)
}

/// `n` copies of `x` in a [`try_vec`].
pub(crate) fn try_vec_of<T: Clone>(n: usize, x: T, op: &str) -> Result<Vec<T>> {
    let mut v = try_vec(n, op)?;
    v.resize(n, x);
    Ok(v)
}

/// Shape error `"<op>: <text>"`.
pub(crate) fn shape_err(op: &str, text: impl std::fmt::Display) -> OpalError {
    OpalError::shape(format!("{op}: {text}"))
}

/// [`opal::tensor::wrap_dim`] with the argument order of the CPU kernels.
#[inline]
pub(crate) fn wrap_dim(dim: i64, ndim: usize, op: &str) -> Result<usize> {
    opal::tensor::wrap_dim(op, dim, ndim)
}

/// Element count of a shape; `usize::MAX` (which no allocation can serve) when the
/// product overflows.
pub(crate) fn numel(shape: &[i64]) -> usize {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d.max(0) as usize))
        .unwrap_or(usize::MAX)
}

/// Calls `f` with `t`'s elements as a row-major `&[C]`: borrowed in place when `t`
/// is contiguous of dtype `C`, else converted into a temporary.
pub(crate) fn with_slice<C: opal::Element, R>(
    t: &Tensor,
    f: impl FnOnce(&[C]) -> Result<R>,
) -> Result<R> {
    if t.dtype() == C::DTYPE && t.is_contiguous() {
        let guard = t.read::<C>()?;
        let n = guard.numel();
        let p = t.data_ptr::<C>()?;
        // SAFETY: `t` is contiguous with `n` elements of C from `p`, and `guard` holds
        // a shared borrow of its storage for as long as the slice lives.
        let s = unsafe { std::slice::from_raw_parts(p.cast_const(), n) };
        let r = f(s);
        drop(guard);
        return r;
    }
    let v = to_vec_as::<C>(t)?;
    f(&v)
}

/// A new contiguous tensor of `shape` and `dtype` whose elements `f` computes as
/// `C`, written in place when `dtype` is `C`, else computed in a buffer and cast.
pub(crate) fn make_output<C: opal::Element + Default>(
    shape: &[i64],
    dtype: DType,
    f: impl FnOnce(&mut [C]) -> Result<()>,
) -> Result<Tensor> {
    if dtype == C::DTYPE {
        // Every caller writes every element, so a recycled (uninitialised) block
        // saves the zero-fill and page faults of a fresh allocation.
        let out = empty_uninit(shape, dtype)?;
        {
            let guard = out.write::<C>()?;
            let n = guard.numel();
            let p = out.data_ptr::<C>()?;
            // SAFETY: `out` is new, contiguous, with `n` elements of C; `guard` holds
            // the exclusive borrow while the slice lives.
            let s = unsafe { std::slice::from_raw_parts_mut(p, n) };
            f(s)?;
            drop(guard);
        }
        return Ok(out);
    }
    let mut buf = try_vec_of(numel(shape), C::default(), "make_output")?;
    f(&mut buf)?;
    let tmp = Tensor::from_vec(buf, shape)?;
    let out = empty(shape, dtype)?;
    copy_into(&out, &tmp, "make_output")?;
    Ok(out)
}

/// Writes `src` (a result of the same shape) into the out= tensor `out`, resizing
/// it by PyTorch's rules and casting when `out`'s dtype allows it.
pub(crate) fn write_out(src: &Tensor, out: &Tensor, op: &str) -> Result<Tensor> {
    crate::out::check_out_dtype(src.dtype(), out.dtype(), op)?;
    crate::out::resize_out(out, src.sizes(), op)?;
    copy_into(out, src, op)?;
    Ok(out.clone())
}
