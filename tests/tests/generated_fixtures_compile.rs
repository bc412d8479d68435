//! The generated code of codegen's test fixtures compiles in a crate that depends
//! on `opal`:
//! - the emit snapshot fixture (every schema type, every kind of default, methods,
//!   overloads, a structured delegate, a factory op) is clippy-clean with
//!   `-D warnings`;
//! - the adversarial names of `codegen/tests/fixtures/adversarial/` (operators named
//!   `prelude`, `support`, `Tensor`, `None`, `i64`, `call`, `DEF`, keywords, ...;
//!   arguments named `DEF`, `SLOT`, `ks`, `opts`, `None`, `default`, ...) check
//!   without warnings, with every operator generated (mangled where needed, none
//!   dropped).

use opal_tests::scratch;

/// Generates the code of the fixture directory `fixture` into the scratch crate
/// `name`, checks that `unsupported` operators were left out, and runs
/// `cargo <args>` on the crate: its success and stderr.
fn generate_and_run(
    fixture: &str,
    name: &str,
    unsupported: usize,
    args: &[&str],
) -> (bool, String) {
    let (dir, out, yaml) =
        scratch::fixture_crate(env!("CARGO_TARGET_TMPDIR"), fixture, name).expect("scratch crate");
    let report = opal_codegen::Builder::new()
        .native_yaml(&yaml)
        .out_dir(&out)
        .cargo_directives(false)
        .generate()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        report.unsupported.len(),
        unsupported,
        "{:?}",
        report.unsupported
    );
    let target = scratch::shared_target(env!("CARGO_TARGET_TMPDIR"));
    scratch::cargo(&dir, &target, args).expect("cargo runs")
}

#[test]
fn emit_fixture_compiles_clippy_clean() {
    let (ok, stderr) = generate_and_run(
        "codegen/tests/fixtures/emit/ops",
        "emit-fixture-check",
        1,
        &["clippy", "--offline", "--quiet", "--", "-D", "warnings"],
    );
    assert!(ok, "clippy on the generated fixture code failed:\n{stderr}");
}

#[test]
fn adversarial_names_generate_code_that_compiles() {
    let (ok, stderr) = generate_and_run(
        "codegen/tests/fixtures/adversarial",
        "adversarial-names-check",
        0,
        &["check", "--offline", "--quiet"],
    );
    assert!(ok, "cargo check of the adversarial names failed:\n{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
}
