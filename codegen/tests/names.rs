//! Operator and argument names that would not compile as Rust (issue 12): the ones
//! colliding with generated items, the std prelude or the runtime's names are
//! mangled; names that still collide after that are located errors, from
//! `generate` and from `check`. `tests/tests/adversarial_names.rs` compiles the
//! generated code of `fixtures/adversarial/`.

use std::collections::BTreeMap;
use std::process::Command;

use opal_codegen::emit::plan::plan;

const BIN: &str = env!("CARGO_BIN_EXE_opal-codegen");

fn fixture() -> String {
    format!(
        "{}/tests/fixtures/adversarial/native_functions.yaml",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn adversarial_names_are_mangled_not_dropped() {
    let nf = opal_codegen::load(fixture()).unwrap_or_else(|d| panic!("{d}"));
    let p = plan(&nf, "aten").unwrap_or_else(|e| panic!("{e:?}"));
    assert!(p.unsupported.is_empty(), "{:?}", p.unsupported);
    assert_eq!(p.ops.len(), nf.functions.len());
    let idents: BTreeMap<&str, &str> = p
        .ops
        .iter()
        .map(|o| (o.op_name.as_str(), o.ident_str.as_str()))
        .collect();
    for (op, ident) in [
        ("prelude", "prelude_op"),
        ("support", "support_op"),
        ("init", "init_op"),
        ("TensorOps", "TensorOps_op"),
        ("Tensor", "Tensor_op"),
        ("None", "None_op"),
        ("i64", "i64_op"),
        ("std", "std_op"),
        // Items inside each operator's own module do not clash with operators.
        ("DEF", "DEF"),
        ("call", "call"),
        ("Sig", "Sig"),
        ("prelude_", "prelude_"),
        ("Self", "Self_"),
        ("where", "where"),
    ] {
        assert_eq!(idents.get(op).copied(), Some(ident), "operator `{op}`");
    }
    let args = p.ops.iter().find(|o| o.op_name == "arg_names").unwrap();
    let names: BTreeMap<&str, &str> = args
        .args
        .iter()
        .map(|a| (a.arg.name.as_str(), a.name.as_str()))
        .collect();
    for (arg, ident) in [
        ("DEF", "DEF_"),
        ("SLOT", "SLOT_"),
        ("ks", "ks_"),
        ("opts", "opts_"),
        ("None", "None_"),
        ("Tensor", "Tensor_"),
        ("default", "default_"),
        ("Sig", "Sig"),
        ("call", "call"),
        ("type", "type"),
    ] {
        assert_eq!(names.get(arg).copied(), Some(ident), "argument `{arg}`");
    }
}

/// `check` and `generate`'s plan on `yaml`: the plan's errors and `check`'s stderr.
fn refused(yaml: &str) -> (Vec<opal_codegen::emit::EmitError>, String) {
    let nf = opal_codegen::load_str(yaml, "names.yaml", None).unwrap_or_else(|d| panic!("{d}"));
    let errs = plan(&nf, "aten").expect_err("plan refuses");
    let dir = std::env::temp_dir().join(format!("opal-names-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("names-{}.yaml", errs.len() * 1000 + yaml.len()));
    std::fs::write(&path, yaml).unwrap();
    let out = Command::new(BIN)
        .args(["check", path.to_str().unwrap()])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let _ = std::fs::remove_file(&path);
    (errs, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_mangled_name_that_still_collides_is_a_located_error() {
    let yaml =
        "- func: prelude(Tensor self) -> Tensor\n\n- func: prelude_op(Tensor self) -> Tensor\n";
    let (errs, stderr) = refused(yaml);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].loc.line, 3);
    assert!(
        stderr.contains(":3:9: operators `prelude` and `prelude_op` both map to"),
        "{stderr}"
    );
    assert!(stderr.contains("help:"), "{stderr}");
}

#[test]
fn colliding_tensor_methods_are_a_located_error() {
    let yaml = "- func: abs(Tensor self, int a=1) -> Tensor\n  variants: method\n\n- func: abs_with(Tensor self) -> Tensor\n  variants: method\n";
    let (errs, stderr) = refused(yaml);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].loc.line, 1);
    assert!(stderr.contains(":1:1:"), "{stderr}");
    assert!(stderr.contains("help: rename"), "{stderr}");
}

#[test]
fn arguments_that_collide_after_mangling_leave_the_operator_out_with_a_reason() {
    let yaml = "- func: f(Tensor self, int DEF, int DEF_) -> Tensor\n";
    let nf = opal_codegen::load_str(yaml, "names.yaml", None).unwrap_or_else(|d| panic!("{d}"));
    let p = plan(&nf, "aten").unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(p.unsupported.len(), 1);
    assert_eq!(p.unsupported[0].loc.line, 1);
    assert!(
        p.unsupported[0].reason.contains("`DEF_`"),
        "{:?}",
        p.unsupported
    );
}
