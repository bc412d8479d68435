//! Generated backend code compiles under `#![deny(warnings)]`, also when its CPU
//! fallback module has no helper to offer (every supported op unpinned), which used
//! to leave an unused import behind.

use opal_tests::scratch;

#[test]
fn backend_with_an_empty_fallback_module_compiles_under_deny_warnings() {
    let tmp = env!("CARGO_TARGET_TMPDIR");
    let dir = std::path::PathBuf::from(tmp).join("backend-deny-warnings");
    let backend_yaml = dir.join("backend.yaml");
    let lib_rs = "#![deny(warnings)]\n//! Generated backend, checked warning-free.\n\
                  #[allow(missing_docs)]\npub mod backend {\n    include!(\"backend_plain.rs\");\n}\n";
    scratch::create(&dir, "backend-deny-warnings", lib_rs).expect("scratch crate");
    std::fs::write(
        &backend_yaml,
        "backend: Plain\ndispatch_key: PrivateUse3\ndevice: plain\nfallback: cpu\n\
         supported:\n  - add.Tensor\n  - neg\n",
    )
    .unwrap();
    let out = opal_codegen::BackendBuilder::new(&backend_yaml)
        .native_yaml(scratch::workspace_root().join("runtime/native_functions.yaml"))
        .ops_path("::opal::ops")
        .out_dir(dir.join("src"))
        .file_name("backend_plain.rs")
        .cargo_directives(false)
        .generate()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = std::fs::read_to_string(out).unwrap();
    assert!(
        text.contains("pub mod fallback"),
        "the fallback module is generated"
    );
    let target = scratch::shared_target(tmp);
    let (ok, stderr) =
        scratch::cargo(&dir, &target, &["check", "--offline", "--quiet"]).expect("cargo runs");
    assert!(
        ok,
        "generated backend code warns or fails under deny(warnings):\n{stderr}"
    );
}
