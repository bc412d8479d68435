//! Typed kernel signature aliases: `pub type Sig = fn(DispatchKeySet, args..) -> Result<R>;`
//! in every op module. Backends name these to write typed kernels.
//!
//! Owns: the `Sig` item and the parameter lists shared by all typed entry points.
//! Must not: decide names or types (that is `crate::ident`).

use proc_macro2::TokenStream;
use quote::quote;

use super::plan::{ArgPlan, OpPlan};
use super::{op_doc, Ctx};

/// `name: Type` for each argument (borrowed argument form).
pub fn params<'a>(cx: &Ctx, args: impl Iterator<Item = &'a ArgPlan<'a>>) -> Vec<TokenStream> {
    args.map(|a| {
        let id = a.ident();
        let ty = cx.types.arg(a.ty());
        quote!(#id: #ty)
    })
    .collect()
}

/// The argument idents, in order.
pub fn names<'a>(args: impl Iterator<Item = &'a ArgPlan<'a>>) -> Vec<TokenStream> {
    args.map(|a| {
        let id = a.ident();
        quote!(#id)
    })
    .collect()
}

/// `Result<R>` of the op as written inside its module: several returns are named by
/// the module's `Output` tuple alias.
pub fn ret(cx: &Ctx, op: &OpPlan) -> TokenStream {
    if op.f.func.returns.len() > 1 {
        cx.types.result(quote!(Output))
    } else {
        cx.types.result(cx.types.returns(op.return_types()))
    }
}

/// `Result<R>` of the op as written outside its module (`op::Output` for tuples).
pub fn ret_outside(cx: &Ctx, op: &OpPlan) -> TokenStream {
    if op.f.func.returns.len() > 1 {
        let id = op.ident();
        cx.types.result(quote!(self::#id::Output))
    } else {
        cx.types.result(cx.types.returns(op.return_types()))
    }
}

/// `#[allow(clippy::too_many_arguments)]` when a function of `n` parameters needs it.
pub fn many_args_allow(n: usize) -> TokenStream {
    if n > 7 {
        quote!(#[allow(clippy::too_many_arguments, reason = "one parameter per schema argument")])
    } else {
        quote!()
    }
}

/// The `Sig` alias of one op.
pub fn sig(cx: &Ctx, op: &OpPlan) -> TokenStream {
    let tys = op.args.iter().map(|a| cx.types.arg(a.ty()));
    let ret = ret(cx, op);
    let doc = op_doc(
        op,
        "Typed kernel signature: the dispatch key set, then the arguments in schema order.",
    );
    let output = if op.f.func.returns.len() > 1 {
        let t = cx.types.returns(op.return_types());
        let odoc = op_doc(op, "The operator's returns, in schema order.");
        quote! {
            #odoc
            pub type Output = #t;
        }
    } else {
        quote!()
    };
    quote! {
        #output
        #doc
        pub type Sig = fn(DispatchKeySet #(, #tys)*) -> #ret;
    }
}
