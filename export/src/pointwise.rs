//! Fusion of element-wise chains for the CPU: runs of consecutive nodes that are
//! element-wise ATen operations on f32 tensors of one static, contiguous shape
//! (or on numbers) become one [`opal_cpu::fused::Program`], run block by block
//! without materializing the values only the run itself reads (MobileNet's
//! hardswish is five nodes, GPT-2's GELU eight).
//!
//! A run with one output writes it over an input that nothing else reads (a
//! convolution's or a product's result right before its activation) instead of
//! a new tensor: one allocation less per step, and a lower peak.
//!
//! Owns: recognising those nodes from the traced metadata, lowering a run of
//! them to a program, choosing the input whose buffer the output takes, and
//! running it. Must not: fuse across a shape change, a broadcast, another
//! dtype, a non-contiguous value or a node it does not know (those keep the
//! dispatcher's generic path), or drop a value something outside the run reads.

use crate::error::{bail, Error, Result};
use crate::graph::f32_contiguous;
use crate::plan::{Kind, Plan, SymOut};
use crate::schema::{Arg, Node, Out, Program};
use opal::{DType, Device, Tensor};
use opal_cpu::fused::{Instr, Op, Operand};
use std::collections::HashMap;

/// A fused run of nodes.
pub(crate) struct Group {
    /// Node indices, consecutive.
    pub members: std::ops::Range<usize>,
    /// Values read from outside the run, in register order.
    pub inputs: Vec<String>,
    /// Values of the run that something outside it reads.
    pub outputs: Vec<String>,
    pub sizes: Vec<i64>,
    pub program: opal_cpu::fused::Program,
}

/// An operand of a lowered node: a graph value, a constant, or an earlier
/// result of the same node.
#[derive(Clone)]
enum Src {
    Value(String),
    Const(f32),
    Local(usize),
}

fn arg<'a>(node: &'a Node, name: &str) -> Option<&'a Arg> {
    node.inputs.iter().find(|a| a.name == name).map(|a| &a.arg)
}

fn operand(a: Option<&Arg>) -> Option<Src> {
    match a? {
        Arg::Tensor(n) => Some(Src::Value(n.clone())),
        Arg::Int(i) => Some(Src::Const(*i as f32)),
        Arg::Float(f) => Some(Src::Const(*f as f32)),
        _ => None,
    }
}

/// Absent, or the number 1.
fn unit_alpha(node: &Node) -> bool {
    match arg(node, "alpha") {
        None => true,
        Some(Arg::Int(1)) => true,
        Some(Arg::Float(f)) => *f == 1.0,
        _ => false,
    }
}

/// The node as a list of (op, a, b); the last one's result is the node's value.
fn lower(node: &Node) -> Option<Vec<(Op, Src, Src)>> {
    let t = node.target.strip_prefix("torch.ops.aten.")?;
    let x = || operand(arg(node, "self"));
    let bin = |op| Some(vec![(op, x()?, operand(arg(node, "other"))?)]);
    let un = |op| Some(vec![(op, x()?, Src::Const(0.0))]);
    match t {
        "add.Tensor" | "add.Scalar" if unit_alpha(node) => bin(Op::Add),
        "sub.Tensor" | "sub.Scalar" if unit_alpha(node) => bin(Op::Sub),
        "mul.Tensor" | "mul.Scalar" => bin(Op::Mul),
        "div.Tensor" | "div.Scalar" => bin(Op::Div),
        "relu.default" => un(Op::Relu),
        "tanh.default" => un(Op::Tanh),
        "sigmoid.default" => un(Op::Sigmoid),
        "neg.default" => un(Op::Neg),
        "exp.default" => un(Op::Exp),
        "rsqrt.default" => un(Op::Rsqrt),
        "pow.Tensor_Scalar" => match operand(arg(node, "exponent"))? {
            c @ Src::Const(_) => Some(vec![(Op::Pow, x()?, c)]),
            _ => None,
        },
        "gelu.default" => match arg(node, "approximate") {
            None => un(Op::Gelu),
            Some(Arg::Str(s)) if s == "none" => un(Op::Gelu),
            Some(Arg::Str(s)) if s == "tanh" => un(Op::GeluTanh),
            _ => None,
        },
        "clamp.default" => {
            let bound = |name| match arg(node, name) {
                None | Some(Arg::None) => Some(None),
                Some(a) => match operand(Some(a))? {
                    c @ Src::Const(_) => Some(Some(c)),
                    _ => None,
                },
            };
            let (lo, hi) = (bound("min")?, bound("max")?);
            let mut v = Vec::new();
            let mut cur = x()?;
            if let Some(lo) = lo {
                v.push((Op::ClampMin, cur, lo));
                cur = Src::Local(0);
            }
            if let Some(hi) = hi {
                v.push((Op::ClampMax, cur, hi));
            }
            (!v.is_empty()).then_some(v)
        }
        _ => None,
    }
}

/// A node lowered: its operations, its value's name and its sizes.
type Lowered = (Vec<(Op, Src, Src)>, String, Vec<i64>);

/// The node's lowering and output sizes when it can join a run.
fn candidate(p: &Program, node: &Node) -> Option<Lowered> {
    let [Out::Tensor(out)] = node.outputs.as_slice() else {
        return None;
    };
    let sizes = f32_contiguous(p, out)?;
    let ops = lower(node)?;
    for (_, a, b) in &ops {
        for s in [a, b] {
            if let Src::Value(v) = s {
                if f32_contiguous(p, v)? != sizes {
                    return None;
                }
            }
        }
    }
    Some((ops, out.clone(), sizes))
}

/// Every run of two or more fusable consecutive nodes of one shape, and every
/// lone one whose operation is a transcendental one.
pub(crate) fn groups(p: &Program) -> Vec<Group> {
    let mut readers: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, node) in p.nodes.iter().enumerate() {
        for a in &node.inputs {
            let mut add = |s: &String| readers.entry(s.clone()).or_default().push(i);
            match &a.arg {
                Arg::Tensor(s) | Arg::OptTensor(Some(s)) => add(s),
                Arg::Tensors(v) => v.iter().for_each(&mut add),
                Arg::OptTensors(v) => v.iter().flatten().for_each(&mut add),
                Arg::SymInt(crate::schema::SymRef::Name(s)) => add(s),
                Arg::SymInts(v) => v.iter().for_each(|r| {
                    if let crate::schema::SymRef::Name(s) = r {
                        add(s)
                    }
                }),
                _ => {}
            }
        }
    }
    let graph_out: Vec<&str> = p
        .outputs
        .iter()
        .filter_map(|o| match o {
            Out::Tensor(s) => Some(s.as_str()),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < p.nodes.len() {
        let Some(first) = candidate(p, &p.nodes[i]) else {
            i += 1;
            continue;
        };
        let mut run = vec![first];
        let mut j = i + 1;
        while j < p.nodes.len() {
            match candidate(p, &p.nodes[j]) {
                Some(c) if c.2 == run[0].2 => run.push(c),
                _ => break,
            }
            j += 1;
        }
        // A lone node is a program too: the program's vectorized erf / tanh /
        // exp beat the operator's (BERT's and ViT's GELU stand alone between
        // two products), and a lone relu or residual sum then writes over the
        // convolution result it follows (MobileNetV3's 14 and 7) instead of
        // allocating through the operator's dispatch.
        if let Some(g) = build(i..j, run, &readers, &graph_out) {
            out.push(g);
        }
        i = j;
    }
    out
}

fn build(
    members: std::ops::Range<usize>,
    run: Vec<Lowered>,
    readers: &HashMap<String, Vec<usize>>,
    graph_out: &[&str],
) -> Option<Group> {
    let defined: HashMap<&str, ()> = run.iter().map(|r| (r.1.as_str(), ())).collect();
    let mut inputs: Vec<String> = Vec::new();
    for (ops, _, _) in &run {
        for (_, a, b) in ops {
            for s in [a, b] {
                if let Src::Value(v) = s {
                    if !defined.contains_key(v.as_str()) && !inputs.contains(v) {
                        inputs.push(v.clone());
                    }
                }
            }
        }
    }
    // Registers: inputs first, then one per instruction in order.
    let mut reg: HashMap<String, usize> = inputs
        .iter()
        .enumerate()
        .map(|(k, v)| (v.clone(), k))
        .collect();
    let mut instrs = Vec::new();
    for (ops, name, _) in &run {
        let base = inputs.len() + instrs.len();
        for (op, a, b) in ops {
            let o = |s: &Src| -> Option<Operand> {
                Some(match s {
                    Src::Value(v) => Operand::Reg(*reg.get(v)?),
                    Src::Const(c) => Operand::Const(*c),
                    Src::Local(k) => Operand::Reg(base + k),
                })
            };
            instrs.push(Instr {
                op: *op,
                a: o(a)?,
                b: o(b)?,
                dst: inputs.len() + instrs.len(),
            });
        }
        reg.insert(name.clone(), inputs.len() + instrs.len() - 1);
    }
    let outputs: Vec<String> = run
        .iter()
        .map(|r| r.1.clone())
        .filter(|name| {
            graph_out.contains(&name.as_str())
                || readers
                    .get(name)
                    .is_some_and(|rs| rs.iter().any(|r| !members.contains(r)))
        })
        .collect();
    let out_regs = outputs.iter().map(|n| reg[n]).collect();
    let program = opal_cpu::fused::Program::new(inputs.len(), instrs, out_regs).ok()?;
    Some(Group {
        members,
        inputs,
        outputs,
        sizes: run[0].2.clone(),
        program,
    })
}

/// Operators whose every result is a new tensor of its own (never an input,
/// a view of one, or a value kept between runs): the only results, besides
/// those of fused steps, whose buffer a fused step's output may take.
const FRESH_RESULTS: [&str; 5] = [
    "aten::convolution",
    "aten::addmm",
    "aten::mm",
    "aten::bmm",
    "aten::mean.dim",
];

fn makes_new_tensors(kind: &Kind) -> bool {
    match kind {
        Kind::Op { op, .. } => FRESH_RESULTS.contains(&op.name()),
        Kind::Alias { .. } | Kind::Size { .. } | Kind::View { .. } | Kind::Int { .. } => false,
        // The fused and direct steps each return a tensor of their own.
        _ => true,
    }
}

/// Lets each fused step with one output write it over one of its inputs: an
/// input made as a new tensor by an earlier step of the plan (or a view of one
/// that only the view reads), read by no other step (so no other view of it
/// exists), freed by this step, and neither a graph input, a stored or
/// folded value (`kept`: the runner hands those to every run) nor a graph
/// output.
pub(crate) fn donate(plan: &mut Plan, kept: &[usize]) {
    let mut reads = vec![0usize; plan.slots];
    let mut fresh = vec![false; plan.slots];
    let mut buf = Vec::new();
    for s in &plan.steps {
        buf.clear();
        s.kind.reads(&mut buf);
        for &r in &buf {
            reads[r] += 1;
        }
        if makes_new_tensors(&s.kind) {
            buf.clear();
            s.kind.writes(&mut buf);
            for &w in &buf {
                fresh[w] = true;
            }
        }
    }
    let never: Vec<usize> = plan
        .outputs
        .iter()
        .filter_map(|o| match o {
            SymOut::Slot(s) => Some(*s),
            _ => None,
        })
        .chain(kept.iter().copied())
        .collect();
    for &k in &never {
        fresh[k] = false;
    }
    // A view of a new tensor that nothing else reads holds that tensor's only
    // handle once the view's step frees it (a GELU after a product reads the
    // product through a view).
    for s in &plan.steps {
        if let Kind::View { src, dst, .. } = &s.kind {
            if fresh[*src] && reads[*src] == 1 && s.frees.contains(src) {
                fresh[*dst] = true;
            }
        }
    }
    // A view that is itself kept or a graph output is never taken.
    for &k in &never {
        fresh[k] = false;
    }
    for step in &mut plan.steps {
        let Kind::Pointwise {
            inputs,
            outputs,
            donor,
            ..
        } = &mut step.kind
        else {
            continue;
        };
        if outputs.len() == 1 {
            *donor = inputs
                .iter()
                .position(|&s| fresh[s] && reads[s] == 1 && step.frees.contains(&s));
        }
    }
}

/// Runs a fused program: the inputs as contiguous f32 of `sizes` (a copy when
/// one is not contiguous), each output a new CPU tensor, or with `donor` the
/// one output written over that input (the caller holds its only handle: see
/// [`donate`]).
pub(crate) fn run(
    program: &opal_cpu::fused::Program,
    inputs: Vec<Tensor>,
    donor: Option<usize>,
    n_out: usize,
    sizes: &[i64],
) -> Result<Vec<Tensor>> {
    let mut ins = Vec::with_capacity(inputs.len());
    for (k, t) in inputs.into_iter().enumerate() {
        if t.dtype() != DType::F32 || t.sizes() != sizes || !t.device().is_cpu() {
            bail!(
                "fused element-wise input {k} is {} {:?} on {}, the trace recorded f32 {sizes:?} on cpu",
                t.dtype(),
                t.sizes(),
                t.device()
            );
        }
        ins.push(if t.is_contiguous() {
            t
        } else {
            opal::ops::TensorOps::contiguous(&t)?
        });
    }
    let n = sizes.iter().product::<i64>().max(0) as usize;
    let not_contiguous = || Error::new("a fused operand is not contiguous");
    if let (Some(d), 1) = (donor.filter(|&d| d < ins.len()), n_out) {
        let y = ins.remove(d);
        let reads = ins
            .iter()
            .map(|t| t.read::<f32>())
            .collect::<opal::Result<Vec<_>>>()?;
        let others = reads
            .iter()
            .map(|r| r.as_slice().ok_or_else(not_contiguous))
            .collect::<Result<Vec<_>>>()?;
        let mut w = y.write::<f32>()?;
        program.run_in_place(d, &others, w.as_mut_slice().ok_or_else(not_contiguous)?)?;
        drop(w);
        return Ok(vec![y]);
    }
    let outs = (0..n_out)
        .map(|_| Tensor::empty(sizes, DType::F32, Device::cpu()))
        .collect::<opal::Result<Vec<_>>>()?;
    let reads = ins
        .iter()
        .map(|t| t.read::<f32>())
        .collect::<opal::Result<Vec<_>>>()?;
    let mut writes = outs
        .iter()
        .map(|t| t.write::<f32>())
        .collect::<opal::Result<Vec<_>>>()?;
    let in_slices = reads
        .iter()
        .map(|r| r.as_slice().ok_or_else(not_contiguous))
        .collect::<Result<Vec<_>>>()?;
    let mut out_slices = writes
        .iter_mut()
        .map(|w| w.as_mut_slice().ok_or_else(not_contiguous))
        .collect::<Result<Vec<_>>>()?;
    program.run(n, &in_slices, &mut out_slices)?;
    drop(out_slices);
    drop(writes);
    Ok(outs)
}
