//! Per-tensor autograd state and the `Tensor` methods over it.
//!
//! Owns: `requires_grad`, `.grad`, `grad_fn` and their rules (only floating and
//! complex leaves may require grad; only leaves may change it). Must not: run
//! backward (that is `engine`).

use super::node::{Edge, Node};
use crate::error::{OpalError, Result};
use crate::tensor::{autograd_keys_for_device, AutogradState};
use crate::Tensor;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// What autograd knows of one tensor.
#[derive(Default)]
pub(crate) struct AutogradMeta {
    /// A leaf whose gradient is wanted.
    requires_grad: AtomicBool,
    /// The accumulated gradient of a leaf.
    grad: Mutex<Option<Tensor>>,
    /// The node that produced this tensor, with the index of this tensor among the
    /// node's forward outputs. Replaced when an in-place op rewrites the tensor.
    grad_fn: Mutex<Option<(Arc<dyn Node>, usize)>>,
    /// Handles of this tensor held by its own `grad_fn`'s saved outputs (see
    /// [`SavedTensor::output`](super::SavedTensor::output)).
    pub(super) saved_by_grad_fn: Arc<AtomicUsize>,
    /// A recorded view op made a view of this tensor: writing it in place would
    /// change the view's value behind the view's history.
    pub(super) viewed: AtomicBool,
}

impl AutogradState for AutogradMeta {
    /// Called as a handle of `t` drops: when the handles left are only those its
    /// own `grad_fn` saved, nothing can use `t` in a new op any more, so its link to
    /// the node is cut, breaking the `t -> grad_fn -> saved t` cycle. (Consumers of
    /// `t` already recorded hold the node through their edges.)
    #[cold]
    #[inline(never)]
    fn on_handle_drop(&self, t: &Tensor) {
        let saved = self.saved_by_grad_fn.load(Ordering::Acquire);
        if saved != 0 && t.handle_count() <= saved + 1 {
            let node = lock(&self.grad_fn).take();
            drop(node);
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A poisoned lock only means another thread panicked while holding it; the data
/// (a handle) is still whole.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Tensor {
    /// The tensor's autograd state, if it was ever given one.
    #[inline]
    pub(crate) fn autograd_meta(&self) -> Option<&AutogradMeta> {
        self.autograd_state()?.as_any().downcast_ref()
    }

    /// The tensor's autograd state, made on first use.
    pub(crate) fn autograd_meta_or_init(&self) -> &AutogradMeta {
        let state = self.autograd_state_or_init(|| Box::<AutogradMeta>::default());
        match state.as_any().downcast_ref() {
            Some(m) => m,
            // `AutogradState` is crate-private and this is its one implementor.
            None => unreachable!("a tensor's autograd state is always an AutogradMeta"),
        }
    }

    /// True for a tensor that autograd tracks: a leaf that requires grad, or the
    /// result of an op recorded for backward.
    pub fn requires_grad(&self) -> bool {
        self.autograd_meta()
            .is_some_and(|m| m.requires_grad.load(Ordering::Acquire) || lock(&m.grad_fn).is_some())
    }

    /// Marks a leaf as requiring grad (or not): backward passes then accumulate its
    /// gradient into [`Tensor::grad`]. An `Err` for a tensor with a `grad_fn` (only
    /// leaves may change it) or, when `requires_grad`, a dtype that is neither
    /// floating nor complex.
    pub fn set_requires_grad(&self, requires_grad: bool) -> Result<&Tensor> {
        if !self.is_defined() {
            return Err(OpalError::msg("set_requires_grad: the tensor is undefined"));
        }
        if self.grad_fn().is_some() {
            return Err(OpalError::msg(format!(
                "set_requires_grad: you can only change requires_grad flags of leaf tensors \
                 (this one is the output of {}); use detach() to get a leaf",
                self.grad_fn().map_or("?".into(), |n| n.name().to_string())
            )));
        }
        if requires_grad && !(self.dtype().is_floating_point() || self.dtype().is_complex()) {
            return Err(OpalError::msg(format!(
                "set_requires_grad: only tensors of floating point and complex dtype can require \
                 gradients (this one is {})",
                self.dtype()
            )));
        }
        if requires_grad {
            self.join_autograd();
        }
        if let Some(m) = self.autograd_meta() {
            m.requires_grad.store(requires_grad, Ordering::Release);
        }
        Ok(self)
    }

    /// True unless the tensor was produced by a recorded op (PyTorch's `is_leaf`).
    pub fn is_leaf(&self) -> bool {
        self.grad_fn().is_none()
    }

    /// The backward node that produced this tensor, if any.
    pub fn grad_fn(&self) -> Option<Arc<dyn Node>> {
        self.autograd_meta()
            .and_then(|m| lock(&m.grad_fn).as_ref().map(|(n, _)| n.clone()))
    }

    /// The gradient accumulated into this leaf by backward passes (`None` before
    /// the first, or after [`Tensor::set_grad`] with `None`).
    pub fn grad(&self) -> Option<Tensor> {
        self.autograd_meta().and_then(|m| lock(&m.grad).clone())
    }

    /// Replaces the accumulated gradient (`None` clears it, as `zero_grad` with
    /// `set_to_none` does).
    pub fn set_grad(&self, grad: Option<Tensor>) {
        *lock(&self.autograd_meta_or_init().grad) = grad;
    }

    /// A tensor sharing this one's data and geometry, outside autograd (no
    /// `grad_fn`, not requiring grad). In-place changes through either are seen by
    /// both, and counted by the shared version counter.
    pub fn detach(&self) -> Result<Tensor> {
        if !self.is_defined() {
            return Ok(Tensor::undefined());
        }
        self.as_strided(self.sizes(), self.strides(), self.storage_offset())
    }

    /// How many operator calls have written this tensor's storage (shared by its
    /// views): what saved tensors compare to detect in-place changes.
    pub fn version(&self) -> u64 {
        self.storage().version()
    }

    /// Runs backward from this tensor (a one-element loss): accumulates the
    /// gradients of the leaves it depends on into their `.grad`. The graph's saved
    /// tensors are freed; see [`super::backward`] to keep them or to pass a
    /// gradient.
    pub fn backward(&self) -> Result<()> {
        super::backward(
            std::slice::from_ref(self),
            &[],
            super::GradOptions::default(),
        )
    }

    /// The edge a gradient for this tensor flows along: its `grad_fn` (with output
    /// index), the tensor itself when it is a leaf that requires grad, or nothing.
    pub(crate) fn gradient_edge(&self) -> Edge {
        match self.autograd_meta() {
            Some(m) => {
                if let Some((n, i)) = lock(&m.grad_fn).as_ref() {
                    return Edge::to_node(n.clone(), *i, self);
                }
                if m.requires_grad.load(Ordering::Acquire) {
                    return Edge::to_leaf(self);
                }
                Edge::none()
            }
            None => Edge::none(),
        }
    }

    /// Makes `node` (output `index`) this tensor's `grad_fn`.
    pub(crate) fn set_grad_fn(&self, node: Arc<dyn Node>, index: usize) {
        self.join_autograd();
        *lock(&self.autograd_meta_or_init().grad_fn) = Some((node, index));
    }

    /// Adds `g` to this leaf's `.grad` (or sets it, the first time).
    pub(crate) fn accumulate_grad(&self, g: Tensor) -> Result<()> {
        let m = self.autograd_meta_or_init();
        let mut slot = lock(&m.grad);
        let _no_grad = super::NoGradGuard::new();
        // On an `Err` the previous gradient stays.
        *slot = Some(super::engine::sum(slot.clone(), g)?);
        Ok(())
    }

    /// Gives the tensor its device's autograd key, so its ops reach autograd.
    fn join_autograd(&self) {
        self.autograd_meta_or_init();
        self.add_keys(autograd_keys_for_device(self.device()));
    }
}
