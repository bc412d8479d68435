//! `adapters`: the current-schema kernels that run a pinned kernel when the
//! added arguments have their defaults.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use crate::emit::defaults::Value;
use crate::emit::plan::ArgPlan;
use crate::emit::signature::{many_args_allow, names, params};
use crate::emit::{self, Ctx};

use super::{ret, trait_name};
use crate::backend::compat::Compat;
use crate::backend::plan::Entry;
use crate::backend::spec::{BackendSpec, FallbackPolicy};

/// `x == default` (or, with `negate`, `x != default`) for an added argument, in
/// its borrowed form, written the way clippy wants it.
fn default_test(a: &ArgPlan, v: &Value, negate: bool) -> TokenStream {
    let id = a.ident();
    let empty = |v: &Value| match v {
        Value::IntList(x) => x.is_empty(),
        Value::FloatList(x) => x.is_empty(),
        Value::BoolList(x) => x.is_empty(),
        Value::StrList(x) => x.is_empty(),
        _ => false,
    };
    match (v, negate) {
        (Value::None, false) => quote!(#id.is_none()),
        (Value::None, true) => quote!(#id.is_some()),
        (Value::Bool(b), _) if !a.ty().is_optional() => {
            if *b != negate {
                quote!(#id)
            } else {
                quote!(!#id)
            }
        }
        (v, _) if empty(v) => {
            let t = if a.ty().is_optional() {
                quote!(#id.is_some_and(|__v| __v.is_empty()))
            } else {
                quote!(#id.is_empty())
            };
            if negate {
                quote!(!#t)
            } else {
                t
            }
        }
        (v, false) => {
            let e = emit::defaults::arg_expr(a.ty(), v);
            quote!(#id == #e)
        }
        (v, true) => {
            let e = emit::defaults::arg_expr(a.ty(), v);
            quote!(#id != #e)
        }
    }
}

/// `adapters`: per pinned op with added defaulted arguments, the current-schema
/// kernel that runs the old kernel when the defaults are passed.
pub(super) fn adapters_module(cx: &Ctx, entries: &[Entry], spec: &BackendSpec) -> TokenStream {
    let trait_id = format_ident!("{}", trait_name(&spec.backend.value));
    let b = &spec.backend.value;
    let cpu = spec.fallback.value == FallbackPolicy::Cpu;
    let fns: Vec<TokenStream> = entries
        .iter()
        .filter_map(|e| {
            let Compat::Adapter { added } = e.compat else {
                return None;
            };
            let id = e.cur.ident();
            let ps = params(cx, e.cur.args.iter());
            let ret = ret(cx, e.cur);
            let allow = many_args_allow(ps.len() + 1);
            let snake = cx.non_snake(e.cur);
            let old_args = names(e.ker.args.iter());
            let all_args = names(e.cur.args.iter());
            let added_plans: Vec<(&ArgPlan, &Value)> = added
                .iter()
                .filter_map(|ad| {
                    let a = e.cur.args.iter().find(|a| a.arg.name == ad.name)?;
                    Some((a, a.default.as_ref()?))
                })
                .collect();
            let checks: Vec<TokenStream> = added_plans
                .iter()
                .map(|(a, v)| default_test(a, v, false))
                .collect();
            let other = if cpu {
                quote!(super::fallback::full::#id(ks, #(#all_args),*))
            } else {
                // Name the first argument that is not at its default.
                let arms = added_plans.iter().map(|(a, v)| {
                    let differs = default_test(a, v, true);
                    let aid = a.ident();
                    let msg = format!(
                        "'{}': argument '{}' = {{:?}} is not supported by backend {b}: its kernel \
                         was written against `{}`, which predates '{}' (only the default {} runs \
                         there), and the backend has no fallback",
                        e.cur.qualified,
                        a.arg.name,
                        e.ker.schema,
                        a.arg.name,
                        a.arg.default.as_deref().unwrap_or("?")
                    );
                    quote! {
                        if #differs {
                            return ::std::result::Result::Err(::opal::OpalError::msg(::std::format!(#msg, #aid)));
                        }
                    }
                });
                quote! {{
                    #(#arms)*
                    ::std::result::Result::Err(::opal::OpalError::msg("unreachable: adapter without a non-default argument"))
                }}
            };
            let doc = emit::doc(&format!(
                "Adapter of the pinned kernel of `{}`: current schema `{}`, kernel written \
                 against `{}`.",
                e.cur.qualified, e.cur.schema, e.ker.schema
            ));
            Some(quote! {
                #doc
                #allow
                #snake
                #[inline]
                pub fn #id<K: #trait_id>(ks: DispatchKeySet, #(#ps),*) -> #ret {
                    if #(#checks)&&* {
                        K::#id(ks, #(#old_args),*)
                    } else {
                        #other
                    }
                }
            })
        })
        .collect();
    if fns.is_empty() {
        return quote!();
    }
    quote! {
        /// Defaulted-argument adapters: kernels for the current schemas that run the
        /// pinned kernels when every argument they predate holds its default.
        #[allow(non_snake_case, reason = "adapter names follow operator names")]
        pub mod adapters {
            use super::ops::prelude::*;
            use super::#trait_id;

            #(#fns)*
        }
    }
}
