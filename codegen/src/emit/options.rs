//! Idiomatic defaults: for every op with defaulted arguments, an `Options` struct in
//! the op module (one public field per defaulted argument, `Default` giving the schema
//! defaults, a setter per field taking the plain value, so callers never write
//! `Some(..)` or `None::<T>`) and `with(required.., opts)`.
//!
//! Owns: `Options`, its `Default` and setters, and `with`. Must not: emit the
//! dispatching entry points (see `stubs`).

use proc_macro2::TokenStream;
use quote::quote;

use super::plan::{ArgPlan, OpPlan};
use super::signature::{many_args_allow, params, ret};
use super::stubs::full_args;
use super::{defaults, doc, op_doc, Ctx};
use crate::ident::{self, owned_to_arg};
use crate::model::{BaseTy, Type};

/// A setter for one field.
fn setter(cx: &Ctx, op: &OpPlan, a: &ArgPlan) -> TokenStream {
    let id = a.ident();
    let lit = a.arg.default.as_deref().unwrap_or("");
    let doc = op_doc(
        op,
        &format!("Sets `{}` (schema default: `{lit}`).", a.arg.name),
    );
    let (inner, optional) = match a.ty() {
        Type::Optional(t) => (t.as_ref(), true),
        t => (t, false),
    };
    let wrap = |e: TokenStream| {
        if optional {
            quote!(Some(#e))
        } else {
            e
        }
    };
    if *inner == Type::Base(BaseTy::Tensor) {
        let t = cx.types.owned(inner);
        let v = wrap(quote!(value.clone()));
        quote! {
            #doc
            #[must_use]
            pub fn #id(mut self, value: &#t) -> Self {
                self.#id = #v;
                self
            }
        }
    } else {
        let t = cx.types.owned(inner);
        let v = wrap(quote!(value.into()));
        quote! {
            #doc
            #[must_use]
            pub fn #id(mut self, value: impl Into<#t>) -> Self {
                self.#id = #v;
                self
            }
        }
    }
}

/// `Options` and `with` for an op with defaults (nothing otherwise).
pub fn options(cx: &Ctx, op: &OpPlan) -> TokenStream {
    if !op.has_defaults() {
        return quote!();
    }
    let defaulted: Vec<&ArgPlan> = op.args.iter().filter(|a| a.default.is_some()).collect();
    let fields = defaulted.iter().map(|a| {
        let id = a.ident();
        let t = cx.types.owned(a.ty());
        let doc = doc(&format!("`{}`", a.arg));
        quote! {
            #doc
            pub #id: #t
        }
    });
    let inits = defaulted.iter().map(|a| {
        let id = a.ident();
        let e = a
            .default
            .as_ref()
            .map(|v| defaults::owned_expr(a.ty(), v))
            .unwrap_or_default();
        quote!(#id: #e)
    });
    let setters = defaulted.iter().map(|a| setter(cx, op, a));
    let required: Vec<&ArgPlan> = op.args.iter().filter(|a| a.default.is_none()).collect();
    let mut ps = params(cx, required.iter().copied());
    let o = ident::ident(ident::OPTIONS);
    ps.push(quote!(opts: #o));
    let args = full_args(op, |a| {
        let id = a.ident();
        owned_to_arg(quote!(opts.#id), a.ty())
    });
    let ret = ret(cx, op);
    let sdoc = op_doc(
        op,
        "The defaulted arguments: `Default` gives the schema defaults, each setter replaces one.",
    );
    let wdoc = op_doc(
        op,
        "Calls the operator with the required arguments and `opts` for the defaulted ones.",
    );
    let allow = many_args_allow(ps.len());
    quote! {
        #sdoc
        #[derive(Clone, Debug)]
        pub struct #o {
            #(#fields,)*
        }

        #[allow(clippy::derivable_impls, reason = "the schema's defaults, spelled out")]
        impl Default for #o {
            #[inline]
            fn default() -> Self {
                Self { #(#inits,)* }
            }
        }

        impl #o {
            #(#setters)*
        }

        #wdoc
        #allow
        #[inline]
        pub fn with(#(#ps),*) -> #ret {
            self::call(#(#args),*)
        }
    }
}
