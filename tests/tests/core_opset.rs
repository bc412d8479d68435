//! The core ATen opset: every operator PyTorch 2.15 tags `core` (the set that
//! `torch.export`'s decompositions reduce a model to) is defined by Opal with
//! PyTorch's schema, carries the `core` tag here too, and has a kernel that serves
//! it on CPU and on Meta. The list is read from PyTorch's own
//! `native_functions.yaml` in `../shared/fixtures/pytorch-2.15/`, so the count cannot
//! drift: an operator PyTorch adds to the set, or one dropped here, fails the test.
//! Every one of them is defined: a missing one fails the test with its name.
//!
//! Owns: the opset's completeness. Must not: check values (the golden tests do).

use opal::dispatch::{DispatchKey, Dispatcher};
use opal_tests::scratch;
use std::collections::BTreeMap;

/// `name.overload` -> canonical schema of every entry tagged `core` in `yaml`.
fn core_schemas(yaml: &std::path::Path) -> BTreeMap<String, String> {
    let model = opal_codegen::load(yaml).unwrap_or_else(|e| panic!("{e}"));
    model
        .functions
        .iter()
        .filter(|f| f.tags.iter().any(|t| t == "core"))
        .map(|f| (f.func.name.to_string(), f.func.to_string()))
        .collect()
}

fn pytorch_core() -> BTreeMap<String, String> {
    let root = scratch::workspace_root();
    core_schemas(&root.join("../shared/fixtures/pytorch-2.15/native_functions.yaml"))
}

fn opal_core() -> BTreeMap<String, String> {
    core_schemas(&scratch::workspace_root().join("runtime/native_functions.yaml"))
}

#[test]
fn the_core_tag_marks_pytorchs_193_operators_with_their_schemas() {
    let theirs = pytorch_core();
    assert_eq!(theirs.len(), 193, "PyTorch 2.15 tags 193 operators core");
    let ours = opal_core();
    let missing: Vec<&str> = theirs
        .keys()
        .filter(|k| !ours.contains_key(*k))
        .map(String::as_str)
        .collect();
    let extra: Vec<&String> = ours.keys().filter(|k| !theirs.contains_key(*k)).collect();
    let differing: Vec<String> = theirs
        .iter()
        .filter_map(|(k, s)| {
            let o = ours.get(k)?;
            (o != s).then(|| format!("{k}:\n  PyTorch: {s}\n  Opal:    {o}"))
        })
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty() && differing.is_empty(),
        "core opset differs from PyTorch 2.15's:\n{} missing: {missing:?}\n{} tagged core here only: {extra:?}\n{} with another schema:\n{}",
        missing.len(),
        extra.len(),
        differing.len(),
        differing.join("\n")
    );
}

#[test]
fn every_core_operator_has_a_cpu_and_a_meta_kernel() {
    opal_cpu::init().expect("registering the CPU backend");
    opal_meta::init().expect("registering the Meta backend");
    let composite = [
        DispatchKey::CompositeImplicitAutograd,
        DispatchKey::CompositeExplicitAutograd,
        DispatchKey::CompositeExplicitAutogradNonFunctional,
    ];
    let mut problems = Vec::new();
    for name in pytorch_core().keys() {
        let Some(op) = Dispatcher::global().find(&format!("aten::{name}")) else {
            problems.push(format!("{name}: not defined"));
            continue;
        };
        for backend in [DispatchKey::CPU, DispatchKey::Meta] {
            let served =
                op.has_kernel_for(backend) || composite.iter().any(|k| op.has_kernel_for(*k));
            if !served {
                problems.push(format!(
                    "{name}: no {backend:?} or composite kernel (registered: {:?})",
                    op.registered_keys()
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} core operators are not served:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
