//! Output preparation for CPU kernels: allocating results, PyTorch's out= rules
//! (resize a wrongly sized `out`, warn when it had elements, reject a dtype that
//! cannot hold the result) and in-place shape checks.
//!
//! Owns: `can_cast`, `resize_out`, `check_out_dtype`, `write_result`, `new_result`,
//! `Dest`. Must not: compute anything element-wise itself.
//!
//! # For kernel authors
//!
//! A kernel computes into a tensor of its *result* dtype and shape; `write_result`
//! supplies that tensor for the three calling forms ([`Dest::New`] functional,
//! [`Dest::Out`] for `out=`, [`Dest::InPlace`] for `op_`) and handles a destination
//! whose dtype differs from the result dtype by computing into a temporary and
//! casting it across with [`crate::copy::copy_into`].

use crate::copy::copy_into;
use opal::{DType, OpalError, Result, Tensor};
use std::collections::HashSet;
use std::sync::Mutex;

/// Where an op's result goes.
#[derive(Clone, Copy)]
pub enum Dest<'a> {
    /// Functional form: allocate a new tensor.
    New,
    /// `out=` form: resize `out` if needed (PyTorch's rules) and write into it.
    Out(&'a Tensor),
    /// In-place form: the tensor must already have the result's shape.
    InPlace(&'a Tensor),
}

/// Errors unless a result of dtype `result` may be stored into `out_dtype`.
pub fn check_out_dtype(result: DType, out_dtype: DType, op: &str) -> Result<()> {
    if opal::rules::can_cast(result, out_dtype) {
        Ok(())
    } else {
        Err(OpalError::msg(format!(
            "{op}: result type {result} can't be cast to the desired output type {out_dtype}"
        )))
    }
}

/// Ops that already warned about resizing a non-empty out= tensor (warn once per op,
/// as PyTorch does).
static WARNED: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Resizes `out` to `shape` when it differs. Resizing a tensor that had elements is
/// allowed but deprecated in PyTorch, which warns; we warn once per op through
/// [`opal::warning::warn`] (stderr, or a `tracing` event with opal's `tracing`
/// feature).
pub fn resize_out(out: &Tensor, shape: &[i64], op: &str) -> Result<()> {
    if out.sizes() == shape {
        return Ok(());
    }
    if out.numel() != 0 {
        if let Ok(mut g) = WARNED.lock() {
            if g.get_or_insert_with(HashSet::new).insert(op.to_string()) {
                opal::warning::warn(
                    op,
                    &format!(
                        "an output with one or more elements was resized since it had shape {:?}, which does not match the required output shape {shape:?}",
                        out.sizes()
                    ),
                );
            }
        }
    }
    out.resize_(shape)
}

/// Allocates a zero-filled contiguous CPU tensor.
pub fn empty(shape: &[i64], dtype: DType) -> Result<Tensor> {
    Tensor::empty(shape, dtype, opal::Device::cpu())
}

/// Allocates a contiguous CPU tensor with unspecified contents, for callers that
/// overwrite every element: large ones are recycled blocks (see [`crate::alloc`]),
/// which saves the zeroing and page faults of a fresh allocation.
pub fn empty_uninit(shape: &[i64], dtype: DType) -> Result<Tensor> {
    crate::alloc::empty_cpu(shape, dtype)
}

/// A fresh tensor of `shape` and `dtype`, written by `kernel` (which must write every
/// element: the memory may be recycled, see [`empty_uninit`]).
///
/// Crate-private, like [`write_result`]: the result is filled under
/// [`Tensor::fill_unshared`], whose contract (no other thread touches the tensor
/// meanwhile) holds for this crate's kernels but could not be promised for any
/// closure a caller outside might pass.
#[inline]
pub(crate) fn new_result(
    shape: &[i64],
    dtype: DType,
    kernel: impl FnOnce(&Tensor) -> Result<()>,
) -> Result<Tensor> {
    let mut t = empty_uninit(shape, dtype)?;
    // SAFETY: CPU kernels touch the tensors they are given from the calling thread
    // only; their helper threads get slices or raw pointers (`iter::par_ranges`,
    // `parallel::fork_chunks_mut`), never a tensor.
    unsafe { t.fill_unshared(kernel) }?;
    Ok(t)
}

/// Produces the result of an op of result dtype `dtype` and `shape` into `dest`:
/// `kernel` is called with a tensor of exactly that dtype and shape to fill (the
/// destination itself when its dtype matches, else a temporary that is then cast
/// into the destination). Returns the destination tensor. A [`Dest::New`] result is
/// made by [`new_result`].
pub(crate) fn write_result(
    dest: Dest<'_>,
    shape: &[i64],
    dtype: DType,
    op: &str,
    kernel: impl FnOnce(&Tensor) -> Result<()>,
) -> Result<Tensor> {
    let target = match dest {
        Dest::New => return new_result(shape, dtype, kernel),
        Dest::Out(o) => {
            check_out_dtype(dtype, o.dtype(), op)?;
            resize_out(o, shape, op)?;
            o
        }
        Dest::InPlace(s) => {
            if s.sizes() != shape {
                return Err(OpalError::shape(format!(
                    "{op}: output with shape {:?} doesn't match the broadcast shape {shape:?}",
                    s.sizes()
                )));
            }
            check_out_dtype(dtype, s.dtype(), op)?;
            s
        }
    };
    if target.dtype() == dtype {
        kernel(target)?;
    } else {
        let tmp = empty_uninit(shape, dtype)?;
        kernel(&tmp)?;
        copy_into(target, &tmp, op)?;
    }
    Ok(target.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cast_rules() {
        let e = check_out_dtype(DType::F32, DType::I64, "add.out").unwrap_err();
        assert!(e.to_string().contains("add.out"));
    }
}
