//! Small queries on a parsed graph that the load-time pattern passes share: a
//! node's named argument, its single output, its ATen target, how many nodes
//! and graph outputs read each value, a value's static contiguous f32 shape,
//! the scan for a pattern's non-overlapping occurrences, and the tests'
//! comparison of a fused step's result with the operator's.
//!
//! Owns: those queries. Must not: rewrite anything (the passes do).

use crate::schema::{Arg, Dim, Node, Out, Program, SymRef};
use opal::DType;
use std::collections::HashMap;

/// The node's argument called `name`.
pub(crate) fn arg<'a>(node: &'a Node, name: &str) -> Option<&'a Arg> {
    node.inputs.iter().find(|a| a.name == name).map(|a| &a.arg)
}

/// The value a tensor argument names.
pub(crate) fn tensor_arg<'a>(node: &'a Node, name: &str) -> Option<&'a str> {
    match arg(node, name)? {
        Arg::Tensor(n) => Some(n),
        _ => None,
    }
}

/// The node's only output, when it has exactly one tensor output.
pub(crate) fn out(node: &Node) -> Option<&str> {
    match node.outputs.as_slice() {
        [Out::Tensor(n)] => Some(n),
        _ => None,
    }
}

/// True when the node runs `aten::<target>` (`target` like `mean.dim`).
pub(crate) fn is(node: &Node, target: &str) -> bool {
    node.target
        .strip_prefix("torch.ops.aten.")
        .is_some_and(|t| t == target)
}

/// How many times nodes and graph outputs read each value (symbolic ints
/// included).
pub(crate) fn readers(p: &Program) -> HashMap<&str, usize> {
    fn add<'a>(n: &mut HashMap<&'a str, usize>, s: &'a str) {
        *n.entry(s).or_default() += 1;
    }
    let mut n: HashMap<&str, usize> = HashMap::new();
    for node in &p.nodes {
        for a in &node.inputs {
            match &a.arg {
                Arg::Tensor(s) | Arg::OptTensor(Some(s)) => add(&mut n, s),
                Arg::Tensors(v) => v.iter().for_each(|s| add(&mut n, s)),
                Arg::OptTensors(v) => v.iter().flatten().for_each(|s| add(&mut n, s)),
                Arg::SymInt(SymRef::Name(s)) => add(&mut n, s),
                Arg::SymInts(v) => v.iter().for_each(|r| {
                    if let SymRef::Name(s) = r {
                        add(&mut n, s)
                    }
                }),
                _ => {}
            }
        }
    }
    for o in &p.outputs {
        match o {
            Out::Tensor(s) => add(&mut n, s),
            Out::Tensors(v) => v.iter().for_each(|s| add(&mut n, s)),
            Out::SymInt(SymRef::Name(s)) => add(&mut n, s),
            _ => {}
        }
    }
    n
}

/// Static sizes and strides of an f32 value as traced, or None.
pub(crate) fn f32_static(p: &Program, name: &str) -> Option<(Vec<i64>, Vec<i64>)> {
    let m = p.tensor_meta.get(name)?;
    if m.dtype != DType::F32 {
        return None;
    }
    let all = |d: &[Dim]| {
        d.iter()
            .map(|d| match d {
                Dim::Int(i) => Some(*i),
                Dim::Expr { .. } => None,
            })
            .collect::<Option<Vec<i64>>>()
    };
    Some((all(&m.sizes)?, all(&m.strides)?))
}

/// Static sizes of a contiguous f32 value, or None.
pub(crate) fn f32_contiguous(p: &Program, name: &str) -> Option<Vec<i64>> {
    let (sizes, strides) = f32_static(p, name)?;
    let mut want = 1i64;
    for (s, st) in sizes.iter().zip(&strides).rev() {
        if *s != 1 && *st != want {
            return None;
        }
        want = want.checked_mul(*s)?;
    }
    Some(sizes)
}

/// Every occurrence of a pattern, scanning from the first node: `at(i)` is the
/// occurrence starting at node `i` and the index just past it; the scan goes
/// on after an occurrence, so none overlap.
pub(crate) fn scan<G>(p: &Program, mut at: impl FnMut(usize) -> Option<(G, usize)>) -> Vec<G> {
    let mut found = Vec::new();
    let mut i = 0;
    while i < p.nodes.len() {
        match at(i) {
            Some((g, end)) => {
                i = end.max(i + 1);
                found.push(g);
            }
            None => i += 1,
        }
    }
    found
}

/// [`scan`] for patterns that are runs of consecutive nodes: the scan goes on
/// after each run's last node.
pub(crate) fn scan_runs<G>(
    p: &Program,
    mut at: impl FnMut(usize) -> Option<G>,
    members: impl Fn(&G) -> &std::ops::Range<usize>,
) -> Vec<G> {
    scan(p, |i| {
        at(i).map(|g| {
            let end = members(&g).end;
            (g, end)
        })
    })
}

/// Test helper: same sizes, and every f32 element within `tol` of the
/// reference, relative to its magnitude (absolute below 1).
#[cfg(test)]
pub(crate) fn assert_close(got: &opal::Tensor, want: &opal::Tensor, tol: f32) {
    assert_eq!(got.sizes(), want.sizes());
    let (g, w) = (got.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
    for (a, e) in g.iter().zip(&w) {
        assert!((a - e).abs() <= tol * e.abs().max(1.0), "{a} vs {e}");
    }
}
