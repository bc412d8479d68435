//! Registration of the Meta kernels with the dispatcher, through the code that
//! `build.rs` generates from `backend.yaml` (opal-codegen's `BackendBuilder`): the
//! trait `MetaKernels`, whose provided fns forward to the kernel functions the YAML
//! names (and derive the `autogen` out= ops through
//! [`crate::kernels::autogen::copy_outs`]), and `register::<K>()` (every kernel for
//! the `Meta` dispatch key, through the generated per-op `kernel` adapters that also
//! serve boxed calls).
//!
//! Owns: [`init`]. Must not: contain shape logic or list ops (`backend.yaml` does;
//! the compiler checks every named kernel against its op's schema).

use opal::Result;
use std::sync::OnceLock;

/// The generated kernel trait and registration function of the Meta backend.
#[allow(
    missing_docs,
    reason = "generated code documents itself from the schemas"
)]
pub mod generated {
    include!(concat!(env!("OUT_DIR"), "/backend_meta.rs"));
}

/// The Meta backend: every fn of the generated [`generated::MetaKernels`] is
/// provided (`backend.yaml` names each kernel), so the implementation is empty.
pub struct Meta;

impl generated::MetaKernels for Meta {}

/// Defines Opal's operators (if not yet done) and registers the Meta kernels for
/// the `Meta` dispatch key, for the life of the process. Idempotent: the first call
/// registers, later calls return its outcome.
pub fn init() -> Result<()> {
    static DONE: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        generated::register::<Meta>()
            .map(|lib| lib.leak())
            .map_err(|e| e.to_string())
    })
    .clone()
    .map_err(opal::OpalError::msg)
}
