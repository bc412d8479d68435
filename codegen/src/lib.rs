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

pub mod derivatives;
pub mod diagnostics;
mod load;
pub mod model;
pub mod parse;
pub mod validate;

pub use load::{load, load_bytes, load_str, load_tags_bytes, load_with_tags};
pub mod backend;
pub mod builder;
pub mod emit;
pub mod ident;

pub use backend::BackendBuilder;
pub use builder::Builder;

/// The global allocator Opal's code-generating programs install: the CLI, Opal's
/// build scripts and the codegen benches. Generation builds and drops millions of
/// small token and syntax-tree nodes on two threads; with glibc's allocator,
/// `malloc`/`free` took about a third of backend generation. Install it in a
/// backend's `build.rs` the same way:
///
/// ```ignore
/// #[global_allocator]
/// static ALLOC: opal_codegen::BuildAllocator = opal_codegen::BuildAllocator;
/// ```
pub use mimalloc::MiMalloc as BuildAllocator;
