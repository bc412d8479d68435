//! Batch-norm overloads that torch.export emits: `_native_batch_norm_legit`
//! (running statistics given, updated in training) and its `.no_stats` overload
//! (no running statistics), both `native_batch_norm` under another signature.
//!
//! Owns: the mapping of these overloads onto `native_batch_norm`. Must not: compute
//! statistics itself (the backend's `native_batch_norm` kernel does, and autograd
//! differentiates through it).

use crate::dispatch::DispatchKeySet;
use crate::error::Result;
use crate::ops;
use crate::Tensor;

/// `_native_batch_norm_legit`: `native_batch_norm` with the running statistics
/// present (training updates them in place, evaluation normalizes with them).
#[allow(clippy::too_many_arguments)]
pub(super) fn native_batch_norm_legit(
    _ks: DispatchKeySet,
    input: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    running_mean: &Tensor,
    running_var: &Tensor,
    training: bool,
    momentum: f64,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    ops::native_batch_norm(
        input,
        weight,
        bias,
        Some(running_mean),
        Some(running_var),
        training,
        momentum,
        eps,
    )
}

/// `_native_batch_norm_legit.no_stats`: `native_batch_norm` without running
/// statistics, so the batch's own statistics normalize it.
pub(super) fn native_batch_norm_legit_no_stats(
    _ks: DispatchKeySet,
    input: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    ops::native_batch_norm(input, weight, bias, None, None, training, momentum, eps)
}
