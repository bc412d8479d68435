//! The generated code of the emit snapshot fixture (every schema type, every kind of
//! default, methods, overloads, a structured delegate, a factory op) compiles in a
//! crate that depends on `opal`, and is clippy-clean with `-D warnings`.

use std::path::PathBuf;

use opal_tests::scratch;

#[test]
fn emit_fixture_compiles_clippy_clean() {
    let root = scratch::workspace_root();
    let yaml = root.join("codegen/tests/fixtures/emit/ops/native_functions.yaml");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("emit-fixture-ops");
    let out = dir.join("src/ops");
    let _ = std::fs::remove_dir_all(&out);
    scratch::create(
        &dir,
        "emit-fixture-check",
        "//! Generated from codegen/tests/fixtures/emit/ops by the opal-tests suite.\npub mod ops;\n",
    )
    .expect("scratch crate");
    let report = opal_codegen::Builder::new()
        .native_yaml(&yaml)
        .out_dir(&out)
        .cargo_directives(false)
        .generate()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.unsupported.len(), 1, "{:?}", report.unsupported);

    let target = scratch::shared_target(env!("CARGO_TARGET_TMPDIR"));
    let (ok, stderr) = scratch::cargo(
        &dir,
        &target,
        &["clippy", "--offline", "--quiet", "--", "-D", "warnings"],
    )
    .expect("cargo runs");
    assert!(ok, "clippy on the generated fixture code failed:\n{stderr}");
}
