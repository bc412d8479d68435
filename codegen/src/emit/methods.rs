//! `Tensor` methods for `variants: method` ops: one extension trait (`TensorOps`)
//! declared and implemented for the runtime's `Tensor` in the generated module, which
//! is legal both inside `opal` and in any crate that generates its own ops.
//! `t.op(args..)` applies every default; `t.op_with(args.., opts)` takes the op's
//! `Options`.
//!
//! Owns: the trait and its impl. Must not: emit free functions or op modules.

use syn::{Attribute, Item, Signature};

use super::ast::{self, call, var};
use super::plan::{ArgPlan, OpPlan, Plan};
use super::signature::{inputs, many_args_attr, ret_outside};
use super::{op_doc, Ctx};
use crate::ident;

struct Method {
    doc: Attribute,
    /// The allowances, shared by the declaration and the implementation.
    allows: Vec<Attribute>,
    sig: Signature,
    body: syn::Expr,
}

fn methods(cx: &Ctx, op: &OpPlan, self_idx: usize) -> Vec<Method> {
    let id = op.ident();
    let snake = cx.non_snake_attr(op);
    let required: Vec<&ArgPlan> = op.args.iter().filter(|a| a.default.is_none()).collect();
    let self_arg = &op.args[self_idx];
    let others = || {
        required
            .iter()
            .copied()
            .filter(|a| !std::ptr::eq(*a, self_arg))
    };
    let n_others = others().count();
    let pass = || {
        required.iter().map(|a| {
            if std::ptr::eq(*a, self_arg) {
                ast::p(&["self"])
            } else {
                var(a.ident())
            }
        })
    };
    let allows = |n: usize| {
        let mut v: Vec<Attribute> = many_args_attr(n).into_iter().collect();
        v.extend(snake.clone());
        v
    };
    let method_sig = |name: proc_macro2::Ident, extra: Option<syn::FnArg>| {
        let mut ps = vec![ast::receiver(true, false)];
        ps.extend(inputs(cx, others()));
        ps.extend(extra);
        ast::signature(name, ps, ret_outside(cx, op))
    };
    let doc = op_doc(
        op,
        &format!(
            "Method form of the free function `{}` (defaults applied).",
            op.ident_str
        ),
    );
    let free = ast::path_of([ast::id("self"), id.clone()]);
    let mut out = vec![Method {
        doc,
        allows: allows(n_others + 1),
        sig: method_sig(id.clone(), None),
        body: call(ast::path_expr(free), pass()),
    }];
    if op.has_defaults() {
        let w = ident::ident(&ident::with_method(&op.ident_str));
        let o = ident::ident(ident::OPTIONS);
        let doc = op_doc(
            op,
            &format!(
                "Method form of `{}::with`: defaulted arguments from `opts`.",
                op.ident_str
            ),
        );
        let opts_ty = ast::ty_path(ast::path_of([ast::id("self"), id.clone(), o]));
        let with = ast::path_of([ast::id("self"), id.clone(), ast::id("with")]);
        let args = pass().chain([ast::p(&["opts"])]);
        out.push(Method {
            doc,
            allows: allows(n_others + 2),
            sig: method_sig(w, Some(ast::param(ast::id("opts"), opts_ty))),
            body: call(ast::path_expr(with), args),
        });
    }
    out
}

/// The `TensorOps` trait and its impl for `Tensor`.
pub(crate) fn tensor_ops(cx: &Ctx, plan: &Plan) -> Vec<Item> {
    let all: Vec<Method> = plan
        .ops
        .iter()
        .filter_map(|o| o.method.map(|i| methods(cx, o, i)))
        .flatten()
        .collect();
    let mut decls = Vec::with_capacity(all.len());
    let mut impls = Vec::with_capacity(all.len());
    for m in all {
        let mut attrs = vec![m.doc];
        attrs.extend(m.allows.iter().cloned());
        decls.push(syn::TraitItem::Fn(syn::TraitItemFn {
            attrs,
            sig: m.sig.clone(),
            default: None,
            semi_token: Some(Default::default()),
        }));
        let mut attrs = vec![ast::attr_word("inline")];
        attrs.extend(m.allows);
        let body = vec![ast::tail(m.body)];
        impls.push(ast::impl_fn(attrs, syn::Visibility::Inherited, m.sig, body));
    }
    let t = ident::METHODS_TRAIT;
    let docs = [
        " Methods of `Tensor` for the operators declared with `variants: method`",
        " (bring into scope with `use`; each method documents its schema).",
    ];
    let tr = Item::Trait(syn::ItemTrait {
        attrs: docs.iter().map(|d| ast::attr_doc(d)).collect(),
        vis: ast::public(),
        unsafety: None,
        auto_token: None,
        restriction: None,
        trait_token: Default::default(),
        ident: ident::ident(t),
        generics: Default::default(),
        colon_token: None,
        supertraits: Default::default(),
        brace_token: ast::brace(),
        items: decls,
    });
    vec![
        tr,
        ast::impl_block(Vec::new(), Some(t), ast::ty("Tensor"), impls),
    ]
}
