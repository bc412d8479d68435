//! The golden fixtures' loader and value conversion, shared by `tests/golden.rs`
//! (outputs) and `tests/golden_grad.rs` (gradients): JSON-encoded arguments to
//! `IValue`s, safetensors to tensors, and the elementwise comparison
//! (`|actual - expected| <= atol + rtol * |expected|`, NaN equals NaN).
//!
//! Owns: decoding and comparison. Must not: know any operator.

use opal::dispatch::ArgDef;
use opal::{DType, Device, IValue, Scalar, Tensor};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub struct Golden {
    pub cases: Vec<Value>,
    pub tensors: HashMap<String, Tensor>,
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The directory named by environment variable `var` (relative: from the
/// repository root), else `default` under the repository root.
pub fn fixture_dir(var: &str, default: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(d) => {
            let p = PathBuf::from(d);
            if p.is_absolute() {
                p
            } else {
                repo_root().join(p)
            }
        }
        None => repo_root().join(default),
    }
}

/// The case directories a golden-style test runs: the one named by `var` when it is
/// set; else the shipped set `default` followed by every subdirectory of
/// `tests/fixtures/<ours>` that holds `cases_file` (the core-opset cases generated
/// from PyTorch by the scripts beside them), in name order. The flag is true for
/// the shipped default set, whose skip lists the tests assert exactly.
pub fn case_dirs(var: &str, default: &str, ours: &str, cases_file: &str) -> Vec<(PathBuf, bool)> {
    if std::env::var_os(var).is_some() {
        return vec![(fixture_dir(var, default), false)];
    }
    let mut dirs = vec![(repo_root().join(default), true)];
    let root = repo_root().join("tests/fixtures").join(ours);
    let mut extra: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.join(cases_file).is_file())
                .collect()
        })
        .unwrap_or_default();
    extra.sort();
    dirs.extend(extra.into_iter().map(|p| (p, false)));
    dirs
}

pub fn st_dtype(d: safetensors::Dtype) -> Result<DType, String> {
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

/// Key suffix of a complex tensor stored as its real view (see [`load`]).
pub const COMPLEX_SUFFIX: &str = "#complex";
/// Key suffix of a tensor stored as the transpose of its last two dims: loaded as
/// the transposed (non-contiguous) view (see [`load`]).
pub const TRANSPOSED_SUFFIX: &str = "#T";

/// Loads `<dir>/<cases_file>` and `<dir>/tensors.safetensors`.
pub fn load(dir: &Path, cases_file: &str) -> Golden {
    let cases_path = dir.join(cases_file);
    let text = std::fs::read_to_string(&cases_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", cases_path.display()));
    let json: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not valid JSON: {e}", cases_path.display()));
    let cases = json["cases"]
        .as_array()
        .unwrap_or_else(|| panic!("{} has no `cases` array", cases_path.display()))
        .clone();
    let st_path = dir.join("tensors.safetensors");
    let bytes = std::fs::read(&st_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", st_path.display()));
    let st = safetensors::SafeTensors::deserialize(&bytes).expect("invalid safetensors file");
    let mut tensors = HashMap::new();
    for (name, view) in st.tensors() {
        let mut dtype = st_dtype(view.dtype()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut shape: Vec<i64> = view.shape().iter().map(|&s| s as i64).collect();
        // safetensors (this crate's version) has no complex dtypes: a complex
        // tensor is stored as its real view, pairs in a last dim of 2, under its
        // key plus COMPLEX_SUFFIX.
        let name = match name.strip_suffix(COMPLEX_SUFFIX) {
            Some(base) => {
                dtype = match dtype {
                    DType::F32 => DType::C64,
                    DType::F64 => DType::C128,
                    d => panic!("{name}: a complex tensor stored as {d:?}"),
                };
                assert_eq!(shape.pop(), Some(2), "{name}: no last dim of 2");
                base.to_string()
            }
            None => name,
        };
        let mut t = Tensor::from_bytes(view.data(), &shape, dtype)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        // A non-contiguous input: stored as its transpose (contiguous), under its
        // key plus TRANSPOSED_SUFFIX, and transposed back here into a strided view.
        let name = match name.strip_suffix(TRANSPOSED_SUFFIX) {
            Some(base) => {
                let n = shape.len();
                assert!(n >= 2, "{name}: a transposed tensor needs two dims");
                let (mut sizes, mut strides) = (t.sizes().to_vec(), t.strides().to_vec());
                sizes.swap(n - 2, n - 1);
                strides.swap(n - 2, n - 1);
                t = t
                    .as_strided(&sizes, &strides, 0)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                base.to_string()
            }
            None => name,
        };
        tensors.insert(name, t);
    }
    Golden { cases, tensors }
}

/// Where a case runs: CPU with real data, or meta (inputs replaced by data-less
/// meta tensors of the same sizes and dtype; factory ops asked for `device=meta`).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Target {
    Cpu,
    Meta,
}

impl Golden {
    pub fn tensor(&self, key: &Value, target: Target) -> Result<Tensor, String> {
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

pub fn float_of(v: &Value) -> Result<f64, String> {
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

pub fn int_of(v: &Value) -> Result<i64, String> {
    v.as_i64().ok_or_else(|| format!("not an int: {v}"))
}

pub fn list_of<T>(v: &Value, f: impl Fn(&Value) -> Result<T, String>) -> Result<Vec<T>, String> {
    v.as_array()
        .ok_or_else(|| format!("not a list: {v}"))?
        .iter()
        .map(f)
        .collect()
}

/// A complex scalar encoded as `[re, im]`.
pub fn complex_of(v: &Value) -> Result<Scalar, String> {
    match list_of(v, float_of)?.as_slice() {
        [re, im] => Ok(Scalar::Complex(*re, *im)),
        _ => Err(format!("not a complex [re, im]: {v}")),
    }
}

pub fn scalar_of(v: &Value) -> Result<Scalar, String> {
    let (kind, x) = v
        .as_object()
        .and_then(|o| o.iter().next())
        .ok_or("empty scalar")?;
    Ok(match kind.as_str() {
        "int" => Scalar::Int(int_of(x)?),
        "float" => Scalar::Float(float_of(x)?),
        "bool" => Scalar::Bool(x.as_bool().ok_or("bad bool")?),
        "complex" => complex_of(x)?,
        k => return Err(format!("unknown scalar kind '{k}'")),
    })
}

/// Converts one encoded argument to the `IValue` its schema type takes.
pub fn to_ivalue(g: &Golden, v: &Value, arg: &ArgDef, target: Target) -> Result<IValue, String> {
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
        "complex" if ty == "Scalar" => IValue::Scalar(complex_of(x)?),
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
pub fn values_f64(t: &Tensor) -> Result<Vec<f64>, String> {
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

pub fn compare_tensor(
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

pub fn ivalue_kind(v: &IValue) -> &'static str {
    match v {
        IValue::None => "None",
        IValue::Tensor(_) => "Tensor",
        IValue::TensorList(_) => "Tensor[]",
        IValue::Tuple(_) => "tuple",
        _ => "a non-tensor value",
    }
}
