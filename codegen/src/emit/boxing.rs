//! Boxed <-> typed adapters per op: `boxed(f)` wraps a typed kernel (`Sig`) so it
//! serves boxed calls (pops the arguments off the stack with `FromIValue`, calls `f`,
//! pushes the returns), and `kernel(f)` makes the `KernelFunction` that carries both.
//! (The typed -> boxed direction of calls lives in `stubs::entry`.)
//!
//! Owns: `boxed` and `kernel`. Must not: register anything.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::plan::OpPlan;
use super::{op_doc, Ctx};
use crate::ident::{Passing, Types};
use crate::model::{BaseTy, Type};

/// `boxed` and `kernel` in the op module.
pub fn adapters(cx: &Ctx, op: &OpPlan) -> TokenStream {
    // Each argument is popped in order right inside the call expression; temporaries
    // live until the end of the statement, so borrowed forms can point at them.
    let pass = op.args.iter().map(|a| match Types::passing(a.ty()) {
        Passing::Value => quote!(a.next()?),
        Passing::Ref => match a.ty() {
            // `&Tensor` etc. infer `T`; `&str`/`&[T]` need the owned type named.
            Type::Base(b) if !matches!(b, BaseTy::Str | BaseTy::DimVector) => quote!(&a.next()?),
            t => {
                let t = cx.types.owned(t);
                quote!(&a.next::<#t>()?)
            }
        },
        Passing::OptRef => {
            let t = cx.types.owned(a.ty());
            quote!(a.next::<#t>()?.as_ref())
        }
        Passing::OptDeref => {
            let t = cx.types.owned(a.ty());
            quote!(a.next::<#t>()?.as_deref())
        }
    });
    let nret = op.f.func.returns.len();
    let call = quote!(f(ks #(, #pass)*)?);
    let body = match nret {
        0 => quote!(#call;),
        1 => quote!(stack.push(#call.into_ivalue());),
        _ => {
            let rs: Vec<_> = (0..nret).map(|i| format_ident!("r{}", i)).collect();
            quote! {
                let (#(#rs),*) = #call;
                #(stack.push(#rs.into_ivalue());)*
            }
        }
    };
    let bdoc = op_doc(
        op,
        "Wraps a typed kernel so it serves boxed calls: pops the arguments, calls `f`, pushes the returns.",
    );
    let kdoc = op_doc(
        op,
        "The `KernelFunction` of a typed kernel: its typed fast path plus its boxed adapter.",
    );
    let stack = if nret == 0 { quote!(_) } else { quote!(stack) };
    let a = if op.args.is_empty() {
        quote!(_)
    } else {
        quote!(a)
    };
    quote! {
        #bdoc
        #[inline]
        pub fn boxed(f: Sig) -> ::std::sync::Arc<BoxedKernelFn> {
            support::boxed(&DEF, move |ks, #a, #stack| {
                #body
                Ok(())
            })
        }

        #kdoc
        #[inline]
        pub fn kernel(f: Sig) -> KernelFunction {
            KernelFunction::typed(f, self::boxed(f))
        }
    }
}
