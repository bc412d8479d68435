//! `opal-codegen`: loads PyTorch-style `native_functions.yaml` files into a validated,
//! located model and generates Opal's typed operator layer from it.
//!
//! Pipeline (one module per stage):
//! - [`model`]: plain immutable data (schemas, native functions, locations).
//! - [`parse`]: the `func:` grammar and YAML loading into the model.
//! - [`validate`]: torchgen's implicit rules and the checks PyTorch (and Rust) need.
//! - [`diagnostics`]: located errors rendered with miette.
//! - `emit`: Rust code from the model.
//!
//! Entry points: [`load`], [`load_with_tags`], [`load_str`], [`load_bytes`] and
//! [`parse::parse_schema`].

pub mod autocast;
pub mod composite;
pub mod derivatives;
pub mod diagnostics;
mod load;
pub mod model;
pub mod parse;
pub mod suggest;
pub mod validate;

pub use load::{load, load_bytes, load_str, load_tags_bytes, load_with_tags};
pub mod backend;
pub mod builder;
pub mod emit;
pub mod ident;

pub use backend::{opal_native_yaml, BackendBuilder, OPAL_NATIVE_YAML_VAR};
pub use builder::Builder;

/// The global allocator for programs that generate code: with the `mimalloc`
/// feature (which `cli` enables) it is mimalloc, otherwise the system allocator.
/// Generation builds and drops millions of small token and syntax-tree nodes on two
/// threads; with glibc's allocator, `malloc`/`free` took about a third of backend
/// generation of 400 ops, while Opal's own build scripts (a few hundred ops, under a
/// second) gain less than compiling mimalloc's C sources costs, so they use the
/// default. Install it in a `build.rs` that generates from a large YAML, with
/// `features = ["mimalloc"]` on the build-dependency:
///
/// ```ignore
/// #[global_allocator]
/// static ALLOC: opal_codegen::BuildAllocator = opal_codegen::BuildAllocator;
/// ```
#[cfg(feature = "mimalloc")]
pub use mimalloc::MiMalloc as BuildAllocator;
/// The global allocator for programs that generate code: the system allocator,
/// since the `mimalloc` feature is off (see that feature in `Cargo.toml`).
#[cfg(not(feature = "mimalloc"))]
pub use std::alloc::System as BuildAllocator;
