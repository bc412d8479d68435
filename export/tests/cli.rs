//! The `opal-pt2` command: runs and inspects a model, writes outputs that match
//! PyTorch's, and reports bad input with a message and exit code 1, never a
//! panic.

use crate::common;

use common::{compare, dir_from_env, models};
use std::process::{Command, Output};

fn opal_pt2(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opal-pt2"))
        .args(args)
        .output()
        .expect("running opal-pt2")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn run_writes_outputs_matching_pytorch() {
    let dir = dir_from_env("OPAL_EXPORT_MODELS_DIR", "export/tests/fixtures/models");
    let m = &models(&dir)[0];
    let out = std::env::temp_dir().join(format!("opal_pt2_cli_{}.safetensors", std::process::id()));
    // `opal-pt2 run` of the model on `dev` with `extra` arguments: its stdout.
    let run = |dev: &str, extra: &[&str]| {
        let mut args = vec![
            "run",
            m.path.to_str().unwrap(),
            "--inputs",
            m.io.to_str().unwrap(),
            "--device",
            dev,
        ];
        args.extend_from_slice(extra);
        let o = opal_pt2(&args);
        let (stdout, stderr) = text(&o);
        assert!(o.status.success(), "{stdout}\n{stderr}");
        stdout
    };
    for dev in ["cpu", "emu"] {
        let stdout = run(dev, &["--output", out.to_str().unwrap()]);
        assert!(stdout.contains("output.0:"), "{stdout}");
        let got = opal_export::io::read_indexed(&out, "output").unwrap();
        let want = opal_export::io::read_indexed(&m.io, "output").unwrap();
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            compare(g, w, m.atol, m.rtol).unwrap();
        }
    }
    let stdout = run("meta", &[]);
    assert!(stdout.contains("on meta"), "{stdout}");
}

#[test]
fn inspect_prints_the_ops_and_their_support() {
    let dir = dir_from_env("OPAL_EXPORT_MODELS_DIR", "export/tests/fixtures/models");
    let m = &models(&dir)[0];
    let o = opal_pt2(&["inspect", m.path.to_str().unwrap(), "--device", "emu"]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stdout.contains("aten::addmm") && stdout.contains("device: emu"),
        "{stdout}"
    );
    assert!(
        stdout.contains("aten::sym_size.int") && stdout.contains("interpreter"),
        "{stdout}"
    );
}

#[test]
fn errors_exit_with_1_and_a_message() {
    let dir = dir_from_env("OPAL_EXPORT_MODELS_DIR", "export/tests/fixtures/models");
    let m = &models(&dir)[0];
    let (model, io) = (m.path.to_str().unwrap(), m.io.to_str().unwrap());
    let run = |extra: &[&'static str]| {
        let mut v = vec!["run", model, "--inputs", io];
        v.extend_from_slice(extra);
        v
    };
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["run", "/nonexistent/model.pt2", "--inputs", io],
            "model.pt2",
        ),
        (
            vec!["run", model, "--inputs", "/nonexistent/in.safetensors"],
            "in.safetensors",
        ),
        (run(&["--device", "nosuchdevice"]), "nosuchdevice"),
        (
            run(&["--device", "meta", "--output", "/tmp/x.safetensors"]),
            "meta tensor",
        ),
        (vec!["inspect", io], "zip"),
        (vec!["frobnicate"], "frobnicate"),
    ];
    for (args, needle) in cases {
        let o = opal_pt2(&args);
        let (stdout, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {stdout}\n{stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: expected `{needle}` in {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
