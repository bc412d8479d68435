//! Golden test: every case of `cases.json` + `tensors.safetensors` (PyTorch 2.15's
//! reference outputs, see `../shared/README.md`) is run by op name through boxed
//! calling and compared with the reference: dtype and shape exactly, values within
//! the case's `atol`/`rtol` (NaN equals NaN), or shape and dtype only for
//! `check: shape_dtype` (random ops). An expected `none` (PyTorch's undefined tensor,
//! e.g. a gradient `output_mask` did not request) passes exactly when Opal's output
//! is undefined, and an undefined output never passes for an expected tensor.
//!
//! Two runs share the loader: `golden_cpu` (values, on CPU) and `golden_meta` (the
//! same cases on meta tensors: the Meta backend must predict every output's shape
//! and dtype without data).
//!
//! The directory is `OPAL_GOLDEN_DIR` (a relative path is taken from the repository
//! root), default `../shared/fixtures/golden` from the repository root:
//! `OPAL_GOLDEN_DIR=<dir> cargo test -p opal-tests --test golden`.
//!
//! No case is skipped silently: skips are listed below with their reason and the
//! test asserts that exactly those were skipped.
//!
//! Owns: the golden loader, the JSON -> `IValue` conversion and the comparison.
//! Must not: special-case an op to make it pass (fix the kernel instead).

use opal::dispatch::{ArgDef, DispatchKey, Dispatcher};
use opal::{DType, Device, IValue, Scalar, Stack, Tensor};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

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
fn cpu_skip_reason(_g: &Golden, case: &Value) -> Option<&'static str> {
    let op = Dispatcher::global().find(&format!("aten::{}", case["op"].as_str()?))?;
    let serving = [
        DispatchKey::CPU,
        DispatchKey::CompositeImplicitAutograd,
        DispatchKey::CompositeExplicitAutograd,
        DispatchKey::CompositeExplicitAutogradNonFunctional,
    ];
    (!serving.iter().any(|k| op.has_kernel_for(*k))).then_some(NO_CPU_KERNEL)
}

/// Why the meta run cannot check `case`, if it cannot (recognised in any data set).
fn meta_skip_reason(g: &Golden, case: &Value) -> Option<&'static str> {
    let args = case["args"].as_array()?;
    match case["op"].as_str()? {
        "index.Tensor" => {
            let keys = args.get(1)?.get("optional_tensor_list")?.as_array()?;
            let mask = keys.iter().filter_map(Value::as_str).any(|k| {
                g.tensors
                    .get(k)
                    .is_some_and(|t| matches!(t.dtype(), DType::Bool | DType::U8))
            });
            mask.then_some(
                "boolean-mask indexing: the output length is the number of true elements",
            )
        }
        "one_hot" => {
            let n = args.get(1)?;
            let inferred =
                n.get("default").is_some() || n.get("int").and_then(Value::as_i64) == Some(-1);
            inferred.then_some("num_classes=-1 infers the class count from the largest value")
        }
        _ => None,
    }
}

struct Golden {
    cases: Vec<Value>,
    tensors: HashMap<String, Tensor>,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn golden_dir() -> PathBuf {
    match std::env::var_os("OPAL_GOLDEN_DIR") {
        Some(d) => {
            let p = PathBuf::from(d);
            if p.is_absolute() {
                p
            } else {
                repo_root().join(p)
            }
        }
        None => repo_root().join("../shared/fixtures/golden"),
    }
}

fn st_dtype(d: safetensors::Dtype) -> Result<DType, String> {
    use safetensors::Dtype as S;
    Ok(match d {
        S::BOOL => DType::Bool,
        S::U8 => DType::U8,
        S::I8 => DType::I8,
        S::I16 => DType::I16,
        S::I32 => DType::I32,
        S::I64 => DType::I64,
        S::F16 => DType::F16,
        S::BF16 => DType::BF16,
        S::F32 => DType::F32,
        S::F64 => DType::F64,
        other => return Err(format!("unsupported safetensors dtype {other:?}")),
    })
}

fn load() -> Golden {
    let dir = golden_dir();
    let cases_path = dir.join("cases.json");
    let text = std::fs::read_to_string(&cases_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", cases_path.display()));
    let json: Value = serde_json::from_str(&text).expect("cases.json is not valid JSON");
    let cases = json["cases"]
        .as_array()
        .expect("cases.json has no `cases` array")
        .clone();
    let st_path = dir.join("tensors.safetensors");
    let bytes = std::fs::read(&st_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", st_path.display()));
    let st = safetensors::SafeTensors::deserialize(&bytes).expect("invalid safetensors file");
    let mut tensors = HashMap::new();
    for (name, view) in st.tensors() {
        let dtype = st_dtype(view.dtype()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let shape: Vec<i64> = view.shape().iter().map(|&s| s as i64).collect();
        let t = Tensor::from_bytes(view.data(), &shape, dtype)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        tensors.insert(name, t);
    }
    Golden { cases, tensors }
}

/// Where a case runs: CPU with real data, or meta (inputs replaced by data-less
/// meta tensors of the same sizes and dtype; factory ops asked for `device=meta`).
#[derive(Copy, Clone, PartialEq)]
enum Target {
    Cpu,
    Meta,
}

impl Golden {
    fn tensor(&self, key: &Value, target: Target) -> Result<Tensor, String> {
        let key = key.as_str().ok_or("tensor key is not a string")?;
        let t = self
            .tensors
            .get(key)
            .ok_or_else(|| format!("tensor '{key}' missing from tensors.safetensors"))?;
        match target {
            Target::Cpu => Ok(t.clone()),
            Target::Meta => {
                Tensor::empty_strided(t.sizes(), t.strides(), t.dtype(), Device::meta())
                    .map_err(|e| e.to_string())
            }
        }
    }
}

fn float_of(v: &Value) -> Result<f64, String> {
    match v {
        Value::String(s) => match s.as_str() {
            "inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            "nan" => Ok(f64::NAN),
            _ => Err(format!("bad float string '{s}'")),
        },
        _ => v.as_f64().ok_or_else(|| format!("not a float: {v}")),
    }
}

fn int_of(v: &Value) -> Result<i64, String> {
    v.as_i64().ok_or_else(|| format!("not an int: {v}"))
}

fn list_of<T>(v: &Value, f: impl Fn(&Value) -> Result<T, String>) -> Result<Vec<T>, String> {
    v.as_array()
        .ok_or_else(|| format!("not a list: {v}"))?
        .iter()
        .map(f)
        .collect()
}

fn scalar_of(v: &Value) -> Result<Scalar, String> {
    let (kind, x) = v
        .as_object()
        .and_then(|o| o.iter().next())
        .ok_or("empty scalar")?;
    Ok(match kind.as_str() {
        "int" => Scalar::Int(int_of(x)?),
        "float" => Scalar::Float(float_of(x)?),
        "bool" => Scalar::Bool(x.as_bool().ok_or("bad bool")?),
        k => return Err(format!("unknown scalar kind '{k}'")),
    })
}

/// Converts one encoded argument to the `IValue` its schema type takes.
fn to_ivalue(g: &Golden, v: &Value, arg: &ArgDef, target: Target) -> Result<IValue, String> {
    let ty = arg.ty.trim_end_matches('?');
    let is_list = ty.ends_with(']');
    let (kind, x) = v
        .as_object()
        .and_then(|o| o.iter().next())
        .ok_or_else(|| format!("bad value {v}"))?;
    let iv = match kind.as_str() {
        "default" => {
            let f = arg
                .default
                .ok_or_else(|| format!("argument '{}' has no schema default", arg.name))?;
            f()
        }
        "none" => IValue::None,
        "tensor" => IValue::Tensor(g.tensor(x, target)?),
        "tensor_list" => IValue::TensorList(list_of(x, |k| g.tensor(k, target))?),
        "optional_tensor_list" => IValue::OptionalTensorList(list_of(x, |k| {
            if k.is_null() {
                Ok(None)
            } else {
                g.tensor(k, target).map(Some)
            }
        })?),
        "int" if is_list => IValue::IntList(vec![int_of(x)?]),
        "int" if ty == "Scalar" => IValue::Scalar(Scalar::Int(int_of(x)?)),
        "int" if ty == "float" => IValue::Double(int_of(x)? as f64),
        "int" => IValue::Int(int_of(x)?),
        "float" if ty == "Scalar" => IValue::Scalar(Scalar::Float(float_of(x)?)),
        "float" => IValue::Double(float_of(x)?),
        "bool" if ty == "Scalar" => IValue::Scalar(Scalar::Bool(x.as_bool().ok_or("bad bool")?)),
        "bool" => IValue::Bool(x.as_bool().ok_or("bad bool")?),
        "int_list" => IValue::IntList(list_of(x, int_of)?),
        "float_list" => IValue::DoubleList(list_of(x, float_of)?),
        "bool_list" => IValue::BoolList(list_of(x, |b| {
            b.as_bool().ok_or_else(|| "bad bool".to_string())
        })?),
        "scalar" => IValue::Scalar(scalar_of(x)?),
        "dtype" => IValue::DType(
            DType::parse(x.as_str().ok_or("dtype is not a string")?).map_err(|e| e.to_string())?,
        ),
        "str" => IValue::Str(x.as_str().ok_or("str is not a string")?.to_string()),
        k => return Err(format!("unknown value kind '{k}'")),
    };
    // Factory ops choose their backend from `device`: on meta, ask for meta.
    if target == Target::Meta && ty == "Device" && matches!(iv, IValue::None) {
        return Ok(IValue::Device(Device::meta()));
    }
    Ok(iv)
}

/// Elements as f64 (complex: re, im pairs), in logical order.
fn values_f64(t: &Tensor) -> Result<Vec<f64>, String> {
    let b = t.to_bytes().map_err(|e| e.to_string())?;
    let chunks = |n: usize| b.chunks_exact(n);
    Ok(match t.dtype() {
        DType::Bool | DType::U8 => b.iter().map(|&x| x as f64).collect(),
        DType::I8 => b.iter().map(|&x| x as i8 as f64).collect(),
        DType::I16 => chunks(2)
            .map(|c| i16::from_ne_bytes([c[0], c[1]]) as f64)
            .collect(),
        DType::I32 => chunks(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap_or_default()) as f64)
            .collect(),
        DType::I64 => chunks(8)
            .map(|c| i64::from_ne_bytes(c.try_into().unwrap_or_default()) as f64)
            .collect(),
        DType::F16 => chunks(2)
            .map(|c| half::f16::from_ne_bytes([c[0], c[1]]).to_f64())
            .collect(),
        DType::BF16 => chunks(2)
            .map(|c| half::bf16::from_ne_bytes([c[0], c[1]]).to_f64())
            .collect(),
        DType::F32 | DType::C64 => chunks(4)
            .map(|c| f32::from_ne_bytes(c.try_into().unwrap_or_default()) as f64)
            .collect(),
        DType::F64 | DType::C128 => chunks(8)
            .map(|c| f64::from_ne_bytes(c.try_into().unwrap_or_default()))
            .collect(),
    })
}

fn compare_tensor(
    expected: &Tensor,
    actual: &IValue,
    atol: f64,
    rtol: f64,
    values: bool,
) -> Result<(), String> {
    let IValue::Tensor(a) = actual else {
        return Err(format!("expected a tensor, got {}", ivalue_kind(actual)));
    };
    // Its placeholder metadata (an empty f32 tensor) must not pass for a real one.
    if !a.is_defined() {
        return Err("expected a tensor, got an undefined tensor".into());
    }
    if a.dtype() != expected.dtype() {
        return Err(format!(
            "dtype {} != expected {}",
            a.dtype().name(),
            expected.dtype().name()
        ));
    }
    if a.sizes() != expected.sizes() {
        return Err(format!(
            "shape {:?} != expected {:?}",
            a.sizes(),
            expected.sizes()
        ));
    }
    if !values {
        return Ok(());
    }
    let (ev, av) = (values_f64(expected)?, values_f64(a)?);
    let bad: Vec<usize> = (0..ev.len())
        .filter(|&i| {
            let (e, x) = (ev[i], av[i]);
            !((e.is_nan() && x.is_nan()) || e == x || (x - e).abs() <= atol + rtol * e.abs())
        })
        .collect();
    match bad.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "{} of {} values differ (atol {atol}, rtol {rtol}); first at flat index {i}: got {}, expected {}",
            bad.len(),
            ev.len(),
            av[i],
            ev[i]
        )),
    }
}

fn ivalue_kind(v: &IValue) -> &'static str {
    match v {
        IValue::None => "None",
        IValue::Tensor(_) => "Tensor",
        IValue::TensorList(_) => "Tensor[]",
        IValue::Tuple(_) => "tuple",
        _ => "a non-tensor value",
    }
}

fn compare_output(
    g: &Golden,
    expected: &Value,
    actual: &IValue,
    case: &Value,
    target: Target,
) -> Result<(), String> {
    let atol = case["atol"].as_f64().unwrap_or(0.0);
    let rtol = case["rtol"].as_f64().unwrap_or(0.0);
    let values = target == Target::Cpu && case["check"].as_str() != Some("shape_dtype");
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
        compare_output(g, e, a, case, target).map_err(|r| format!("output {i}: {r}"))?;
    }
    Ok(())
}

/// Runs every case that `skip` does not exclude; prints the summary and the
/// failures; asserts that nothing failed and, for the shipped data set, that the
/// skipped cases are exactly `listed`.
fn run_all(
    target: Target,
    label: &str,
    listed: &[&[&str]],
    skip: fn(&Golden, &Value) -> Option<&'static str>,
) {
    let g = load();
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
        match run_case(&g, case, target) {
            Ok(()) => passed += 1,
            Err(e) => failures.push((id, e)),
        }
    }
    println!("golden{label}: {passed} passed, {} failed", failures.len());
    for (id, why) in &failures {
        println!("  FAIL {id}: {why}");
    }
    if std::env::var_os("OPAL_GOLDEN_DIR").is_none() {
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
    assert!(
        failures.is_empty(),
        "golden{label}: {} of {} cases failed",
        failures.len(),
        passed + failures.len()
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
