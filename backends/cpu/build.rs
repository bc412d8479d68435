//! Generates the CPU backend's kernel trait (`CpuKernels`) and its registration
//! function from `backend.yaml` against `opal`'s own `native_functions.yaml` (into
//! `OUT_DIR/backend_cpu.rs`, included by `src/registration/mod.rs`).
//!
//! Owns: only the call of `opal_codegen::BackendBuilder`. Must not: generate anything
//! by hand or read kernel sources.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // The YAML `opal` generated its ops from (its build script publishes the path),
    // so the output refers to `::opal::ops` for the per-op items (`Sig`, `DEF`,
    // `kernel`, `structured`) instead of carrying a copy of them.
    opal_codegen::BackendBuilder::new("backend.yaml")
        .native_from_opal()
        .ops_path("::opal::ops")
        .generate_or_exit();
}
