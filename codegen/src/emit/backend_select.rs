//! BackendSelect kernels for factory ops (no tensor arguments, a `device` argument):
//! the backend comes from `device` (`None` means cpu); the kernel redispatches to
//! that backend's key. `registry::def_all` registers them.
//!
//! Owns: `backend_select` in factory op modules. Must not: register kernels.

use proc_macro2::TokenStream;
use quote::quote;

use super::plan::OpPlan;
use super::signature::{many_args_allow, names, params, ret};
use super::{op_doc, Ctx};
use crate::model::Type;

/// `backend_select` for a factory op (nothing for other ops).
pub fn backend_select(cx: &Ctx, op: &OpPlan) -> TokenStream {
    let Some(di) = op.factory_device else {
        return quote!();
    };
    let dev = &op.args[di];
    let dev_id = dev.ident();
    let device = match dev.ty() {
        Type::Optional(_) => quote!(#dev_id),
        _ => quote!(Some(#dev_id)),
    };
    let ps = params(cx, op.args.iter());
    let ns = names(op.args.iter());
    let ret = ret(cx, op);
    let doc = op_doc(
        op,
        &format!(
            "BackendSelect kernel: redispatches to the backend of `{}` (cpu when absent).",
            dev.arg.name
        ),
    );
    let allow = many_args_allow(ps.len() + 1);
    quote! {
        #doc
        #allow
        #[inline]
        pub fn backend_select(ks: DispatchKeySet, #(#ps),*) -> #ret {
            let __ks = support::backend_select_keys(ks, #device);
            self::redispatch(__ks, #(#ns),*)
        }
    }
}
