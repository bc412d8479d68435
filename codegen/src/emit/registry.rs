//! The schema registry: one `pub static DEF: OpDef` per op (with `ArgDef`s whose
//! `default` is a fn producing the `IValue` of the literal default), the list of all
//! definitions, and the functions that define them with the dispatcher.
//!
//! Owns: `DEF`, `ALL_DEFS`, `def_all`, `init`, `register_backend_select`.
//! Must not: emit calling code (stubs) or kernels.

use proc_macro2::TokenStream;
use quote::quote;

use super::plan::{OpPlan, Plan};
use super::{defaults, doc, op_doc, Ctx};

/// The type text with its alias annotation (`Tensor(a!)`, `int[]?`) from the canonical
/// text of an argument or return, by dropping ` name[=default]`.
fn annotated_type(printed: &str, name: &str, default: Option<&str>) -> String {
    let mut suffix = String::new();
    if !name.is_empty() {
        suffix = format!(" {name}");
    }
    if let Some(d) = default {
        suffix.push('=');
        suffix.push_str(d);
    }
    printed.strip_suffix(&suffix).unwrap_or(printed).to_string()
}

/// The `DEF` static of one op.
pub fn def(_cx: &Ctx, op: &OpPlan) -> TokenStream {
    let name = &op.qualified;
    let schema = &op.schema;
    let args = op.args.iter().map(|a| {
        let n = &a.arg.name;
        let ty = annotated_type(&a.arg.to_string(), &a.arg.name, a.arg.default.as_deref());
        let mut flags = Vec::new();
        if a.kwarg_only {
            flags.push(quote!(support::KW));
        }
        if a.out {
            flags.push(quote!(support::OUT));
        }
        if a.arg.is_write() {
            flags.push(quote!(support::MUT));
        }
        match (&a.default, flags.is_empty()) {
            // The common case: positional, no default, not written to.
            (None, true) => quote!(support::arg(#n, #ty)),
            (default, _) => {
                let flags = if flags.is_empty() {
                    quote!(0)
                } else {
                    quote!(#(#flags)|*)
                };
                let default = match default {
                    Some(v) => {
                        let e = defaults::ivalue_expr(v);
                        quote!(Some(|| #e))
                    }
                    None => quote!(None),
                };
                quote!(support::arg_full(#n, #ty, #flags, #default))
            }
        }
    });
    let rets =
        op.f.func
            .returns
            .iter()
            .map(|r| annotated_type(&r.to_string(), r.name.as_deref().unwrap_or(""), None));
    let doc = op_doc(op, "The operator's definition for the dispatcher.");
    quote! {
        #doc
        pub static DEF: OpDef = OpDef {
            name: #name,
            schema: #schema,
            args: &[#(#args),*],
            returns: &[#(#rets),*],
            signature: || ::std::any::TypeId::of::<Sig>(),
        };
    }
}

/// `ALL_DEFS`, `def_all`, `register_backend_select` and `init` (once per output).
pub fn def_all(_cx: &Ctx, plan: &Plan) -> TokenStream {
    let defs = plan.ops.iter().map(|o| {
        let id = o.ident();
        quote!(&self::#id::DEF)
    });
    let factories: Vec<TokenStream> = plan
        .ops
        .iter()
        .filter(|o| o.factory_device.is_some())
        .map(|o| {
            let id = o.ident();
            quote! {
                d.register_impl(
                    self::#id::DEF.name,
                    DispatchKey::BackendSelect,
                    self::#id::kernel(self::#id::backend_select),
                )?.leak();
            }
        })
        .collect();
    let register_body = if factories.is_empty() {
        quote! {
            let _ = d;
            Ok(())
        }
    } else {
        quote! {
            #(#factories)*
            Ok(())
        }
    };
    let all_doc = doc(&format!(
        "Every operator definition of this module (namespace `{}`), in YAML order.",
        plan.namespace
    ));
    quote! {
        #all_doc
        pub static ALL_DEFS: &[&OpDef] = &[#(#defs),*];

        /// Defines every operator of [`ALL_DEFS`] with `d` (idempotent) and registers
        /// the BackendSelect kernels of the factory operators.
        pub fn def_all(d: &Dispatcher) -> Result<()> {
            for def in ALL_DEFS {
                d.def(def)?;
            }
            self::register_backend_select(d)
        }

        /// Registers the BackendSelect kernel of every factory operator (no tensor
        /// arguments, a `device` argument) with `d`, for the life of the process.
        pub fn register_backend_select(d: &Dispatcher) -> Result<()> {
            #register_body
        }

        /// Defines every operator with the global dispatcher and registers the
        /// BackendSelect kernels, once per process (later calls return the first
        /// outcome). Factory operators call it before dispatching; backends may call it
        /// from their own `init`.
        pub fn init() -> Result<()> {
            static DONE: ::std::sync::OnceLock<::std::result::Result<(), String>> =
                ::std::sync::OnceLock::new();
            DONE.get_or_init(|| self::def_all(Dispatcher::global()).map_err(|e| e.to_string()))
                .clone()
                .map_err(OpalError::msg)
        }
    }
}
