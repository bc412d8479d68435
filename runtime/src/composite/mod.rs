//! Composite kernels: the operators that `native_functions.yaml` gives no dispatch
//! key (or only `CompositeImplicitAutograd`), plus CompositeExplicitAutograd ops that
//! no backend needs to specialise (`split.Tensor`, `linear.out`, the in-place view
//! ops `transpose_`, `t_`, `squeeze_.dim`, `unsqueeze_`), written once in terms of
//! other generated operators (`crate::ops::…`) or, for the in-place view ops, of
//! [`Tensor::set_geometry_`](crate::Tensor::set_geometry_), so they run on every
//! backend — CPU, Meta, out-of-tree devices — with no backend work.
//!
//! [`register`] puts each kernel of this module under the alias key the YAML gives
//! its op (`CompositeImplicitAutograd` or `CompositeExplicitAutograd`); the global
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

mod dropout;
mod linalg;
mod nn;
mod shape;

use crate::dispatch::{DispatchKey, Dispatcher};
use crate::ops;
use crate::tensor::wrap_dim;

/// Registers every composite kernel with `d` under its op's composite key, for the
/// life of the process. The operators need not be defined yet (definition later
/// checks the registered signatures).
///
/// Infallible in practice: `register_impl` fails only for the `Undefined` key, a name
/// without namespace, a non-fn-pointer kernel or a signature that differs from the
/// op's definition, and the compiler rules all of these out here (every kernel goes
/// through the op's own `kernel(Sig)`). Should one fail anyway, the op is left
/// without a composite kernel and calling it returns the dispatcher's "no kernel"
/// error, naming the op and its registered keys.
pub(crate) fn register(d: &Dispatcher) {
    let key = DispatchKey::CompositeImplicitAutograd;
    let kernels = [
        (ops::reshape::DEF.name, ops::reshape::kernel(shape::reshape)),
        (
            ops::flatten_using_ints::DEF.name,
            ops::flatten_using_ints::kernel(shape::flatten_using_ints),
        ),
        (ops::narrow::DEF.name, ops::narrow::kernel(shape::narrow)),
        (ops::chunk::DEF.name, ops::chunk::kernel(shape::chunk)),
        (
            ops::contiguous::DEF.name,
            ops::contiguous::kernel(shape::contiguous),
        ),
        (ops::matmul::DEF.name, ops::matmul::kernel(linalg::matmul)),
        (
            ops::matmul_out::DEF.name,
            ops::matmul_out::kernel(linalg::matmul_out),
        ),
        (ops::linear::DEF.name, ops::linear::kernel(linalg::linear)),
        (ops::one_hot::DEF.name, ops::one_hot::kernel(nn::one_hot)),
        (
            ops::dropout::DEF.name,
            ops::dropout::kernel(dropout::dropout),
        ),
        (
            ops::dropout_::DEF.name,
            ops::dropout_::kernel(dropout::dropout_),
        ),
    ];
    for (name, k) in kernels {
        if let Ok(h) = d.register_impl(name, key, k) {
            h.leak();
        }
    }
    // CompositeExplicitAutograd ops written over other ops: they serve every backend
    // key that has no kernel of its own (but, unlike the implicit ones, not autograd).
    let explicit = [
        (
            ops::split_tensor::DEF.name,
            ops::split_tensor::kernel(shape::split_tensor),
        ),
        (
            ops::linear_out::DEF.name,
            ops::linear_out::kernel(linalg::linear_out),
        ),
        (
            ops::transpose_::DEF.name,
            ops::transpose_::kernel(shape::transpose_),
        ),
        (ops::t_::DEF.name, ops::t_::kernel(shape::t_)),
        (
            ops::squeeze_dim_::DEF.name,
            ops::squeeze_dim_::kernel(shape::squeeze_dim_),
        ),
        (
            ops::unsqueeze_::DEF.name,
            ops::unsqueeze_::kernel(shape::unsqueeze_),
        ),
    ];
    for (name, k) in explicit {
        if let Ok(h) = d.register_impl(name, DispatchKey::CompositeExplicitAutograd, k) {
            h.leak();
        }
    }
}
