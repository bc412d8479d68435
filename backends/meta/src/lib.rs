//! Opal's Meta (shape-only) backend: kernels that compute output sizes, strides and
//! dtypes exactly like PyTorch's meta tensors, without touching data.
//!
//! Owns: the shape rules ([`shape`], reusable by any backend), the Meta-device
//! kernels built on them ([`kernels`]) and their registration ([`init`]). Must not:
//! read or write tensor data, or depend on another backend.
//!
//! Tracing shapes through any program of Opal ops:
//!
//! ```
//! use opal::{ops, DType, Device, Tensor};
//! opal_meta::init()?;
//! let x = Tensor::empty(&[32, 784], DType::F32, Device::meta())?;
//! let w = Tensor::empty(&[256, 784], DType::F32, Device::meta())?;
//! let h = ops::relu(&ops::linear(&x, &w)?)?;
//! assert_eq!(h.sizes(), &[32, 256]);
//! assert!(h.device().is_meta()); // no data was allocated or computed
//! # Ok::<(), opal::OpalError>(())
//! ```
//!
//! The rules are plain functions of sizes, strides and dtypes, for any backend:
//! `shape::elementwise_geometry` (broadcast sizes and output strides),
//! `shape::promote::result_type`, `shape::reduce::reduction_sizes`,
//! `shape::index::one_hot_sizes`, `shape::view::view`, ...; the rules the CPU
//! backend shares (convolution, pooling, ...) are `opal::rules`'.

pub mod kernels;
pub mod registration;
pub mod shape;

pub use registration::init;
