//! torchgen's backend YAML (the format of torch-xla, Intel's XPU ops, torch_npu) as
//! input: its keys accepted, vendor keys reported and ignored, a `backend:` Opal
//! has no key for registered under PrivateUse1 with its lower-cased name as device,
//! ops the native YAML lacks an error unless skipped, duplicates a warning.

use std::path::{Path, PathBuf};

use opal_codegen::backend::run::{coverage_of, generate_code, load_inputs, warnings_of, Inputs};
use opal_codegen::backend::{BackendKey, Status};

fn fixture(name: &str) -> PathBuf {
    Path::new("tests/fixtures/backend").join(name)
}

fn inputs(name: &str) -> Inputs {
    load_inputs(&fixture(name), &fixture("native.yaml"), None).expect("loads")
}

fn has(warnings: &[String], text: &str) -> bool {
    warnings.iter().any(|w| w.contains(text))
}

#[test]
fn a_key_opal_lacks_becomes_privateuse1_named_after_the_backend() {
    let i = inputs("torchgen_xla.yaml");
    assert_eq!(i.spec.dispatch_key.value, BackendKey::PrivateUse1);
    assert_eq!(i.spec.device.value, "xla");
    assert_eq!(i.spec.backend.value, "XLA");
    let w = warnings_of(&i);
    assert!(has(&w, "torchgen_xla.yaml:3:10: Opal has no dispatch key `XLA`: the backend registers under PrivateUse1 as device `xla`"), "{w:#?}");
    assert!(has(&w, "`ir_gen:` (1 ops) is ignored"), "{w:#?}");
    assert!(
        has(&w, "`custom_ops:` is not a key Opal uses; ignored"),
        "{w:#?}"
    );
    assert!(has(&w, "'mul.Tensor' is listed twice"), "{w:#?}");
}

#[test]
fn unknown_ops_fail_unless_skipped() {
    let mut i = inputs("torchgen_xla.yaml");
    let err = generate_code(&i, false, None).expect_err("not_an_op is unknown");
    let text = err.render(false, 200);
    assert!(
        text.contains("'not_an_op' is not an operator of the native YAML"),
        "{text}"
    );
    assert_eq!(err.items.len(), 1, "{text}");

    i.skip_unknown_ops = true;
    let code = generate_code(&i, false, None).expect("the rest generates");
    // full_codegen ops are kernels the backend has; autograd ops get their own fn.
    for f in [
        "fn add_out(",
        "fn mul_tensor(",
        "fn relu(",
        "fn autograd_sum(",
    ] {
        assert!(code.module.contains(f), "{f}");
    }
    let w = warnings_of(&i);
    assert!(
        has(
            &w,
            "'not_an_op' is not an operator of the native YAML (skipped: --skip-unknown-ops)"
        ),
        "{w:#?}"
    );
    let (report, _) = coverage_of(&i);
    let relu = report.ops.iter().find(|r| r.op == "relu").unwrap();
    assert_eq!(relu.status, Status::Native);
}

#[test]
fn func_names_and_vendor_entry_keys_are_accepted() {
    let i = inputs("torchgen_npu.yaml");
    assert_eq!(i.spec.device.value, "npu");
    let names: Vec<String> = i
        .spec
        .supported
        .iter()
        .map(|s| s.name().to_string())
        .collect();
    assert_eq!(names, ["add.out", "relu"]);
    assert!(i.spec.supported.iter().all(|s| s.pinned().is_none()));
    let w = warnings_of(&i);
    assert!(
        has(
            &w,
            "`op_api:` in a `supported:` entry is not a key Opal uses; ignored"
        ),
        "{w:#?}"
    );
    assert!(
        has(&w, "`tocpu:` is not a key Opal uses; ignored"),
        "{w:#?}"
    );
    generate_code(&i, false, None).expect("generates");
}

#[test]
fn a_builtin_key_keeps_its_name_and_opal_format_stays_strict() {
    let yaml = b"backend: PrivateUse1\ncpp_namespace: my_dev\nsupported:\n  - relu\n";
    let spec = opal_codegen::backend::load_bytes("pu1.yaml", yaml).expect("loads");
    assert_eq!(spec.dispatch_key.value, BackendKey::PrivateUse1);
    assert_eq!(spec.device.value, "privateuseone");
    assert!(spec.warnings.is_empty(), "{:?}", spec.warnings);
    // Without `cpp_namespace:` this is Opal's format: an unknown key is an error.
    let yaml =
        b"backend: Emu\ndispatch_key: PrivateUse1\ndevice: emu\nop_api: true\nsupported: []\n";
    let err = opal_codegen::backend::load_bytes("opal.yaml", yaml).expect_err("unknown key");
    assert!(err.render(false, 100).contains("unknown key `op_api`"));
}

/// A line closing more `]` than it opens, then a flow list whose last item has
/// no text of its own: locating the list's brackets once subtracted past zero
/// (a panic found by fuzzing). It is an error with a location, like any other.
#[test]
fn unbalanced_brackets_are_located_errors_not_panics() {
    let yaml = b"backend: Cpu2\ndispatkh_key: CPU]]]]]]]]]]\nsupported: [add.Tensor, add.Scalar, empty.mrp edCm:u1\ndispatkh_key_ofyrmat]\n";
    let err = opal_codegen::backend::load_bytes("fuzz.yaml", yaml).expect_err("malformed");
    let shown = err.render(false, 100);
    assert!(shown.contains("fuzz.yaml:"), "{shown}");
}
