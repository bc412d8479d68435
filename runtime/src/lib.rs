//! Opal runtime: tensors, dtypes, devices, boxed values, dispatch keys, the
//! dispatcher and generated ops.
//!
//! # A first program
//!
//! Register a backend, make tensors, run operators, print the result:
//!
//! ```
//! use opal::ops::{self, TensorOps};
//! use opal::Tensor;
//!
//! opal_cpu::init()?; // register the CPU backend (idempotent); `opal_meta::init()` likewise
//! let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
//! let w = Tensor::from_slice(&[1.0f32, -1.0, 0.5, -2.0], &[2, 2])?;
//! let y = ops::mm(&x, &w)?.relu()?; // generated ops: free functions and `TensorOps` methods
//! let z = ((&y * 2.0)? - &y)?; // `std::ops` operators return `opal::Result<Tensor>`
//! println!("{z}");
//! assert_eq!(z.to_string(), "tensor([[2., 0.],\n        [5., 0.]])");
//! assert_eq!(Vec::<f32>::try_from(&z)?, vec![2.0, 0.0, 5.0, 0.0]);
//! # Ok::<(), opal::OpalError>(())
//! ```
//!
//! More complete programs are in `runtime/examples/`: `train_mlp` (a training loop
//! with hand-written gradients), `custom_backend` and `custom_op`
//! (`cargo run --release -p opal-runtime --example train_mlp`).
//!
//! # Module map
//!
//! | module | owns |
//! |---|---|
//! | [`error`] | [`OpalError`], [`ErrorKind`], [`Result`] |
//! | [`dtype`] | [`DType`], [`Element`], promotion, `result_type`, default dtype, [`Complex`] |
//! | [`scalar`] | [`Scalar`] |
//! | [`device`] | [`Device`], [`DeviceType`], PrivateUse backend names; the device runtime: [`device::DeviceHooks`], device counts, current device, memory statistics |
//! | [`serialize`] | saving and loading tensors in the safetensors format |
//! | [`types`] | [`Layout`], [`MemoryFormat`], [`QScheme`], [`Dimname`], [`Stream`], [`Opaque`] |
//! | [`generator`] | [`Generator`] (Philox, per device, seedable) |
//! | [`tensor`] | [`Tensor`], [`Storage`], allocators, data access guards, printing; the aliasing model |
//! | [`ivalue`] | [`IValue`], [`Stack`], [`IntoIValue`], [`FromIValue`] |
//! | [`dispatch`] | keys, key sets, TLS, [`dispatch::Dispatcher`], kernels, typed/boxed calling |
//! | [`fallback`] | the boxed CPU fallback for device backends and the device transfer registry |
//! | [`interop`] | `std::ops` operators, `Vec`/slice conversions, [`Tensor::equal`], [`Tensor::allclose`] |
//! | [`ops`] | generated operators (written by `opal-codegen` via `build.rs`) |
//! | [`plugin`] | backend plugins: discovery, autoload, the C ABI's host side, [`plugins`] |
//! | [`warning`] | warnings of library code: stderr, or `tracing` events with the `tracing` feature |
//!
//! The API used by generated code and backends is fixed in `docs/design.md`.
//!
//! # Features
//!
//! - `serde`: `Serialize`/`Deserialize` for the plain value types ([`DType`],
//!   [`dtype::Category`], [`Complex`], [`DeviceType`], [`Device`] as
//!   `{"type": .., "index": ..}`, [`Scalar`], [`Layout`], [`MemoryFormat`],
//!   [`QScheme`], [`Dimname`] as its name, [`Stream`]).
//! - `tracing`: [`warning::warn`] emits `tracing` events instead of printing; the
//!   CPU fallback runs each op in a `cpu_fallback` span and registering a PrivateUse
//!   backend name is an event. Without the feature none of it is compiled in.
//!
//! # Quick tour
//!
//! ```
//! use opal::{DType, Device, Scalar, Tensor};
//! // Tensors from Rust data, and back.
//! let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
//! assert_eq!(t.to_string(), "tensor([[1., 2.],\n        [3., 4.]])");
//! let col = t.as_strided(&[2], &[2], 1)?; // a view: second column
//! assert_eq!(col.to_vec::<f32>()?, vec![2.0, 4.0]);
//! assert_eq!(Tensor::scalar_tensor(&Scalar::Int(7), DType::I32, Device::cpu())?.item()?, Scalar::Int(7));
//!
//! // Kernels write through shared handles under a storage borrow.
//! t.write::<f32>()?.as_mut_slice().unwrap()[0] = 10.0;
//! assert_eq!(t.get(&[0, 0])?, Scalar::Float(10.0));
//!
//! // An out-of-tree device: a name for a PrivateUse key and an allocator.
//! use opal::dispatch::DispatchKey;
//! use opal::tensor::{register_allocator, CpuAllocator};
//! static HOST: CpuAllocator = CpuAllocator;
//! opal::register_privateuse_backend(DispatchKey::PrivateUse1, "emu")?;
//! register_allocator(opal::DeviceType::PrivateUse1, &HOST);
//! let e = Tensor::empty(&[2], DType::F32, "emu:0".parse()?)?;
//! assert!(e.key_set().has(DispatchKey::PrivateUse1));
//!
//! // Reproducible random numbers.
//! let g = opal::Generator::new(Device::cpu());
//! g.manual_seed(0);
//! let a = g.next_f64();
//! g.manual_seed(0);
//! assert_eq!(a, g.next_f64());
//! # Ok::<(), opal::OpalError>(())
//! ```
#![warn(missing_docs)]

pub mod autocast;
pub mod autograd;
mod composite;
pub mod derivatives;
pub mod device;
mod device_runtime;
mod device_type;
pub mod dispatch;
pub mod dtype;
pub mod error;
pub mod fallback;
pub mod generator;
pub mod interop;
pub mod ivalue;
pub mod keys;
pub mod ops;
pub mod plugin;
pub mod rules;
pub mod scalar;
#[cfg(feature = "serde")]
mod serde_impls;
pub mod serialize;
mod startup;
pub mod tensor;
mod transfer;
pub mod types;
pub mod warning;

pub use device::{register_privateuse_backend, Device, DeviceType};
pub use dtype::{promote_types, Complex, DType, Element, ScalarType};
pub use error::{ErrorKind, OpalError, Result};
pub use generator::Generator;
pub use ivalue::{FromIValue, IValue, IntoIValue, Stack};
pub use plugin::plugins;
pub use scalar::Scalar;
pub use tensor::{Storage, Tensor, TensorKeys};
pub use types::{Dimname, Layout, MemoryFormat, Opaque, QScheme, Stream};
