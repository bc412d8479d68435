//! `fallback`: per supported op, the CPU fallback with the kernel's signature.

use proc_macro2::TokenStream;
use quote::quote;

use crate::emit::plan::OpPlan;
use crate::emit::signature::{many_args_allow, names, params};
use crate::emit::{self, Ctx, RuntimePath};

use super::ret;
use crate::backend::compat::Compat;
use crate::backend::plan::Entry;

/// `fallback`: per supported op, the CPU fallback with the kernel's signature
/// (added arguments at their defaults), and in `fallback::full`, for adapted ops,
/// with the current one.
pub(super) fn fallback_module(entries: &[Entry]) -> TokenStream {
    let cx = Ctx::new(&RuntimePath::Opal);
    let boxed_call = |e: &Entry, path: TokenStream| {
        let id = e.cur.ident();
        let ns = names(e.cur.args.iter());
        quote! {
            ::opal::fallback::call(&#path::ops::#id::DEF, ks, ::std::vec![#(#ns.into_ivalue()),*])
        }
    };
    // One fallback fn: the op's name, `sig`'s parameters and returns, `body`.
    let fallback_fn = |e: &Entry, sig: &OpPlan, body: TokenStream, what: &str| {
        let id = e.cur.ident();
        let ps = params(&cx, sig.args.iter());
        let ret = ret(&cx, sig);
        let allow = many_args_allow(ps.len() + 1);
        let doc = emit::doc(&format!("`{}` on the CPU, {what}", e.cur.qualified));
        quote! {
            #doc
            #allow
            pub fn #id(ks: DispatchKeySet, #(#ps),*) -> #ret {
                #body
            }
        }
    };
    let full_fns: Vec<TokenStream> = entries
        .iter()
        .filter(|e| matches!(e.compat, Compat::Adapter { .. }))
        .map(|e| {
            let body = boxed_call(e, quote!(super::super));
            let what = format!("every argument of: `{}`", e.cur.schema);
            fallback_fn(e, e.cur, body, &what)
        })
        .collect();
    let ker_fns: Vec<TokenStream> = entries
        .iter()
        .filter(|e| !std::ptr::eq(e.cur, e.ker))
        .map(|e| {
            let body = match e.compat {
                Compat::Identical => boxed_call(e, quote!(super)),
                Compat::Adapter { .. } => {
                    let args = current_args(e);
                    let id = e.cur.ident();
                    quote!(self::full::#id(ks, #(#args),*))
                }
            };
            let what = format!("with the kernel's signature: `{}`", e.ker.schema);
            fallback_fn(e, e.ker, body, &what)
        })
        .collect();
    // An empty module imports nothing (an unused import warns under deny(warnings)).
    let prelude = (!ker_fns.is_empty()).then(|| {
        quote!(
            use super::ops::prelude::*;
        )
    });
    let full_prelude = (!full_fns.is_empty()).then(|| {
        quote!(
            use super::super::ops::prelude::*;
        )
    });
    quote! {
        /// The CPU fallback for the pinned ops, with each kernel's own signature, so a
        /// kernel can hand cases it does not handle (an unsupported dtype, say) to the
        /// CPU and keep doing so unchanged when its op gains defaulted arguments. (Any
        /// op: `::opal::fallback::call(&ops::<op>::DEF, ks, <boxed arguments>)`.)
        #[allow(dead_code, non_snake_case, reason = "kernels call the helpers they need; names follow operator names")]
        pub mod fallback {
            #prelude

            #(#ker_fns)*

            /// The same with the current schema's arguments, for adapted ops (what an
            /// adapter calls for argument values its pinned kernel predates).
            pub mod full {
                #full_prelude

                #(#full_fns)*
            }
        }
    }
}

/// The current schema's arguments, from a scope holding the kernel's parameters:
/// added arguments at their defaults.
fn current_args(e: &Entry) -> Vec<TokenStream> {
    let added: Vec<&str> = match e.compat {
        Compat::Adapter { added } => added.iter().map(|a| a.name.as_str()).collect(),
        Compat::Identical => Vec::new(),
    };
    e.cur
        .args
        .iter()
        .map(|a| {
            if added.contains(&a.arg.name.as_str()) {
                match &a.default {
                    Some(v) => emit::defaults::arg_expr(a.ty(), v),
                    None => quote!(::std::compile_error!("added argument without default")),
                }
            } else {
                let id = a.ident();
                quote!(#id)
            }
        })
        .collect()
}
