//! Parsing: the `func:` schema grammar and loading a `native_functions.yaml` into
//! located, not yet validated entries.
//!
//! Owns: text -> model. Must not: apply torchgen's implicit rules or cross-entry
//! checks (that is `crate::validate`), or know about Rust naming/emission.

mod block;
mod entry;
pub(crate) mod lexer;
pub(crate) mod node;
pub(crate) mod outline;
mod schema;
mod typed;
mod yaml;

pub use schema::{limits, parse_schema, parse_schema_at, split_namespace};
pub(crate) use yaml::parse_native_yaml_checked;
pub(crate) use yaml::read_document;
pub use yaml::{decode, parse_native_yaml, parse_tags, Parsed};
