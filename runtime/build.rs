//! Generates Opal's operator layer from this crate's `native_functions.yaml` into
//! `$OUT_DIR/opal_ops/` (included by `src/ops/mod.rs`), and tells the build scripts
//! of backend crates where that YAML is.
//!
//! The YAML (and `tags.yaml` beside it) ship inside this package. This crate declares
//! `links = "opal"`, so the `cargo:native_yaml=<path>` line below reaches every crate
//! that depends on it directly as the environment variable `DEP_OPAL_NATIVE_YAML` of
//! its build script (`opal_codegen::BackendBuilder::native_from_opal` reads it):
//! backends generate against the very YAML `opal` was generated from, without a path
//! into Opal's repository.
//!
//! It also generates the autograd kernels from `derivatives.yaml` (`autograd.rs`,
//! included by `src/autograd/generated.rs`) and the composite kernel table from
//! `composites.yaml` (`composites.rs`, included by `src/composite/mod.rs`).
//!
//! Owns: only the call of `opal_codegen::Builder`. Must not: generate anything by
//! hand. Reruns only when build.rs or the YAML files change; unchanged outputs are
//! not rewritten, so a no-op build recompiles nothing.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let (Some(out_dir), Some(manifest_dir)) = (
        std::env::var_os("OUT_DIR"),
        std::env::var_os("CARGO_MANIFEST_DIR"),
    ) else {
        eprintln!("opal build.rs: OUT_DIR or CARGO_MANIFEST_DIR is not set (run through cargo)");
        std::process::exit(1);
    };
    // Build scripts run in the package root: generate from the relative path (it is
    // what the generated files' headers and any diagnostics show), publish the
    // absolute one.
    let native = "native_functions.yaml";
    println!(
        "cargo:native_yaml={}",
        PathBuf::from(manifest_dir).join(native).display()
    );
    opal_codegen::Builder::new()
        .native_yaml(native)
        .derivatives_yaml("derivatives.yaml")
        .composites_yaml("composites.yaml")
        .namespace("aten")
        .out_dir(PathBuf::from(&out_dir).join("opal_ops"))
        .runtime_crate()
        .generate_or_exit();
    // Autocast kernels from the cast policy (src/autocast/mod.rs includes them).
    opal_codegen::autocast::Builder::new()
        .native_yaml(native)
        .policy("autocast.yaml")
        .out_dir(PathBuf::from(&out_dir).join("opal_autocast"))
        .generate_or_exit();
}
