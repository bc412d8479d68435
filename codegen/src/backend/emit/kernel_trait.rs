//! The backend's constants and its kernel trait: one associated fn per supported
//! op, typed, pinned signature where pinned, provided where the YAML names a kernel.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use crate::emit::signature::{many_args_allow, params};
use crate::emit::{self, Ctx, RuntimePath};

use super::{provided_body, ret, Parts};
use crate::backend::compat::Compat;
use crate::backend::plan::Entry;
use crate::backend::spec::BackendSpec;

impl Parts<'_, '_> {
    /// The constants and the kernel trait.
    pub(super) fn kernel_trait(&self) -> TokenStream {
        let cx = Ctx::new(&RuntimePath::Opal);
        let spec = self.spec;
        let b = &spec.backend.value;
        let key_name = spec.dispatch_key.value.as_str();
        let key = format_ident!("{}", key_name);
        let device = &spec.device.value;
        let trait_id = self.trait_id();
        let trait_fns = self
            .entries
            .iter()
            .map(|e| trait_fn(&cx, e, self.entries, spec));
        let transfer_fns = if self.cpu_fallback() {
            quote! {
                /// Copies `src`, a tensor of this backend's device, into a new contiguous CPU
                /// tensor (used by the CPU fallback).
                fn transfer_to_cpu(src: &Tensor) -> Result<Tensor>;

                /// Writes the values of the CPU tensor `src` into `dst`, a tensor of this
                /// backend's device with the same sizes and dtype (used by the CPU fallback).
                fn transfer_from_cpu(src: &Tensor, dst: &Tensor) -> Result<()>;
            }
        } else {
            quote!()
        };
        let trait_doc = emit::doc(&format!(
            "The kernels of backend `{b}` (dispatch key {key_name}, device `{device}`): one \
             associated function per op of `supported:` in {}, each with the typed signature of \
             the schema its kernel was written against.\n\nImplement it on a type of yours and call \
             [`register`] with that type.",
            self.opts.backend_source
        ));
        let ns_lit = self.ns;
        quote! {
            /// The dispatch key this backend registers under.
            pub const DISPATCH_KEY: ::opal::dispatch::DispatchKey = ::opal::dispatch::DispatchKey::#key;
            /// The device name users write (`"emu"`, `"emu:1"`).
            pub const DEVICE: &str = #device;
            /// The backend's name.
            #[allow(dead_code, reason = "for users of the generated module")]
            pub const BACKEND: &str = #b;
            /// The operator namespace.
            pub const NAMESPACE: &str = #ns_lit;

            #trait_doc
            #[allow(non_snake_case, reason = "kernel names follow operator names (`add__tensor`)")]
            pub trait #trait_id: 'static {
                #(#trait_fns)*
                #transfer_fns
            }
        }
    }
}

/// The trait's associated fn for one supported op.
fn trait_fn(cx: &Ctx, e: &Entry, entries: &[Entry], spec: &BackendSpec) -> TokenStream {
    let backend = spec.backend.value.as_str();
    let id = e.fn_ident();
    let ps = params(cx, e.ker.args.iter());
    let ret = ret(cx, e.ker);
    let what = if e.autograd {
        "Autograd kernel (the backend's own backward: record it with `opal::autograd::record` and redispatch below the autograd keys) of"
    } else {
        "Kernel of"
    };
    let mut text = format!(
        "{what} `{}` for backend `{backend}`.\n\nSchema: `{}`",
        e.cur.qualified, e.cur.schema
    );
    if let Compat::Adapter { added } = e.compat {
        let names: Vec<String> = added
            .iter()
            .map(|a| format!("`{}={}`", a.name, a.default))
            .collect();
        text.push_str(&format!(
            "\n\nPinned: written against `{}`. Calls that pass the defaults {} run here; \
             other values go to the backend's fallback (or fail with an error naming them).",
            e.ker.schema,
            names.join(", ")
        ));
    } else if e.ker.schema != e.cur.schema || !std::ptr::eq(e.ker, e.cur) {
        text.push_str(&format!("\n\nPinned: `{}`.", e.ker.schema));
    }
    let out_copy = spec.out_copy.as_ref().map(|c| c.value.as_str());
    let body = provided_body(e, entries, out_copy);
    match (e.kernel, e.autogen_from) {
        (Some(k), _) => text.push_str(&format!("\n\nRuns `{k}` (named in the backend YAML).")),
        (None, Some(_)) if body.is_some() => text.push_str(&format!(
            "\n\nDerived (`autogen`): the backend's `{}` kernel, its results copied into the \
             `out` tensors by `{}`.",
            entries[e.autogen_from.unwrap_or_default()].cur.op_name,
            out_copy.unwrap_or_default()
        )),
        _ => {}
    }
    let doc = emit::doc(&text);
    let allow = many_args_allow(ps.len() + 1);
    let snake = cx.non_snake(e.cur);
    match body {
        Some(body) => {
            let ks = if e.kernel.is_some() && !e.autograd {
                quote!(_ks)
            } else {
                quote!(ks)
            };
            quote! {
                #doc
                #allow
                #snake
                #[inline]
                fn #id(#ks: DispatchKeySet, #(#ps),*) -> #ret #body
            }
        }
        None => quote! {
            #doc
            #allow
            #snake
            fn #id(ks: DispatchKeySet, #(#ps),*) -> #ret;
        },
    }
}
