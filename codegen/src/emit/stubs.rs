//! Typed dispatch stubs: the free function `ops::<op>` (required arguments, defaults
//! applied), and in the op module `call` (every argument explicit: computes the
//! dispatch key set from the tensor arguments) and `redispatch` (from a given key
//! set: typed fast path through a cached `OpSlot`, boxed path through the stack).
//!
//! Owns: those three functions. Must not: emit options structs, boxing adapters or
//! kernels (see `options`, `boxing`, `backend_select`, `structured`).

use proc_macro2::TokenStream;
use quote::quote;

use super::plan::{ArgPlan, OpPlan};
use super::signature::{many_args_allow, names, params, ret, ret_outside};
use super::{defaults, op_doc, Ctx};
use crate::model::{BaseTy, Type};

/// Expressions for a call of `call` with every argument, where defaulted arguments
/// take `defaulted(arg)` and the others their own ident.
pub fn full_args(
    op: &OpPlan,
    mut defaulted: impl FnMut(&ArgPlan) -> TokenStream,
) -> Vec<TokenStream> {
    op.args
        .iter()
        .map(|a| {
            if a.default.is_some() {
                defaulted(a)
            } else {
                let id = a.ident();
                quote!(#id)
            }
        })
        .collect()
}

/// A default in argument form, as a temporary (`&Scalar::Int(1)`, `None`, `&[0, 1]`).
pub fn default_arg(a: &ArgPlan) -> TokenStream {
    match &a.default {
        Some(v) => defaults::arg_expr(a.ty(), v),
        None => quote!(),
    }
}

/// The free function `ops::<op>(required args)`.
pub fn free_fn(cx: &Ctx, op: &OpPlan) -> TokenStream {
    let id = op.ident();
    let required: Vec<&ArgPlan> = op.args.iter().filter(|a| a.default.is_none()).collect();
    let ps = params(cx, required.iter().copied());
    let args = full_args(op, default_arg);
    let ret = ret_outside(cx, op);
    let what = if op.has_defaults() {
        format!(
            "`{}` with every defaulted argument at its default (`{}::with` takes an `Options` value).",
            op.qualified, op.ident_str
        )
    } else {
        format!("`{}`.", op.qualified)
    };
    let doc = op_doc(op, &what);
    let allow = many_args_allow(ps.len());
    let snake = cx.non_snake(op);
    quote! {
        #doc
        #allow
        #snake
        #[inline]
        pub fn #id(#(#ps),*) -> #ret {
            self::#id::call(#(#args),*)
        }
    }
}

/// `DispatchKeySet` from the tensor-like arguments.
fn arg_keys(op: &OpPlan) -> TokenStream {
    let adds = op.args.iter().filter_map(|a| {
        let id = a.ident();
        match a.ty() {
            Type::Base(BaseTy::Tensor) => Some(quote!(.with_tensor(#id))),
            Type::Optional(t) if **t == Type::Base(BaseTy::Tensor) => {
                Some(quote!(.with_opt_tensor(#id)))
            }
            Type::List { elem, .. } if **elem == Type::Base(BaseTy::Tensor) => {
                Some(quote!(.with_tensors(#id)))
            }
            Type::List { elem, .. } if elem.is_tensor_like() => {
                Some(quote!(.with_opt_tensors(#id)))
            }
            _ => None,
        }
    });
    quote!(DispatchKeySet::empty() #(#adds)*)
}

/// Calls the boxed kernel `__k` and pops its returns into the Rust return value.
fn boxed_call(op: &OpPlan, ns: &[TokenStream]) -> TokenStream {
    let call = quote!(support::call_boxed(
        __k,
        __op.handle(),
        ks,
        vec![#(#ns.into_ivalue()),*]
    )?);
    let n = op.f.func.returns.len();
    match n {
        0 => quote!({
            #call;
            Ok(())
        }),
        1 => quote!(support::ret1(#call, &DEF)),
        _ => {
            let gets = (0..n).map(|_| quote!(__r.next()?));
            quote! {{
                let mut __r = support::Rets::take(#call, &DEF)?;
                Ok((#(#gets),*))
            }}
        }
    }
}

/// `call` and `redispatch` in the op module.
pub fn entry(cx: &Ctx, op: &OpPlan) -> TokenStream {
    let ps = params(cx, op.args.iter());
    let ns = names(op.args.iter());
    let ret = ret(cx, op);
    let keys = arg_keys(op);
    let boxed = boxed_call(op, &ns);
    let init = if op.factory_device.is_some() {
        quote!(super::init()?;)
    } else {
        quote!()
    };
    let call_doc = op_doc(
        op,
        "Calls the operator with every argument explicit, dispatching on the key set of its tensor arguments.",
    );
    let re_doc = op_doc(
        op,
        "Calls the operator with the key set `ks` (a kernel passes its own key set minus its key and those above it).",
    );
    let allow = many_args_allow(ps.len());
    let allow_re = many_args_allow(ps.len() + 1);
    quote! {
        #call_doc
        #allow
        #[inline]
        pub fn call(#(#ps),*) -> #ret {
            #init
            let __ks = support::keys(#keys);
            self::redispatch(__ks, #(#ns),*)
        }

        #re_doc
        #allow_re
        #[inline]
        pub fn redispatch(ks: DispatchKeySet, #(#ps),*) -> #ret {
            static SLOT: OpSlot<Sig> = OpSlot::new(&DEF);
            let __op = SLOT.get()?;
            match __op.lookup(ks)? {
                Kernel::Typed(__f) => __f(ks, #(#ns),*),
                Kernel::Boxed(__k) => #boxed,
            }
        }
    }
}
