//! Backward nodes, the edges between them, and saved tensors.
//!
//! Owns: the [`Node`] interface the engine runs, [`Edge`] (where a gradient goes,
//! with the shape, dtype and device it must have there) and [`SavedTensor`]
//! (a tensor kept for backward, checked against in-place changes). Must not: order
//! or run nodes (that is `engine`).

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{OpalError, Result};
use crate::Tensor;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// One backward step: the gradients of an operation's forward outputs in, the
/// gradients of its forward inputs out (one per [`Node::next_edges`] entry).
pub trait Node: Send + Sync {
    /// The node's name for messages (`AddBackward0`-style, or the op's name).
    fn name(&self) -> &str;
    /// How many forward outputs the node has (gradients it receives).
    fn num_outputs(&self) -> usize;
    /// Where the gradient of each forward input goes.
    fn next_edges(&self) -> &[Edge];
    /// Computes the gradients of the forward inputs from `grads`, the gradients of
    /// the forward outputs (`None`: that output got no gradient, i.e. zero). Returns
    /// one entry per next edge (`None`: no gradient for that input).
    fn apply(&self, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>>;
    /// Frees what the node saved for backward (after a pass without
    /// `retain_graph`); a later [`Node::apply`] is then an `Err`.
    fn release_saved(&self) {}
}

/// The shape, dtype and device a gradient must have where an edge leads.
#[derive(Clone, Debug, PartialEq)]
pub struct InputMeta {
    /// Sizes of the forward input.
    pub sizes: Vec<i64>,
    /// Its dtype.
    pub dtype: DType,
    /// Its device.
    pub device: Device,
}

impl InputMeta {
    /// The metadata of `t`.
    pub fn of(t: &Tensor) -> InputMeta {
        InputMeta {
            sizes: t.sizes().to_vec(),
            dtype: t.dtype(),
            device: t.device(),
        }
    }
}

pub(crate) enum EdgeTarget {
    /// The input does not take part in autograd: its gradient is dropped.
    None,
    /// A leaf that requires grad: its gradient is accumulated into `.grad`.
    Leaf(Tensor),
    /// Input `index` of another node (the node's forward output `index`).
    Node(Arc<dyn Node>, usize),
}

/// Where the gradient of one forward input goes.
pub struct Edge {
    pub(crate) target: EdgeTarget,
    /// What the gradient must look like there (`None` for [`Edge::none`]).
    pub(crate) meta: Option<InputMeta>,
}

impl Edge {
    /// The edge of `t`: its `grad_fn`, itself when it is a leaf that requires grad,
    /// or nowhere.
    pub fn of(t: &Tensor) -> Edge {
        t.gradient_edge()
    }

    pub(crate) fn none() -> Edge {
        Edge {
            target: EdgeTarget::None,
            meta: None,
        }
    }

    pub(crate) fn to_leaf(t: &Tensor) -> Edge {
        Edge {
            target: EdgeTarget::Leaf(t.clone()),
            meta: Some(InputMeta::of(t)),
        }
    }

    pub(crate) fn to_node(n: Arc<dyn Node>, index: usize, t: &Tensor) -> Edge {
        Edge {
            target: EdgeTarget::Node(n, index),
            meta: Some(InputMeta::of(t)),
        }
    }

    /// True when a gradient along this edge is used.
    pub fn is_used(&self) -> bool {
        !matches!(self.target, EdgeTarget::None)
    }
}

/// A tensor saved for backward, with its storage's version at save time.
pub struct SavedTensor {
    /// `None` once released.
    tensor: Mutex<Option<Tensor>>,
    /// For a saved output whose view keeps the output's block alive: the output's
    /// count of such handles, decremented when this one goes.
    counted_in: Option<Arc<AtomicUsize>>,
    version: u64,
    /// The node's and the argument's names, for the error message.
    node: &'static str,
    name: &'static str,
}

impl SavedTensor {
    /// Saves an input of the op (kept as it is).
    pub fn input(t: &Tensor, node: &'static str, name: &'static str) -> SavedTensor {
        SavedTensor::new(t.clone(), t.version(), node, name)
    }

    /// Saves an output of the op. Kept detached: the output's `grad_fn` is this
    /// node, and a node holding its own output would never be freed.
    pub fn output(t: &Tensor, node: &'static str, name: &'static str) -> Result<SavedTensor> {
        let mut saved = SavedTensor::new(t.detach()?, t.version(), node, name);
        if t.owns_storage() {
            // The detached view holds `t`'s own block (its bytes live there).
            let count = t.autograd_meta_or_init().saved_by_grad_fn.clone();
            count.fetch_add(1, Ordering::AcqRel);
            saved.counted_in = Some(count);
        }
        Ok(saved)
    }

    fn new(t: Tensor, version: u64, node: &'static str, name: &'static str) -> SavedTensor {
        SavedTensor {
            tensor: Mutex::new(Some(t)),
            counted_in: None,
            version,
            node,
            name,
        }
    }

    /// The saved tensor; an `Err` when it was released by an earlier backward pass
    /// or changed in place since it was saved.
    pub fn get(&self) -> Result<Tensor> {
        let t = self
            .tensor
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| {
                OpalError::msg(format!(
                    "{}: trying to backward through the graph a second time (its saved tensor \
                     `{}` was freed after the first pass); pass retain_graph=true the first time",
                    self.node, self.name
                ))
            })?;
        let now = t.version();
        if t.is_defined() && now != self.version {
            return Err(OpalError::msg(format!(
                "{}: one of the variables needed for gradient computation has been modified by \
                 an inplace operation: saved tensor `{}` ({:?} {}) is at version {now}; expected \
                 version {} instead",
                self.node,
                self.name,
                t.sizes(),
                t.dtype(),
                self.version
            )));
        }
        Ok(t)
    }

    /// Frees the tensor (see [`Node::release_saved`]).
    pub fn release(&self) {
        let t = self.tensor.lock().unwrap_or_else(|e| e.into_inner()).take();
        if t.is_some() {
            if let Some(c) = &self.counted_in {
                c.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

impl Drop for SavedTensor {
    fn drop(&mut self) {
        self.release();
    }
}
