//! Generates the kernel traits and registration of `emu` and `emu2` from their
//! backend YAMLs against `opal`'s own `native_functions.yaml` (into `OUT_DIR`). Like
//! any out-of-tree backend, it gets that YAML from `opal` itself: `opal-runtime`'s
//! build script publishes its path, which cargo hands to this script as
//! `DEP_OPAL_NATIVE_YAML` (read by `opal_codegen::opal_native_yaml`).
//!
//! For the evolution tests it also writes an *evolved* copy of that YAML (new
//! defaulted arguments on ops emu implements) and generates both backends against
//! it, self-contained, under the operator namespace `evolved`
//! (`backend_emu_evolved.rs`, `backend_emu2_evolved.rs`); only `tests/evolution.rs`
//! includes those.

use std::path::PathBuf;

/// (schema in opal's YAML, evolved schema): defaulted arguments added at the end
/// of the keyword-only arguments, before `out`, and among the positional ones.
const EVOLUTION: &[(&str, &str)] = &[
    (
        "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
        "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1, bool fast_math=False) -> Tensor",
    ),
    (
        "add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
        "add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1, bool fast_math=False) -> Tensor(a!)",
    ),
    (
        "add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
        "add.out(Tensor self, Tensor other, *, Scalar alpha=1, bool fast_math=False, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "mul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
        "mul.out(Tensor self, Tensor other, *, int rounding=0, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "mul.Tensor(Tensor self, Tensor other) -> Tensor",
        "mul.Tensor(Tensor self, Tensor other, *, int rounding=0) -> Tensor",
    ),
    (
        "mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)",
        "mul_.Tensor(Tensor(a!) self, Tensor other, *, int rounding=0) -> Tensor(a!)",
    ),
    ("relu(Tensor self) -> Tensor", "relu(Tensor self, float? cap=None) -> Tensor"),
    (
        "relu_(Tensor(a!) self) -> Tensor(a!)",
        "relu_(Tensor(a!) self, float? cap=None) -> Tensor(a!)",
    ),
    (
        "sum(Tensor self, *, ScalarType? dtype=None) -> Tensor",
        "sum(Tensor self, *, ScalarType? dtype=None, str mode=\"fast\") -> Tensor",
    ),
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // The YAML `opal` generated its ops from, so the output refers to `::opal::ops`
    // for the per-op items instead of carrying a copy.
    let native = opal_codegen::opal_native_yaml().unwrap_or_else(|e| {
        eprintln!("emu build.rs: {e}");
        std::process::exit(1)
    });
    for yaml in ["emu.yaml", "emu2.yaml"] {
        opal_codegen::BackendBuilder::new(yaml)
            .native_from_opal()
            .ops_path("::opal::ops")
            .generate_or_exit();
    }

    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let dir = out.join("evolved");
    let text = std::fs::read_to_string(&native).unwrap_or_else(|e| {
        eprintln!("cannot read {}: {e}", native.display());
        std::process::exit(1)
    });
    let mut evolved = text.clone();
    for (from, to) in EVOLUTION {
        let line = format!("- func: {from}\n");
        if !evolved.contains(&line) {
            eprintln!("build.rs: opal's YAML no longer has `{from}`; update EVOLUTION");
            std::process::exit(1);
        }
        evolved = evolved.replace(&line, &format!("- func: {to}\n"));
    }
    if let Err(e) = std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(dir.join("native_functions.yaml"), evolved))
    {
        eprintln!("cannot write the evolved YAML: {e}");
        std::process::exit(1);
    }
    for (yaml, file) in [
        ("emu.yaml", "backend_emu_evolved.rs"),
        ("emu2.yaml", "backend_emu2_evolved.rs"),
    ] {
        opal_codegen::BackendBuilder::new(yaml)
            .native_yaml(dir.join("native_functions.yaml"))
            .namespace("evolved")
            // The tests call the evolved ops, which only these items define.
            .carry_entry_points(true)
            .file_name(file)
            .cargo_directives(false)
            .generate_or_exit();
    }
}
