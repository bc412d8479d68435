//! The schema model: plain, immutable data describing operators as declared in a
//! `native_functions.yaml` (and in a backend YAML).
//!
//! Owns: the data types only (operator names, types, arguments, returns, schemas,
//! native functions with their YAML metadata, source locations).
//! Must not: parse text, read files, validate, or know anything about Rust code
//! generation. Parsing lives in `crate::parse`, checking in `crate::validate`, Rust
//! naming in `crate::ident`, emission in `crate::emit`.

mod display;
mod function;
mod loc;
mod query;
mod schema;
mod small_map;
mod types;

pub use function::*;
pub use loc::*;
pub use schema::*;
pub use small_map::SmallMap;
pub use types::*;
