//! `opal-codegen derivatives check`: the summary line and exit 0 on a good file,
//! located errors on stderr and exit 1 on a bad one.

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_opal-codegen");
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../");

fn check(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(["derivatives", "check"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_good_file_prints_one_summary_line() {
    // The native_functions.yaml beside the file is the default.
    let path = format!("{ROOT}../shared/fixtures/pytorch-2.15/derivatives.yaml");
    let out = check(&[&path]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(
        stdout.contains("ok, 688 entries, 1388 formulas (911 backward, 477 forward)"),
        "{stdout}"
    );
    assert!(out.stderr.is_empty());

    let out = check(&[&format!("{ROOT}runtime/derivatives.yaml")]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn errors_go_to_stderr_with_exit_1() {
    let fixture = format!("{ROOT}codegen/tests/fixtures/derivatives/unknown_method.yaml");
    let native = format!("{ROOT}runtime/native_functions.yaml");
    let out = check(&["--native", &native, &fixture]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8(out.stderr).unwrap();
    // miette wraps the message line at the terminal width, even inside the
    // path, and where depends on how long the checkout's path is; the snippet
    // header is never wrapped.
    assert!(stderr.contains(&format!("[{fixture}:2:47]")), "{stderr}");
    assert!(stderr.contains("`scalar_typ`"), "{stderr}");
    assert!(stderr.contains("did you mean `scalar_type`?"), "{stderr}");
    assert!(
        stderr.ends_with(&format!("{fixture}: 1 error\n")),
        "{stderr}"
    );
}

#[test]
fn a_missing_native_file_is_reported() {
    let out = check(&["--native", "/nonexistent/native_functions.yaml", "x.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("cannot read the file"), "{stderr}");
}
