//! Parsing: the `func:` schema grammar and loading a `native_functions.yaml` into
//! located, not yet validated entries.
//!
//! Owns: text -> model. Must not: apply torchgen's implicit rules or cross-entry
//! checks (that is `crate::validate`), or know about Rust naming/emission.

mod block;
mod entry;
pub mod lexer;
pub mod node;
pub mod outline;
mod schema;
mod typed;
mod yaml;

pub use entry::KNOWN_KEYS;
pub use schema::{limits, parse_operator_name_at, parse_schema, parse_schema_at, split_namespace};
pub(crate) use yaml::read_document;
pub use yaml::{decode, parse_native_yaml, parse_native_yaml_checked, parse_tags, Checked, Parsed};
