//! Composite kernels: the operators that `native_functions.yaml` gives no dispatch
//! key (or only `CompositeImplicitAutograd`), plus CompositeExplicitAutograd ops that
//! no backend needs to specialise (`split.Tensor`, `linear.out`, the in-place view
//! ops `transpose_`, `t_`, `squeeze_.dim`, `unsqueeze_`), written once in terms of
//! other generated operators (`crate::ops::…`) or, for the in-place view ops, of
//! [`Tensor::set_geometry_`](crate::Tensor::set_geometry_), so they run on every
//! backend — CPU, Meta, out-of-tree devices — with no backend work.
//!
//! [`register`] puts each kernel of this module under the alias key that
//! `composites.yaml` (beside `native_functions.yaml`) gives it
//! (`CompositeImplicitAutograd` or `CompositeExplicitAutograd`); the global
//! dispatcher calls it while it is created, so the kernels are in place before any
//! operator is defined or called and a user never has to call an init function for
//! them. A backend that registers its own kernel for one of these operators still
//! wins on its key.
//!
//! Each kernel has the operator's typed kernel signature (`ops::<op>::Sig`, checked by
//! the compiler through `ops::<op>::kernel`). The key set is not forwarded: like
//! PyTorch's composites, a kernel calls the operators it is built from afresh, so each
//! of them dispatches on its own arguments (and a later autograd layer sees them).
//!
//! Owns: these kernels, their shape helpers and [`register`]. Must not: read or write
//! tensor data directly (everything goes through operators or, for geometry only,
//! `Tensor` methods that touch no data, which is what makes the kernels
//! backend-independent), or register anything for a backend key.

mod diagonal;
mod dropout;
mod linalg;
mod nn;
mod norm;
mod pad;
mod pool;
mod resample;
mod shape;
mod storage;
mod symbolic;
mod tensor;
mod variance;
mod views;

use crate::dispatch::Dispatcher;
use crate::tensor::wrap_dim;

/// The kernel table generated from `composites.yaml` (`composite_kernels()`).
mod generated {
    include!(concat!(env!("OUT_DIR"), "/opal_ops/composites.rs"));
}

/// Registers every composite kernel of `composites.yaml` with `d` under its alias
/// key, for the life of the process. The operators need not be defined yet
/// (definition later checks the registered signatures).
///
/// `register_impl` fails only for the `Undefined` key, a name without namespace, a
/// non-fn-pointer kernel or a signature that differs from the op's definition, and
/// the compiler rules these out (every kernel goes through the op's own
/// `kernel(Sig)`). Should one fail anyway, the others are still registered and the
/// `Err` names each failure (the dispatcher reports it when the operators are
/// defined).
pub(crate) fn register(d: &Dispatcher) -> crate::Result<()> {
    let mut failed = Vec::new();
    for (name, key, kernel) in generated::composite_kernels() {
        match d.register_impl(name, key, kernel) {
            Ok(handle) => handle.leak(),
            Err(e) => failed.push(format!("{name} at {key:?}: {e}")),
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(crate::OpalError::msg(format!(
            "composite kernel registration failed: {}",
            failed.join("; ")
        )))
    }
}
