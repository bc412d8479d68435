//! Backend generation and coverage on the small fixtures: what a backend gets
//! (kernels, adapters, derived structured ops, fallback), the coverage report in its
//! three formats, both-file diagnostics for incompatible pins, determinism.

use std::path::{Path, PathBuf};

use opal_codegen::backend::run::{coverage_of, generate_code, load_inputs, with_cpu_backend};
use opal_codegen::backend::{Format, Status};

/// Relative to the crate root (cargo runs tests there), so that rendered
/// diagnostics wrap the same way wherever the checkout lives.
fn fixture(name: &str) -> PathBuf {
    Path::new("tests/fixtures/backend").join(name)
}

fn inputs(backend: &str) -> opal_codegen::backend::run::Inputs {
    load_inputs(&fixture(backend), &fixture("native.yaml"), None).expect("fixtures load")
}

/// The backend-specific part of the generated module (after the per-op items,
/// which belong to the emitter's snapshots).
fn backend_part(module: &str) -> &str {
    let at = module
        .find("/// The dispatch key this backend registers under.")
        .expect("backend items");
    &module[at..]
}

#[test]
fn generated_backend_items() {
    let code = generate_code(&inputs("emu.yaml"), true, None).expect("generates");
    let part = backend_part(&code.module);
    // One associated fn per supported op, typed, pinned signatures where pinned.
    assert!(
        part.contains("fn add_out(\n        ks: DispatchKeySet,"),
        "{part}"
    );
    assert!(
        part.contains("fn sum(ks: DispatchKeySet, self_: &Tensor) -> Result<Tensor>;"),
        "{part}"
    );
    // The adapter passes the default to the old kernel, anything else to the fallback.
    assert!(part.contains("if dtype.is_none() {\n            K::sum(ks, self_)\n        } else {\n            super::fallback::full::sum(ks, self_, dtype)"), "{part}");
    // Derived structured ops and the fallback are registered.
    assert!(
        part.contains(
            r#"lib.impl_("add.Tensor", ops::add_tensor::kernel(ops::add_tensor::structured))?;"#
        ),
        "{part}"
    );
    assert!(
        part.contains("lib.fallback(::opal::fallback::kernel())?;"),
        "{part}"
    );
    assert!(part.contains("pub mod kernels;"), "{part}");
    insta::assert_snapshot!("emu_backend_items", part);
    insta::assert_snapshot!("emu_skeleton", code.skeleton.expect("skeleton"));
}

#[test]
fn without_fallback_an_adapter_names_op_argument_value_and_backend() {
    let mut i = inputs("emu.yaml");
    i.spec.fallback.value = opal_codegen::backend::FallbackPolicy::None;
    let code = generate_code(&i, false, None).expect("generates");
    let part = backend_part(&code.module);
    assert!(!part.contains("pub mod fallback"), "{part}");
    assert!(!part.contains("pub mod kernels;"), "{part}");
    assert!(
        part.contains("'aten::sum': argument 'dtype' = {:?} is not supported by backend Emu: its kernel was written against `sum(Tensor self) -> Tensor`, which predates 'dtype' (only the default None runs there), and the backend has no fallback"),
        "{part}"
    );
}

#[test]
fn generation_is_deterministic() {
    let i = inputs("emu.yaml");
    let a = generate_code(&i, true, None).unwrap();
    let b = generate_code(&i, true, None).unwrap();
    assert_eq!(a.module, b.module);
    assert_eq!(a.skeleton, b.skeleton);
}

#[test]
fn coverage_in_three_formats() {
    let (report, errors) = coverage_of(&inputs("emu.yaml"));
    assert!(errors.is_none());
    let status = |op: &str| report.ops.iter().find(|r| r.op == op).map(|r| r.status);
    assert_eq!(status("add.out"), Some(Status::Native));
    assert_eq!(
        status("add.Tensor"),
        Some(Status::Native),
        "derived from add.out"
    );
    assert_eq!(status("add_.Tensor"), Some(Status::Native));
    assert_eq!(status("mul.Tensor"), Some(Status::Native));
    assert_eq!(status("sum"), Some(Status::Adapter));
    assert_eq!(status("relu"), Some(Status::Fallback));
    assert_eq!(status("square"), Some(Status::Composite));
    assert_eq!(status("_cuda_only"), Some(Status::Missing));
    let t = &report.totals;
    assert_eq!(
        (
            t.native,
            t.adapter,
            t.composite,
            t.fallback,
            t.missing,
            t.total
        ),
        (4, 1, 1, 2, 2, 10)
    );

    let text = report.render(Format::Text);
    assert!(
        text.contains("sum          adapter    pinned kernel predates dtype=None"),
        "{text}"
    );
    assert!(
        text.ends_with("total: native 4, adapter 1, composite 1, fallback 2, missing 2 (10 ops)\n"),
        "{text}"
    );
    let md = report.render(Format::Markdown);
    assert!(
        md.contains("| `_cuda_only` | missing | no CPU kernel for the fallback |"),
        "{md}"
    );
    assert!(md.contains("| adapter | 1 |"), "{md}");
    let json: serde_json::Value =
        serde_json::from_str(&report.render(Format::Json)).expect("valid JSON");
    assert_eq!(json["totals"]["native"], 4);
    assert_eq!(json["ops"][5]["op"], "sum");
    assert_eq!(json["ops"][5]["status"], "adapter");
    insta::assert_snapshot!("emu_coverage_text", text);
}

#[test]
fn incompatible_pins_show_both_yaml_locations() {
    let i = inputs("bad_pins.yaml");
    let e = generate_code(&i, false, None).expect_err("bad pins fail");
    assert_eq!(e.items.len(), 4, "{e}");
    let out = e.render(false, 100);
    // The backend YAML location, then the native YAML's.
    assert!(out.contains("bad_pins.yaml:7:"), "{out}");
    assert!(out.contains("native.yaml:"), "{out}");
    assert!(out.contains("did you mean 'add.out'?"), "{out}");
    // The same entry twice is a warning, not an error.
    assert!(!out.contains("'add.out' is listed twice"), "{out}");
    let warnings = opal_codegen::backend::run::warnings_of(&i);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("bad_pins.yaml:12:5: 'add.out' is listed twice")),
        "{warnings:?}"
    );
    let (report, errs) = coverage_of(&i);
    assert!(errs.is_some());
    let row = report.ops.iter().find(|r| r.op == "sum").unwrap();
    assert_eq!(row.status, Status::Missing);
    assert!(
        row.detail
            .starts_with("incompatible pin: argument 'dtype' of 'sum' was retyped"),
        "{}",
        row.detail
    );
    insta::assert_snapshot!("bad_pins_diagnostics", out);
}

#[test]
fn autograd_ops_get_their_own_trait_fn_at_the_autograd_key() {
    let code = generate_code(&inputs("emu_autograd.yaml"), true, None).expect("generates");
    let part = backend_part(&code.module);
    assert!(
        part.contains("fn autograd_relu(ks: DispatchKeySet, self_: &Tensor) -> Result<Tensor>;"),
        "{part}"
    );
    assert!(
        part.contains(
            r#"    lib.impl_for(
        "relu",
        ::opal::dispatch::DispatchKey::AutogradPrivateUse1,
        ops::relu::kernel(<K as EmuKernels>::autograd_relu),
    )?;"#
        ),
        "{part}"
    );
    let skeleton = code.skeleton.expect("skeleton");
    assert!(
        skeleton.contains("fn autograd_relu(_ks: DispatchKeySet, _self_: &Tensor) -> Result<Tensor> {\n        ::std::result::Result::Err(OpalError::not_implemented(\"aten::relu\", \"Emu\"))"),
        "{skeleton}"
    );
}

#[test]
fn autograd_entries_are_checked() {
    let err = match load_inputs(&fixture("bad_autograd.yaml"), &fixture("native.yaml"), None) {
        Ok(i) => match generate_code(&i, false, None) {
            Ok(_) => panic!("bad autograd entries generate"),
            Err(e) => e.to_string(),
        },
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("'rleu' is not an operator of the native YAML"),
        "{err}"
    );
    assert!(err.contains("did you mean 'relu'?"), "{err}");
    assert!(err.contains("`autograd:` lists operator names"), "{err}");
    assert!(err.contains("bad_autograd.yaml:7:5"), "{err}");
}

#[test]
fn named_kernels_and_autogen_outs_need_no_hand_written_forwarding() {
    let code = generate_code(&inputs("named.yaml"), true, None).expect("generates");
    let part = backend_part(&code.module);
    // A named kernel: the trait fn is provided and forwards (relative paths are
    // from the crate root; `crate::` paths are kept).
    assert!(
        part.contains("crate::kernels::add_out(self_, other, alpha, out)"),
        "{part}"
    );
    assert!(
        part.contains("-> Result<Tensor> {\n        crate::kernels::mul(self_, other)\n    }"),
        "{part}"
    );
    // A pinned entry forwards with the pinned schema's arguments.
    assert!(part.contains("crate::kernels::sum_old(self_)"), "{part}");
    // `relu.out` is listed on `relu_` by `autogen:`, but derives from the
    // functional `relu`: run it, then hand the result to the copy rule.
    assert!(part.contains("let r0 = Self::relu(ks, self_)?;"), "{part}");
    assert!(
        part.contains("crate::kernels::copy_outs(\"relu.out\", &[(&r0, out)])?;"),
        "{part}"
    );
    // An entry without a kernel stays for the backend to write.
    assert!(
        part.contains("fn square(ks: DispatchKeySet, self_: &Tensor) -> Result<Tensor>;"),
        "{part}"
    );
    // The starter implements only that one.
    let skeleton = code.skeleton.expect("skeleton");
    assert!(skeleton.contains("fn square("), "{skeleton}");
    for provided in ["fn add_out(", "fn mul_tensor(", "fn relu_out(", "fn sum("] {
        assert!(!skeleton.contains(provided), "{provided}: {skeleton}");
    }
    insta::assert_snapshot!("named_backend_trait", trait_part(part));
}

/// The kernel trait, out of the backend items.
fn trait_part(part: &str) -> &str {
    let start = part.find("pub trait NamedKernels").expect("trait");
    let end = part[start..].find("\n}\n").expect("trait end") + start + 3;
    &part[start..end]
}

#[test]
fn coverage_counts_what_the_runtime_has() {
    // Without the CPU backend, `relu.out` (autogen, no CPU entry in the native
    // YAML) has no CPU kernel the fallback could run; `square` is a composite only
    // because composites.yaml beside the native YAML lists it.
    let (report, _) = coverage_of(&inputs("emu.yaml"));
    let status = |r: &opal_codegen::backend::Coverage, op: &str| {
        r.ops.iter().find(|row| row.op == op).map(|row| row.status)
    };
    assert_eq!(status(&report, "square"), Some(Status::Composite));
    assert_eq!(status(&report, "relu.out"), Some(Status::Missing));
    // With it, the fallback runs exactly what the CPU backend has.
    let mut i = inputs("emu.yaml");
    with_cpu_backend(&mut i, &fixture("cpu.yaml")).expect("cpu backend resolves");
    let (report, _) = coverage_of(&i);
    assert_eq!(status(&report, "relu.out"), Some(Status::Fallback));
    assert_eq!(status(&report, "relu_"), Some(Status::Fallback));
    assert_eq!(status(&report, "relu"), Some(Status::Fallback));
    assert_eq!(status(&report, "_cuda_only"), Some(Status::Missing));
    assert_eq!(status(&report, "square"), Some(Status::Composite));
}
