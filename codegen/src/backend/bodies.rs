//! Bodies of the kernel trait's provided fns, so that a backend writes kernels, not
//! forwarding: an op whose `supported:` entry names its kernel function forwards to
//! it (through a shared rule first when the entry reads `rule | kernel`), and an `out=` op that the native YAML derives with `autogen:` runs the
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

/// A `supported:` entry's kernel: one function taking the op's arguments, or
/// `rule | kernel`, where the rule (shared by backends, `opal::rules`) takes the
/// arguments, checks them and computes the results' geometry, and the backend's
/// kernel takes what the rule returns. The op's signature is then written once, in
/// the rule.
pub(super) struct KernelCall {
    rule: Option<syn::Path>,
    kernel: syn::Path,
}

/// Parses a kernel as the backend YAML writes it (see [`KernelCall`]).
pub(super) fn kernel_call(text: &str) -> Result<KernelCall, String> {
    match text.split_once('|') {
        Some((rule, kernel)) => Ok(KernelCall {
            rule: Some(kernel_path(rule.trim())?),
            kernel: kernel_path(kernel.trim())?,
        }),
        None => Ok(KernelCall {
            rule: None,
            kernel: kernel_path(text)?,
        }),
    }
}

/// `kernel(args...)` (`kernel(rule(args...)?)` for a `rule | kernel`), or
/// `kernel(ks, ...)` for an autograd kernel (which needs the key set to redispatch
/// below the autograd keys).
pub(super) fn forward(call: &KernelCall, args: &[ArgPlan], pass_keys: bool) -> TokenStream {
    let names = args.iter().map(ArgPlan::ident);
    let ks = pass_keys.then(|| quote!(ks,));
    let kernel = &call.kernel;
    match &call.rule {
        Some(rule) => quote!({ #kernel(#ks #rule(#(#names),*)?) }),
        None => quote!({ #kernel(#ks #(#names),*) }),
    }
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
