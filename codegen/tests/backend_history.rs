//! Real schema history: a backend whose kernels were written against PyTorch 1.13,
//! pinned op by op (`- func: <1.13 schema>`), generated against PyTorch 2.15. Every
//! 1.13 schema that changed by 2.15 (the reduced 1.13 fixture holds exactly those
//! entries) is classified: identical Rust signature, adapter (only defaulted
//! arguments added), or a precise error; the classification of each op is
//! snapshotted, a hand-checked sample is asserted, and both parts are generated for
//! real (the compatible pins generate; each incompatible one is a located error).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use opal_codegen::backend::run::{coverage_of, generate_code, load_inputs};
use opal_codegen::backend::{classify, Compat};
use opal_codegen::model::Origin;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn native_2_15() -> PathBuf {
    root().join("../shared/fixtures/pytorch-2.15/native_functions.yaml")
}

fn yaml_1_13() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/pytorch-releases/1.13.1/native_functions.yaml")
}

/// (op, classification) for every declared 1.13 function also in 2.15.
fn classify_all() -> Vec<(String, Result<Compat, String>)> {
    let old = opal_codegen::load(yaml_1_13()).expect("1.13 fixture loads");
    let new = opal_codegen::load(native_2_15()).expect("2.15 loads");
    let by_name: std::collections::HashMap<String, &opal_codegen::model::NativeFunction> = new
        .functions
        .iter()
        .map(|f| (f.func.name.to_string(), f))
        .collect();
    old.functions
        .iter()
        .filter(|f| matches!(f.origin, Origin::Declared))
        .filter_map(|f| {
            let name = f.func.name.to_string();
            let cur = by_name.get(&name)?;
            Some((name, classify(&f.func, &cur.func).map_err(|e| e.message)))
        })
        .collect()
}

fn class_of<'a>(
    all: &'a [(String, Result<Compat, String>)],
    op: &str,
) -> &'a Result<Compat, String> {
    &all.iter()
        .find(|(n, _)| n == op)
        .unwrap_or_else(|| panic!("{op} not classified"))
        .1
}

fn added_names(c: &Result<Compat, String>) -> Vec<String> {
    match c {
        Ok(Compat::Adapter { added }) => added
            .iter()
            .map(|a| format!("{}={}", a.name, a.default))
            .collect(),
        other => panic!("expected an adapter, got {other:?}"),
    }
}

#[test]
fn pinned_1_13_backend_against_2_15_op_by_op() {
    let all = classify_all();
    let mut listing = String::new();
    let (mut same, mut adapted, mut errors) = (0, 0, 0);
    for (op, c) in &all {
        match c {
            Ok(Compat::Identical) => {
                same += 1;
                let _ = writeln!(listing, "{op}: identical");
            }
            Ok(Compat::Adapter { .. }) => {
                adapted += 1;
                let _ = writeln!(listing, "{op}: adapter ({})", added_names(c).join(", "));
            }
            Err(m) => {
                errors += 1;
                let _ = writeln!(listing, "{op}: error: {m}");
            }
        }
    }
    let summary = format!(
        "{} ops: {same} identical, {adapted} adapter, {errors} error",
        all.len()
    );
    insta::assert_snapshot!("pytorch_1_13_vs_2_15", format!("{summary}\n{listing}"));

    // Hand-checked against both files.
    // int -> SymInt only: the Rust signature did not change.
    assert_eq!(class_of(&all, "embedding"), &Ok(Compat::Identical));
    // bool[3]/int[] -> SymInt[] plus new keyword-only arguments with defaults.
    assert_eq!(
        added_names(class_of(&all, "_assert_tensor_metadata")),
        ["device=None", "layout=None"]
    );
    assert_eq!(
        added_names(class_of(&all, "stft")),
        ["align_to_window=None"]
    );
    assert_eq!(
        added_names(class_of(&all, "pad_sequence")),
        ["padding_side=\"right\""]
    );
    assert_eq!(
        added_names(class_of(&all, "to_sparse")),
        ["layout=None", "blocksize=None", "dense_dim=None"]
    );
    assert_eq!(
        added_names(class_of(&all, "_foreach_norm.Scalar")),
        ["dtype=None"]
    );
    // `correction` went from int? to Scalar?: a different Rust type.
    assert_eq!(
        class_of(&all, "std.correction"),
        &Err(
            "argument 'correction' of 'std.correction' was retyped: pinned int? -> current Scalar?"
                .to_string()
        )
    );
    // `from` became `from_`: a rename is a new required argument.
    assert!(
        matches!(class_of(&all, "can_cast"), Err(m) if m.contains("was 'from' renamed to 'from_'?"))
    );
    // A sixth return.
    assert!(
        matches!(class_of(&all, "_lstm_mps"), Err(m) if m.starts_with("the returns of '_lstm_mps' changed"))
    );
    // `noise` became mutable.
    assert!(
        matches!(class_of(&all, "rrelu_with_noise"), Err(m) if m.contains("alias annotation of argument 'noise'"))
    );
    // An argument was removed.
    assert!(
        matches!(class_of(&all, "_scaled_dot_product_attention_math"), Err(m) if m.contains("'bool need_attn_weights' of the pinned schema is not in the current"))
    );
}

/// Ops the report marks as derived from a supported out= kernel.
fn inputs_derived(report: &opal_codegen::backend::Coverage) -> usize {
    report
        .ops
        .iter()
        .filter(|r| r.detail.starts_with("derived from"))
        .count()
}

/// Writes a backend YAML pinning `ops` to their 1.13 schemas.
fn backend_yaml(dir: &Path, name: &str, ops: &[(String, String)]) -> PathBuf {
    let mut y = String::from(
        "backend: Legacy\ndispatch_key: PrivateUse3\ndevice: legacy\nfallback: cpu\nsupported:\n",
    );
    for (_, schema) in ops {
        let _ = writeln!(y, "  - func: {schema}");
    }
    let path = dir.join(name);
    std::fs::write(&path, y).expect("write backend YAML");
    path
}

#[test]
fn a_1_13_backend_generates_against_2_15() {
    let old = opal_codegen::load(yaml_1_13()).expect("1.13 fixture loads");
    let all = classify_all();
    let schema_of = |op: &str| {
        old.functions
            .iter()
            .find(|f| f.func.name.to_string() == op)
            .map(|f| f.func.to_string())
            .expect("1.13 schema")
    };
    let (ok, bad): (Vec<_>, Vec<_>) = all.iter().partition(|(_, c)| c.is_ok());
    let ok: Vec<(String, String)> = ok.iter().map(|(n, _)| (n.clone(), schema_of(n))).collect();
    let bad: Vec<(String, String)> = bad.iter().map(|(n, _)| (n.clone(), schema_of(n))).collect();
    let dir = std::env::temp_dir().join(format!("opal-backend-history-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    // The compatible pins generate: one trait method per op, 25 adapters.
    let inputs =
        load_inputs(&backend_yaml(&dir, "ok.yaml", &ok), &native_2_15(), None).expect("loads");
    let code = generate_code(&inputs, false, None).expect("compatible pins generate");
    assert_eq!(
        code.module
            .matches("pub fn register<K: LegacyKernels>")
            .count(),
        1
    );
    let adapters = code
        .module
        .split("pub mod adapters")
        .nth(1)
        .expect("adapters");
    let adapters = adapters
        .split("struct Transfer<K>")
        .next()
        .expect("adapters module");
    let n_adapters = adapters.matches("<K: LegacyKernels>(").count();
    let (report, errs) = coverage_of(&inputs);
    assert!(errs.is_none());
    // Coverage also counts ops derived (structured_delegate) from an adapted out= kernel.
    assert!(
        report.totals.adapter >= n_adapters,
        "{} < {n_adapters}",
        report.totals.adapter
    );
    assert_eq!(
        report.totals.native + report.totals.adapter,
        ok.len() + inputs_derived(&report)
    );
    assert_eq!(
        n_adapters,
        all.iter()
            .filter(|(_, c)| matches!(c, Ok(Compat::Adapter { .. })))
            .count()
    );

    // The incompatible ones fail, one located error each, naming both files.
    let inputs =
        load_inputs(&backend_yaml(&dir, "bad.yaml", &bad), &native_2_15(), None).expect("loads");
    let e = generate_code(&inputs, false, None).expect_err("incompatible pins fail");
    assert_eq!(e.items.len(), bad.len());
    let text = e.render(false, 120);
    assert!(text.contains("bad.yaml:6:"), "{text}");
    assert!(text.contains("native_functions.yaml:"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
