//! Structured-delegate derivation: for an op with `structured_delegate: <op>.out`, a
//! kernel `structured` (of the op's own `Sig`) that runs the functional op on meta
//! tensors of the same sizes/strides/dtype (the Meta backend's kernel is the meta
//! function), allocates the outputs on the real device (in-place: checks the result
//! fits `self`) and calls the out= op by `redispatch` with the same key set. A backend
//! that registers `add.out` registers `add_tensor::kernel(add_tensor::structured)` and
//! `add_tensor_::kernel(add_tensor_::structured)` for its key and gets `add`/`add_`.
//!
//! Owns: `structured` in op modules. Must not: register kernels.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::plan::OpPlan;
use super::signature::{many_args_allow, names, params, ret};
use super::{op_doc, Ctx};
use crate::model::{BaseTy, Type};

/// `structured` for an op with a usable structured delegate (nothing otherwise).
pub fn structured(cx: &Ctx, op: &OpPlan) -> TokenStream {
    let Some(s) = &op.structured else {
        return quote!();
    };
    let sup = quote!(support);
    let ps = params(cx, op.args.iter());
    let ns = names(op.args.iter());
    let ret = ret(cx, op);
    let mut prep = Vec::new();
    let mut meta_args = Vec::new();
    let mut device = None;
    for (i, a) in op.args.iter().enumerate() {
        let id = a.ident();
        let m = format_ident!("__m{}", i);
        let tensor = Type::Base(BaseTy::Tensor);
        match a.ty() {
            t if *t == tensor => {
                device.get_or_insert_with(|| quote!(#sup::device_of(#id)));
                prep.push(quote!(let #m = #sup::to_meta(#id)?;));
                meta_args.push(quote!(&#m));
            }
            Type::Optional(t) if **t == tensor => {
                prep.push(quote!(let #m = #sup::opt_to_meta(#id)?;));
                meta_args.push(quote!(#m.as_ref()));
            }
            Type::List { elem, .. } if **elem == tensor => {
                device.get_or_insert_with(|| quote!(#sup::device_of_list(#id)?));
                prep.push(quote!(let #m = #sup::list_to_meta(#id)?;));
                meta_args.push(quote!(&#m));
            }
            Type::List { elem, .. } if elem.is_tensor_like() => {
                prep.push(quote!(let #m = #sup::opt_list_to_meta(#id)?;));
                meta_args.push(quote!(&#m));
            }
            _ => meta_args.push(quote!(#id)),
        }
    }
    let Some(device) = device else {
        return quote!();
    };
    let meta_op = crate::ident::ident(&s.meta_op);
    let out_op = crate::ident::ident(&s.out_op);
    let nret = op.f.func.returns.len();
    let body = if s.inplace {
        let self_id = op.args[0].ident();
        quote! {
            let __meta = super::#meta_op::call(#(#meta_args),*)?;
            #sup::check_inplace(self::DEF.name, #self_id, &__meta)?;
            super::#out_op::redispatch(ks, #(#ns,)* #self_id)?;
            Ok(#self_id.clone())
        }
    } else {
        let outs: Vec<_> = (0..nret).map(|i| format_ident!("__o{}", i)).collect();
        let allocs = if nret == 1 {
            let o = &outs[0];
            quote!(let #o = #sup::empty_from_meta(&__meta, __device)?;)
        } else {
            let idx = (0..nret).map(syn::Index::from);
            quote!(#(let #outs = #sup::empty_from_meta(&__meta.#idx, __device)?;)*)
        };
        let result = if nret == 1 {
            let o = &outs[0];
            quote!(#o)
        } else {
            quote!((#(#outs),*))
        };
        quote! {
            let __device = #device;
            let __meta = super::#meta_op::call(#(#meta_args),*)?;
            #allocs
            super::#out_op::redispatch(ks, #(#ns,)* #(&#outs),*)?;
            Ok(#result)
        }
    };
    let doc = op_doc(
        op,
        &format!(
            "Kernel derived from the out= operator `{}` and the Meta kernel of `{}`: register `kernel(structured)` for any backend key that has the out= kernel.",
            s.out_op, s.meta_op
        ),
    );
    let allow = many_args_allow(ps.len() + 1);
    quote! {
        #doc
        #allow
        #[inline]
        pub fn structured(ks: DispatchKeySet, #(#ps),*) -> #ret {
            #(#prep)*
            #body
        }
    }
}
