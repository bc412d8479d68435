//! Idiomatic defaults: for every op with defaulted arguments, an `Options` struct in
//! the op module (one public field per defaulted argument, `Default` giving the schema
//! defaults, a setter per field taking the plain value, so callers never write
//! `Some(..)` or `None::<T>`) and `with(required.., opts)`.
//!
//! Owns: `Options`, its `Default` and setters, and `with`. Must not: emit the
//! dispatching entry points (see `stubs`).

use quote::quote;
use syn::{Item, Member};

use super::ast::{self, p};
use super::defaults::Value;
use super::plan::{ArgPlan, OpPlan};
use super::signature::{inline_attrs, inputs, many_args_attr, ret};
use super::stubs::full_args;
use super::{defaults, doc_attr, op_doc, Ctx};
use crate::ident::{self, owned_to_arg};
use crate::model::{BaseTy, Type};

/// `self.name` / `opts.name`.
fn field_of(base: &str, a: &ArgPlan) -> syn::Expr {
    ast::field(p(&[base]), Member::Named(a.ident()))
}

/// A setter for one field.
fn setter(cx: &Ctx, op: &OpPlan, a: &ArgPlan) -> syn::ImplItem {
    let lit = a.arg.default.as_deref().unwrap_or("");
    let doc = op_doc(
        op,
        &format!("Sets `{}` (schema default: `{lit}`).", a.arg.name),
    );
    let (inner, optional) = match a.ty() {
        Type::Optional(t) => (t.as_ref(), true),
        t => (t, false),
    };
    let t = cx.types.owned_type(inner);
    let (value_ty, value) = if *inner == Type::Base(BaseTy::Tensor) {
        (ast::ty_ref(t), "clone")
    } else {
        (ast::ty_impl("Into", [t]), "into")
    };
    let mut v = ast::method(p(&["value"]), value, None, []);
    if optional {
        v = ast::some(v);
    }
    let sig = ast::signature(
        a.ident(),
        [
            ast::receiver(false, true),
            ast::param(ast::id("value"), value_ty),
        ],
        ast::ty("Self"),
    );
    let body = vec![
        ast::semi(ast::assign(field_of("self", a), v)),
        ast::tail(p(&["self"])),
    ];
    let attrs = vec![doc, ast::attr_word("must_use")];
    ast::impl_fn(attrs, ast::public(), sig, body)
}

/// `Options` and `with` for an op with defaults (nothing otherwise).
pub fn options(cx: &Ctx, op: &OpPlan, out: &mut Vec<Item>) {
    if !op.has_defaults() {
        return;
    }
    let defaulted: Vec<(&ArgPlan, &Value)> = op
        .args
        .iter()
        .filter_map(|a| Some((a, a.default.as_ref()?)))
        .collect();
    let o = ident::ident(ident::OPTIONS);
    let fields = defaulted.iter().map(|(a, _)| syn::Field {
        attrs: vec![doc_attr(format!("`{}`", a.arg))],
        vis: ast::public(),
        mutability: syn::FieldMutability::None,
        ident: Some(a.ident()),
        colon_token: Some(Default::default()),
        ty: cx.types.owned_type(a.ty()),
    });
    let sdoc = op_doc(
        op,
        "The defaulted arguments: `Default` gives the schema defaults, each setter replaces one.",
    );
    out.push(Item::Struct(syn::ItemStruct {
        attrs: vec![sdoc, ast::attr_list("derive", quote!(Clone, Debug))],
        vis: ast::public(),
        struct_token: Default::default(),
        ident: o.clone(),
        generics: Default::default(),
        fields: syn::Fields::Named(syn::FieldsNamed {
            brace_token: ast::brace(),
            named: fields.collect(),
        }),
        semi_token: None,
    }));

    let inits = defaulted
        .iter()
        .map(|(a, v)| (a.ident(), defaults::owned_value(a.ty(), v)));
    let default_fn = ast::impl_fn(
        vec![ast::attr_word("inline")],
        syn::Visibility::Inherited,
        ast::signature(ast::id("default"), [], ast::ty("Self")),
        vec![ast::tail(ast::struct_expr(ast::path(&["Self"]), inits))],
    );
    let allow_derivable = ast::attr_list(
        "allow",
        quote!(
            clippy::derivable_impls,
            reason = "the schema's defaults, spelled out"
        ),
    );
    let options_ty = || ast::ty_path(ast::path_of([o.clone()]));
    out.push(ast::impl_block(
        vec![allow_derivable],
        Some("Default"),
        options_ty(),
        vec![default_fn],
    ));
    let setters = defaulted.iter().map(|(a, _)| setter(cx, op, a)).collect();
    out.push(ast::impl_block(Vec::new(), None, options_ty(), setters));

    let mut ps = inputs(cx, op.args.iter().filter(|a| a.default.is_none()));
    ps.push(ast::param(ast::id("opts"), options_ty()));
    let args = full_args(op, |a| owned_to_arg(field_of("opts", a), a.ty()));
    let wdoc = op_doc(
        op,
        "Calls the operator with the required arguments and `opts` for the defaulted ones.",
    );
    let attrs = inline_attrs(wdoc, [many_args_attr(ps.len())]);
    let body = ast::call(p(&["self", "call"]), args);
    let sig = ast::signature(ast::id("with"), ps, ret(cx, op));
    out.push(ast::pub_fn(attrs, sig, vec![ast::tail(body)]));
}
