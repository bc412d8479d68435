//! `Tensor` methods for `variants: method` ops: one extension trait (`TensorOps`)
//! declared and implemented for the runtime's `Tensor` in the generated module, which
//! is legal both inside `opal` and in any crate that generates its own ops.
//! `t.op(args..)` applies every default; `t.op_with(args.., opts)` takes the op's
//! `Options`.
//!
//! Owns: the trait and its impl. Must not: emit free functions or op modules.

use proc_macro2::TokenStream;
use quote::quote;

use super::plan::{ArgPlan, OpPlan, Plan};
use super::signature::{many_args_allow, params, ret_outside};
use super::{op_doc, Ctx};
use crate::ident;

struct Method {
    doc: TokenStream,
    decl: TokenStream,
    body: TokenStream,
}

fn methods(cx: &Ctx, op: &OpPlan, self_idx: usize) -> Vec<Method> {
    let id = op.ident();
    let snake = cx.non_snake(op);
    let ret = ret_outside(cx, op);
    let required: Vec<&ArgPlan> = op.args.iter().filter(|a| a.default.is_none()).collect();
    let self_arg = &op.args[self_idx];
    let others: Vec<&ArgPlan> = required
        .iter()
        .copied()
        .filter(|a| !std::ptr::eq(*a, self_arg))
        .collect();
    let ps = params(cx, others.iter().copied());
    let pass: Vec<TokenStream> = required
        .iter()
        .map(|a| {
            if std::ptr::eq(*a, self_arg) {
                quote!(self)
            } else {
                let i = a.ident();
                quote!(#i)
            }
        })
        .collect();
    let doc = op_doc(
        op,
        &format!(
            "Method form of the free function `{}` (defaults applied).",
            op.ident_str
        ),
    );
    let allow = many_args_allow(ps.len() + 1);
    let mut out = vec![Method {
        doc,
        decl: quote! {
            #allow
            #snake
            fn #id(&self #(, #ps)*) -> #ret
        },
        body: quote!({ self::#id(#(#pass),*) }),
    }];
    if op.has_defaults() {
        let w = ident::ident(&ident::with_method(&op.ident_str));
        let o = ident::ident(ident::OPTIONS);
        let doc = op_doc(
            op,
            &format!(
                "Method form of `{}::with`: defaulted arguments from `opts`.",
                op.ident_str
            ),
        );
        let allow = many_args_allow(ps.len() + 2);
        out.push(Method {
            doc,
            decl: quote! {
                #allow
                #snake
                fn #w(&self #(, #ps)*, opts: self::#id::#o) -> #ret
            },
            body: quote!({ self::#id::with(#(#pass,)* opts) }),
        });
    }
    out
}

/// The `TensorOps` trait and its impl for `Tensor`.
pub fn tensor_ops(cx: &Ctx, plan: &Plan) -> TokenStream {
    let all: Vec<Method> = plan
        .ops
        .iter()
        .filter_map(|o| o.method.map(|i| methods(cx, o, i)))
        .flatten()
        .collect();
    let decls = all.iter().map(|m| {
        let doc = &m.doc;
        let decl = &m.decl;
        quote!(#doc #decl)
    });
    let impls = all.iter().map(|m| {
        let decl = &m.decl;
        let body = &m.body;
        quote!(#[inline] #decl #body)
    });
    let t = ident::ident(ident::METHODS_TRAIT);
    quote! {
        /// Methods of `Tensor` for the operators declared with `variants: method`
        /// (bring into scope with `use`; each method documents its schema).
        pub trait #t {
            #(#decls;)*
        }

        impl #t for Tensor {
            #(#impls)*
        }
    }
}
