//! The ExportedProgram JSON of torch.export's serializer (schema major 8), read
//! into plain structs: nodes with named arguments, graph inputs and outputs,
//! tensor metadata, the graph signature and the range constraints.
//!
//! Owns: the JSON shapes and the serializer's enum codes (ScalarType, Layout,
//! MemoryFormat). Must not: look up operators or touch tensors' data (see `plan`
//! and `weights`).

use crate::error::{bail, Error, Result};
use opal::{DType, Layout, MemoryFormat};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// The schema major version this reader understands.
pub const SCHEMA_MAJOR: i64 = 8;

/// A symbolic int argument: a constant or the name of a value of the graph.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum SymRef {
    Int(i64),
    Name(String),
}

/// One argument value, as serialized.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Arg {
    None,
    Tensor(String),
    Tensors(Vec<String>),
    OptTensor(Option<String>),
    OptTensors(Vec<Option<String>>),
    Int(i64),
    Ints(Vec<i64>),
    Float(f64),
    Floats(Vec<f64>),
    Bool(bool),
    Bools(Vec<bool>),
    Str(String),
    Strs(Vec<String>),
    SymInt(SymRef),
    SymInts(Vec<SymRef>),
    ScalarType(DType),
    MemoryFormat(MemoryFormat),
    Layout(Layout),
    /// The device type the export ran on (`cpu`); the runner substitutes its own.
    Device(String),
}

/// A node's named argument.
#[derive(Clone, Debug)]
pub(crate) struct NamedArg {
    pub name: String,
    pub arg: Arg,
}

/// What a node or the graph outputs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Out {
    None,
    Tensor(String),
    Tensors(Vec<String>),
    SymInt(SymRef),
    Int(i64),
}

#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub name: String,
    pub target: String,
    pub inputs: Vec<NamedArg>,
    pub outputs: Vec<Out>,
}

/// One size, stride or offset of tensor metadata.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Dim {
    Int(i64),
    /// A sympy expression with the value it had when traced.
    Expr {
        expr: String,
        hint: Option<i64>,
    },
}

impl Dim {
    /// The traced value.
    pub fn hint(&self) -> Option<i64> {
        match self {
            Dim::Int(i) => Some(*i),
            Dim::Expr { hint, .. } => *hint,
        }
    }

    /// The symbol's name when the expression is a single symbol (`s70`).
    pub fn symbol(&self) -> Option<&str> {
        let Dim::Expr { expr, .. } = self else {
            return None;
        };
        let rest = expr.strip_prefix("Symbol('")?;
        let end = rest.find('\'')?;
        rest[end..]
            .starts_with("',")
            .then_some(&rest[..end])
            .or_else(|| rest[end..].starts_with("')").then_some(&rest[..end]))
    }
}

#[derive(Clone, Debug)]
pub(crate) struct TensorMeta {
    pub dtype: DType,
    pub sizes: Vec<Dim>,
    pub strides: Vec<Dim>,
    pub offset: Dim,
}

impl TensorMeta {
    /// Sizes, strides, offset as plain ints (traced values for symbols).
    pub fn hinted(&self) -> Option<(Vec<i64>, Vec<i64>, i64)> {
        let all = |d: &[Dim]| d.iter().map(Dim::hint).collect::<Option<Vec<_>>>();
        Some((all(&self.sizes)?, all(&self.strides)?, self.offset.hint()?))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum InputKind {
    Parameter(String),
    Buffer(String),
    Constant(String),
    User,
}

#[derive(Clone, Debug)]
pub(crate) struct Range {
    pub symbol: String,
    pub min: Option<i64>,
    pub max: Option<i64>,
}

/// The parsed program.
#[derive(Clone, Debug)]
pub(crate) struct Program {
    pub schema: (i64, i64),
    /// Graph inputs (placeholders) in order, with what feeds each.
    pub inputs: Vec<(String, InputKind)>,
    /// The user outputs.
    pub outputs: Vec<Out>,
    pub nodes: Vec<Node>,
    pub tensor_meta: HashMap<String, TensorMeta>,
    pub ranges: Vec<Range>,
}

fn field<'a>(v: &'a Value, key: &str) -> Result<&'a Value> {
    v.get(key)
        .ok_or_else(|| Error::new(format!("missing field `{key}`")))
}

fn obj(v: &Value) -> Result<&Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| Error::new(format!("expected an object, got `{}`", short(v))))
}

fn arr(v: &Value) -> Result<&Vec<Value>> {
    v.as_array()
        .ok_or_else(|| Error::new(format!("expected a list, got `{}`", short(v))))
}

fn string(v: &Value) -> Result<String> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| Error::new(format!("expected a string, got `{}`", short(v))))
}

fn int(v: &Value) -> Result<i64> {
    v.as_i64()
        .ok_or_else(|| Error::new(format!("expected an int, got `{}`", short(v))))
}

fn boolean(v: &Value) -> Result<bool> {
    v.as_bool()
        .ok_or_else(|| Error::new(format!("expected a bool, got `{}`", short(v))))
}

/// Floats are numbers, or the strings `Infinity`, `-Infinity`, `NaN`.
fn float(v: &Value) -> Result<f64> {
    match v {
        Value::String(s) => match s.as_str() {
            "Infinity" | "inf" => Ok(f64::INFINITY),
            "-Infinity" | "-inf" => Ok(f64::NEG_INFINITY),
            "NaN" | "nan" => Ok(f64::NAN),
            _ => bail!("expected a float, got the string `{s}`"),
        },
        _ => v
            .as_f64()
            .ok_or_else(|| Error::new(format!("expected a float, got `{}`", short(v)))),
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(80) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s,
    }
}

fn list<T>(v: &Value, f: impl Fn(&Value) -> Result<T>) -> Result<Vec<T>> {
    arr(v)?.iter().map(f).collect()
}

/// The one key and value of a serialized union (`{"as_int": 3}`).
fn union(v: &Value) -> Result<(&str, &Value)> {
    let o = obj(v)?;
    let mut it = o.iter();
    match (it.next(), it.next()) {
        (Some((k, x)), None) => Ok((k.as_str(), x)),
        _ => bail!("expected a one-field union, got `{}`", short(v)),
    }
}

/// PyTorch's serialized ScalarType codes, for the dtypes Opal has.
pub(crate) fn dtype_of(code: i64) -> Result<DType> {
    Ok(match code {
        1 => DType::U8,
        2 => DType::I8,
        3 => DType::I16,
        4 => DType::I32,
        5 => DType::I64,
        6 => DType::F16,
        7 => DType::F32,
        8 => DType::F64,
        10 => DType::C64,
        11 => DType::C128,
        12 => DType::Bool,
        13 => DType::BF16,
        9 => bail!("dtype code 9 (complex32) is not supported by Opal"),
        28 | 34 | 35 => {
            bail!("dtype code {code} (an unsigned int wider than 8 bits) is not supported by Opal")
        }
        29..=33 => bail!("dtype code {code} (a float8 type) is not supported by Opal"),
        _ => bail!("unknown dtype code {code}"),
    })
}

fn layout_of(code: i64) -> Result<Layout> {
    match code {
        7 => Ok(Layout::Strided),
        1..=6 => bail!("layout code {code} (sparse or mkldnn) is not supported"),
        _ => bail!("unknown layout code {code}"),
    }
}

fn memory_format_of(code: i64) -> Result<MemoryFormat> {
    Ok(match code {
        1 => MemoryFormat::Contiguous,
        2 => MemoryFormat::ChannelsLast,
        3 => MemoryFormat::ChannelsLast3d,
        4 => MemoryFormat::Preserve,
        _ => bail!("unknown memory format code {code}"),
    })
}

fn tensor_name(v: &Value) -> Result<String> {
    string(field(v, "name")?)
}

fn sym_ref(v: &Value) -> Result<SymRef> {
    match union(v)? {
        ("as_name", x) => Ok(SymRef::Name(string(x)?)),
        ("as_int", x) => Ok(SymRef::Int(int(x)?)),
        (k, _) => bail!("unsupported symbolic int `{k}`"),
    }
}

fn opt_tensor(v: &Value) -> Result<Option<String>> {
    match union(v)? {
        ("as_tensor", x) => Ok(Some(tensor_name(x)?)),
        ("as_none", _) => Ok(None),
        (k, _) => bail!("unsupported optional tensor `{k}`"),
    }
}

pub(crate) fn arg(v: &Value) -> Result<Arg> {
    let (k, x) = union(v)?;
    Ok(match k {
        "as_none" => Arg::None,
        "as_tensor" => Arg::Tensor(tensor_name(x)?),
        "as_tensors" => Arg::Tensors(list(x, tensor_name)?),
        "as_optional_tensor" => Arg::OptTensor(opt_tensor(x)?),
        "as_optional_tensors" => Arg::OptTensors(list(x, opt_tensor)?),
        "as_int" => Arg::Int(int(x)?),
        "as_ints" => Arg::Ints(list(x, int)?),
        "as_float" => Arg::Float(float(x)?),
        "as_floats" => Arg::Floats(list(x, float)?),
        "as_bool" => Arg::Bool(boolean(x)?),
        "as_bools" => Arg::Bools(list(x, boolean)?),
        "as_string" => Arg::Str(string(x)?),
        "as_strings" => Arg::Strs(list(x, string)?),
        "as_sym_int" => Arg::SymInt(sym_ref(x)?),
        "as_sym_ints" => Arg::SymInts(list(x, sym_ref)?),
        "as_scalar_type" => Arg::ScalarType(dtype_of(int(x)?)?),
        "as_memory_format" => Arg::MemoryFormat(memory_format_of(int(x)?)?),
        "as_layout" => Arg::Layout(layout_of(int(x)?)?),
        "as_device" => Arg::Device(string(field(x, "type")?)?),
        other => bail!("argument kind `{other}` is not supported"),
    })
}

fn out(v: &Value) -> Result<Out> {
    let (k, x) = union(v)?;
    Ok(match k {
        "as_none" => Out::None,
        "as_tensor" => Out::Tensor(tensor_name(x)?),
        "as_tensors" => Out::Tensors(list(x, tensor_name)?),
        "as_sym_int" => Out::SymInt(sym_ref(x)?),
        "as_int" => Out::Int(int(x)?),
        other => bail!("output kind `{other}` is not supported"),
    })
}

fn dim(v: &Value) -> Result<Dim> {
    match union(v)? {
        ("as_int", x) => Ok(Dim::Int(int(x)?)),
        ("as_expr", x) => {
            let hint = match x.get("hint") {
                Some(Value::Null) | None => None,
                Some(h) => match union(h)? {
                    ("as_int", i) => Some(int(i)?),
                    _ => None,
                },
            };
            Ok(Dim::Expr {
                expr: string(field(x, "expr_str")?)?,
                hint,
            })
        }
        (k, _) => bail!("unsupported size kind `{k}`"),
    }
}

pub(crate) fn tensor_meta(v: &Value) -> Result<TensorMeta> {
    if let Some(l) = v.get("layout") {
        layout_of(int(l)?)?;
    }
    Ok(TensorMeta {
        dtype: dtype_of(int(field(v, "dtype")?)?)?,
        sizes: list(field(v, "sizes")?, dim)?,
        strides: list(field(v, "strides")?, dim)?,
        offset: match v.get("storage_offset") {
            Some(o) => dim(o)?,
            None => Dim::Int(0),
        },
    })
}

fn node(v: &RawNode) -> Result<Node> {
    let target = string(&v.target)?;
    let name = match &v.name {
        Value::String(s) => s.clone(),
        _ => target.clone(),
    };
    let parse = || -> Result<Node> {
        let inputs = list(&v.inputs, |a| {
            let name = string(field(a, "name")?)?;
            let parsed =
                arg(field(a, "arg")?).map_err(|e| e.context(format!("argument '{name}'")))?;
            Ok(NamedArg { name, arg: parsed })
        })?;
        Ok(Node {
            name: name.clone(),
            target: target.clone(),
            inputs,
            outputs: list(&v.outputs, out)?,
        })
    };
    parse().map_err(|e| e.context(format!("node '{name}' ({target})")))
}

fn input_spec(v: &Value) -> Result<(String, InputKind)> {
    let (k, x) = union(v)?;
    let arg_name = |x: &Value| tensor_name(field(x, "arg")?);
    Ok(match k {
        "parameter" => (
            arg_name(x)?,
            InputKind::Parameter(string(field(x, "parameter_name")?)?),
        ),
        "buffer" => (
            arg_name(x)?,
            InputKind::Buffer(string(field(x, "buffer_name")?)?),
        ),
        "tensor_constant" => (
            arg_name(x)?,
            InputKind::Constant(string(field(x, "tensor_constant_name")?)?),
        ),
        "user_input" => match arg(field(x, "arg")?)? {
            Arg::Tensor(n) => (n, InputKind::User),
            _ => bail!("a user input that is not a tensor is not supported"),
        },
        "custom_obj" => bail!("custom object inputs (torchbind) are not supported"),
        other => bail!("input kind `{other}` is not supported"),
    })
}

/// Parses the program JSON (schema major [`SCHEMA_MAJOR`]); `max_nodes` is checked
/// before the nodes are read.
/// The program JSON's skeleton: what the reader uses, with every other field
/// (node metadata, the module call graph, verifiers) skipped unparsed, which is
/// most of the text.
#[derive(Deserialize)]
struct RawProgram {
    schema_version: Value,
    graph_module: RawModule,
    #[serde(default)]
    range_constraints: Value,
}

#[derive(Deserialize)]
struct RawModule {
    graph: RawGraph,
    signature: Value,
}

#[derive(Deserialize)]
struct RawGraph {
    inputs: Value,
    outputs: Value,
    nodes: Vec<RawNode>,
    tensor_values: Value,
    #[serde(default)]
    custom_obj_values: Value,
}

#[derive(Deserialize)]
struct RawNode {
    target: Value,
    inputs: Value,
    outputs: Value,
    #[serde(default)]
    name: Value,
}

fn check_version(sv: &Value) -> Result<(i64, i64)> {
    let major = int(field(sv, "major")?)?;
    let minor = sv.get("minor").and_then(Value::as_i64).unwrap_or(0);
    if major != SCHEMA_MAJOR {
        bail!(
            "schema version {major}.{minor} is not supported (this reader reads major {SCHEMA_MAJOR})"
        );
    }
    Ok((major, minor))
}

/// Parses the program JSON (schema major [`SCHEMA_MAJOR`]); `max_nodes` is checked
/// before the nodes are converted.
pub(crate) fn parse(text: &[u8], max_nodes: usize) -> Result<Program> {
    let raw: RawProgram = match serde_json::from_slice(text) {
        Ok(r) => r,
        Err(e) => {
            // Another schema version may not fit this skeleton: say so first.
            if let Ok(v) = serde_json::from_slice::<Value>(text) {
                check_version(field(&v, "schema_version")?)?;
            }
            bail!("the program JSON is invalid: {e}");
        }
    };
    let (major, minor) = check_version(&raw.schema_version)?;
    let g = &raw.graph_module.graph;
    if let Value::Object(o) = &g.custom_obj_values {
        if let Some(k) = o.keys().next() {
            bail!("custom object `{k}` (torchbind) is not supported");
        }
    }
    let nodes_v = &g.nodes;
    if nodes_v.len() > max_nodes {
        bail!(
            "the graph has {} nodes, over LoadLimits::max_nodes ({max_nodes})",
            nodes_v.len()
        );
    }
    let nodes = nodes_v.iter().map(node).collect::<Result<Vec<_>>>()?;
    let mut tensor_meta = HashMap::new();
    for (k, m) in obj(&g.tensor_values)? {
        let meta = tensor_meta_checked(m).map_err(|e| e.context(format!("tensor value '{k}'")))?;
        tensor_meta.insert(k.clone(), meta);
    }
    let sig = &raw.graph_module.signature;
    let inputs = list(field(sig, "input_specs")?, input_spec)
        .map_err(|e| e.context("graph signature input"))?;
    let graph_inputs = list(&g.inputs, |a| match arg(a)? {
        Arg::Tensor(n) => Ok(n),
        _ => bail!("a graph input that is not a tensor is not supported"),
    })?;
    if graph_inputs.len() != inputs.len()
        || graph_inputs.iter().zip(&inputs).any(|(g, (s, _))| g != s)
    {
        bail!("the graph's inputs do not match its signature's input specs");
    }
    let mut outputs = Vec::new();
    for o in arr(field(sig, "output_specs")?)? {
        match union(o)? {
            ("user_output", x) => outputs.push(out(field(x, "arg")?)?),
            (k, _) => bail!("output kind `{k}` (a mutation or gradient output) is not supported"),
        }
    }
    let graph_outputs = list(&g.outputs, out)?;
    if graph_outputs != outputs {
        bail!("the graph's outputs do not match its signature's user outputs");
    }
    let mut ranges = Vec::new();
    if let Value::Object(rc) = &raw.range_constraints {
        for (sym, r) in rc {
            let bound = |k: &str| r.get(k).and_then(Value::as_i64);
            ranges.push(Range {
                symbol: sym.clone(),
                min: bound("min_val"),
                max: bound("max_val"),
            });
        }
    }
    Ok(Program {
        schema: (major, minor),
        inputs,
        outputs,
        nodes,
        tensor_meta,
        ranges,
    })
}

/// Tensor metadata with its static sizes checked to be non-negative and its
/// byte size to fit an i64.
pub(crate) fn tensor_meta_checked(v: &Value) -> Result<TensorMeta> {
    let m = tensor_meta(v)?;
    if let Some((sizes, strides, offset)) = m.hinted() {
        static_bytes(&sizes, &strides, offset, m.dtype)?;
    }
    Ok(m)
}

/// Bytes of storage that a view of `sizes`/`strides`/`offset` reaches, checked:
/// negative or overflowing geometry is an error.
pub(crate) fn static_bytes(
    sizes: &[i64],
    strides: &[i64],
    offset: i64,
    dtype: DType,
) -> Result<u64> {
    if sizes.len() != strides.len() {
        bail!("{} sizes but {} strides", sizes.len(), strides.len());
    }
    if offset < 0 || sizes.iter().chain(strides).any(|&x| x < 0) {
        bail!("negative size, stride or offset in {sizes:?} / {strides:?} / {offset}");
    }
    if sizes.contains(&0) {
        return Ok(0);
    }
    let mut last: i64 = offset;
    for (&s, &st) in sizes.iter().zip(strides) {
        last = (s - 1)
            .checked_mul(st)
            .and_then(|x| x.checked_add(last))
            .ok_or_else(|| Error::new(format!("shape {sizes:?} overflows")))?;
    }
    let elems = last
        .checked_add(1)
        .ok_or_else(|| Error::new(format!("shape {sizes:?} overflows")))?;
    (elems as u64)
        .checked_mul(dtype.size() as u64)
        .filter(|b| *b <= i64::MAX as u64)
        .ok_or_else(|| Error::new(format!("shape {sizes:?} of {dtype} overflows")))
}

/// Elements times dtype size of `sizes` (0 on overflow never happens: checked).
pub(crate) fn numel_bytes(sizes: &[i64], dtype: DType) -> Option<u64> {
    sizes.iter().try_fold(dtype.size() as u64, |acc, &s| {
        u64::try_from(s).ok().and_then(|s| acc.checked_mul(s))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_symbol_is_recognized() {
        let d = |e: &str| Dim::Expr {
            expr: e.into(),
            hint: Some(4),
        };
        assert_eq!(
            d("Symbol('s70', positive=True, integer=True)").symbol(),
            Some("s70")
        );
        assert_eq!(d("Symbol('s1')").symbol(), Some("s1"));
        assert_eq!(
            d("Add(Symbol('s70', positive=True), Integer(1))").symbol(),
            None
        );
        assert_eq!(Dim::Int(3).symbol(), None);
    }

    #[test]
    fn geometry_bytes_are_checked() {
        assert_eq!(static_bytes(&[2, 3], &[3, 1], 0, DType::F32).unwrap(), 24);
        assert_eq!(static_bytes(&[2, 3], &[1, 2], 1, DType::F32).unwrap(), 28);
        assert_eq!(static_bytes(&[0, 3], &[3, 1], 5, DType::F32).unwrap(), 0);
        assert!(static_bytes(&[i64::MAX, 2], &[2, 1], 0, DType::F32).is_err());
        assert!(static_bytes(&[-1], &[1], 0, DType::F32).is_err());
        assert!(static_bytes(&[2], &[1, 1], 0, DType::F32).is_err());
    }

    #[test]
    fn every_opal_dtype_code_maps() {
        for (code, d) in [
            (1, DType::U8),
            (5, DType::I64),
            (7, DType::F32),
            (12, DType::Bool),
            (13, DType::BF16),
            (11, DType::C128),
        ] {
            assert_eq!(dtype_of(code).unwrap(), d);
        }
        assert!(dtype_of(29).unwrap_err().to_string().contains("float8"));
        assert!(dtype_of(99).is_err());
    }
}
