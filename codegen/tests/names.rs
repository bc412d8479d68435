//! Operator and argument names that would not compile as Rust: the ones colliding
//! with generated items, the std prelude or the runtime's names are mangled; names
//! that still collide after that are located errors, from `generate` and from
//! `check`. `tests/tests/generated_fixtures_compile.rs` compiles the generated code
//! of `fixtures/adversarial/`; the mangling table itself is checked
//! by the unit tests in `src/emit/names_tests.rs`.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_opal-codegen");

/// The naming check `generate` runs, on `yaml`: its errors and `check`'s stderr.
fn refused(yaml: &str) -> (Vec<opal_codegen::emit::EmitError>, String) {
    let nf = opal_codegen::load_str(yaml, "names.yaml", None).unwrap_or_else(|d| panic!("{d}"));
    let errs = opal_codegen::emit::check_names(&nf).expect_err("the names are refused");
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
    let p =
        opal_codegen::emit::generate(&nf, &Default::default()).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(p.unsupported.len(), 1);
    assert_eq!(p.unsupported[0].loc.line, 1);
    assert!(
        p.unsupported[0].reason.contains("`DEF_`"),
        "{:?}",
        p.unsupported
    );
}
