//! Golden test: every case of `cases.json` + `tensors.safetensors` (PyTorch 2.15's
//! reference outputs, see `../shared/README.md`) is run by op name through boxed
//! calling and compared with the reference: dtype and shape exactly, values within
//! the case's `atol`/`rtol` (NaN equals NaN), or shape and dtype only for
//! `check: shape_dtype` (random ops; `shape_dtype_outputs` lists single outputs
//! checked so, such as the indices `topk` picks among tied values). An expected `none` (PyTorch's undefined tensor,
//! e.g. a gradient `output_mask` did not request) passes exactly when Opal's output
//! is undefined, and an undefined output never passes for an expected tensor.
//!
//! Two runs share the loader: `golden_cpu` (values, on CPU) and `golden_meta` (the
//! same cases on meta tensors: the Meta backend must predict every output's shape
//! and dtype without data).
//!
//! The directory is `OPAL_GOLDEN_DIR` (a relative path is taken from the repository
//! root), default `../shared/fixtures/golden` from the repository root:
//! `OPAL_GOLDEN_DIR=<dir> cargo test -p opal-tests --test integration golden::`.
//!
//! No case is skipped silently: skips are listed below with their reason and the
//! test asserts that exactly those were skipped.
//!
//! Owns: the golden loader, the JSON -> `IValue` conversion and the comparison.
//! Must not: special-case an op to make it pass (fix the kernel instead).

use opal::dispatch::{DispatchKey, Dispatcher};
use opal::{DType, IValue, Stack};
use opal_tests::golden::{compare_tensor, ivalue_kind, to_ivalue, Golden, Target};
use serde_json::Value;
use std::collections::BTreeSet;

/// Cases of the OpInfo replay (`golden-core/opinfo`) that Opal does not pass yet,
/// by target, operator and the dtype of the case's first tensor, with why. A
/// listed case that passes fails the test (take it off the list), as does any
/// unlisted failure.
const OPINFO_GAPS: &[(Target, &[&str], &[DType], &str)] = &[];

/// Why `case` of the OpInfo replay in `dir` is a known gap on `target`, if it is.
fn opinfo_gap(
    g: &Golden,
    dir: &std::path::Path,
    case: &Value,
    target: Target,
) -> Option<&'static str> {
    if !dir.ends_with("opinfo") {
        return None;
    }
    let op = case["op"].as_str()?;
    let first = case["args"]
        .as_array()?
        .iter()
        .find_map(|a| a.get("tensor"))?;
    let dtype = g.tensor(first, Target::Cpu).ok()?.dtype();
    OPINFO_GAPS
        .iter()
        .find(|(t, ops, dtypes, _)| *t == target && ops.contains(&op) && dtypes.contains(&dtype))
        .map(|gap| gap.3)
}

/// Why the CPU run cannot check a case yet: no kernel serves the op on CPU (no CPU
/// kernel and no composite kernel registered). Today every golden op has one (the
/// composite ops, `split.Tensor` included, run through the runtime's composite
/// kernels), so the list is empty; the exact-list assertion keeps it that way.
const NO_CPU_KERNEL: &str = "no kernel serves this op on CPU (no CPU or composite kernel)";

/// Cases the CPU run skips with the shipped data set (see [`NO_CPU_KERNEL`]).
const NO_CPU_KERNEL_CASES: &[&str] = &[];

/// Cases only the meta run skips with the shipped data set: their output shape
/// depends on tensor *values*, which meta tensors do not have (PyTorch's meta
/// tensors refuse them too).
const META_DATA_DEPENDENT_CASES: &[&str] = &["index.Tensor/3", "one_hot/0"];

/// Why the CPU run cannot check `case`, if it cannot (recognised in any data set).
fn cpu_skip_reason(_g: &Golden, case: &Value) -> Option<String> {
    let op = Dispatcher::global().find(&format!("aten::{}", case["op"].as_str()?))?;
    let serving = [
        DispatchKey::CPU,
        DispatchKey::CompositeImplicitAutograd,
        DispatchKey::CompositeExplicitAutograd,
        DispatchKey::CompositeExplicitAutogradNonFunctional,
    ];
    (!serving.iter().any(|k| op.has_kernel_for(*k))).then(|| NO_CPU_KERNEL.to_string())
}

/// Why the meta run cannot check `case`, if it cannot (recognised in any data set).
fn meta_skip_reason(g: &Golden, case: &Value) -> Option<String> {
    // Cases generated here mark their own data-dependent outputs.
    if let Some(why) = case.get("meta_skip").and_then(Value::as_str) {
        return Some(why.to_string());
    }
    let args = case["args"].as_array()?;
    match case["op"].as_str()? {
        "index.Tensor" => {
            let keys = args.get(1)?.get("optional_tensor_list")?.as_array()?;
            let mask = keys.iter().filter_map(Value::as_str).any(|k| {
                g.tensors
                    .get(k)
                    .is_some_and(|t| matches!(t.dtype(), DType::Bool | DType::U8))
            });
            mask.then(|| {
                "boolean-mask indexing: the output length is the number of true elements".into()
            })
        }
        "one_hot" => {
            let n = args.get(1)?;
            let inferred =
                n.get("default").is_some() || n.get("int").and_then(Value::as_i64) == Some(-1);
            inferred.then(|| "num_classes=-1 infers the class count from the largest value".into())
        }
        _ => None,
    }
}

fn compare_output(
    g: &Golden,
    expected: &Value,
    actual: &IValue,
    case: &Value,
    target: Target,
    index: usize,
) -> Result<(), String> {
    let atol = case["atol"].as_f64().unwrap_or(0.0);
    let rtol = case["rtol"].as_f64().unwrap_or(0.0);
    // `shape_dtype_outputs`: outputs whose values PyTorch leaves to the
    // implementation (which of several tied elements `topk` reports).
    let free = case["shape_dtype_outputs"]
        .as_array()
        .is_some_and(|o| o.iter().any(|i| i.as_u64() == Some(index as u64)));
    let values = target == Target::Cpu && case["check"].as_str() != Some("shape_dtype") && !free;
    let (kind, x) = expected
        .as_object()
        .and_then(|o| o.iter().next())
        .ok_or("bad expected output")?;
    let expect_tensor = |k: &Value| g.tensor(k, Target::Cpu);
    match kind.as_str() {
        "tensor" => {
            compare_tensor(&expect_tensor(x)?, actual, atol, rtol, values)?;
            if target == Target::Meta {
                check_on_meta(actual)?;
            }
            Ok(())
        }
        "tensor_list" => {
            let IValue::TensorList(ts) = actual else {
                return Err(format!(
                    "expected a tensor list, got {}",
                    ivalue_kind(actual)
                ));
            };
            let keys = x.as_array().ok_or("bad tensor_list")?;
            if keys.len() != ts.len() {
                return Err(format!("{} tensors, expected {}", ts.len(), keys.len()));
            }
            for (i, (k, t)) in keys.iter().zip(ts).enumerate() {
                let a = IValue::Tensor(t.clone());
                compare_tensor(&expect_tensor(k)?, &a, atol, rtol, values)
                    .map_err(|e| format!("[{i}]: {e}"))?;
                if target == Target::Meta {
                    check_on_meta(&a)?;
                }
            }
            Ok(())
        }
        // PyTorch's undefined tensor (e.g. a gradient `output_mask` did not
        // request): Opal's boxes as `None`; an undefined tensor left inside
        // `IValue::Tensor` is accepted too, since it is the same value.
        "none" => match actual {
            IValue::None => Ok(()),
            IValue::Tensor(t) if !t.is_defined() => Ok(()),
            other => Err(format!(
                "expected None (an undefined tensor: an output not requested), got {}",
                ivalue_kind(other)
            )),
        },
        k => Err(format!("unknown output kind '{k}'")),
    }
}

fn check_on_meta(v: &IValue) -> Result<(), String> {
    match v {
        IValue::Tensor(t) if !t.device().is_meta() => {
            Err(format!("result on {:?}, expected meta", t.device()))
        }
        _ => Ok(()),
    }
}

/// Runs one case; `Err` carries a short reason.
fn run_case(g: &Golden, case: &Value, target: Target) -> Result<(), String> {
    let op = case["op"].as_str().ok_or("case without op")?;
    let name = format!("aten::{op}");
    let handle = Dispatcher::global()
        .find(&name)
        .ok_or_else(|| format!("operator {name} is not defined"))?;
    let def = handle
        .def()
        .ok_or_else(|| format!("operator {name} has no schema"))?;
    let args = case["args"].as_array().ok_or("case without args")?;
    if args.len() != def.args.len() {
        return Err(format!(
            "{} encoded arguments, schema has {}",
            args.len(),
            def.args.len()
        ));
    }
    let mut stack: Stack = Vec::with_capacity(args.len());
    for (v, a) in args.iter().zip(def.args) {
        stack.push(to_ivalue(g, v, a, target).map_err(|e| format!("argument '{}': {e}", a.name))?);
    }
    Dispatcher::global()
        .call_boxed(&name, &mut stack)
        .map_err(|e| format!("error: {e}"))?;
    let outputs = case["outputs"].as_array().ok_or("case without outputs")?;
    if stack.len() != outputs.len() {
        return Err(format!(
            "{} results, expected {}",
            stack.len(),
            outputs.len()
        ));
    }
    for (i, (e, a)) in outputs.iter().zip(&stack).enumerate() {
        compare_output(g, e, a, case, target, i).map_err(|r| format!("output {i}: {r}"))?;
    }
    Ok(())
}

/// Runs every case of every case directory (`case_dirs`) that `skip` does not
/// exclude; prints the summary and the failures; asserts that nothing failed and,
/// for the shipped data set, that the skipped cases are exactly `listed`.
fn run_all(
    target: Target,
    label: &str,
    listed: &[&[&str]],
    skip: fn(&Golden, &Value) -> Option<String>,
) {
    let dirs = opal_tests::golden::case_dirs(
        "OPAL_GOLDEN_DIR",
        "../shared/fixtures/golden",
        "golden-core",
        "cases.json",
    );
    let mut total_failed = 0;
    let mut total_run = 0;
    for (dir, shipped) in dirs {
        let g = opal_tests::golden::load(&dir, "cases.json");
        let mut passed = 0;
        let mut failures: Vec<(String, String)> = Vec::new();
        let mut skipped = BTreeSet::new();
        for case in &g.cases {
            let id = case["id"].as_str().unwrap_or("?").to_string();
            if let Some(why) = skip(&g, case) {
                println!("  skip {id}: {why}");
                skipped.insert(id);
                continue;
            }
            match (
                run_case(&g, case, target),
                opinfo_gap(&g, &dir, case, target),
            ) {
                (Ok(()), None) => passed += 1,
                (Err(e), None) => failures.push((id, e)),
                (Err(_), Some(why)) => println!("  known gap {id}: {why}"),
                (Ok(()), Some(_)) => failures.push((
                    id,
                    "passes but is listed in OPINFO_GAPS: take it off the list".into(),
                )),
            }
        }
        println!(
            "golden{label} {}: {passed} passed, {} failed",
            dir.display(),
            failures.len()
        );
        for (id, why) in &failures {
            println!("  FAIL {id}: {why}");
        }
        if shipped {
            let listed: BTreeSet<String> = listed
                .iter()
                .flat_map(|l| l.iter())
                .map(|id| id.to_string())
                .collect();
            assert_eq!(
                skipped, listed,
                "skipped cases differ from the listed skips"
            );
        }
        total_failed += failures.len();
        total_run += passed + failures.len();
    }
    assert!(
        total_failed == 0,
        "golden{label}: {total_failed} of {total_run} cases failed"
    );
}

#[test]
fn golden_cpu() {
    opal_cpu::init().expect("registering the CPU backend");
    run_all(Target::Cpu, "", &[NO_CPU_KERNEL_CASES], cpu_skip_reason);
}

#[test]
fn golden_meta() {
    opal_meta::init().expect("registering the Meta backend");
    run_all(
        Target::Meta,
        " (meta)",
        &[META_DATA_DEPENDENT_CASES],
        meta_skip_reason,
    );
}
