//! Generated backend code compiles under `#![deny(warnings)]`, also when its CPU
//! fallback module has no helper to offer (every supported op unpinned), which used
//! to leave an unused import behind, and when it carries the per-op items itself (no
//! `ops_path`), where only derivations' and factories' ops keep their entry points.

use opal_tests::scratch;

/// Generates the backend of `backend_yaml` into a scratch crate named `name`
/// (`#![deny(warnings)]`), checks that the crate compiles, and returns the code.
fn generate_and_check(name: &str, backend_yaml: &str, ops_path: Option<&str>) -> String {
    let tmp = env!("CARGO_TARGET_TMPDIR");
    let dir = std::path::PathBuf::from(tmp).join(name);
    let lib_rs = "#![deny(warnings)]\n//! Generated backend, checked warning-free.\n\
                  #[allow(missing_docs)]\npub mod backend {\n    include!(\"backend.rs\");\n}\n";
    scratch::create(&dir, name, lib_rs).expect("scratch crate");
    let yaml_path = dir.join("backend.yaml");
    std::fs::write(&yaml_path, backend_yaml).unwrap();
    let mut builder = opal_codegen::BackendBuilder::new(&yaml_path)
        .native_yaml(scratch::workspace_root().join("runtime/native_functions.yaml"))
        .out_dir(dir.join("src"))
        .file_name("backend.rs")
        .cargo_directives(false);
    if let Some(path) = ops_path {
        builder = builder.ops_path(path);
    }
    let out = builder.generate().unwrap_or_else(|e| panic!("{e}"));
    let target = scratch::shared_target(tmp);
    let (ok, stderr) =
        scratch::cargo(&dir, &target, &["check", "--offline", "--quiet"]).expect("cargo runs");
    assert!(
        ok,
        "generated backend code ({name}) warns or fails under deny(warnings):\n{stderr}"
    );
    std::fs::read_to_string(out).unwrap()
}

#[test]
fn backend_with_an_empty_fallback_module_compiles_under_deny_warnings() {
    let text = generate_and_check(
        "backend-deny-warnings",
        "backend: Plain\ndispatch_key: PrivateUse3\ndevice: plain\nfallback: cpu\n\
         supported:\n  - add.Tensor\n  - neg\n",
        Some("::opal::ops"),
    );
    assert!(
        text.contains("pub mod fallback"),
        "the fallback module is generated"
    );
}

#[test]
fn backend_carrying_its_op_items_compiles_under_deny_warnings() {
    // `add.out` makes `add.Tensor` and `add_.Tensor` derivations (they call the
    // out= and meta ops' entry points); `empty.memory_format` is a factory (its
    // BackendSelect kernel redispatches); `neg` is registered only.
    let text = generate_and_check(
        "backend-carried-deny-warnings",
        "backend: Carried\ndispatch_key: PrivateUse3\ndevice: carried\nfallback: none\n\
         supported:\n  - add.out\n  - empty.memory_format\n  - neg\n",
        None,
    );
    let module = |name: &str| {
        let start = text
            .find(&format!("pub mod {name} {{"))
            .unwrap_or_else(|| panic!("`{name}` is carried"));
        let end = text[start..]
            .find("\n    }\n")
            .map_or(text.len(), |e| start + e);
        text[start..end].to_string()
    };
    assert!(
        module("add_out").contains("pub fn redispatch"),
        "out= op called by derivations"
    );
    assert!(
        module("add_tensor").contains("pub fn structured"),
        "derivation carried"
    );
    assert!(module("empty_memory_format").contains("pub fn backend_select"));
    assert!(
        !module("neg").contains("pub fn redispatch") && module("neg").contains("pub fn kernel"),
        "an op only registered carries no entry points"
    );
}
