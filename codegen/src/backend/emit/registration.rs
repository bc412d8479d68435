//! `register`: the backend's kernels at its dispatch key (with the fallback
//! helpers, the adapters, the CPU-fallback transfer and the `kernels` declaration
//! it gathers).

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use crate::emit::{self, Ctx, RuntimePath};

use super::Parts;
use crate::backend::compat::Compat;
use crate::backend::spec::BackendKey;

impl Parts<'_, '_> {
    /// The fallback helpers, the adapters, the CPU-fallback transfer, `register` and
    /// the `kernels` module declaration.
    pub(super) fn registration(&self) -> TokenStream {
        let cx = Ctx::new(&RuntimePath::Opal);
        let (spec, entries) = (self.spec, self.entries);
        let trait_id = self.trait_id();
        let cpu_fallback = self.cpu_fallback();
        let fallback_mod = if cpu_fallback {
            super::fallback::fallback_module(entries)
        } else {
            quote!()
        };
        let adapters = super::adapters::adapters_module(&cx, entries, spec);
        let impls = self.impls(&trait_id);
        let rename = if spec.dispatch_key.value.is_private_use() {
            quote!(::opal::register_privateuse_backend(DISPATCH_KEY, DEVICE)?;)
        } else {
            quote!()
        };
        let (fallback_reg, transfer_struct) = if cpu_fallback {
            cpu_fallback_items(spec.dispatch_key.value, &trait_id)
        } else {
            (quote!(), quote!())
        };
        let reg_doc = self.register_doc(cpu_fallback);
        let skeleton_mod = if self.opts.with_skeleton_mod {
            quote! {
                /// The backend's kernels (a starter written once by `--init-skeleton`; edit it).
                pub mod kernels;
            }
        } else {
            quote!()
        };
        quote! {
            #fallback_mod
            #adapters
            #transfer_struct

            #reg_doc
            pub fn register<K: #trait_id>() -> ::opal::Result<::opal::dispatch::Library> {
                #rename
                ops::init()?;
                let mut lib = ::opal::dispatch::Library::new(NAMESPACE, DISPATCH_KEY);
                #(#impls)*
                #fallback_reg
                ::std::result::Result::Ok(lib)
            }

            #skeleton_mod
        }
    }

    /// The `impl_` call of each kernel: the trait's (or its adapter), at the
    /// backend's key or its autograd key, then the ops derived through
    /// `structured_delegate`.
    fn impls(&self, trait_id: &proc_macro2::Ident) -> Vec<TokenStream> {
        let spec = self.spec;
        let autograd_key = format_ident!("{}", spec.dispatch_key.value.autograd_key());
        let impls = self.entries.iter().map(|e| {
            let id = e.cur.ident();
            let name = &e.cur.op_name;
            if e.autograd {
                let f = e.fn_ident();
                return quote!(lib.impl_for(#name, ::opal::dispatch::DispatchKey::#autograd_key, ops::#id::kernel(<K as #trait_id>::#f))?;);
            }
            let f = match e.compat {
                Compat::Identical => quote!(<K as #trait_id>::#id),
                Compat::Adapter { .. } => quote!(adapters::#id::<K>),
            };
            quote!(lib.impl_(#name, ops::#id::kernel(#f))?;)
        });
        let derived_impls = self.derived.iter().map(|d| {
            let id = d.ident();
            let name = &d.op_name;
            quote!(lib.impl_(#name, ops::#id::kernel(ops::#id::structured))?;)
        });
        impls.chain(derived_impls).collect()
    }

    /// The doc of `register`: what it registers.
    fn register_doc(&self, cpu_fallback: bool) -> TokenStream {
        let (spec, entries) = (self.spec, self.entries);
        let b = &spec.backend.value;
        let key_name = spec.dispatch_key.value.as_str();
        let device = &spec.device.value;
        let n_native = entries.len();
        let n_derived = self.derived.len();
        emit::doc(&format!(
            "Registers backend `{b}` for dispatch key {key_name}{}: {n_native} kernel(s) of \
             `K`{}, {n_derived} op(s) derived from its out= kernels through `structured_delegate`{}.\n\n\
             Returns the `Library` holding the registrations: dropping it deregisters them, \
             `.leak()` keeps them for the life of the process. Idempotent per process only \
             through the caller (registering twice stacks kernels).",
            if spec.dispatch_key.value.is_private_use() {
                format!(" (renamed to device `{device}`)")
            } else {
                String::new()
            },
            if entries.iter().any(|e| matches!(e.compat, Compat::Adapter { .. })) {
                " (pinned kernels through defaulted-argument adapters)"
            } else {
                ""
            },
            if cpu_fallback {
                ", and the CPU fallback for every other op"
            } else {
                ""
            }
        ))
    }
}

fn device_type(k: BackendKey) -> proc_macro2::Ident {
    format_ident!("{}", k.device_type())
}

/// `fallback: cpu`: the registration of the CPU fallback with this backend's data
/// mover, and the mover (forwarding to the kernel trait).
fn cpu_fallback_items(
    key: BackendKey,
    trait_id: &proc_macro2::Ident,
) -> (TokenStream, TokenStream) {
    let ty = device_type(key);
    let reg = quote! {
        ::opal::fallback::register_transfer(
            ::opal::DeviceType::#ty,
            ::std::boxed::Box::leak(::std::boxed::Box::new(Transfer::<K>(::std::marker::PhantomData))),
        );
        lib.fallback(::opal::fallback::kernel())?;
    };
    let transfer = quote! {
        /// The CPU fallback's data mover for this backend's device, forwarding to the
        /// kernel trait.
        struct Transfer<K>(::std::marker::PhantomData<fn() -> K>);

        impl<K: #trait_id> ::opal::fallback::DeviceTransfer for Transfer<K> {
            fn to_cpu(&self, src: &Tensor) -> Result<Tensor> {
                K::transfer_to_cpu(src)
            }
            fn from_cpu(&self, src: &Tensor, dst: &Tensor) -> Result<()> {
                K::transfer_from_cpu(src, dst)
            }
        }
    };
    (reg, transfer)
}
