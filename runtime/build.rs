//! Generates Opal's operator layer from the root `native_functions.yaml` into
//! `$OUT_DIR/opal_ops/` (included by `src/ops/mod.rs`).
//!
//! Owns: only the call of `opal_codegen::Builder`. Must not: generate anything by
//! hand. Reruns only when build.rs or the YAML files change; unchanged outputs are
//! not rewritten, so a no-op build recompiles nothing.

#[global_allocator]
static ALLOC: opal_codegen::BuildAllocator = opal_codegen::BuildAllocator;

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let Some(out_dir) = std::env::var_os("OUT_DIR") else {
        eprintln!("opal build.rs: OUT_DIR is not set (run through cargo)");
        std::process::exit(1);
    };
    let result = opal_codegen::Builder::new()
        .native_yaml("../native_functions.yaml")
        .namespace("aten")
        .out_dir(PathBuf::from(out_dir).join("opal_ops"))
        .runtime_crate()
        .generate();
    if let Err(e) = result {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
