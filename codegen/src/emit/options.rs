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
use super::signature::{inline_attrs, inputs, ret};
use super::stubs::full_args;
use super::{defaults, doc_attr, member_doc, Ctx};
use crate::ident::{self, owned_to_arg};
use crate::model::{BaseTy, Type};

/// `self.name` / `opts.name`.
fn field_of(base: &str, a: &ArgPlan) -> syn::Expr {
    ast::field(p(&[base]), Member::Named(a.ident()))
}

/// A setter for one field.
fn setter(cx: &Ctx, a: &ArgPlan) -> syn::ImplItem {
    let lit = a.arg.default.as_deref().unwrap_or("");
    let doc = member_doc(&format!("Sets `{}` (schema default: `{lit}`).", a.arg.name));
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
pub(crate) fn options(cx: &Ctx, op: &OpPlan, out: &mut Vec<Item>) {
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
    let sdoc = member_doc(
        "The defaulted arguments: `Default` gives the schema defaults, each setter replaces one.",
    );
    let defaults = Defaults::of(defaulted.iter().map(|(a, v)| (a.ty(), *v)));
    let derive = if defaults == Defaults::AllDerivable {
        quote!(Clone, Debug, Default)
    } else {
        quote!(Clone, Debug)
    };
    out.push(Item::Struct(syn::ItemStruct {
        attrs: vec![sdoc, ast::attr_list("derive", derive)],
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

    let options_ty = || ast::ty_path(ast::path_of([o.clone()]));
    if defaults != Defaults::AllDerivable {
        default_impl(&defaulted, defaults, options_ty(), out);
    }
    let setters = defaulted.iter().map(|(a, _)| setter(cx, a)).collect();
    out.push(ast::impl_block(Vec::new(), None, options_ty(), setters));

    let mut ps = inputs(cx, op.args.iter().filter(|a| a.default.is_none()));
    ps.push(ast::param(ast::id("opts"), options_ty()));
    let args = full_args(op, |a| owned_to_arg(field_of("opts", a), a.ty()));
    let wdoc = member_doc(
        "Calls the operator with the required arguments and `opts` for the defaulted ones.",
    );
    let attrs = inline_attrs(wdoc);
    let body = ast::call(p(&["self", "call"]), args);
    let sig = ast::signature(ast::id("with"), ps, ret(cx, op));
    out.push(ast::pub_fn(attrs, sig, vec![ast::tail(body)]));
}

/// How an `Options` struct's schema defaults relate to its fields' `Default`s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Defaults {
    /// Every value is its type's `Default` (`None`, `0`, `false`, an empty list):
    /// `#[derive(Default)]` says the same in one word.
    AllDerivable,
    /// Some value surely differs from its type's `Default` (`true`, `1`, a
    /// `Scalar`, a non-empty list or string).
    SomeNotDefault,
    /// Neither: some value may or may not count as a default for Clippy (a
    /// float zero, an empty string, an enum variant).
    Unsure,
}

impl Defaults {
    fn of<'v>(values: impl Iterator<Item = (&'v Type, &'v Value)>) -> Defaults {
        let mut all = true;
        for (ty, v) in values {
            if matches!(ty, Type::Optional(_)) {
                // `None`, or `Some(..)`: never a default.
                if !matches!(v, Value::None) {
                    return Defaults::SomeNotDefault;
                }
                continue;
            }
            match v {
                Value::None | Value::Int(0) | Value::Bool(false) => {}
                Value::IntList(xs) if xs.is_empty() => {}
                Value::FloatList(xs) if xs.is_empty() => {}
                Value::BoolList(xs) if xs.is_empty() => {}
                Value::StrList(xs) if xs.is_empty() => {}
                Value::Int(_)
                | Value::Bool(true)
                | Value::ScalarInt(_)
                | Value::ScalarFloat(_)
                | Value::ScalarBool(_)
                | Value::IntList(_)
                | Value::FloatList(_)
                | Value::BoolList(_)
                | Value::StrList(_) => return Defaults::SomeNotDefault,
                Value::Str(s) if !s.is_empty() => return Defaults::SomeNotDefault,
                Value::Float(_)
                | Value::Str(_)
                | Value::DType(_)
                | Value::MemoryFormat(_)
                | Value::Layout(_) => all = false,
            }
        }
        if all {
            Defaults::AllDerivable
        } else {
            Defaults::Unsure
        }
    }
}

/// `impl Default for Options` with the schema's defaults spelled out.
fn default_impl(
    defaulted: &[(&ArgPlan, &Value)],
    defaults: Defaults,
    options_ty: syn::Type,
    out: &mut Vec<Item>,
) {
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
    // Clippy's `derivable_impls` fires when every value is the type's default;
    // when some value surely is not, the impl needs no allowance.
    let attrs = if defaults == Defaults::SomeNotDefault {
        Vec::new()
    } else {
        vec![allow_derivable]
    };
    out.push(ast::impl_block(
        attrs,
        Some("Default"),
        options_ty,
        vec![default_fn],
    ));
}
