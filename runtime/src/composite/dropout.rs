//! Dropout composites: `dropout` and `dropout_`, written over `native_dropout`
//! (whose backend kernel draws the mask from its device's default generator), so
//! they run on every backend that has `native_dropout` or falls back to the CPU.
//!
//! As in PyTorch, both return their input itself when nothing is dropped (not
//! training, `p = 0`, or an empty tensor); `p` outside `[0, 1]` is an error even
//! then. `dropout_` zeroes the dropped elements of `self` and scales the kept ones by
//! `1 / (1 - p)` in place.
//!
//! Owns: these two kernels. Must not: draw random numbers or touch tensor data
//! itself (the operators do).

use crate::dispatch::DispatchKeySet;
use crate::error::{OpalError, Result};
use crate::ops;
use crate::{Scalar, Tensor};

/// Rejects `p` outside `[0, 1]` (and NaN); true when the call drops anything.
fn drops(op: &str, input: &Tensor, p: f64, train: bool) -> Result<bool> {
    if !(0.0..=1.0).contains(&p) {
        return Err(OpalError::msg(format!(
            "{op}: dropout probability has to be between 0 and 1, but got {p}"
        )));
    }
    Ok(train && p > 0.0 && input.numel() > 0)
}

/// `dropout`: `native_dropout`'s output when training, else `input` itself.
pub(super) fn dropout(_ks: DispatchKeySet, input: &Tensor, p: f64, train: bool) -> Result<Tensor> {
    if !drops("dropout", input, p, train)? {
        return Ok(input.clone());
    }
    Ok(ops::native_dropout(input, p, Some(true))?.0)
}

/// `dropout_`: `self` with the dropped elements zeroed and the others scaled.
pub(super) fn dropout_(_ks: DispatchKeySet, self_: &Tensor, p: f64, train: bool) -> Result<Tensor> {
    if !drops("dropout_", self_, p, train)? {
        return Ok(self_.clone());
    }
    let (_, mask) = ops::native_dropout(self_, p, Some(true))?;
    ops::masked_fill_scalar_(self_, &ops::logical_not(&mask)?, &Scalar::Float(0.0))?;
    if p < 1.0 {
        ops::mul_scalar_(self_, &Scalar::Float(1.0 / (1.0 - p)))?;
    }
    Ok(self_.clone())
}
