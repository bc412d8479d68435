//! The generated code of the emit snapshot fixture (every schema type, every kind of
//! default, methods, overloads, a structured delegate, a factory op) compiles in a
//! crate that depends on `opal`, and is clippy-clean with `-D warnings`.

use opal_tests::scratch;

#[test]
fn emit_fixture_compiles_clippy_clean() {
    let (dir, out, yaml) = scratch::fixture_crate(
        env!("CARGO_TARGET_TMPDIR"),
        "codegen/tests/fixtures/emit/ops",
        "emit-fixture-check",
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
