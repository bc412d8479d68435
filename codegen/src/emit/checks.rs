//! The entry of every operator call: which tensor arguments it reads and writes,
//! and the checks the runtime makes on them before a kernel runs (the device rule
//! and the overlap rules for written tensors). `redispatch` and the boxed adapter
//! wrap their kernel call in the runtime's op holds with these.
//!
//! Owns: the read/write split of an op's tensor arguments and its `OpChecks`
//! expression. Must not: emit anything but expressions for `stubs` and `boxing`.

use syn::Expr;

use super::ast::{self, call_path, p};
use super::plan::{ArgPlan, OpPlan};
use crate::model::{BaseTy, DeviceCheck, Type};

/// Ops that move data between devices, so mixed-device arguments are their point
/// (`copy_(cpu, emu)`), or that take index tensors from the host (`index` with CPU
/// indices on a device tensor). Matched on the name without overload.
const MOVES_DATA: &[&str] = &[
    "_to_copy",
    "copy_",
    "_copy_from",
    "_copy_from_and_resize",
    "to",
    "index",
    "index_put",
    "index_put_",
    "_index_put_impl_",
];

/// Inputs that may share no element with a written tensor, not even all of them
/// (PyTorch's rule for ops that read an input while writing in another order than
/// element by element; the element-wise rule only refuses a partial overlap), by op
/// name without overload and in-place `_`, so the `out=` and in-place forms agree.
/// Measured on PyTorch: `tests/fixtures/out-alias` (a full overlap with `self` of
/// `scatter`'s out= form, or with `gather`'s `index`, is accepted there);
/// `index_put_` and `stack` were measured by hand (no golden case of theirs lets an
/// input have the written tensor's shape): both refuse any overlap.
const NO_OVERLAP_INPUTS: &[(&str, &[&str])] = &[
    ("cat", &["tensors"]),
    ("gather", &["self"]),
    ("index", &["self", "indices"]),
    ("index_put", &["indices", "values"]),
    ("index_select", &["self", "index"]),
    ("scatter", &["index", "src"]),
    ("scatter_add", &["index", "src"]),
    ("stack", &["tensors"]),
];

/// Which argument positions [`checks_expr`] numbers.
#[derive(Copy, Clone, PartialEq, Eq)]
pub(crate) enum Positions {
    /// The read tensor arguments, as the typed entry passes them to the op holds.
    Reads,
    /// Every schema argument, as a boxed call's stack holds them.
    Schema,
}

/// Whether the op writes `a`: its `(a!)` annotation, plus the running statistics of
/// the batch-norm family, which PyTorch's schemas leave unannotated although the
/// forward in training mode updates them in place (backward ops only read them).
/// `ArgDef::mutable` says the same, so boxed calls and the CPU fallback (which
/// copies written arguments back to the device) treat them alike.
pub(crate) fn is_written(op: &OpPlan, a: &ArgPlan) -> bool {
    a.arg.is_write()
        || (matches!(a.arg.name.as_str(), "running_mean" | "running_var")
            && !op.f.func.name.name.base.contains("backward"))
}

/// How a tensor-like argument is passed to the runtime's op holds (and which
/// tensors an autograd kernel records, see `super::autograd`).
pub(crate) enum Shape {
    One,
    Opt,
    List,
    OptList,
}

pub(crate) fn shape(ty: &Type) -> Option<Shape> {
    match ty {
        Type::Base(BaseTy::Tensor) => Some(Shape::One),
        Type::Optional(t) if **t == Type::Base(BaseTy::Tensor) => Some(Shape::Opt),
        Type::List { elem, .. } if **elem == Type::Base(BaseTy::Tensor) => Some(Shape::List),
        Type::List { elem, .. } if elem.is_tensor_like() => Some(Shape::OptList),
        _ => None,
    }
}

/// The bit mask of [`NO_OVERLAP_INPUTS`] over `op`'s arguments numbered per `at`.
fn no_overlap_mask(op: &OpPlan, at: Positions) -> u64 {
    let name = &op.f.func.name.name;
    let Some((_, inputs)) = NO_OVERLAP_INPUTS.iter().find(|(n, _)| *n == name.base) else {
        return 0;
    };
    let numbered = op.args.iter().filter(|a| match at {
        Positions::Schema => true,
        Positions::Reads => shape(a.ty()).is_some() && !is_written(op, a),
    });
    let mut mask = 0u64;
    for (i, a) in numbered.enumerate() {
        if inputs.contains(&a.arg.name.as_str()) && !is_written(op, a) && i < 64 {
            mask |= 1 << i;
        }
    }
    mask
}

/// `support::checks(support::DEVICES_..., write_overlap, no_overlap)` for `op`, its
/// argument positions numbered per `at`.
pub(crate) fn checks_expr(op: &OpPlan, at: Positions) -> Expr {
    let f = op.f;
    let name = &f.func.name.name;
    let full = if name.inplace {
        format!("{}_", name.base)
    } else {
        name.base.clone()
    };
    let moves = MOVES_DATA.contains(&full.as_str());
    let devices = if moves {
        "DEVICES_ANY"
    } else if f.device_check == DeviceCheck::NoCheck {
        "DEVICES_SAME_OR_CPU_SCALAR"
    } else {
        "DEVICES_SAME"
    };
    // Ops that only restride `self` (`transpose_`, ...) write no element.
    let write_overlap = !f.tags.iter().any(|t| t == "inplace_view");
    call_path(
        &["support", "checks"],
        [
            p(&["support", devices]),
            ast::bool_lit(write_overlap),
            ast::literal(proc_macro2::Literal::u64_suffixed(no_overlap_mask(op, at))),
        ],
    )
}

/// Wraps `body` (an expression of the op's `Result` type) in the runtime's op holds
/// over the op's tensor arguments: `support::held(DEF.name, checks, [reads],
/// [writes], move || body)`, or `held_dyn` with `OpArg`s when an argument is
/// optional or a list. Ops without tensor arguments run `body` as it is.
pub(crate) fn with_holds(op: &OpPlan, body: Expr) -> Expr {
    let tensors: Vec<(&ArgPlan, Shape)> = op
        .args
        .iter()
        .filter_map(|a| shape(a.ty()).map(|s| (a, s)))
        .collect();
    if tensors.is_empty() {
        return body;
    }
    let name = ast::field(p(&["DEF"]), syn::Member::Named(ast::id("name")));
    let closure = ast::closure(true, [], body);
    let plain = tensors.iter().all(|(_, s)| matches!(s, Shape::One));
    let side = |write: bool| {
        let picked = tensors
            .iter()
            .filter(move |(a, _)| is_written(op, a) == write);
        if plain {
            ast::array(picked.map(|(a, _)| ast::var(a.ident())))
        } else {
            let args = picked.map(|(a, s)| {
                let variant = match s {
                    Shape::One => "One",
                    Shape::Opt => "Opt",
                    Shape::List => "List",
                    Shape::OptList => "OptList",
                };
                call_path(&["support", "OpArg", variant], [ast::var(a.ident())])
            });
            ast::reference(ast::array(args))
        }
    };
    let held = if plain { "held" } else { "held_dyn" };
    call_path(
        &["support", held],
        [
            name,
            checks_expr(op, Positions::Reads),
            side(false),
            side(true),
            closure,
        ],
    )
}
