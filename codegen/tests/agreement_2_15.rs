//! The loaded model of PyTorch 2.15's file agrees with torchgen's own model
//! (`functions.jsonl`, 3,110 functions) field by field, in the same order.

use std::path::PathBuf;

use opal_codegen::model::{DeviceCheck, NativeFunction};
use serde_json::Value;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/pytorch-2.15")
}

fn ours(f: &NativeFunction) -> Value {
    let mut variants = Vec::new();
    if f.variants.function {
        variants.push("function");
    }
    if f.variants.method {
        variants.push("method");
    }
    let dispatch: serde_json::Map<String, Value> = f
        .dispatch
        .iter()
        .map(|(k, v)| (k.clone(), Value::from(v.kernel.clone())))
        .collect();
    let mut cpp_no_default_args = f.cpp_no_default_args.clone();
    cpp_no_default_args.sort();
    serde_json::json!({
        "schema": f.func.to_string(),
        "line": f.loc.line,
        "kind": f.func.kind().as_str(),
        "variants": variants,
        "dispatch": dispatch,
        "structured": f.structured,
        "structured_delegate": f.structured_delegate.as_ref().map(|d| d.to_string()),
        "tags": f.tags,
        "autogen": f.autogen.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        "manual_cpp_binding": f.manual_cpp_binding,
        "device_check": match f.device_check { DeviceCheck::ExactSame => "ExactSame", DeviceCheck::NoCheck => "NoCheck" },
        "device_guard": f.device_guard,
        "python_module": f.python_module,
        "category_override": f.category_override,
        "cpp_no_default_args": cpp_no_default_args,
        "is_abstract": f.is_abstract,
        "has_composite_implicit_autograd_kernel": f.has_composite_implicit_autograd_kernel,
        "has_composite_explicit_autograd_kernel": f.has_composite_explicit_autograd_kernel,
    })
}

#[test]
fn model_agrees_with_torchgen() {
    let model = match opal_codegen::load(dir().join("native_functions.yaml")) {
        Ok(m) => m,
        Err(d) => panic!("{}", d.render(false, 120)),
    };
    let want: Vec<Value> = std::fs::read_to_string(dir().join("functions.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(want.len(), 3110);
    let names: Vec<String> = model.functions.iter().map(|f| f.func.to_string()).collect();
    let missing: Vec<&str> = want
        .iter()
        .filter_map(|w| w["schema"].as_str())
        .filter(|s| !names.iter().any(|n| n == s))
        .collect();
    let extra: Vec<&String> = names
        .iter()
        .filter(|n| {
            !want
                .iter()
                .any(|w| w["schema"].as_str() == Some(n.as_str()))
        })
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:#?}\nextra {extra:#?}"
    );
    assert_eq!(model.functions.len(), want.len(), "function count");
    let mut bad = Vec::new();
    for (f, w) in model.functions.iter().zip(&want) {
        let o = ours(f);
        let mut w = w.clone();
        // torchgen stores cpp_no_default_args as a set; compare sorted.
        if let Some(a) = w["cpp_no_default_args"].as_array_mut() {
            a.sort_by(|x, y| x.as_str().cmp(&y.as_str()));
        }
        for (k, v) in o.as_object().unwrap() {
            if w[k] != *v {
                bad.push(format!(
                    "{} [{}]: ours {} torchgen {}",
                    w["schema"], k, v, w[k]
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} differences:\n{}",
        bad.len(),
        bad[..bad.len().min(30)].join("\n")
    );
}
