//! Recording: how a kernel attaches a backward node to the results of an op.
//!
//! Owns: [`record`], the closure-backed node it makes, and the in-place rule for
//! leaves ([`check_inplace`]). Must not: know formulas (the caller's closure is
//! the formula).

use super::grad_mode::is_grad_enabled;
use super::node::{Edge, Node};
use crate::error::{OpalError, Result};
use crate::Tensor;
use std::sync::{Arc, Mutex};

/// A backward formula: the gradients of the forward outputs in, one gradient per
/// forward input out (`None` where an input gets none). It owns what it saved, and
/// is dropped when the graph is released.
pub type BackwardFn = Box<dyn Fn(&[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> + Send + Sync>;

struct FnNode {
    name: &'static str,
    num_outputs: usize,
    edges: Vec<Edge>,
    backward: Mutex<Option<BackwardFn>>,
}

impl Node for FnNode {
    fn name(&self) -> &str {
        self.name
    }

    fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    fn next_edges(&self) -> &[Edge] {
        &self.edges
    }

    fn apply(&self, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let f = self.backward.lock().unwrap_or_else(|e| e.into_inner());
        let f = f.as_ref().ok_or_else(|| {
            OpalError::msg(format!(
                "{}: trying to backward through the graph a second time (its saved tensors were \
                 freed after the first pass); pass retain_graph=true the first time",
                self.name
            ))
        })?;
        let out = f(grads)?;
        if out.len() != self.edges.len() {
            return Err(OpalError::msg(format!(
                "{}: the backward function returned {} gradients for {} inputs",
                self.name,
                out.len(),
                self.edges.len()
            )));
        }
        Ok(out)
    }

    fn release_saved(&self) {
        *self.backward.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Records the op `name` for backward when grad mode is on and one of `inputs`
/// takes part in autograd: a node with `backward` as its formula becomes the
/// `grad_fn` of every defined tensor of `outputs` (output `i` is gradient slot `i`).
/// Returns whether it recorded. For an in-place op, pass the written tensor both as
/// an input (its history so far) and as an output (it gets the new node), after
/// [`check_inplace`].
pub fn record(
    name: &'static str,
    inputs: &[&Tensor],
    outputs: &[&Tensor],
    backward: BackwardFn,
) -> Result<bool> {
    if !is_grad_enabled() || !inputs.iter().any(|t| t.requires_grad()) {
        return Ok(false);
    }
    check_complex(name, inputs, outputs)?;
    let node: Arc<dyn Node> = Arc::new(FnNode {
        name,
        num_outputs: outputs.len(),
        edges: inputs.iter().map(|t| Edge::of(t)).collect(),
        backward: Mutex::new(Some(backward)),
    });
    for (i, out) in outputs.iter().enumerate() {
        if out.is_defined() {
            out.set_grad_fn(node.clone(), i);
        }
    }
    Ok(true)
}

/// Nodes whose formulas hold for complex tensors in PyTorch's convention even
/// when real and complex tensors meet (the FFTs' formulas are written for it; a
/// dtype conversion's gradient converts back, dropping an imaginary part).
const COMPLEX_ANY: &[&str] = &["FftR2cBackward0", "FftC2rBackward0", "ToCopyBackward0"];

/// Nodes whose formulas hold for complex tensors as long as real and complex
/// tensors do not meet: linear, conjugation-free moves and sums of values.
const COMPLEX_SAME: &[&str] = &[
    "AliasBackward0",
    "CatBackward0",
    "CloneBackward0",
    "ConstantPadNdBackward0",
    "ExpandBackward0",
    "MeanBackward0",
    "MeanBackward1",
    "NegBackward0",
    "PermuteBackward0",
    "SelectBackward0",
    "SliceBackward0",
    "SqueezeBackward0",
    "SqueezeBackward1",
    "SumBackward0",
    "SumBackward1",
    "TBackward0",
    "TransposeBackward0",
    "UnsqueezeBackward0",
    "ViewBackward0",
    "WhereBackward0",
];

/// The other formulas are written for real tensors (PyTorch's conjugations and
/// its real-to-complex gradient projection left out), so recording a node over
/// complex tensors there is an `Err` rather than a wrong gradient later.
fn check_complex(name: &str, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let all = || inputs.iter().chain(outputs).filter(|t| t.is_defined());
    if !all().any(|t| t.dtype().is_complex()) || COMPLEX_ANY.contains(&name) {
        return Ok(());
    }
    let mixed = all().any(|t| t.dtype().is_floating_point());
    if COMPLEX_SAME.contains(&name) && !mixed {
        return Ok(());
    }
    Err(OpalError::msg(format!(
        "{name}: autograd does not support complex tensors at this operator{} (only the \
         real FFTs, dtype conversions, and sums, means, negations, concatenations and \
         views of complex tensors alone)",
        if mixed { " with real ones" } else { "" }
    )))
}

/// The in-place rule: writing a leaf that requires grad, while grad mode is on, is
/// an `Err` (its gradient would be that of a value that no longer exists). Under
/// [`super::NoGradGuard`] (an optimizer step) it is allowed.
pub fn check_inplace(t: &Tensor, op: &str) -> Result<()> {
    if is_grad_enabled() && t.is_leaf() && t.requires_grad() {
        return Err(OpalError::msg(format!(
            "{op}: a leaf tensor that requires grad is being used in an in-place operation \
             (wrap the update in a NoGradGuard, or detach() the tensor first)"
        )));
    }
    Ok(())
}
