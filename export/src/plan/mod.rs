//! The interpreter's load-time work: each node resolved to its dispatcher handle,
//! its arguments matched to the schema by name (schema defaults for omitted
//! ones), the constant part of each argument stack built once, values numbered
//! into slots, and each value's last use found so the runner frees it there.
//!
//! Owns: [`Plan`], its step kinds and its compilation from the parsed program
//! (targets in `target`, argument stacks in `args`). Must not: run anything or
//! hold tensors other than the constant arguments (see `runner`).

use crate::error::{bail, Result};
use crate::schema::{numel_bytes, Arg, Node, Out, Program, SymRef};
use opal::dispatch::OperatorHandle;
use opal::{Device, IValue};
use std::collections::HashMap;

mod args;
mod target;

use args::{compile_builtin, compile_op, compile_size, single_out, Slots};
use target::size_query;
pub(crate) use target::{classify, resolve, Target};

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

/// What a step runs. Every kind but `Op`, `Alias`, `Size`, `View` and `Int`
/// (a fused or direct CPU step) returns tensors of its own, never an input or
/// a view of one: `pointwise::donate` relies on it.
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
    /// A 1x1 convolution of one group, stride 1, no padding (CPU only; see
    /// `conv1x1`).
    Conv1x1 {
        input: usize,
        weight: usize,
        bias: Option<usize>,
        output: usize,
    },
    /// A depthwise convolution of a channels-last input (CPU only; see
    /// `depthwise_nhwc`).
    DepthwiseNhwc {
        input: usize,
        weight: usize,
        bias: Option<usize>,
        output: usize,
        geom: crate::depthwise_nhwc::Geometry,
    },
    /// A convolution of non-overlapping patches (CPU only; see `patchify`).
    Patchify {
        input: usize,
        weight: usize,
        bias: Option<usize>,
        output: usize,
        kernel: [i64; 2],
        nhwc: bool,
    },
    /// `bmm` of a batch by one matrix expanded over it, as one product (CPU
    /// only; see `shared_rhs_bmm`).
    SharedRhsBmm {
        input: usize,
        matrix: usize,
        output: usize,
    },
    /// `add(mul(s, x), r)` over channels-last values (CPU only; see
    /// `scale_residual`): two nodes.
    ScaleResidual {
        scale: usize,
        input: usize,
        residual: usize,
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
            Kind::ScaleResidual {
                scale,
                input,
                residual,
                ..
            } => out.extend([*scale, *input, *residual]),
            Kind::SharedRhsBmm { input, matrix, .. } => out.extend([*input, *matrix]),
            Kind::Conv1x1 {
                input,
                weight,
                bias,
                ..
            }
            | Kind::DepthwiseNhwc {
                input,
                weight,
                bias,
                ..
            }
            | Kind::Patchify {
                input,
                weight,
                bias,
                ..
            } => {
                out.extend([*input, *weight]);
                out.extend(bias);
            }
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
            | Kind::Conv1x1 { output, .. }
            | Kind::DepthwiseNhwc { output, .. }
            | Kind::Patchify { output, .. }
            | Kind::SharedRhsBmm { output, .. }
            | Kind::ScaleResidual { output, .. }
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
    ScaleResidual(crate::scale_residual::Group),
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
        for g in crate::scale_residual::groups(p) {
            if claim(&g.members) {
                fused.insert(g.members.start, Fused::ScaleResidual(g));
            }
        }
        for g in crate::pointwise::groups(p) {
            if claim(&g.members) {
                fused.insert(g.members.start, Fused::Pointwise(g));
            }
        }
    }
    let cpu_readers = (device == Device::cpu()).then(|| crate::graph::readers(p));
    let made_by = (device == Device::cpu()).then(|| crate::shared_rhs_bmm::producers(p));
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
                    Fused::ScaleResidual(g) => {
                        skip_to = g.members.end;
                        Kind::ScaleResidual {
                            scale: slots.get(&g.scale)?,
                            input: slots.get(&g.input)?,
                            residual: slots.get(&g.residual)?,
                            output: slots.define(&g.output)?,
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
            let conv = (device == Device::cpu())
                .then(|| crate::conv1x1::lower(p, node))
                .flatten();
            if let Some(c) = conv {
                resolve(node)?;
                return Ok(Kind::Conv1x1 {
                    input: slots.get(&c.input)?,
                    weight: slots.get(&c.weight)?,
                    bias: c.bias.as_deref().map(|b| slots.get(b)).transpose()?,
                    output: single_out(node, &mut slots)?,
                });
            }
            let dw = (device == Device::cpu())
                .then(|| crate::depthwise_nhwc::lower(p, node))
                .flatten();
            if let Some(c) = dw {
                resolve(node)?;
                return Ok(Kind::DepthwiseNhwc {
                    input: slots.get(&c.input)?,
                    weight: slots.get(&c.weight)?,
                    bias: c.bias.as_deref().map(|b| slots.get(b)).transpose()?,
                    output: single_out(node, &mut slots)?,
                    geom: c.geom,
                });
            }
            let shared = made_by
                .as_ref()
                .and_then(|m| crate::shared_rhs_bmm::lower(p, node, m));
            if let Some(b) = shared {
                resolve(node)?;
                return Ok(Kind::SharedRhsBmm {
                    input: slots.get(&b.input)?,
                    matrix: slots.get(&b.matrix)?,
                    output: single_out(node, &mut slots)?,
                });
            }
            let patches = (device == Device::cpu())
                .then(|| crate::patchify::lower(p, node))
                .flatten();
            if let Some(c) = patches {
                resolve(node)?;
                return Ok(Kind::Patchify {
                    input: slots.get(&c.input)?,
                    weight: slots.get(&c.weight)?,
                    bias: c.bias.as_deref().map(|b| slots.get(b)).transpose()?,
                    output: single_out(node, &mut slots)?,
                    kernel: c.kernel,
                    nhwc: c.nhwc,
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
