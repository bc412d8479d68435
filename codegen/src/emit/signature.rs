//! Typed kernel signature aliases: `pub type Sig = fn(DispatchKeySet, args..) -> Result<R>;`
//! in every op module. Backends name these to write typed kernels.
//!
//! Owns: the `Sig` item and the parameter lists shared by all typed entry points.
//! Must not: decide names or types (that is `crate::ident`).

use proc_macro2::TokenStream;
use quote::{quote, ToTokens};
use syn::{FnArg, Item};

use super::ast;
use super::plan::{ArgPlan, OpPlan};
use super::{member_doc, Ctx};

/// `name: Type` for each argument (borrowed argument form).
pub(crate) fn inputs<'a>(cx: &Ctx, args: impl Iterator<Item = &'a ArgPlan<'a>>) -> Vec<FnArg> {
    args.map(|a| ast::param(a.ident(), cx.types.arg_type(a.ty())))
        .collect()
}

/// `ks: DispatchKeySet`, then [`inputs`] (kernels and redispatching entry points).
fn ks_inputs(cx: &Ctx, op: &OpPlan) -> Vec<FnArg> {
    let mut v = vec![ast::param(ast::id("ks"), ast::ty("DispatchKeySet"))];
    v.extend(inputs(cx, op.args.iter()));
    v
}

/// [`inputs`] as tokens (for the backend generator).
pub(crate) fn params<'a>(
    cx: &Ctx,
    args: impl Iterator<Item = &'a ArgPlan<'a>>,
) -> Vec<TokenStream> {
    inputs(cx, args)
        .into_iter()
        .map(ToTokens::into_token_stream)
        .collect()
}

/// The arguments as expressions, in order.
pub(crate) fn arg_exprs<'a>(args: impl Iterator<Item = &'a ArgPlan<'a>>) -> Vec<syn::Expr> {
    args.map(|a| ast::var(a.ident())).collect()
}

/// The argument idents, in order, as tokens.
pub(crate) fn names<'a>(args: impl Iterator<Item = &'a ArgPlan<'a>>) -> Vec<TokenStream> {
    args.map(|a| {
        let id = a.ident();
        quote!(#id)
    })
    .collect()
}

/// `Result<R>` of the op as written inside its module: several returns are named by
/// the module's `Output` tuple alias.
pub(crate) fn ret(cx: &Ctx, op: &OpPlan) -> syn::Type {
    if op.f.func.returns.len() > 1 {
        cx.types.result_type(ast::ty("Output"))
    } else {
        cx.types
            .result_type(cx.types.returns_type(op.return_types()))
    }
}

/// `Result<R>` of the op as written outside its module (`op::Output` for tuples).
pub(crate) fn ret_outside(cx: &Ctx, op: &OpPlan) -> syn::Type {
    if op.f.func.returns.len() > 1 {
        let p = ast::path_of([ast::id("self"), op.ident(), ast::id("Output")]);
        cx.types.result_type(ast::ty_path(p))
    } else {
        cx.types
            .result_type(cx.types.returns_type(op.return_types()))
    }
}

/// `#[allow(clippy::too_many_arguments)]` when a function of `n` parameters needs it.
pub(crate) fn many_args_attr(n: usize) -> Option<syn::Attribute> {
    (n > 7).then(|| {
        ast::attr_list(
            "allow",
            quote!(
                clippy::too_many_arguments,
                reason = "one parameter per schema argument"
            ),
        )
    })
}

/// [`many_args_attr`] as tokens (for the backend generator).
pub(crate) fn many_args_allow(n: usize) -> TokenStream {
    many_args_attr(n)
        .map(ToTokens::into_token_stream)
        .unwrap_or_default()
}

/// The attributes of an inline function: `doc` and `#[inline]` (the lint
/// allowances of generated code sit on the module of each file, see
/// `emit::file_module`).
pub(crate) fn inline_attrs(doc: syn::Attribute) -> Vec<syn::Attribute> {
    vec![doc, ast::attr_word("inline")]
}

/// `#[inline] pub fn name(ks: DispatchKeySet, args..) -> Result<R> { body }`: a
/// function with the op's kernel signature (`redispatch`, `backend_select`,
/// `structured`).
pub(crate) fn kernel_fn(
    cx: &Ctx,
    op: &OpPlan,
    name: &str,
    doc: syn::Attribute,
    body: Vec<syn::Stmt>,
) -> Item {
    let attrs = inline_attrs(doc);
    let sig = ast::signature(ast::id(name), ks_inputs(cx, op), ret(cx, op));
    ast::pub_fn(attrs, sig, body)
}

/// `pub type name = ty;`.
fn type_alias(attrs: Vec<syn::Attribute>, name: &str, ty: syn::Type) -> Item {
    Item::Type(syn::ItemType {
        attrs,
        vis: ast::public(),
        type_token: Default::default(),
        ident: ast::id(name),
        generics: Default::default(),
        eq_token: Default::default(),
        ty: Box::new(ty),
        semi_token: Default::default(),
    })
}

/// The `Sig` alias of one op (after the `Output` alias of a multi-return op).
pub(crate) fn sig(cx: &Ctx, op: &OpPlan, out: &mut Vec<Item>) {
    if op.f.func.returns.len() > 1 {
        let t = cx.types.returns_type(op.return_types());
        let odoc = member_doc("The operator's returns, in schema order.");
        out.push(type_alias(vec![odoc], "Output", t));
    }
    let doc = member_doc(
        "Typed kernel signature: the dispatch key set, then the arguments in schema order.",
    );
    let tys = std::iter::once(ast::ty("DispatchKeySet"))
        .chain(op.args.iter().map(|a| cx.types.arg_type(a.ty())));
    out.push(type_alias(vec![doc], "Sig", ast::ty_fn(tys, ret(cx, op))));
}
