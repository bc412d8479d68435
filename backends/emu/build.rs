//! Generates the kernel traits and registration of `emu` and `emu2` from their
//! backend YAMLs against the root `native_functions.yaml` (into `OUT_DIR`).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let native = "../../native_functions.yaml";
    // The root YAML is the one `opal` generates its ops from, so the output refers to
    // `::opal::ops` for the per-op items instead of carrying a copy.
    for yaml in ["emu.yaml", "emu2.yaml"] {
        opal_codegen::BackendBuilder::new(yaml)
            .native(native)
            .ops_path("::opal::ops")
            .run_or_exit();
    }
}
