//! Generates the Meta backend's kernel trait (`MetaKernels`) and its registration
//! function from `backend.yaml` against the root `native_functions.yaml` (into
//! `OUT_DIR/backend_meta.rs`, included by `src/registration.rs`).
//!
//! Owns: only the call of `opal_codegen::BackendBuilder`. Must not: generate anything
//! by hand or read kernel sources.

#[global_allocator]
static ALLOC: opal_codegen::BuildAllocator = opal_codegen::BuildAllocator;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // The root YAML is the one `opal` generates its ops from: refer to `::opal::ops`
    // for the per-op items instead of carrying a copy of them.
    opal_codegen::BackendBuilder::new("backend.yaml")
        .native("../../native_functions.yaml")
        .ops_path("::opal::ops")
        .run_or_exit();
}
