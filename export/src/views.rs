//! View nodes run without the dispatcher on the CPU: `view`, `permute`,
//! `expand`, `unsqueeze`, `squeeze.dim`, `slice.Tensor`, `select.int`,
//! `transpose.int`, `t` and `alias` with constant arguments call the CPU
//! backend's own view functions directly. A transformer's graph is about half
//! such nodes (GPT-2: 80 of 176), each of which only computes new sizes and
//! strides; a boxed call through the dispatcher cost more than that work.
//!
//! Owns: recognising those nodes and running them. Must not: handle a node
//! with a symbolic argument or any other operator (those keep the dispatcher),
//! or differ from the dispatcher's result (the same functions compute both).

use crate::graph::{arg, is};
use crate::schema::{Arg, Node};
use opal::Tensor;

/// One view node, its arguments resolved.
#[derive(Clone, Debug)]
pub(crate) enum ViewOp {
    View(Vec<i64>),
    Permute(Vec<i64>),
    Expand(Vec<i64>),
    Unsqueeze(i64),
    Squeeze(i64),
    Slice {
        dim: i64,
        start: Option<i64>,
        end: Option<i64>,
        step: i64,
    },
    Select {
        dim: i64,
        index: i64,
    },
    Transpose(i64, i64),
    T,
    Alias,
}

fn int(node: &Node, name: &str) -> Option<i64> {
    match arg(node, name)? {
        Arg::Int(i) => Some(*i),
        _ => None,
    }
}

/// An optional int: absent or None is `Some(None)`; a symbolic one is `None`.
fn opt_int(node: &Node, name: &str) -> Option<Option<i64>> {
    match arg(node, name) {
        None | Some(Arg::None) => Some(None),
        Some(Arg::Int(i)) => Some(Some(*i)),
        _ => None,
    }
}

fn ints(node: &Node, name: &str) -> Option<Vec<i64>> {
    match arg(node, name)? {
        Arg::Ints(v) => Some(v.clone()),
        Arg::Int(i) => Some(vec![*i]),
        _ => None,
    }
}

/// The node as a view of its `self` argument, when it is one this module runs.
pub(crate) fn lower(node: &Node) -> Option<ViewOp> {
    if !matches!(arg(node, "self"), Some(Arg::Tensor(_))) {
        return None;
    }
    let op = if is(node, "view.default") {
        ViewOp::View(ints(node, "size")?)
    } else if is(node, "permute.default") {
        ViewOp::Permute(ints(node, "dims")?)
    } else if is(node, "expand.default") {
        ViewOp::Expand(ints(node, "size")?)
    } else if is(node, "unsqueeze.default") {
        ViewOp::Unsqueeze(int(node, "dim")?)
    } else if is(node, "squeeze.dim") {
        ViewOp::Squeeze(int(node, "dim")?)
    } else if is(node, "slice.Tensor") {
        ViewOp::Slice {
            dim: opt_int(node, "dim")?.unwrap_or(0),
            start: opt_int(node, "start")?,
            end: opt_int(node, "end")?,
            step: opt_int(node, "step")?.unwrap_or(1),
        }
    } else if is(node, "select.int") {
        ViewOp::Select {
            dim: int(node, "dim")?,
            index: int(node, "index")?,
        }
    } else if is(node, "transpose.int") {
        ViewOp::Transpose(int(node, "dim0")?, int(node, "dim1")?)
    } else if is(node, "t.default") {
        ViewOp::T
    } else if is(node, "alias.default") {
        ViewOp::Alias
    } else {
        return None;
    };
    // Every argument must be one read above (an `implicit=True` expand, or an
    // argument this module does not know, keeps the dispatcher).
    let known: &[&str] = match op {
        ViewOp::View(_) | ViewOp::Expand(_) => &["self", "size"],
        ViewOp::Permute(_) => &["self", "dims"],
        ViewOp::Unsqueeze(_) | ViewOp::Squeeze(_) => &["self", "dim"],
        ViewOp::Slice { .. } => &["self", "dim", "start", "end", "step"],
        ViewOp::Select { .. } => &["self", "dim", "index"],
        ViewOp::Transpose(..) => &["self", "dim0", "dim1"],
        ViewOp::T | ViewOp::Alias => &["self"],
    };
    let implicit_false =
        |a: &crate::schema::NamedArg| a.name == "implicit" && matches!(a.arg, Arg::Bool(false));
    node.inputs
        .iter()
        .all(|a| known.contains(&a.name.as_str()) || implicit_false(a))
        .then_some(op)
}

impl ViewOp {
    /// The operator it stands for (profiles).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            ViewOp::View(_) => "aten::view",
            ViewOp::Permute(_) => "aten::permute",
            ViewOp::Expand(_) => "aten::expand",
            ViewOp::Unsqueeze(_) => "aten::unsqueeze",
            ViewOp::Squeeze(_) => "aten::squeeze.dim",
            ViewOp::Slice { .. } => "aten::slice.Tensor",
            ViewOp::Select { .. } => "aten::select.int",
            ViewOp::Transpose(..) => "aten::transpose.int",
            ViewOp::T => "aten::t",
            ViewOp::Alias => "aten::alias",
        }
    }
}

/// The view of `x` (a CPU tensor) the node makes.
pub(crate) fn apply(op: &ViewOp, x: &Tensor) -> opal::Result<Tensor> {
    use opal_cpu::shape;
    match op {
        ViewOp::View(s) => shape::view(x, s),
        ViewOp::Permute(d) => shape::permute(x, d),
        ViewOp::Expand(s) => shape::expand(x, s, false),
        ViewOp::Unsqueeze(d) => shape::unsqueeze(x, *d),
        ViewOp::Squeeze(d) => shape::squeeze_dim(x, *d),
        ViewOp::Slice {
            dim,
            start,
            end,
            step,
        } => shape::slice_tensor(x, *dim, *start, *end, *step),
        ViewOp::Select { dim, index } => shape::select_int(x, *dim, *index),
        ViewOp::Transpose(a, b) => shape::transpose_int(x, *a, *b),
        ViewOp::T => shape::t(x),
        ViewOp::Alias => x.as_strided(x.sizes(), x.strides(), x.storage_offset()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::NamedArg;

    fn node(target: &str, args: Vec<(&str, Arg)>) -> Node {
        let mut inputs = vec![NamedArg {
            name: "self".into(),
            arg: Arg::Tensor("x".into()),
        }];
        inputs.extend(args.into_iter().map(|(n, a)| NamedArg {
            name: n.into(),
            arg: a,
        }));
        Node {
            name: "n".into(),
            target: format!("torch.ops.aten.{target}"),
            inputs,
            outputs: vec![],
        }
    }

    #[test]
    fn each_view_matches_the_dispatched_operator() {
        crate::program::init_backends().unwrap();
        let x = Tensor::from_vec((0..24).map(|i| i as f32).collect(), &[2, 3, 4]).unwrap();
        let cases: Vec<(Node, opal::Result<Tensor>)> = vec![
            (
                node("view.default", vec![("size", Arg::Ints(vec![6, -1]))]),
                opal::ops::view(&x, &[6, -1]),
            ),
            (
                node("permute.default", vec![("dims", Arg::Ints(vec![2, 0, 1]))]),
                opal::ops::permute(&x, &[2, 0, 1]),
            ),
            (
                node("unsqueeze.default", vec![("dim", Arg::Int(1))]),
                opal::ops::unsqueeze(&x, 1),
            ),
            (
                node(
                    "slice.Tensor",
                    vec![
                        ("dim", Arg::Int(2)),
                        ("start", Arg::Int(1)),
                        ("end", Arg::Int(i64::MAX)),
                        ("step", Arg::Int(2)),
                    ],
                ),
                opal::ops::slice_tensor::call(&x, 2, Some(1), Some(i64::MAX), 2),
            ),
            (
                node(
                    "select.int",
                    vec![("dim", Arg::Int(1)), ("index", Arg::Int(-1))],
                ),
                opal::ops::select_int(&x, 1, -1),
            ),
            (
                node(
                    "transpose.int",
                    vec![("dim0", Arg::Int(0)), ("dim1", Arg::Int(2))],
                ),
                opal::ops::transpose_int(&x, 0, 2),
            ),
        ];
        for (n, want) in cases {
            let op = lower(&n).unwrap_or_else(|| panic!("{} not lowered", n.target));
            let (got, want) = (apply(&op, &x).unwrap(), want.unwrap());
            assert_eq!(
                (got.sizes(), got.strides(), got.storage_offset()),
                (want.sizes(), want.strides(), want.storage_offset()),
                "{}",
                n.target
            );
        }
        // A view the layout cannot take is the operator's own error.
        let bad = lower(&node("view.default", vec![("size", Arg::Ints(vec![24]))])).unwrap();
        let xt = apply(&ViewOp::Transpose(0, 2), &x).unwrap();
        assert!(apply(&bad, &xt).unwrap_err().to_string().contains("view"));
        // A symbolic size or an unknown argument keeps the dispatcher.
        let sym = node(
            "view.default",
            vec![(
                "size",
                Arg::SymInts(vec![crate::schema::SymRef::Name("s0".into())]),
            )],
        );
        assert!(lower(&sym).is_none());
        let implicit = node(
            "expand.default",
            vec![
                ("size", Arg::Ints(vec![2, 3, 4])),
                ("implicit", Arg::Bool(true)),
            ],
        );
        assert!(lower(&implicit).is_none());
    }
}
