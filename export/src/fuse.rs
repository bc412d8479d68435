//! Load-time rewrites of the graph that keep its results (within rounding) and
//! save work on every run: a batch norm in inference mode right after a
//! convolution is folded into the convolution's weight and bias; on the CPU,
//! the exporter's metadata asserts that the traced metadata already answers
//! are dropped.
//!
//! Owns: recognising the patterns and computing the folded stored tensors (on
//! the CPU, before they move to the device). Must not: change what any graph
//! output or user input means, or rewrite a node whose intermediate value
//! anything else reads.

use crate::error::Result;
use crate::graph::{arg, readers};
use crate::schema::{Arg, InputKind, Node, Out, Program};
use opal::{DType, Tensor};
use std::collections::HashMap;

const CONV: &str = "torch.ops.aten.convolution.default";
const ASSERT: &str = "torch.ops.aten._assert_tensor_metadata.default";
const BN: &str = "torch.ops.aten._native_batch_norm_legit_no_training.default";

fn set_arg(node: &mut Node, name: &str, v: Arg) {
    if let Some(a) = node.inputs.iter_mut().find(|a| a.name == name) {
        a.arg = v;
    }
}

/// The stored f32 tensor a graph input names, or None (a user input, another
/// dtype, a name that is not an input).
fn stored_f32<'a>(
    p: &Program,
    stored: &'a HashMap<String, Tensor>,
    name: &str,
) -> Option<&'a Tensor> {
    let (_, kind) = p.inputs.iter().find(|(n, _)| n == name)?;
    let fqn = match kind {
        InputKind::Parameter(f) | InputKind::Buffer(f) | InputKind::Constant(f) => f,
        InputKind::User => return None,
    };
    stored.get(fqn).filter(|t| t.dtype() == DType::F32)
}

/// Optional stored per-channel vector of `len` f32 (None: the argument is None).
fn per_channel(
    p: &Program,
    stored: &HashMap<String, Tensor>,
    a: Option<&Arg>,
    len: usize,
) -> Option<Option<Vec<f32>>> {
    match a? {
        Arg::None | Arg::OptTensor(None) => Some(None),
        Arg::Tensor(n) | Arg::OptTensor(Some(n)) => {
            let v = stored_f32(p, stored, n)?.to_vec::<f32>().ok()?;
            (v.len() == len).then_some(Some(v))
        }
        _ => None,
    }
}

/// Folds every `convolution -> _native_batch_norm_legit_no_training` pair whose
/// convolution output only the batch norm reads and whose other two outputs
/// nothing reads: `w' = w * s`, `b' = (b - mean) * s + beta` with
/// `s = gamma / sqrt(var + eps)` per output channel (computed in f64). The new
/// tensors are added as constants; the original ones stay (other nodes may read
/// them). Returns how many pairs were folded.
pub(crate) fn fold_batch_norms(
    p: &mut Program,
    stored: &mut HashMap<String, Tensor>,
) -> Result<usize> {
    let mut folded = 0;
    let mut i = 0;
    while i + 1 < p.nodes.len() {
        if let Some((w, b)) = fold_pair(p, stored, i)? {
            let conv_name = p.nodes[i].name.clone();
            let y = match &p.nodes[i + 1].outputs[0] {
                Out::Tensor(y) => y.clone(),
                _ => unreachable!("checked by fold_pair"),
            };
            let mut add = |what: &str, t: Tensor| -> String {
                let name = format!("_opal_folded_{conv_name}_{what}");
                stored.insert(name.clone(), t);
                p.inputs
                    .push((name.clone(), InputKind::Constant(name.clone())));
                name
            };
            let wn = add("weight", w);
            let bn = add("bias", b);
            let conv = &mut p.nodes[i];
            set_arg(conv, "weight", Arg::Tensor(wn));
            set_arg(conv, "bias", Arg::OptTensor(Some(bn)));
            conv.outputs = vec![Out::Tensor(y)];
            p.nodes.remove(i + 1);
            folded += 1;
        }
        i += 1;
    }
    Ok(folded)
}

/// The folded weight and bias for nodes `i` (a convolution) and `i + 1` (a batch
/// norm reading only it), or None when the pair does not qualify.
fn fold_pair(
    p: &Program,
    stored: &HashMap<String, Tensor>,
    i: usize,
) -> Result<Option<(Tensor, Tensor)>> {
    let (c, n) = (&p.nodes[i], &p.nodes[i + 1]);
    if c.target != CONV || n.target != BN {
        return Ok(None);
    }
    let [Out::Tensor(a)] = c.outputs.as_slice() else {
        return Ok(None);
    };
    if arg(n, "input") != Some(&Arg::Tensor(a.clone())) {
        return Ok(None);
    }
    let uses = readers(p);
    let unread = |o: &Out| match o {
        Out::Tensor(s) => !uses.contains_key(s.as_str()),
        Out::None => true,
        _ => false,
    };
    if uses.get(a.as_str()) != Some(&1)
        || n.outputs.len() != 3
        || !matches!(n.outputs[0], Out::Tensor(_))
        || !n.outputs[1..].iter().all(unread)
        || arg(c, "transposed") != Some(&Arg::Bool(false))
    {
        return Ok(None);
    }
    let Some(Arg::Tensor(wname)) = arg(c, "weight") else {
        return Ok(None);
    };
    let Some(w) = stored_f32(p, stored, wname) else {
        return Ok(None);
    };
    let cout = w.sizes().first().copied().unwrap_or(0).max(0) as usize;
    let eps = match arg(n, "eps") {
        Some(Arg::Float(e)) => *e,
        Some(Arg::Int(e)) => *e as f64,
        _ => return Ok(None),
    };
    let chans = |name| per_channel(p, stored, arg(n, name), cout);
    let (Some(gamma), Some(beta), Some(Some(mean)), Some(Some(var)), Some(bias)) = (
        chans("weight"),
        chans("bias"),
        chans("running_mean"),
        chans("running_var"),
        per_channel(p, stored, arg(c, "bias"), cout),
    ) else {
        return Ok(None);
    };
    let wv = w.to_vec::<f32>()?;
    if cout == 0 || wv.len() % cout != 0 {
        return Ok(None);
    }
    let per = wv.len() / cout;
    let mut nw = Vec::with_capacity(wv.len());
    let mut nb = Vec::with_capacity(cout);
    for o in 0..cout {
        let s = gamma.as_ref().map_or(1.0, |g| g[o] as f64) / (var[o] as f64 + eps).sqrt();
        nw.extend(
            wv[o * per..(o + 1) * per]
                .iter()
                .map(|&x| (x as f64 * s) as f32),
        );
        let b0 = bias.as_ref().map_or(0.0, |b| b[o] as f64);
        let shift = beta.as_ref().map_or(0.0, |b| b[o] as f64);
        nb.push(((b0 - mean[o] as f64) * s + shift) as f32);
    }
    Ok(Some((
        Tensor::from_slice(&nw, w.sizes())?,
        Tensor::from_slice(&nb, &[cout as i64])?,
    )))
}

/// Removes the `_assert_tensor_metadata` nodes that check only a dtype (and the
/// strided layout, and the export's device, which the runner substitutes with
/// its own) equal to the one traced for the value: the runner checks the user
/// inputs' dtypes against the same metadata, and the operators' dtype rules
/// decide every other value's dtype from them, so the check holds on every
/// run. The exporter writes one before each dtype-sensitive step (Llama has
/// 16); they also split the chains the fusion passes look for. An assert on
/// sizes or strides is kept. Returns how many were removed.
pub(crate) fn drop_answered_asserts(p: &mut Program) -> usize {
    let before = p.nodes.len();
    let meta = &p.tensor_meta;
    p.nodes.retain(|n| {
        if n.target != ASSERT || !n.outputs.iter().all(|o| matches!(o, Out::None)) {
            return true;
        }
        let Some(Arg::Tensor(a)) = arg(n, "a") else {
            return true;
        };
        let Some(m) = meta.get(a) else {
            return true;
        };
        let answered = n.inputs.iter().all(|x| match (x.name.as_str(), &x.arg) {
            ("a", _) | ("device", _) => true,
            ("size" | "stride", Arg::None) => true,
            ("dtype", Arg::None) => true,
            ("dtype", Arg::ScalarType(d)) => *d == m.dtype,
            ("layout", Arg::None) => true,
            ("layout", Arg::Layout(l)) => *l == opal::Layout::Strided,
            _ => false,
        });
        !answered
    });
    before - p.nodes.len()
}
