//! Opal's Meta (shape-only) backend: kernels that compute output sizes, strides and
//! dtypes exactly like PyTorch's meta tensors, without touching data.
//!
//! Owns: the shape rules ([`shape`], reusable by any backend) and the Meta-device
//! kernels built on them. Must not: read or write tensor data, or depend on another
//! backend.

pub mod kernels;
pub mod shape;
