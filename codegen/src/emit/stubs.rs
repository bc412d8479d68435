//! Typed dispatch stubs: the free function `ops::<op>` (required arguments, defaults
//! applied), and in the op module `call` (every argument explicit: computes the
//! dispatch key set from the tensor arguments) and `redispatch` (from a given key
//! set: typed fast path through a cached `OpSlot`, boxed path through the stack).
//!
//! Owns: those three functions. Must not: emit options structs, boxing adapters or
//! kernels (see `options`, `boxing`, `backend_select`, `structured`).

use quote::quote;
use syn::{Expr, Item, Stmt};

use super::ast::{self, call, call_path, method, p, reference, try_, var};
use super::plan::{ArgPlan, OpPlan};
use super::signature::{arg_exprs, inline_attrs, inputs, kernel_fn, ret, ret_outside};
use super::{checks, defaults, free_doc, member_doc, Ctx};
use crate::model::{BaseTy, Type};

/// Expressions for a call of `call` with every argument, where defaulted arguments
/// take `defaulted(arg)` and the others their own ident.
pub(crate) fn full_args(op: &OpPlan, mut defaulted: impl FnMut(&ArgPlan) -> Expr) -> Vec<Expr> {
    op.args
        .iter()
        .map(|a| {
            if a.default.is_some() {
                defaulted(a)
            } else {
                var(a.ident())
            }
        })
        .collect()
}

/// The free function `ops::<op>(required args)`.
pub(crate) fn free_fn(cx: &Ctx, op: &OpPlan) -> Item {
    let id = op.ident();
    let ps = inputs(cx, op.args.iter().filter(|a| a.default.is_none()));
    let args = full_args(op, |a| match &a.default {
        Some(v) => defaults::arg_value(a.ty(), v),
        None => var(a.ident()),
    });
    let what = if op.has_defaults() {
        format!(
            "`{}` with every defaulted argument at its default (`{}::with` takes an `Options` value).",
            op.qualified, op.ident_str
        )
    } else {
        format!("`{}`.", op.qualified)
    };
    let attrs = inline_attrs(free_doc(op, &what));
    let callee = ast::path_of([ast::id("self"), id.clone(), ast::id("call")]);
    let body = call(ast::path_expr(callee), args);
    ast::pub_fn(
        attrs,
        ast::signature(id, ps, ret_outside(cx, op)),
        vec![ast::tail(body)],
    )
}

/// `DispatchKeySet` from the tensor-like arguments.
fn arg_keys(op: &OpPlan) -> Expr {
    let empty = call_path(&["DispatchKeySet", "empty"], []);
    op.args.iter().fold(empty, |keys, a| {
        let with = match a.ty() {
            Type::Base(BaseTy::Tensor) => "with_tensor",
            Type::Optional(t) if **t == Type::Base(BaseTy::Tensor) => "with_opt_tensor",
            Type::List { elem, .. } if **elem == Type::Base(BaseTy::Tensor) => "with_tensors",
            Type::List { elem, .. } if elem.is_tensor_like() => "with_opt_tensors",
            _ => return keys,
        };
        method(keys, with, None, [var(a.ident())])
    })
}

/// Calls the boxed kernel `__k` and pops its returns into the Rust return value.
fn boxed_call(op: &OpPlan) -> Expr {
    let ns = op.args.iter().map(|a| a.ident());
    let stack = ast::bracket_macro("vec", quote!(#(#ns.into_ivalue()),*));
    let call = try_(call_path(
        &["support", "call_boxed"],
        [
            p(&["__k"]),
            method(p(&["__op"]), "handle", None, []),
            p(&["ks"]),
            stack,
        ],
    ));
    let def = || reference(p(&["DEF"]));
    match op.f.func.returns.len() {
        0 => ast::block_expr(vec![ast::semi(call), ast::tail(ast::ok(ast::tuple([])))]),
        1 => call_path(&["support", "ret1"], [call, def()]),
        n => {
            let rets = try_(call_path(&["support", "Rets", "take"], [call, def()]));
            let gets = (0..n).map(|_| try_(method(p(&["__r"]), "next", None, [])));
            ast::block_expr(vec![
                ast::let_(ast::pat_ident(ast::id("__r"), true), rets),
                ast::tail(ast::ok(ast::tuple(gets))),
            ])
        }
    }
}

/// `call` and `redispatch` in the op module.
pub(crate) fn entry(cx: &Ctx, op: &OpPlan, out: &mut Vec<Item>) {
    let ns = || arg_exprs(op.args.iter());
    let ks_and = |first: &str| std::iter::once(p(&[first])).chain(ns());
    let call_doc = member_doc(
        "Calls the operator with every argument explicit, dispatching on the key set of its tensor arguments.",
    );
    let re_doc = member_doc(
        "Calls the operator with the key set `ks` (a kernel passes its own key set minus its key and those above it).",
    );

    let mut body: Vec<Stmt> = Vec::with_capacity(3);
    if op.factory_device.is_some() {
        body.push(ast::semi(try_(call_path(&["super", "init"], []))));
    }
    body.push(ast::let_var(
        "__ks",
        call_path(&["support", "keys"], [arg_keys(op)]),
    ));
    body.push(ast::tail(call_path(
        &["self", "redispatch"],
        ks_and("__ks"),
    )));
    let sig = ast::signature(ast::id("call"), inputs(cx, op.args.iter()), ret(cx, op));
    out.push(ast::pub_fn(inline_attrs(call_doc), sig, body));

    let slot = ast::static_item(
        Vec::new(),
        syn::Visibility::Inherited,
        "SLOT",
        ast::ty_generic("OpSlot", [ast::ty("Sig")]),
        call_path(&["OpSlot", "new"], [reference(p(&["DEF"]))]),
    );
    let lookup = try_(method(p(&["__op"]), "lookup", None, [p(&["ks"])]));
    let dispatch = ast::match_(
        lookup,
        [
            (
                ast::pat_tuple_struct(&["Kernel", "Typed"], ast::id("__f")),
                call(p(&["__f"]), ks_and("ks")),
            ),
            (
                ast::pat_tuple_struct(&["Kernel", "Boxed"], ast::id("__k")),
                boxed_call(op),
            ),
        ],
    );
    let body = vec![
        Stmt::Item(slot),
        ast::let_var("__op", try_(method(p(&["SLOT"]), "get", None, []))),
        ast::tail(checks::with_holds(op, dispatch)),
    ];
    out.push(kernel_fn(cx, op, "redispatch", re_doc, body));
}
