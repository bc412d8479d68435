//! Shape, stride and dtype inference without data: the reusable half of the Meta
//! backend. Every function works on plain sizes / strides / dtypes so CPU kernels,
//! structured kernels and shape tracing can share one definition of each rule.
//!
//! Owns: the rules, grouped by op family in the submodules. Must not: allocate
//! tensors, dispatch, or depend on a backend (the `kernels` module wraps these into
//! Meta-device kernels).

pub mod dropout;
pub mod elementwise;
pub mod geometry;
pub mod index;
pub mod linalg;
pub mod promote;
pub mod reduce;
pub mod view;

pub use elementwise::elementwise_geometry;
pub use geometry::{contiguous_strides, wrap_dim};
pub use promote::{result_type, Operand};
pub use view::Strided;

/// The error every rule returns: the op name first, then the reason, so a failed
/// shape check reads like PyTorch's (`mm: mat1 and mat2 shapes cannot be ...`).
pub fn fail(op: &str, reason: impl std::fmt::Display) -> opal::OpalError {
    opal::OpalError::shape(format!("{op}: {reason}"))
}
