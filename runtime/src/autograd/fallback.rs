//! The autograd fallback: what an operator with no autograd kernel does at the
//! autograd keys.
//!
//! An op without a derivative (no `derivatives.yaml` entry, no composite
//! decomposition) runs below autograd as before; but when grad mode is on, one of
//! its tensor arguments requires grad and it returns a floating-point tensor, its
//! result would silently carry no history — a wrong gradient later. That call is an
//! `Err` instead, naming the op, the key, the device and what to do. Results that
//! cannot carry a gradient (integer and bool tensors, non-tensors) pass.
//!
//! Owns: the fallback kernel and its registration. Must not: differentiate anything.

use super::grad_mode::is_grad_enabled;
use crate::dispatch::{DispatchKey, DispatchKeySet, Dispatcher, KernelFunction, OperatorHandle};
use crate::error::{OpalError, Result};
use crate::{IValue, Stack, Tensor};

fn any_tensor(v: &IValue, f: &dyn Fn(&Tensor) -> bool) -> bool {
    match v {
        IValue::Tensor(t) => t.is_defined() && f(t),
        IValue::TensorList(ts) => ts.iter().any(|t| t.is_defined() && f(t)),
        IValue::OptionalTensorList(ts) => ts.iter().flatten().any(|t| t.is_defined() && f(t)),
        _ => false,
    }
}

fn fallback(op: &OperatorHandle, ks: DispatchKeySet, stack: &mut Stack) -> Result<()> {
    let key = ks.highest();
    let needs = is_grad_enabled() && stack.iter().any(|v| any_tensor(v, &Tensor::requires_grad));
    let device = stack.iter().find_map(|v| match v {
        IValue::Tensor(t) if t.is_defined() => Some(t.device()),
        _ => None,
    });
    op.redispatch_boxed(ks.below(DispatchKey::AutogradOther), stack)?;
    if needs
        && stack
            .iter()
            .any(|v| any_tensor(v, &|t: &Tensor| t.dtype().is_floating_point()))
    {
        let key = key.map_or_else(|| "an autograd key".to_string(), |k| k.to_string());
        let device = device.map_or_else(|| "?".to_string(), |d| d.to_string());
        return Err(OpalError::msg(format!(
            "{}: no derivative formula for this operator (dispatch key {key}, device {device}): \
             an input requires grad and the result is floating point, so its gradient would be \
             lost; add an entry to derivatives.yaml, or run it under NoGradGuard / on detach()ed \
             inputs",
            op.name()
        )));
    }
    Ok(())
}

/// Registers the fallback for every autograd runtime key of `d`, for the life of
/// the process.
pub(crate) fn register(d: &Dispatcher) {
    for &k in DispatchKey::RUNTIME.iter().filter(|k| k.is_autograd()) {
        if let Ok(h) = d.register_fallback(k, KernelFunction::from_boxed_fn(fallback)) {
            h.leak();
        }
    }
}
