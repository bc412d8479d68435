//! Adversarial names compile (issue 12): the generated code of
//! `codegen/tests/fixtures/adversarial/` (operators named `prelude`, `support`,
//! `Tensor`, `None`, `i64`, `call`, `DEF`, keywords, ...; arguments named `DEF`,
//! `SLOT`, `ks`, `opts`, `None`, `default`, ...) compiles in a crate that depends
//! on `opal`, with every operator generated (mangled where needed, none dropped).

use opal_tests::scratch;

#[test]
fn adversarial_names_generate_code_that_compiles() {
    let (dir, out, yaml) = scratch::fixture_crate(
        env!("CARGO_TARGET_TMPDIR"),
        "codegen/tests/fixtures/adversarial",
        "adversarial-names-check",
    )
    .expect("scratch crate");
    let report = opal_codegen::Builder::new()
        .native_yaml(&yaml)
        .out_dir(&out)
        .cargo_directives(false)
        .generate()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(report.unsupported.is_empty(), "{:?}", report.unsupported);

    let target = scratch::shared_target(env!("CARGO_TARGET_TMPDIR"));
    let (ok, stderr) =
        scratch::cargo(&dir, &target, &["check", "--offline", "--quiet"]).expect("cargo runs");
    assert!(ok, "cargo check of the adversarial names failed:\n{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
}
