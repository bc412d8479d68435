//! Parsing: the `func:` schema grammar and loading a `native_functions.yaml` into
//! located, not yet validated entries.
//!
//! Owns: text -> model. Must not: apply torchgen's implicit rules or cross-entry
//! checks (that is `crate::validate`), or know about Rust naming/emission.

pub mod lexer;
mod schema;

pub use schema::{parse_schema, parse_schema_at, split_namespace};
