//! Grad mode: whether operations of this thread record backward nodes.
//!
//! Owns: the per-thread flag and its guards. Must not: touch tensors.

use crate::dispatch::tls::{restore_excluded, update_excluded};
use crate::dispatch::{DispatchKey, DispatchKeySet};
use std::cell::Cell;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether operations on this thread record backward nodes (true unless a
/// [`NoGradGuard`] or a disabling [`GradModeGuard`] is alive).
#[inline]
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.try_with(Cell::get).unwrap_or(false)
}

/// Every `Autograd*` runtime key.
pub(crate) fn autograd_keys() -> DispatchKeySet {
    DispatchKey::Autograd.alias_expansion()
}

/// Sets grad mode for this thread while alive and restores the previous mode on
/// drop (also when unwinding). Disabled, it also keeps ops away from the autograd
/// kernels (their keys are excluded), so they run as if no input required grad.
#[must_use = "grad mode is restored when the guard drops"]
pub struct GradModeGuard {
    previous: bool,
    previous_excluded: u64,
    /// Not `Send`: it restores this thread's state.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl GradModeGuard {
    /// Enables (`true`) or disables (`false`) grad mode until the guard drops.
    pub fn new(enabled: bool) -> GradModeGuard {
        let previous = is_grad_enabled();
        let _ = GRAD_ENABLED.try_with(|g| g.set(enabled));
        let keys = autograd_keys().bits();
        let previous_excluded = update_excluded(|ex| if enabled { ex & !keys } else { ex | keys });
        GradModeGuard {
            previous,
            previous_excluded,
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        let _ = GRAD_ENABLED.try_with(|g| g.set(self.previous));
        restore_excluded(self.previous_excluded);
    }
}

/// Disables grad mode while alive (PyTorch's `torch.no_grad()`): results of ops get
/// no `grad_fn`, and in-place updates of leaves that require grad (an optimizer
/// step) are allowed.
#[must_use = "grad mode is restored when the guard drops"]
pub struct NoGradGuard(#[allow(dead_code, reason = "held for its Drop")] GradModeGuard);

impl NoGradGuard {
    /// Disables grad mode until the guard drops.
    pub fn new() -> NoGradGuard {
        NoGradGuard(GradModeGuard::new(false))
    }
}

impl Default for NoGradGuard {
    fn default() -> Self {
        NoGradGuard::new()
    }
}
