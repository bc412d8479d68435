//! The whole of PyTorch: generates the operator layer from PyTorch 2.15's
//! `native_functions.yaml` into a scratch crate that depends on `opal` and
//! `cargo check`s it. Every operator gets a stub; the ones that cannot be expressed
//! are reported by the generator, and this test pins that exact list.

use std::path::PathBuf;

use opal_tests::scratch;

#[test]
fn pytorch_2_15_generates_and_compiles() {
    let root = scratch::workspace_root();
    let yaml = root.join("../shared/fixtures/pytorch-2.15/native_functions.yaml");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pytorch-2.15-ops");
    let out = dir.join("src/ops");
    let _ = std::fs::remove_dir_all(&out);
    scratch::create(
        &dir,
        "pytorch-ops-check",
        "//! Generated from PyTorch 2.15's native_functions.yaml by the opal-tests suite.\npub mod ops;\n",
    )
    .expect("scratch crate");

    let report = opal_codegen::Builder::new()
        .native_yaml(&yaml)
        .namespace("aten")
        .out_dir(&out)
        .cargo_directives(false)
        .generate()
        .unwrap_or_else(|e| panic!("{e}"));

    // The operators that cannot be expressed, with the reason the generator gives.
    let unsupported: Vec<(String, String)> = report
        .unsupported
        .iter()
        .map(|u| (u.op.clone(), u.reason.clone()))
        .collect();
    assert_eq!(unsupported, Vec::<(String, String)>::new());

    // Every function of the model has its free function and module.
    let model = opal_codegen::load(&yaml).unwrap_or_else(|e| panic!("{e}"));
    let text: String = report
        .files
        .iter()
        .map(|f| std::fs::read_to_string(out.join(f)).expect("generated file"))
        .collect();
    let stubs = text.matches("\npub fn ").count();
    let modules = text.matches("\npub mod ").count();
    // `mod.rs` adds the `def_all`, `register_backend_select` and `init` functions
    // and the `prelude` and `support` modules.
    assert_eq!(stubs, model.functions.len() + 3);
    assert_eq!(modules, model.functions.len() + 2);

    let target = scratch::shared_target(env!("CARGO_TARGET_TMPDIR"));
    let (ok, stderr) =
        scratch::cargo(&dir, &target, &["check", "--offline", "--quiet"]).expect("cargo runs");
    assert!(
        ok,
        "cargo check of the generated PyTorch ops failed:\n{stderr}"
    );
}
