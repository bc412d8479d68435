//! The small pieces every generated autograd kernel shares: whether to record
//! ([`should_record`]), the in-place rules ([`check_inplace`], [`mark_viewed`]),
//! the value of `self` before an in-place write ([`original`]), and reading and
//! writing the gradient lists a node gets and returns ([`grad_at`], [`push_list`]).
//! Hand-written kernels that record nodes (custom functions, plugins' and
//! backends' autograd kernels) use them too.
//!
//! Owns: these pieces. Must not: know any derivative formula (those are in
//! `crate::derivatives`).

use super::grad_mode::is_grad_enabled;
use crate::error::{OpalError, Result};
use crate::ops;
use crate::Tensor;

/// Whether an op with these tensor inputs must record a node: grad mode is on and
/// one of them requires grad.
#[inline]
pub fn should_record(inputs: &[&Tensor]) -> bool {
    is_grad_enabled() && inputs.iter().any(|t| t.requires_grad())
}

/// The gradient of output `i` (an undefined tensor when it got none).
pub fn grad_at(grads: &[Option<Tensor>], i: usize) -> Tensor {
    grads
        .get(i)
        .and_then(Clone::clone)
        .unwrap_or_else(Tensor::undefined)
}

/// The in-place rules of generated in-place kernels, checked before the write:
/// a leaf that requires grad is refused (see [`super::check_inplace`]); so is a
/// view, or a tensor a recorded view was taken of, since the other tensors sharing
/// its storage would change behind their recorded history (Opal does not rebase
/// views' history the way PyTorch's ADInplaceOrView does; it refuses instead of
/// giving a wrong gradient).
pub fn check_inplace(t: &Tensor, op: &str) -> Result<()> {
    super::check_inplace(t, op)?;
    if !t.owns_storage() {
        return Err(OpalError::msg(format!(
            "{op}: in-place update of a view (or of a tensor sharing another's storage) \
             while autograd records it is not supported: its base would change without \
             history; use the out-of-place op, or clone() first"
        )));
    }
    if t.autograd_meta()
        .is_some_and(|m| m.viewed.load(std::sync::atomic::Ordering::Acquire))
    {
        return Err(OpalError::msg(format!(
            "{op}: in-place update of a tensor that has views recorded by autograd is not \
             supported: the views would change without history; use the out-of-place op"
        )));
    }
    Ok(())
}

/// Marks `t` as having a view that autograd recorded (see [`check_inplace`]).
pub fn mark_viewed(t: &Tensor) {
    t.autograd_meta_or_init()
        .viewed
        .store(true, std::sync::atomic::Ordering::Release);
}

/// A copy of `t`'s current value, for a formula of an in-place op that reads
/// `self` as it was before the write (made without recording).
pub fn original(t: &Tensor) -> Result<Tensor> {
    let _no_grad = super::NoGradGuard::new();
    ops::_to_copy::call(t, None, None, None, None, false, None)
}

/// Appends the gradients of a `Tensor[]` input (`count` slots).
pub fn push_list(out: &mut Vec<Option<Tensor>>, grads: Option<Vec<Tensor>>, count: usize) {
    match grads {
        Some(gs) => {
            let n = gs.len();
            out.extend(gs.into_iter().map(|g| g.is_defined().then_some(g)));
            out.extend((n..count).map(|_| None));
        }
        None => out.extend((0..count).map(|_| None)),
    }
}
