//! The interpreter's load-time work: each node resolved to its dispatcher handle,
//! its arguments matched to the schema by name (schema defaults for omitted
//! ones), the constant part of each argument stack built once, values numbered
//! into slots, and each value's last use found so the runner frees it there.
//!
//! Owns: [`Plan`] and its compilation from the parsed program. Must not: run
//! anything or hold tensors other than the constant arguments (see `runner`).

use crate::error::{bail, Error, Result};
use crate::schema::{numel_bytes, Arg, Node, Out, Program, SymRef};
use opal::dispatch::{ArgDef, Dispatcher, OperatorHandle};
use opal::{Device, IValue, Scalar, Tensor};
use std::collections::HashMap;

/// A dynamic argument: read from the slots when the node runs.
#[derive(Clone, Debug)]
pub(crate) enum Fill {
    /// The slot's value as is (a tensor, or an int for a symbolic int).
    Value(usize),
    Tensors(Vec<usize>),
    OptTensors(Vec<Option<usize>>),
    /// An int list with symbolic entries.
    Ints(Vec<SymVal>),
    /// A symbolic int where a tensor is expected: a wrapped number.
    WrappedInt(usize),
}

#[derive(Copy, Clone, Debug)]
pub(crate) enum SymVal {
    Const(i64),
    Slot(usize),
}

#[derive(Copy, Clone, Debug)]
pub(crate) enum IntOp {
    Add,
    Sub,
    Mul,
    FloorDiv,
    Mod,
}

/// Where a return goes.
#[derive(Clone, Debug)]
pub(crate) enum Bind {
    Drop,
    Slot(usize),
    List(Vec<usize>),
}

#[derive(Clone, Debug)]
pub(crate) enum Kind {
    Op {
        op: OperatorHandle,
        template: Vec<IValue>,
        fills: Vec<(usize, Fill)>,
        binds: Vec<Bind>,
        /// Bytes of the outputs as traced (the check before the call).
        traced_bytes: u64,
    },
    /// `operator.getitem` on a multi-output node: another name for a slot.
    Alias { src: usize, dst: usize },
    /// `sym_size.int` (and friends): a tensor's size as an int.
    Size {
        src: usize,
        dim: i64,
        what: SizeOf,
        dst: usize,
    },
    /// A fused run of element-wise nodes (CPU only; see `pointwise`): inputs
    /// are read as contiguous f32, each output is a new tensor of `sizes`.
    Pointwise {
        program: opal_cpu::fused::Program,
        inputs: Vec<usize>,
        outputs: Vec<usize>,
        sizes: Vec<i64>,
        /// The input whose buffer the one output takes (see
        /// `pointwise::donate`); None: the output is a new tensor.
        donor: Option<usize>,
    },
    /// softmax over the last dimension with all-`-inf` rows as zeros (CPU
    /// only; see `safe_softmax`): seven nodes of the graph.
    SafeSoftmax {
        input: usize,
        output: usize,
        dim: i64,
    },
    /// RMS normalization over the last dimension, times a weight when the
    /// graph has one (CPU only; see `rms_norm`): five or six nodes.
    RmsNorm {
        input: usize,
        weight: Option<usize>,
        output: usize,
        eps: f64,
    },
    /// `mul` of `[n, c, h, w]` planes by `[n, c, 1, 1]` scales (CPU only; see
    /// `channel_scale`).
    PlaneScale {
        planes: usize,
        scales: usize,
        output: usize,
    },
    /// `mean.dim` over the planes of `[n, c, h, w]` (CPU only; see
    /// `plane_mean`).
    PlaneMean {
        input: usize,
        output: usize,
        keepdim: bool,
    },
    /// `native_layer_norm` whose mean and deviation nothing reads (CPU only;
    /// see `layer_norm`).
    LayerNorm {
        input: usize,
        weight: Option<usize>,
        bias: Option<usize>,
        output: usize,
        eps: f64,
        dim: i64,
    },
    /// A view node with constant arguments (CPU only; see `views`).
    View {
        src: usize,
        dst: usize,
        op: crate::views::ViewOp,
    },
    /// Symbolic int arithmetic (`operator.add`, ...).
    Int {
        op: IntOp,
        a: SymVal,
        b: SymVal,
        dst: usize,
    },
}

#[derive(Copy, Clone, Debug)]
pub(crate) enum SizeOf {
    Size,
    Stride,
    Numel,
    Offset,
}

#[derive(Clone, Debug)]
pub(crate) struct Step {
    /// Index of the node in the program (for error messages).
    pub node: usize,
    pub kind: Kind,
    /// Slots whose last use is this step.
    pub frees: Vec<usize>,
}

#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub steps: Vec<Step>,
    pub slots: usize,
    /// Slot of each graph input, in order.
    pub input_slots: Vec<usize>,
    pub outputs: Vec<SymOut>,
    pub max_stack: usize,
}

#[derive(Clone, Debug)]
pub(crate) enum SymOut {
    Slot(usize),
    Int(i64),
    None,
}

/// What a target is, before resolution against a device.
pub(crate) enum Target {
    /// An operator of the dispatcher (`aten::add.Tensor`, or a plugin's own).
    Aten(String),
    Builtin(&'static str),
    Other,
}

const BUILTINS: [&str; 7] = ["getitem", "add", "sub", "mul", "floordiv", "mod", "neg"];

/// Classifies a serialized target: `torch.ops.aten.add.Tensor` is `aten::add.Tensor`
/// (`.default` is no overload), and an operator of another namespace (a plugin's
/// own, `torch.ops.emu.fused_add_relu.default`) is `emu::fused_add_relu`, looked
/// up in the dispatcher alike; `_operator.getitem` and `<built-in function
/// getitem>` are builtins.
pub(crate) fn classify(target: &str) -> Target {
    let ident = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if let Some((ns, rest)) = target
        .strip_prefix("torch.ops.")
        .and_then(|t| t.split_once('.'))
        .filter(|(ns, rest)| ident(ns) && !rest.is_empty())
    {
        return Target::Aten(match rest.rsplit_once('.') {
            Some((name, "default")) => format!("{ns}::{name}"),
            Some((name, ov)) => format!("{ns}::{name}.{ov}"),
            None => format!("{ns}::{rest}"),
        });
    }
    let b = target
        .strip_prefix("_operator.")
        .or_else(|| target.strip_prefix("operator."))
        .or_else(|| {
            target
                .strip_prefix("<built-in function ")
                .and_then(|t| t.strip_suffix('>'))
        });
    match b.and_then(|b| BUILTINS.iter().find(|x| **x == b)) {
        Some(b) => Target::Builtin(b),
        None => Target::Other,
    }
}

/// The `sym_*` queries handled without the dispatcher (they return ints).
fn size_query(op: &str) -> Option<SizeOf> {
    Some(match op {
        "aten::sym_size.int" => SizeOf::Size,
        "aten::sym_stride.int" => SizeOf::Stride,
        "aten::sym_numel" => SizeOf::Numel,
        "aten::sym_storage_offset" => SizeOf::Offset,
        _ => return None,
    })
}

/// The operator a node names, or why it has none.
pub(crate) fn resolve(node: &Node) -> Result<Option<OperatorHandle>> {
    match classify(&node.target) {
        Target::Aten(name) if size_query(&name).is_some() => Ok(None),
        Target::Aten(name) => match Dispatcher::global().find(&name) {
            Some(h) if h.def().is_some() => Ok(Some(h)),
            _ => bail!("operator '{name}' is not defined in Opal"),
        },
        Target::Builtin(_) => Ok(None),
        Target::Other => bail!(
            "target '{}' is not an ATen operator or a supported builtin",
            node.target
        ),
    }
}

struct Slots {
    map: HashMap<String, usize>,
    n: usize,
}

impl Slots {
    fn define(&mut self, name: &str) -> Result<usize> {
        if self.map.contains_key(name) {
            bail!("value '{name}' is defined twice");
        }
        self.map.insert(name.to_string(), self.n);
        self.n += 1;
        Ok(self.n - 1)
    }

    fn get(&self, name: &str) -> Result<usize> {
        self.map.get(name).copied().ok_or_else(|| {
            Error::new(format!(
                "names '{name}', which no graph input or earlier node defines"
            ))
        })
    }

    fn sym(&self, r: &SymRef) -> Result<SymVal> {
        Ok(match r {
            SymRef::Int(i) => SymVal::Const(*i),
            SymRef::Name(n) => SymVal::Slot(self.get(n)?),
        })
    }
}

/// The schema type without alias annotations, and whether it is optional:
/// `Tensor(a!)` is (`Tensor`, false), `int[1]?` is (`int[1]`, true).
fn base_type(ty: &str) -> (String, bool) {
    let mut out = String::with_capacity(ty.len());
    let mut depth = 0;
    for c in ty.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    match out.strip_suffix('?') {
        Some(b) => (b.to_string(), true),
        None => (out, false),
    }
}

fn scalar_or(ty: &str, s: Scalar, plain: IValue) -> IValue {
    if ty == "Scalar" {
        IValue::Scalar(s)
    } else {
        plain
    }
}

/// The constant value or the fill of one argument, converted for its schema type.
fn convert(
    arg: &Arg,
    def: &ArgDef,
    slots: &Slots,
    device: Device,
) -> Result<(IValue, Option<Fill>)> {
    let (ty, _) = base_type(def.ty);
    let is_list = ty.ends_with(']');
    let c = |v| Ok((v, None));
    // A number where a tensor is expected (`mul.Tensor(x, 0.5)`): PyTorch passes it
    // as a wrapped number, a 0-dim CPU tensor that promotes like a scalar.
    let number = match arg {
        Arg::Int(i) => Some(Scalar::Int(*i)),
        Arg::Float(f) => Some(Scalar::Float(*f)),
        Arg::Bool(b) => Some(Scalar::Bool(*b)),
        _ => None,
    };
    if let (Some(s), "Tensor") = (number, ty.as_str()) {
        return c(IValue::Tensor(Tensor::wrapped_number(&s)?));
    }
    match arg {
        Arg::None => c(IValue::None),
        Arg::Tensor(n) => Ok((IValue::None, Some(Fill::Value(slots.get(n)?)))),
        Arg::OptTensor(None) => c(IValue::None),
        Arg::OptTensor(Some(n)) => Ok((IValue::None, Some(Fill::Value(slots.get(n)?)))),
        Arg::Tensors(ns) => {
            let ids = ns
                .iter()
                .map(|n| slots.get(n))
                .collect::<Result<Vec<_>>>()?;
            let fill = if ty.starts_with("Tensor?") {
                Fill::OptTensors(ids.into_iter().map(Some).collect())
            } else {
                Fill::Tensors(ids)
            };
            Ok((IValue::None, Some(fill)))
        }
        Arg::OptTensors(ns) => {
            let ids = ns
                .iter()
                .map(|n| n.as_ref().map(|n| slots.get(n)).transpose())
                .collect::<Result<Vec<_>>>()?;
            Ok((IValue::None, Some(Fill::OptTensors(ids))))
        }
        Arg::Int(i) if is_list => c(IValue::IntList(vec![*i])),
        Arg::Int(i) if ty == "float" => c(IValue::Double(*i as f64)),
        Arg::Int(i) => c(scalar_or(&ty, Scalar::Int(*i), IValue::Int(*i))),
        Arg::Float(f) => c(scalar_or(&ty, Scalar::Float(*f), IValue::Double(*f))),
        Arg::Bool(b) => c(scalar_or(&ty, Scalar::Bool(*b), IValue::Bool(*b))),
        Arg::Ints(v) if ty.starts_with("float") => {
            c(IValue::DoubleList(v.iter().map(|&i| i as f64).collect()))
        }
        Arg::Ints(v) => c(IValue::IntList(v.clone())),
        Arg::Floats(v) => c(IValue::DoubleList(v.clone())),
        Arg::Bools(v) => c(IValue::BoolList(v.clone())),
        Arg::Str(s) => c(IValue::Str(s.clone())),
        Arg::Strs(v) => c(IValue::StrList(v.clone())),
        Arg::SymInt(r) => match slots.sym(r)? {
            SymVal::Const(i) => convert(&Arg::Int(i), def, slots, device),
            SymVal::Slot(s) if is_list => {
                Ok((IValue::None, Some(Fill::Ints(vec![SymVal::Slot(s)]))))
            }
            SymVal::Slot(s) if ty == "Tensor" => Ok((IValue::None, Some(Fill::WrappedInt(s)))),
            SymVal::Slot(s) => Ok((IValue::None, Some(Fill::Value(s)))),
        },
        Arg::SymInts(rs) => {
            let vals = rs
                .iter()
                .map(|r| slots.sym(r))
                .collect::<Result<Vec<_>>>()?;
            if vals.iter().all(|v| matches!(v, SymVal::Const(_))) {
                let ints = vals
                    .iter()
                    .map(|v| match v {
                        SymVal::Const(i) => *i,
                        SymVal::Slot(_) => 0,
                    })
                    .collect();
                c(IValue::IntList(ints))
            } else {
                Ok((IValue::None, Some(Fill::Ints(vals))))
            }
        }
        Arg::ScalarType(d) => c(IValue::DType(*d)),
        Arg::MemoryFormat(m) => c(IValue::MemoryFormat(*m)),
        Arg::Layout(l) => c(IValue::Layout(*l)),
        // The export ran on one device; the program runs on the runner's.
        Arg::Device(_) => c(IValue::Device(device)),
    }
}

fn int_arg(node: &Node, i: usize) -> Result<&Arg> {
    node.inputs.get(i).map(|a| &a.arg).ok_or_else(|| {
        Error::new(format!(
            "needs {} arguments, has {}",
            i + 1,
            node.inputs.len()
        ))
    })
}

fn sym_arg(node: &Node, i: usize, slots: &Slots) -> Result<SymVal> {
    match int_arg(node, i)? {
        Arg::Int(v) => Ok(SymVal::Const(*v)),
        Arg::SymInt(r) => slots.sym(r),
        other => bail!("argument {i} must be an int, got {other:?}"),
    }
}

fn single_out(node: &Node, slots: &mut Slots) -> Result<usize> {
    match node.outputs.as_slice() {
        [Out::Tensor(n)] | [Out::SymInt(SymRef::Name(n))] => slots.define(n),
        _ => bail!("expected one named output, got {:?}", node.outputs),
    }
}

fn compile_builtin(b: &str, node: &Node, slots: &mut Slots) -> Result<Kind> {
    if b == "getitem" {
        let src = match (int_arg(node, 0)?, int_arg(node, 1)?) {
            (Arg::Tensors(ns), Arg::Int(i)) => {
                let idx = usize::try_from(*i)
                    .ok()
                    .filter(|&i| i < ns.len())
                    .ok_or_else(|| {
                        Error::new(format!("index {i} is out of range for {} values", ns.len()))
                    })?;
                slots.get(&ns[idx])?
            }
            (a, i) => bail!("getitem of {a:?} at {i:?} is not supported"),
        };
        return Ok(Kind::Alias {
            src,
            dst: single_out(node, slots)?,
        });
    }
    let bin = |op| -> Result<(IntOp, SymVal, SymVal)> {
        Ok((op, sym_arg(node, 0, slots)?, sym_arg(node, 1, slots)?))
    };
    let (op, a, b) = match b {
        // neg(a) = 0 - a.
        "neg" => (IntOp::Sub, SymVal::Const(0), sym_arg(node, 0, slots)?),
        "add" => bin(IntOp::Add)?,
        "sub" => bin(IntOp::Sub)?,
        "mul" => bin(IntOp::Mul)?,
        "floordiv" => bin(IntOp::FloorDiv)?,
        _ => bin(IntOp::Mod)?,
    };
    Ok(Kind::Int {
        op,
        a,
        b,
        dst: single_out(node, slots)?,
    })
}

fn compile_size(what: SizeOf, node: &Node, slots: &mut Slots) -> Result<Kind> {
    let src = match int_arg(node, 0)? {
        Arg::Tensor(n) => slots.get(n)?,
        other => bail!("expected a tensor, got {other:?}"),
    };
    let dim = match what {
        SizeOf::Size | SizeOf::Stride => match int_arg(node, 1)? {
            Arg::Int(d) => *d,
            other => bail!("expected an int dim, got {other:?}"),
        },
        _ => 0,
    };
    Ok(Kind::Size {
        src,
        dim,
        what,
        dst: single_out(node, slots)?,
    })
}

fn compile_op(
    op: OperatorHandle,
    node: &Node,
    slots: &mut Slots,
    device: Device,
    traced_bytes: u64,
) -> Result<Kind> {
    let def = op
        .def()
        .ok_or_else(|| Error::new(format!("operator '{}' is not defined", op.name())))?;
    for a in &node.inputs {
        if !def.args.iter().any(|d| d.name == a.name) {
            bail!("'{}' has no argument '{}'", def.name, a.name);
        }
    }
    let mut template = Vec::with_capacity(def.args.len());
    let mut fills = Vec::new();
    for (i, d) in def.args.iter().enumerate() {
        let (v, fill) = match node.inputs.iter().find(|a| a.name == d.name) {
            Some(a) => convert(&a.arg, d, slots, device)
                .map_err(|e| e.context(format!("argument '{}'", d.name)))?,
            None => match d.default {
                Some(f) => (f(), None),
                None => bail!(
                    "argument '{}' of '{}' has no value and no schema default",
                    d.name,
                    def.name
                ),
            },
        };
        template.push(v);
        if let Some(f) = fill {
            fills.push((i, f));
        }
    }
    if node.outputs.len() != def.returns.len() {
        bail!(
            "has {} outputs but '{}' returns {}",
            node.outputs.len(),
            def.name,
            def.returns.len()
        );
    }
    let binds = node
        .outputs
        .iter()
        .map(|o| {
            Ok(match o {
                Out::None | Out::Int(_) | Out::SymInt(SymRef::Int(_)) => Bind::Drop,
                Out::Tensor(n) | Out::SymInt(SymRef::Name(n)) => Bind::Slot(slots.define(n)?),
                Out::Tensors(ns) => Bind::List(
                    ns.iter()
                        .map(|n| slots.define(n))
                        .collect::<Result<Vec<_>>>()?,
                ),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Kind::Op {
        op,
        template,
        fills,
        binds,
        traced_bytes,
    })
}

impl Kind {
    /// Every slot this step reads.
    pub(crate) fn reads(&self, out: &mut Vec<usize>) {
        let sym = |v: &SymVal, out: &mut Vec<usize>| {
            if let SymVal::Slot(s) = v {
                out.push(*s)
            }
        };
        match self {
            Kind::Op { fills, .. } => {
                for (_, f) in fills {
                    match f {
                        Fill::Value(s) | Fill::WrappedInt(s) => out.push(*s),
                        Fill::Tensors(v) => out.extend(v),
                        Fill::OptTensors(v) => out.extend(v.iter().flatten()),
                        Fill::Ints(v) => v.iter().for_each(|x| sym(x, out)),
                    }
                }
            }
            Kind::Alias { src, .. } | Kind::Size { src, .. } | Kind::View { src, .. } => {
                out.push(*src)
            }
            Kind::SafeSoftmax { input, .. } | Kind::PlaneMean { input, .. } => out.push(*input),
            Kind::RmsNorm { input, weight, .. } => {
                out.push(*input);
                out.extend(weight);
            }
            Kind::PlaneScale { planes, scales, .. } => out.extend([*planes, *scales]),
            Kind::LayerNorm {
                input,
                weight,
                bias,
                ..
            } => {
                out.push(*input);
                out.extend(weight);
                out.extend(bias);
            }
            Kind::Pointwise { inputs, .. } => out.extend(inputs),
            Kind::Int { a, b, .. } => {
                sym(a, out);
                sym(b, out);
            }
        }
    }

    /// Every slot this step defines.
    pub(crate) fn writes(&self, out: &mut Vec<usize>) {
        match self {
            Kind::Op { binds, .. } => {
                for b in binds {
                    match b {
                        Bind::Drop => {}
                        Bind::Slot(s) => out.push(*s),
                        Bind::List(v) => out.extend(v),
                    }
                }
            }
            Kind::Alias { dst, .. }
            | Kind::Size { dst, .. }
            | Kind::Int { dst, .. }
            | Kind::View { dst, .. } => out.push(*dst),
            Kind::Pointwise { outputs, .. } => out.extend(outputs),
            Kind::SafeSoftmax { output, .. }
            | Kind::RmsNorm { output, .. }
            | Kind::PlaneScale { output, .. }
            | Kind::PlaneMean { output, .. }
            | Kind::LayerNorm { output, .. } => out.push(*output),
        }
    }
}

/// Bytes of a node's tensor outputs as traced (symbolic sizes at their hints).
fn traced_bytes(p: &Program, node: &Node) -> u64 {
    let mut names = Vec::new();
    for o in &node.outputs {
        match o {
            Out::Tensor(n) => names.push(n),
            Out::Tensors(ns) => names.extend(ns),
            _ => {}
        }
    }
    names
        .iter()
        .filter_map(|n| p.tensor_meta.get(*n))
        .filter_map(|m| {
            let sizes = m
                .sizes
                .iter()
                .map(|d| d.hint())
                .collect::<Option<Vec<_>>>()?;
            numel_bytes(&sizes, m.dtype)
        })
        .fold(0u64, u64::saturating_add)
}

/// A run of nodes that becomes one step.
enum Fused {
    Pointwise(crate::pointwise::Group),
    Softmax(crate::safe_softmax::Group),
    RmsNorm(crate::rms_norm::Group),
}

/// Compiles `p` for `device`; the first node that cannot run is an error naming it.
pub(crate) fn compile(p: &Program, device: Device) -> Result<Plan> {
    let mut slots = Slots {
        map: HashMap::new(),
        n: 0,
    };
    let input_slots = p
        .inputs
        .iter()
        .map(|(n, _)| slots.define(n))
        .collect::<Result<Vec<_>>>()?;
    let mut steps = Vec::with_capacity(p.nodes.len());
    let mut max_stack = 0;
    // Fused runs of nodes (CPU only) by their first node; the other members are
    // skipped.
    let mut fused: HashMap<usize, Fused> = HashMap::new();
    if device == Device::cpu() {
        // A node joins at most one group: the more specific patterns first (an
        // element-wise run could otherwise take the first node of an RMS norm).
        let mut taken = vec![false; p.nodes.len()];
        let mut claim = |r: &std::ops::Range<usize>| {
            let free = r.clone().all(|k| !taken[k]);
            if free {
                taken[r.clone()].fill(true);
            }
            free
        };
        for g in crate::rms_norm::groups(p) {
            if claim(&g.members) {
                fused.insert(g.members.start, Fused::RmsNorm(g));
            }
        }
        for g in crate::safe_softmax::groups(p) {
            if claim(&g.members) {
                fused.insert(g.members.start, Fused::Softmax(g));
            }
        }
        for g in crate::pointwise::groups(p) {
            if claim(&g.members) {
                fused.insert(g.members.start, Fused::Pointwise(g));
            }
        }
    }
    let cpu_readers = (device == Device::cpu()).then(|| crate::graph::readers(p));
    let mut skip_to = 0;
    for (i, node) in p.nodes.iter().enumerate() {
        if i < skip_to {
            continue;
        }
        if let Some(g) = fused.remove(&i) {
            let kind = (|| -> Result<Kind> {
                Ok(match g {
                    Fused::Pointwise(g) => {
                        skip_to = g.members.end;
                        let inputs = g
                            .inputs
                            .iter()
                            .map(|n| slots.get(n))
                            .collect::<Result<Vec<_>>>()?;
                        let outputs = g
                            .outputs
                            .iter()
                            .map(|n| slots.define(n))
                            .collect::<Result<Vec<_>>>()?;
                        Kind::Pointwise {
                            program: g.program,
                            inputs,
                            outputs,
                            sizes: g.sizes,
                            donor: None,
                        }
                    }
                    Fused::Softmax(g) => {
                        skip_to = g.members.end;
                        Kind::SafeSoftmax {
                            input: slots.get(&g.input)?,
                            output: slots.define(&g.output)?,
                            dim: g.dim,
                        }
                    }
                    Fused::RmsNorm(g) => {
                        skip_to = g.members.end;
                        Kind::RmsNorm {
                            input: slots.get(&g.input)?,
                            weight: g.weight.as_deref().map(|w| slots.get(w)).transpose()?,
                            output: slots.define(&g.output)?,
                            eps: g.eps,
                        }
                    }
                })
            })()
            .map_err(|e| e.context(format!("node '{}' ({})", node.name, node.target)))?;
            steps.push(Step {
                node: i,
                kind,
                frees: Vec::new(),
            });
            continue;
        }
        let kind = (|| -> Result<Kind> {
            let view = (device == Device::cpu())
                .then(|| crate::views::lower(node))
                .flatten();
            if let (Some(op), Some(Arg::Tensor(x))) = (view, crate::graph::arg(node, "self")) {
                // Resolved all the same: the operator must exist like any other.
                resolve(node)?;
                return Ok(Kind::View {
                    src: slots.get(x)?,
                    dst: single_out(node, &mut slots)?,
                    op,
                });
            }
            let norm = cpu_readers
                .as_ref()
                .and_then(|r| crate::layer_norm::lower(p, node, r));
            if let Some(n) = norm {
                resolve(node)?;
                let opt = |v: &Option<String>| v.as_deref().map(|n| slots.get(n)).transpose();
                return Ok(Kind::LayerNorm {
                    input: slots.get(&n.input)?,
                    weight: opt(&n.weight)?,
                    bias: opt(&n.bias)?,
                    output: slots.define(&n.output)?,
                    eps: n.eps,
                    dim: n.dim,
                });
            }
            let scale = (device == Device::cpu())
                .then(|| crate::channel_scale::lower(p, node))
                .flatten();
            if let Some(sc) = scale {
                resolve(node)?;
                return Ok(Kind::PlaneScale {
                    planes: slots.get(&sc.planes)?,
                    scales: slots.get(&sc.scales)?,
                    output: single_out(node, &mut slots)?,
                });
            }
            let mean = (device == Device::cpu())
                .then(|| crate::plane_mean::lower(p, node))
                .flatten();
            if let Some(m) = mean {
                resolve(node)?;
                return Ok(Kind::PlaneMean {
                    input: slots.get(&m.input)?,
                    output: single_out(node, &mut slots)?,
                    keepdim: m.keepdim,
                });
            }
            if let Some(op) = resolve(node)? {
                max_stack =
                    max_stack.max(op.def().map_or(0, |d| d.args.len().max(d.returns.len())));
                return compile_op(op, node, &mut slots, device, traced_bytes(p, node));
            }
            match classify(&node.target) {
                Target::Builtin(b) => compile_builtin(b, node, &mut slots),
                Target::Aten(name) => match size_query(&name) {
                    Some(what) => compile_size(what, node, &mut slots),
                    None => bail!("operator '{name}' is not supported"),
                },
                Target::Other => bail!("target '{}' is not supported", node.target),
            }
        })()
        .map_err(|e| e.context(format!("node '{}' ({})", node.name, node.target)))?;
        steps.push(Step {
            node: i,
            kind,
            frees: Vec::new(),
        });
    }
    let outputs = p
        .outputs
        .iter()
        .map(|o| {
            Ok(match o {
                Out::Tensor(n) | Out::SymInt(SymRef::Name(n)) => SymOut::Slot(slots.get(n)?),
                Out::Int(i) | Out::SymInt(SymRef::Int(i)) => SymOut::Int(*i),
                Out::None => SymOut::None,
                Out::Tensors(_) => bail!("a list as a graph output is not supported"),
            })
        })
        .collect::<Result<Vec<_>>>()
        .map_err(|e| e.context("graph output"))?;
    // Last use of each slot: the step after which nothing reads it. Graph outputs
    // live to the end; values nothing reads die right after the step defining them.
    let n = slots.n;
    let mut last: Vec<Option<usize>> = vec![None; n];
    let mut buf = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        buf.clear();
        s.kind.reads(&mut buf);
        s.kind.writes(&mut buf);
        for &x in &buf {
            last[x] = Some(i);
        }
    }
    for o in &outputs {
        if let SymOut::Slot(s) = o {
            last[*s] = None;
        }
    }
    let keep: Vec<bool> = {
        let mut k = vec![false; n];
        for o in &outputs {
            if let SymOut::Slot(s) = o {
                k[*s] = true;
            }
        }
        k
    };
    for (slot, l) in last.iter().enumerate() {
        if let (Some(step), false) = (l, keep[slot]) {
            steps[*step].frees.push(slot);
        }
    }
    Ok(Plan {
        steps,
        slots: n,
        input_slots,
        outputs,
        max_stack,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_map_to_dispatcher_names() {
        let name = |t| match classify(t) {
            Target::Aten(n) => n,
            Target::Builtin(b) => format!("builtin {b}"),
            Target::Other => "other".into(),
        };
        assert_eq!(name("torch.ops.aten.addmm.default"), "aten::addmm");
        assert_eq!(name("torch.ops.aten.add.Tensor"), "aten::add.Tensor");
        assert_eq!(name("_operator.getitem"), "builtin getitem");
        assert_eq!(name("<built-in function add>"), "builtin add");
        assert_eq!(name("torch.ops.mylib.op.default"), "mylib::op");
        assert_eq!(
            name("torch.ops.emu.fused_add_relu.out"),
            "emu::fused_add_relu.out"
        );
        assert_eq!(name("math.sqrt"), "other");
    }

    #[test]
    fn schema_types_lose_their_annotations() {
        assert_eq!(base_type("Tensor(a!)"), ("Tensor".into(), false));
        assert_eq!(base_type("int[1]?"), ("int[1]".into(), true));
        assert_eq!(base_type("Tensor(a)[]"), ("Tensor[]".into(), false));
        assert_eq!(base_type("Tensor?[]"), ("Tensor?[]".into(), false));
    }
}
