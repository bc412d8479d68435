//! `opal-codegen`: loads PyTorch-style `native_functions.yaml` files into a validated,
//! located model and generates Opal's typed operator layer from it.
//!
//! Pipeline (one module per stage):
//! - [`model`]: plain immutable data (schemas, native functions, locations).
//! - `parse`: the `func:` grammar and YAML loading into the model.
//! - `validate`: torchgen's implicit rules and the checks PyTorch (and Rust) need.
//! - `emit`: Rust code from the model.

pub mod diagnostics;
pub mod model;
pub mod parse;
