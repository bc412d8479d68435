//! Reading PyTorch's golden cases (`cases.json` + `tensors.safetensors`) and checking
//! results against them. Reusable by any test crate: `#[path = ...] mod golden_support;`.
//!
//! Owns: case loading (argument values, schema defaults for omitted arguments),
//! and output comparison with the case's tolerances. Must not: know any kernel;
//! callers map an op name to a call.

#![allow(dead_code)] // each including test uses a different subset

use opal::{DType, Scalar, Tensor};
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;

/// The golden directory: `$OPAL_GOLDEN_DIR`, else `<repo>/../shared/fixtures/golden`.
pub fn golden_dir() -> PathBuf {
    match std::env::var_os("OPAL_GOLDEN_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/golden"),
    }
}

/// One argument or output value.
#[derive(Clone, Debug)]
pub enum Val {
    Tensor(Tensor),
    TensorList(Vec<Tensor>),
    OptTensorList(Vec<Option<Tensor>>),
    None,
    Int(i64),
    Float(f64),
    Bool(bool),
    IntList(Vec<i64>),
    FloatList(Vec<f64>),
    BoolList(Vec<bool>),
    Scalar(Scalar),
    DType(DType),
    Str(String),
    /// A schema default literal of a type this loader does not interpret.
    Raw(String),
}

/// One golden case.
pub struct Case {
    pub id: String,
    pub op: String,
    pub schema: String,
    pub args: Vec<Val>,
    pub outputs: Vec<Val>,
    pub atol: f64,
    pub rtol: f64,
    /// `values` or `shape_dtype`.
    pub check: String,
}

fn dtype_of_name(s: &str) -> Result<DType, String> {
    DType::parse(s).map_err(|e| e.to_string())
}

fn float_of(v: &Value) -> Result<f64, String> {
    match v {
        Value::Number(n) => n.as_f64().ok_or("bad number".into()),
        Value::String(s) => match s.as_str() {
            "inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            "nan" => Ok(f64::NAN),
            o => Err(format!("bad float {o}")),
        },
        o => Err(format!("bad float {o}")),
    }
}

/// Splits a schema's argument list into (type, name, default) triples.
fn schema_args(schema: &str) -> Vec<(String, String, Option<String>)> {
    let open = schema.find('(').unwrap_or(0);
    let close = schema.rfind(") ->").unwrap_or(schema.len());
    let inner = &schema[open + 1..close];
    let mut parts = Vec::new();
    let (mut depth, mut cur) = (0, String::new());
    for ch in inner.chars() {
        match ch {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            _ => {}
        }
        if ch == ',' && depth == 0 {
            parts.push(cur.trim().to_string());
            cur.clear();
        } else {
            cur.push(ch);
        }
    }
    if !cur.trim().is_empty() {
        parts.push(cur.trim().to_string());
    }
    parts
        .into_iter()
        .filter(|p| p != "*")
        .map(|p| {
            let (decl, default) = match p.split_once('=') {
                Some((d, v)) => (d.to_string(), Some(v.to_string())),
                None => (p.clone(), None),
            };
            let (ty, name) = decl.rsplit_once(' ').unwrap_or((&decl, ""));
            (ty.to_string(), name.to_string(), default)
        })
        .collect()
}

/// The value a schema default literal stands for, given the argument type.
fn default_val(ty: &str, lit: &str) -> Result<Val, String> {
    let base = ty.trim_end_matches('?');
    if lit == "None" {
        return Ok(Val::None);
    }
    if base.starts_with("int[") || base.starts_with("SymInt[") {
        let body = lit.trim_start_matches('[').trim_end_matches(']');
        if body.is_empty() {
            return Ok(Val::IntList(vec![]));
        }
        if !lit.starts_with('[') {
            // `int[2] padding=0` means the value repeated.
            let n: usize = base[base.find('[').unwrap_or(0) + 1..base.len() - 1]
                .parse()
                .unwrap_or(1);
            let v: i64 = lit
                .parse()
                .map_err(|_| format!("bad int list default {lit}"))?;
            return Ok(Val::IntList(vec![v; n]));
        }
        let v: Result<Vec<i64>, _> = body.split(',').map(|x| x.trim().parse::<i64>()).collect();
        return v
            .map(Val::IntList)
            .map_err(|_| format!("bad int list default {lit}"));
    }
    Ok(match base {
        "int" | "SymInt" => Val::Int(lit.parse().map_err(|_| format!("bad int default {lit}"))?),
        "float" => Val::Float(
            lit.parse()
                .map_err(|_| format!("bad float default {lit}"))?,
        ),
        "bool" => Val::Bool(lit == "True"),
        "str" => Val::Str(lit.trim_matches('"').trim_matches('\'').to_string()),
        "Scalar" => {
            if let Ok(i) = lit.parse::<i64>() {
                Val::Scalar(Scalar::Int(i))
            } else if let Ok(f) = lit.parse::<f64>() {
                Val::Scalar(Scalar::Float(f))
            } else if lit == "True" || lit == "False" {
                Val::Scalar(Scalar::Bool(lit == "True"))
            } else {
                return Err(format!("bad Scalar default {lit}"));
            }
        }
        "ScalarType" => Val::DType(dtype_of_name(lit)?),
        // Types no part-1 kernel takes (MemoryFormat, Layout, ...): keep the literal.
        _ => Val::Raw(lit.to_string()),
    })
}

struct Tensors<'a> {
    st: safetensors::SafeTensors<'a>,
}

impl Tensors<'_> {
    fn get(&self, key: &str) -> Result<Tensor, String> {
        let v = self.st.tensor(key).map_err(|e| format!("{key}: {e}"))?;
        use safetensors::Dtype as S;
        let dt = match v.dtype() {
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
            o => return Err(format!("{key}: unsupported safetensors dtype {o:?}")),
        };
        let shape: Vec<i64> = v.shape().iter().map(|&d| d as i64).collect();
        Tensor::from_bytes(v.data(), &shape, dt).map_err(|e| format!("{key}: {e}"))
    }
}

fn val_of(v: &Value, ts: &Tensors<'_>) -> Result<Val, String> {
    let obj = v.as_object().ok_or("value is not an object")?;
    let (k, x) = obj.iter().next().ok_or("empty value")?;
    Ok(match k.as_str() {
        "tensor" => Val::Tensor(ts.get(x.as_str().ok_or("tensor key")?)?),
        "tensor_list" => Val::TensorList(
            x.as_array()
                .ok_or("tensor_list")?
                .iter()
                .map(|k| ts.get(k.as_str().unwrap_or("")))
                .collect::<Result<_, _>>()?,
        ),
        "optional_tensor_list" => Val::OptTensorList(
            x.as_array()
                .ok_or("optional_tensor_list")?
                .iter()
                .map(|k| match k.as_str() {
                    Some(s) => ts.get(s).map(Some),
                    None => Ok(None),
                })
                .collect::<Result<_, _>>()?,
        ),
        "none" => Val::None,
        "int" => Val::Int(x.as_i64().ok_or("int")?),
        "float" => Val::Float(float_of(x)?),
        "bool" => Val::Bool(x.as_bool().ok_or("bool")?),
        "int_list" => Val::IntList(
            x.as_array()
                .ok_or("int_list")?
                .iter()
                .filter_map(|v| v.as_i64())
                .collect(),
        ),
        "float_list" => Val::FloatList(
            x.as_array()
                .ok_or("float_list")?
                .iter()
                .map(float_of)
                .collect::<Result<_, _>>()?,
        ),
        "bool_list" => Val::BoolList(
            x.as_array()
                .ok_or("bool_list")?
                .iter()
                .filter_map(|v| v.as_bool())
                .collect(),
        ),
        "scalar" => {
            let o = x.as_object().ok_or("scalar")?;
            let (sk, sv) = o.iter().next().ok_or("scalar")?;
            Val::Scalar(match sk.as_str() {
                "int" => Scalar::Int(sv.as_i64().ok_or("scalar int")?),
                "float" => Scalar::Float(float_of(sv)?),
                "bool" => Scalar::Bool(sv.as_bool().ok_or("scalar bool")?),
                o => return Err(format!("scalar kind {o}")),
            })
        }
        "dtype" => Val::DType(dtype_of_name(x.as_str().ok_or("dtype")?)?),
        "str" => Val::Str(x.as_str().ok_or("str")?.to_string()),
        o => return Err(format!("unknown value kind {o}")),
    })
}

/// Loads every case of the golden directory (defaults resolved from the schema).
pub fn load_cases() -> Result<Vec<Case>, String> {
    let dir = golden_dir();
    let text = std::fs::read_to_string(dir.join("cases.json"))
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let json: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let bytes = std::fs::read(dir.join("tensors.safetensors")).map_err(|e| e.to_string())?;
    let ts = Tensors {
        st: safetensors::SafeTensors::deserialize(&bytes).map_err(|e| e.to_string())?,
    };
    let mut out = Vec::new();
    for c in json["cases"].as_array().ok_or("cases")? {
        let schema = c["schema"].as_str().unwrap_or("").to_string();
        let sargs = schema_args(&schema);
        let id = c["id"].as_str().unwrap_or("").to_string();
        let mut args = Vec::new();
        for (i, a) in c["args"].as_array().ok_or("args")?.iter().enumerate() {
            if a.get("default").is_some() {
                let (ty, name, def) = sargs
                    .get(i)
                    .cloned()
                    .ok_or(format!("{id}: arg {i} not in schema"))?;
                let lit = def.ok_or(format!("{id}: arg {name} has no default"))?;
                args.push(default_val(&ty, &lit).map_err(|e| format!("{id}: {e}"))?);
            } else {
                args.push(val_of(a, &ts).map_err(|e| format!("{id}: {e}"))?);
            }
        }
        let outputs = c["outputs"]
            .as_array()
            .ok_or("outputs")?
            .iter()
            .map(|o| val_of(o, &ts))
            .collect::<Result<_, _>>()?;
        out.push(Case {
            id,
            op: c["op"].as_str().unwrap_or("").to_string(),
            schema,
            args,
            outputs,
            atol: c["atol"].as_f64().unwrap_or(0.0),
            rtol: c["rtol"].as_f64().unwrap_or(0.0),
            check: c["check"].as_str().unwrap_or("values").to_string(),
        });
    }
    Ok(out)
}

/// Typed access to a case's arguments, with errors naming the position.
pub struct Args<'a>(pub &'a [Val]);

impl Args<'_> {
    fn get(&self, i: usize) -> Result<&Val, String> {
        self.0.get(i).ok_or(format!("missing argument {i}"))
    }
    pub fn tensor(&self, i: usize) -> Result<&Tensor, String> {
        match self.get(i)? {
            Val::Tensor(t) => Ok(t),
            o => Err(format!("arg {i}: expected tensor, got {o:?}")),
        }
    }
    pub fn scalar(&self, i: usize) -> Result<Scalar, String> {
        match self.get(i)? {
            Val::Scalar(s) => Ok(*s),
            Val::Int(v) => Ok(Scalar::Int(*v)),
            Val::Float(v) => Ok(Scalar::Float(*v)),
            Val::Bool(v) => Ok(Scalar::Bool(*v)),
            o => Err(format!("arg {i}: expected scalar, got {o:?}")),
        }
    }
    pub fn opt_scalar(&self, i: usize) -> Result<Option<Scalar>, String> {
        match self.get(i)? {
            Val::None => Ok(None),
            _ => self.scalar(i).map(Some),
        }
    }
    pub fn int(&self, i: usize) -> Result<i64, String> {
        match self.get(i)? {
            Val::Int(v) => Ok(*v),
            o => Err(format!("arg {i}: expected int, got {o:?}")),
        }
    }
    pub fn opt_int(&self, i: usize) -> Result<Option<i64>, String> {
        match self.get(i)? {
            Val::None => Ok(None),
            _ => self.int(i).map(Some),
        }
    }
    pub fn float(&self, i: usize) -> Result<f64, String> {
        match self.get(i)? {
            Val::Float(v) => Ok(*v),
            Val::Int(v) => Ok(*v as f64),
            o => Err(format!("arg {i}: expected float, got {o:?}")),
        }
    }
    pub fn opt_float(&self, i: usize) -> Result<Option<f64>, String> {
        match self.get(i)? {
            Val::None => Ok(None),
            _ => self.float(i).map(Some),
        }
    }
    pub fn bool(&self, i: usize) -> Result<bool, String> {
        match self.get(i)? {
            Val::Bool(v) => Ok(*v),
            o => Err(format!("arg {i}: expected bool, got {o:?}")),
        }
    }
    pub fn int_list(&self, i: usize) -> Result<Vec<i64>, String> {
        match self.get(i)? {
            Val::IntList(v) => Ok(v.clone()),
            Val::Int(v) => Ok(vec![*v]),
            o => Err(format!("arg {i}: expected int list, got {o:?}")),
        }
    }
    pub fn opt_int_list(&self, i: usize) -> Result<Option<Vec<i64>>, String> {
        match self.get(i)? {
            Val::None => Ok(None),
            _ => self.int_list(i).map(Some),
        }
    }
    pub fn str(&self, i: usize) -> Result<String, String> {
        match self.get(i)? {
            Val::Str(s) => Ok(s.clone()),
            o => Err(format!("arg {i}: expected str, got {o:?}")),
        }
    }
    pub fn opt_str(&self, i: usize) -> Result<Option<String>, String> {
        match self.get(i)? {
            Val::None => Ok(None),
            _ => self.str(i).map(Some),
        }
    }
    pub fn opt_dtype(&self, i: usize) -> Result<Option<DType>, String> {
        match self.get(i)? {
            Val::None => Ok(None),
            Val::DType(d) => Ok(Some(*d)),
            o => Err(format!("arg {i}: expected dtype, got {o:?}")),
        }
    }
}

fn as_f64(t: &Tensor) -> Result<Vec<f64>, String> {
    let c = Tensor::empty(t.sizes(), DType::F64, opal::Device::cpu()).map_err(|e| e.to_string())?;
    opal_cpu::copy::copy_into(&c, t, "golden").map_err(|e| e.to_string())?;
    c.to_vec::<f64>().map_err(|e| e.to_string())
}

/// Compares results with a case's expected outputs (dtype, shape and, for
/// `check == "values"`, values within `atol + rtol * |expected|`, NaN == NaN).
pub fn check(case: &Case, got: &[Tensor]) -> Result<(), String> {
    if got.len() != case.outputs.len() {
        return Err(format!(
            "{} outputs, expected {}",
            got.len(),
            case.outputs.len()
        ));
    }
    for (k, (g, e)) in got.iter().zip(&case.outputs).enumerate() {
        let Val::Tensor(e) = e else {
            return Err(format!("output {k}: expected value is not a tensor"));
        };
        if g.dtype() != e.dtype() {
            return Err(format!(
                "output {k}: dtype {} != expected {}",
                g.dtype(),
                e.dtype()
            ));
        }
        if g.sizes() != e.sizes() {
            return Err(format!(
                "output {k}: shape {:?} != expected {:?}",
                g.sizes(),
                e.sizes()
            ));
        }
        if case.check != "values" {
            continue;
        }
        let (gv, ev) = (as_f64(g)?, as_f64(e)?);
        for (i, (x, y)) in gv.iter().zip(&ev).enumerate() {
            let ok = (x.is_nan() && y.is_nan())
                || x == y
                || (x - y).abs() <= case.atol + case.rtol * y.abs();
            if !ok {
                return Err(format!(
                    "output {k}[{i}]: {x} != expected {y} (atol {}, rtol {})",
                    case.atol, case.rtol
                ));
            }
        }
    }
    Ok(())
}

/// Counts by op name, for reporting.
pub fn count_by_op(cases: &[Case]) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for c in cases {
        *m.entry(c.op.clone()).or_insert(0) += 1;
    }
    m
}
