//! The CPU backend's copy rule for the `out=` operators that `native_functions.yaml`
//! derives with `autogen:` (`relu.out`, `sum.out`, `convolution.out`, ...): the
//! generated trait runs the functional kernel and hands its results to
//! [`copy_outs`], named by `out_copy:` in `backend.yaml`. `native_batch_norm.out`,
//! listed there without a kernel too, is derived the same way.
//!
//! PyTorch generates these as "run the functional op, resize `out` to the result
//! (`resize_output`: warn when a non-empty `out` changes shape), copy the result
//! into it". Its copy helper for generated out= kernels demands that `out` already
//! has the result's dtype and device (unlike structured out= kernels, which cast
//! whenever `canCast` allows): the copy never converts. Ops whose functional form
//! takes `dtype`/`device` options (`_to_copy`, `zeros_like`, `ones_like`,
//! `full_like`) take them from `out`, so there any dtype of `out` is accepted.
//! [`copy_out`] is that rule; `native_dropout.out` and `native_dropout_backward.out`
//! (autogen ops too, in `nn::dropout`) use it as well, and `add.Scalar_out` /
//! `mul.Scalar_out` (`elementwise::binary`) apply [`check_out`] before computing
//! straight into `out`.
//!
//! Owns: the rule ([`copy_out`], [`copy_outs`], [`check_out`]). Must not: compute
//! anything itself (the functional kernels do).

use crate::copy::copy_into;
use crate::out::resize_out;
use opal::{DType, OpalError, Result, Tensor};

/// Writes the functional `result` of `op` into its `out=` tensor: `out` must pass
/// [`check_out`] (checked before anything is changed), is resized to `result`'s
/// shape by PyTorch's out= rule and receives a copy.
pub fn copy_out(op: &str, result: &Tensor, out: &Tensor) -> Result<Tensor> {
    check_out(op, result.dtype(), out)?;
    write_checked(op, result, out)?;
    Ok(out.clone())
}

/// Resizes and fills an `out` that already passed [`check_out`].
fn write_checked(op: &str, result: &Tensor, out: &Tensor) -> Result<()> {
    resize_out(out, result.sizes(), op)?;
    copy_into(out, result, op)
}

/// The autogen rule alone: `out` is a CPU tensor of exactly the result's dtype.
pub fn check_out(op: &str, result: DType, out: &Tensor) -> Result<()> {
    if !out.device().is_cpu() {
        return Err(OpalError::msg(format!(
            "{op}: expected out tensor to have device cpu, but got {:?} instead",
            out.device()
        )));
    }
    if out.dtype() != result {
        return Err(OpalError::msg(format!(
            "{op}: expected out tensor to have dtype {result}, but got {} instead",
            out.dtype()
        )));
    }
    Ok(())
}

/// [`copy_out`] for several `(result, out)` pairs of one op: every `out` is checked
/// before any is written, so that an error leaves them all untouched.
pub fn copy_outs(op: &str, pairs: &[(&Tensor, &Tensor)]) -> Result<()> {
    for (result, out) in pairs {
        check_out(op, result.dtype(), out)?;
    }
    for (result, out) in pairs {
        write_checked(op, result, out)?;
    }
    Ok(())
}
