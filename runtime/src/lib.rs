//! Opal runtime: tensors, dtypes, devices, boxed values, dispatch keys, the
//! dispatcher and generated ops.
//!
//! # Module map
//!
//! | module | owns |
//! |---|---|
//! | [`error`] | [`OpalError`], [`ErrorKind`], [`Result`] |
//! | [`dtype`] | [`DType`], [`Element`], promotion, `result_type`, default dtype, [`Complex`] |
//! | [`scalar`] | [`Scalar`] |
//! | [`device`] | [`Device`], [`DeviceType`], PrivateUse backend names |
//! | [`types`] | [`Layout`], [`MemoryFormat`], [`QScheme`], [`Dimname`], [`Stream`], [`Opaque`] |
//! | [`generator`] | [`Generator`] (Philox, per device, seedable) |
//! | [`tensor`] | [`Tensor`], [`Storage`], allocators, data access guards, printing; the aliasing model |
//! | [`ivalue`] | [`IValue`], [`Stack`], [`IntoIValue`], [`FromIValue`] |
//! | [`dispatch`] | keys, key sets, TLS, [`dispatch::Dispatcher`], kernels, typed/boxed calling |
//! | [`fallback`] | the boxed CPU fallback for device backends and the device transfer registry |
//! | [`ops`] | generated operators (written by `opal-codegen` via `build.rs`) |
//!
//! The API used by generated code and backends is fixed in `docs/design.md`.

pub mod device;
pub mod dispatch;
pub mod dtype;
pub mod error;
pub mod fallback;
pub mod generator;
pub mod ivalue;
pub mod ops;
pub mod scalar;
pub mod tensor;
pub mod types;

pub use device::{register_privateuse_backend, Device, DeviceType};
pub use dtype::{promote_types, Complex, DType, Element, ScalarType};
pub use error::{ErrorKind, OpalError, Result};
pub use generator::Generator;
pub use ivalue::{FromIValue, IValue, IntoIValue, Stack};
pub use scalar::Scalar;
pub use tensor::{Storage, Tensor, TensorKeys};
pub use types::{Dimname, Layout, MemoryFormat, Opaque, QScheme, Stream};
