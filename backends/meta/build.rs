//! Generates the Meta backend's kernel trait (`MetaKernels`) and its registration
//! function from `backend.yaml` against `opal`'s own `native_functions.yaml` (into
//! `OUT_DIR/backend_meta.rs`, included by `src/registration.rs`).
//!
//! Owns: only the call of `opal_codegen::BackendBuilder`. Must not: generate anything
//! by hand or read kernel sources.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // The YAML `opal` generated its ops from (its build script publishes the path):
    // refer to `::opal::ops` for the per-op items instead of carrying a copy of them.
    opal_codegen::BackendBuilder::new("backend.yaml")
        .native_from_opal()
        .ops_path("::opal::ops")
        .generate_or_exit();
}
