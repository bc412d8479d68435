//! The `opal-codegen` binary: `check` and `schemas` exit codes and output.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_opal-codegen");

fn shared(name: &str) -> String {
    format!(
        "{}/../../shared/fixtures/pytorch-2.15/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn malformed(name: &str) -> String {
    format!(
        "{}/../tests/fixtures/malformed/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn check_ok_prints_one_summary_line() {
    let out = Command::new(BIN)
        .args(["check", &shared("native_functions.yaml")])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(
        stdout.contains("ok, 2590 entries, 3110 functions (520 from autogen)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("tags.yaml"),
        "tags.yaml beside the file is used: {stdout}"
    );
    assert!(out.stderr.is_empty());
}

#[test]
fn check_errors_go_to_stderr_with_exit_1() {
    let out = Command::new(BIN)
        .args([
            "check",
            &malformed("several_errors.yaml"),
            "--tags",
            &malformed("tags.yaml"),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8(out.stderr).unwrap();
    for at in [
        "several_errors.yaml:3:13",
        "several_errors.yaml:5:13",
        "several_errors.yaml:9:5",
    ] {
        assert!(stderr.contains(at), "{at} missing:\n{stderr}");
    }
    assert!(stderr.contains("3 errors"), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "no colors when stderr is not a terminal"
    );
}

#[test]
fn check_missing_file_is_an_error_not_a_panic() {
    let out = Command::new(BIN)
        .args(["check", "/nonexistent/native_functions.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read the file"));
}

#[test]
fn schemas_prints_canonical_schemas_in_file_order() {
    let out = Command::new(BIN)
        .args(["schemas", &shared("native_functions.yaml")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let want = std::fs::read_to_string(shared("schemas.txt")).unwrap();
    assert!(
        String::from_utf8(out.stdout).unwrap() == want,
        "differs from schemas.txt"
    );
}
