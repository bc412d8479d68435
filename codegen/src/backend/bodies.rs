//! Bodies of the kernel trait's provided fns, so that a backend writes kernels, not
//! forwarding: an op whose `supported:` entry names its kernel function forwards to
//! it, and an `out=` op that the native YAML derives with `autogen:` runs the
//! backend's functional kernel and then its `out_copy:` rule.
//!
//! Owns: those two bodies and the rule mapping an autogen `out=` op's arguments to
//! its functional op's. Must not: decide which ops get a body (`emit` does, from the
//! plan) or name things (`crate::ident`).

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use crate::emit::plan::{ArgPlan, OpPlan};
use crate::model::{BaseTy, Type};

/// A kernel path from the backend YAML as a path in the including crate: relative
/// paths are taken from the crate root.
pub(super) fn kernel_path(text: &str) -> Result<syn::Path, String> {
    let rooted = ["crate::", "self::", "super::", "::"]
        .iter()
        .any(|p| text.starts_with(p));
    let full = if rooted {
        text.to_string()
    } else {
        format!("crate::{text}")
    };
    syn::parse_str(&full).map_err(|e| format!("`{text}` is not a Rust path: {e}"))
}

/// `kernel(args...)`, or `kernel(ks, args...)` for an autograd kernel (which needs
/// the key set to redispatch below the autograd keys).
pub(super) fn forward(kernel: &syn::Path, args: &[ArgPlan], pass_keys: bool) -> TokenStream {
    let names = args.iter().map(ArgPlan::ident);
    let ks = pass_keys.then(|| quote!(ks,));
    quote!({ #kernel(#ks #(#names),*) })
}

/// The body of an autogen `out=` op (`out_op`, the schema its trait fn has) from the
/// trait fn `functional_fn` of its functional op (`functional`): every functional
/// argument is the `out=` op's argument of the same name, except the tensor options
/// the `out=` schema drops (`dtype` is taken from the first `out`, the others are
/// `None`); the results are handed to `out_copy` with their `out`s, leaving out those
/// a false `output_mask` entry did not request. `None` when the schemas do not fit
/// that rule (a dropped argument that is not optional, or result and `out` counts
/// that differ): the op then needs a kernel of its own.
pub(super) fn autogen_out(
    out_op: &OpPlan,
    functional_fn: &proc_macro2::Ident,
    functional: &OpPlan,
    out_copy: &syn::Path,
) -> Option<TokenStream> {
    let outs: Vec<&ArgPlan> = out_op.args.iter().filter(|a| a.out).collect();
    let first_out = outs.first()?.ident();
    let n_results = functional.f.func.returns.len();
    if n_results != outs.len() || out_op.f.func.returns.len() != outs.len() {
        return None;
    }
    let mut call = Vec::with_capacity(functional.args.len());
    for a in &functional.args {
        if let Some(same) = out_op.args.iter().find(|b| !b.out && b.name == a.name) {
            let id = same.ident();
            call.push(quote!(#id));
        } else if !a.ty().is_optional() {
            return None;
        } else if a.name == "dtype" && a.ty().base() == BaseTy::ScalarType {
            call.push(quote!(::std::option::Option::Some(#first_out.dtype())));
        } else {
            call.push(quote!(::std::option::Option::None));
        }
    }
    let op_name = &out_op.op_name;
    let results: Vec<proc_macro2::Ident> = (0..outs.len()).map(|i| format_ident!("r{i}")).collect();
    let out_ids: Vec<proc_macro2::Ident> = outs.iter().map(|a| a.ident()).collect();
    let bind = if results.len() == 1 {
        let r = &results[0];
        quote!(let #r)
    } else {
        quote!(let (#(#results),*))
    };
    let mask = functional
        .args
        .iter()
        .find(|a| a.name == "output_mask" && matches!(a.ty(), Type::List { .. }))
        .and_then(|m| out_op.args.iter().find(|b| !b.out && b.name == m.name))
        .map(ArgPlan::ident);
    let pairs = results.iter().zip(&out_ids).map(|(r, o)| quote!((&#r, #o)));
    let copy = match mask {
        // Gradients `output_mask` did not ask for were not computed: their `out`s
        // are returned as given.
        Some(m) => quote! {
            let pairs: ::std::vec::Vec<(&Tensor, &Tensor)> = [#(#pairs),*]
                .into_iter()
                .enumerate()
                .filter(|(i, _)| #m.get(*i).copied().unwrap_or(true))
                .map(|(_, pair)| pair)
                .collect();
            #out_copy(#op_name, &pairs)?;
        },
        None => quote!(#out_copy(#op_name, &[#(#pairs),*])?;),
    };
    let ret = if out_ids.len() == 1 {
        let o = &out_ids[0];
        quote!(#o.clone())
    } else {
        quote!((#(#out_ids.clone()),*))
    };
    Some(quote!({
        #bind = Self::#functional_fn(ks, #(#call),*)?;
        #copy
        ::std::result::Result::Ok(#ret)
    }))
}
