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
use super::signature::{inputs, ret_outside};
use super::{doc_attr, op_doc, summary, Ctx};
use crate::ident;

struct Method {
    doc: Attribute,
    sig: Signature,
    body: syn::Expr,
}

fn methods(cx: &Ctx, op: &OpPlan, self_idx: usize) -> Vec<Method> {
    let id = op.ident();
    let required: Vec<&ArgPlan> = op.args.iter().filter(|a| a.default.is_none()).collect();
    let self_arg = &op.args[self_idx];
    let others = || {
        required
            .iter()
            .copied()
            .filter(|a| !std::ptr::eq(*a, self_arg))
    };
    let pass = || {
        required.iter().map(|a| {
            if std::ptr::eq(*a, self_arg) {
                ast::p(&["self"])
            } else {
                var(a.ident())
            }
        })
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
        sig: method_sig(id.clone(), None),
        body: call(ast::path_expr(free), pass()),
    }];
    if op.has_defaults() {
        let w = ident::ident(&ident::with_method(&op.ident_str));
        let o = ident::ident(ident::OPTIONS);
        // The schema stands once per op, on the method above.
        let doc = doc_attr(format!(
            "{}. Method form of `{}::with`: defaulted arguments from `opts` (schema: the method `{}`).",
            summary::op_summary(op.f, &op.op_name),
            op.ident_str,
            op.ident_str
        ));
        let opts_ty = ast::ty_path(ast::path_of([ast::id("self"), id.clone(), o]));
        let with = ast::path_of([ast::id("self"), id.clone(), ast::id("with")]);
        let args = pass().chain([ast::p(&["opts"])]);
        out.push(Method {
            doc,
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
        decls.push(syn::TraitItem::Fn(syn::TraitItemFn {
            attrs: vec![m.doc],
            sig: m.sig.clone(),
            default: None,
            semi_token: Some(Default::default()),
        }));
        let body = vec![ast::tail(m.body)];
        let attrs = vec![ast::attr_word("inline")];
        impls.push(ast::impl_fn(attrs, syn::Visibility::Inherited, m.sig, body));
    }
    let t = ident::METHODS_TRAIT;
    let docs = [
        " Methods of `Tensor` for the operators declared with `variants: method`",
        " (bring into scope with `use`; each op's first method documents its schema).",
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
