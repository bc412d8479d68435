//! Reverse-mode automatic differentiation.
//!
//! A tensor joins autograd when it [requires grad](crate::Tensor::set_requires_grad)
//! (a *leaf*) or when an operation recorded a backward [`Node`] for it (its
//! `grad_fn`). From then on its key set holds its device's autograd key, so its ops
//! reach the kernels registered at `Autograd*` keys; tensors outside autograd never
//! do, and pay nothing for it.
//!
//! [`backward`] and [`grad`] run the recorded graph from outputs to inputs
//! (the `engine` module): each node turns the gradients of its forward outputs into
//! gradients of its forward inputs, the engine sums what reaches the same place,
//! reduces broadcast gradients to their input's shape, and accumulates into the
//! leaves' `.grad`. Saved tensors remember their storage's version, so a backward
//! pass over data an in-place op changed since is an `Err`, never a wrong gradient.
//!
//! Owns: per-tensor autograd state, grad mode, nodes, edges, saved tensors, the
//! engine, and [`record`] (how a kernel attaches a node to its outputs). Must not:
//! know any operator's derivative formula: those come from the kernels that record
//! nodes (custom functions, or kernels generated from `derivatives.yaml`, which
//! call the formulas of `crate::derivatives`). The per-tensor state reaches the
//! tensor through the tensor module's `AutogradState` interface.

mod engine;
mod fallback;
pub(crate) mod generated;
mod grad_mode;
pub mod helpers;
mod hooks;
mod meta;
mod node;
mod record;

pub use engine::{backward, grad, GradOptions};
pub(crate) use fallback::register as register_fallback;
pub use grad_mode::{is_grad_enabled, GradModeGuard, NoGradGuard};
pub use hooks::{register_post_accumulate_grad_hook, GradHook, HookHandle};
pub use node::{Edge, InputMeta, Node, SavedTensor};
pub use record::{check_inplace, record, BackwardFn};
