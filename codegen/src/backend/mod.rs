//! External backends: a backend YAML (modelled on torchgen's external-backend YAML)
//! says which dispatch key and device a backend plugs into and which ops it
//! implements; from it and a native YAML this module generates the kernel trait,
//! the registration function (kernels, defaulted-argument adapters for pinned
//! kernels, the fallback) and a starter implementation, and reports coverage.
//!
//! Pipeline: [`load_bytes`] (YAML -> [`BackendSpec`]) -> `plan::resolve` (match
//! and [`classify`] against the native functions) -> `emit::generate` (Rust code)
//! or `coverage::coverage` (report). Callers go through [`run`], which
//! strings them together the way the CLI does, or [`BackendBuilder`] in a build
//! script; the stages in between are `pub(crate)`, as are the submodules other
//! than `run`.
//!
//! Owns: everything about backend YAMLs. Must not: parse native YAMLs or schemas
//! itself (it calls `crate::parse`), name things (it uses `crate::ident`), or
//! duplicate per-op emission (it uses `crate::emit`).

mod bodies;
mod builder;
mod compat;
mod coverage;
mod emit;
mod load;
mod plan;
mod plugin;
mod report;
pub mod run;
mod spec;
mod yaml;

pub use builder::{opal_native_yaml, BackendBuilder};
pub use compat::{classify, AddedArg, Compat, Incompatibility};
pub use coverage::{Coverage, Format, Row, RuntimeOps, Status, Totals};
pub use emit::{BackendCode, SKELETON_FILE};
pub use load::load_bytes;
pub use plugin::PluginCode;
pub use report::{BackendDiagnostic, BackendErrors, Note, SourceFile};
pub use spec::{BackendKey, BackendSpec, FallbackPolicy, Located, SupportedOp};
