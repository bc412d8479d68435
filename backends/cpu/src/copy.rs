//! Strided copies between any layouts and dtypes: the one routine every
//! "materialise this view" or "cast this tensor" need goes through.
//!
//! Owns: [`copy_into`] (broadcasting, casting copy), [`contiguous`], [`to_dtype`].
//! Must not: decide output shapes for ops (callers do).

use crate::dispatch_all;
use crate::dtype_dispatch::Elem;
use crate::iter::map1;
use crate::out::empty_uninit as empty;
use opal::OpalError;
use opal::{DType, Result, Tensor};

/// Copies `src` into `dst`, broadcasting `src` to `dst`'s shape and converting the
/// dtype with PyTorch's cast semantics (floats to ints truncate, anything to bool
/// tests for non-zero). Any strides on either side.
pub fn copy_into(dst: &Tensor, src: &Tensor, op: &str) -> Result<()> {
    if dst.dtype() == src.dtype() {
        return dispatch_all!(dst.dtype(), op, |T| map1::<T, T>(dst, src, op, |x| x));
    }
    dispatch_all!(dst.dtype(), op, |D| {
        dispatch_all!(src.dtype(), op, |S| map1::<D, S>(dst, src, op, |x| x
            .cast::<D>()))
    })
}

/// `t` itself when contiguous, else a contiguous copy.
pub fn contiguous(t: &Tensor) -> Result<Tensor> {
    if t.is_contiguous() {
        return Ok(t.clone());
    }
    let out = empty(t.sizes(), t.dtype())?;
    copy_into(&out, t, "contiguous")?;
    Ok(out)
}

/// `t` itself when it already has `dtype`, else a contiguous converted copy.
pub fn to_dtype(t: &Tensor, dtype: DType) -> Result<Tensor> {
    if t.dtype() == dtype {
        return Ok(t.clone());
    }
    if dtype.is_complex() || t.dtype().is_complex() {
        return Err(OpalError::not_implemented("to_dtype(complex)", "CPU"));
    }
    let out = empty(t.sizes(), dtype)?;
    copy_into(&out, t, "to_dtype")?;
    Ok(out)
}

/// Reads a tensor's elements in logical (row-major) order as `T`, converting.
pub fn to_vec_as<T: Elem>(t: &Tensor) -> Result<Vec<T>> {
    let c = contiguous(&to_dtype(t, T::DTYPE)?)?;
    // `c` may be `t` itself: read it under a shared borrow, like any input.
    let acc = opal::tensor::KernelAccess::new(&[&c], &[])?;
    let p = acc.read_ptr::<T>(&c)?;
    let n = c.numel() as usize;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        OpalError::msg(format!(
            "to_vec_as: cannot allocate {} bytes for {n} elements",
            n.saturating_mul(std::mem::size_of::<T>())
        ))
    })?;
    // SAFETY: `c` is contiguous with `n` elements of type T starting at `p`, and
    // `acc` holds a shared borrow of its storage while we read.
    v.extend_from_slice(unsafe { std::slice::from_raw_parts(p, n) });
    Ok(v)
}
