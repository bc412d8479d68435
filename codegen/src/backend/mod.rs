//! External backends: a backend YAML (modelled on torchgen's external-backend YAML)
//! says which dispatch key and device a backend plugs into and which ops it
//! implements; from it and a native YAML this module generates the kernel trait,
//! the registration function (kernels, defaulted-argument adapters for pinned
//! kernels, the fallback) and a starter implementation, and reports coverage.
//!
//! Pipeline: [`load`] (YAML -> [`BackendSpec`]) -> [`plan::resolve`] (match and
//! classify against the native functions, see [`compat`]) -> [`emit`] (Rust code)
//! or [`coverage()`](fn@coverage) (report).
//!
//! Owns: everything about backend YAMLs. Must not: parse native YAMLs or schemas
//! itself (it calls `crate::parse`), name things (it uses `crate::ident`), or
//! duplicate per-op emission (it uses `crate::emit`).

mod bodies;
pub mod builder;
pub mod compat;
pub mod coverage;
pub mod emit;
pub mod load;
pub mod plan;
pub mod plugin;
pub mod report;
pub mod run;
pub mod spec;
pub mod yaml;

pub use builder::{opal_native_yaml, BackendBuilder, OPAL_NATIVE_YAML_VAR};
pub use compat::{classify, AddedArg, Compat, Incompatibility};
pub use coverage::{coverage, Coverage, Format, RuntimeOps, Status};
pub use emit::{generate, BackendCode, BackendEmitOptions};
pub use load::{load_bytes, load_file};
pub use plan::{resolve, Plan};
pub use plugin::{generate_plugin, PluginCode};
pub use report::{BackendDiagnostic, BackendErrors, Note, SourceFile};
pub use spec::{BackendKey, BackendSpec, FallbackPolicy, Located, SupportedOp};
