//! The starter implementation (`kernels.rs`) written by `--init-skeleton`.

use quote::{format_ident, quote};

use crate::emit::signature::many_args_allow;
use crate::emit::{self, Ctx};

use super::{provided_body, ret};
use crate::backend::plan::Entry;
use crate::backend::spec::{BackendSpec, FallbackPolicy};

/// The starter implementation (`kernels.rs`).
pub(super) fn skeleton(
    cx: &Ctx,
    spec: &BackendSpec,
    entries: &[Entry],
    trait_id: &proc_macro2::Ident,
) -> Result<String, String> {
    let b = &spec.backend.value;
    let ty = format_ident!("{}", b);
    let out_copy = spec.out_copy.as_ref().map(|c| c.value.as_str());
    // Fns the trait provides (named kernels, autogen out= ops) need no starter.
    let required = entries
        .iter()
        .filter(|e| provided_body(e, entries, out_copy).is_none());
    let fns = required.map(|e| {
        let id = e.fn_ident();
        let ps = e.ker.args.iter().map(|a| {
            let name = format_ident!("{}", crate::ident::unused_arg(&a.ident().to_string()));
            let t = cx.types.arg(a.ty());
            quote!(#name: #t)
        });
        let ret = ret(cx, e.ker);
        let allow = many_args_allow(e.ker.args.len() + 1);
        let snake = cx.non_snake(e.cur);
        let q = &e.cur.qualified;
        quote! {
            #allow
            #snake
            fn #id(_ks: DispatchKeySet, #(#ps),*) -> #ret {
                ::std::result::Result::Err(OpalError::not_implemented(#q, #b))
            }
        }
    });
    let transfer = if spec.fallback.value == FallbackPolicy::Cpu {
        quote! {
            fn transfer_to_cpu(_src: &Tensor) -> Result<Tensor> {
                ::std::result::Result::Err(OpalError::not_implemented("transfer_to_cpu", #b))
            }
            fn transfer_from_cpu(_src: &Tensor, _dst: &Tensor) -> Result<()> {
                ::std::result::Result::Err(OpalError::not_implemented("transfer_from_cpu", #b))
            }
        }
    } else {
        quote!()
    };
    let ty_doc = emit::doc(&format!("The kernels of backend `{b}`."));
    let tokens = quote! {
        use super::ops::prelude::*;

        #ty_doc
        pub struct #ty;

        #[allow(non_snake_case, reason = "kernel names follow operator names")]
        impl super::#trait_id for #ty {
            #(#fns)*
            #transfer
        }

        /// Registers the backend for the rest of the process.
        pub fn init() -> Result<()> {
            super::register::<#ty>()?.leak();
            ::std::result::Result::Ok(())
        }
    };
    let header = format!(
        "// Starter kernels for backend `{b}`, written once by `opal-codegen backend --init-skeleton`.\n\
         // This file is yours: the generator never overwrites it. Each kernel returns a\n\
         // NotImplemented error until you write it.\n\n"
    );
    emit::format_file(&header, tokens)
}
