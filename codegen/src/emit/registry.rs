//! The schema registry: one `pub static DEF: OpDef` per op (with `ArgDef`s whose
//! `default` is a fn producing the `IValue` of the literal default), the list of all
//! definitions, and the functions that define them with the dispatcher.
//!
//! Owns: `DEF`, `ALL_DEFS`, `def_all`, `init`, `register_backend_select`.
//! Must not: emit calling code (stubs) or kernels.

use proc_macro2::{Literal, TokenStream};
use quote::quote;
use syn::Item;

use super::ast::{self, call_path, p};
use super::plan::{OpPlan, Plan};
use super::{defaults, doc, member_doc, Ctx};

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
pub(crate) fn def(_cx: &Ctx, op: &OpPlan) -> Item {
    let args = op.args.iter().map(|a| {
        let n = ast::str_lit(&a.arg.name);
        let ty = ast::str_lit(&annotated_type(
            &a.arg.to_string(),
            &a.arg.name,
            a.arg.default.as_deref(),
        ));
        let flags = [
            (a.kwarg_only, "KW"),
            (a.out, "OUT"),
            (super::checks::is_written(op, a), "MUT"),
        ];
        let flags = ast::bit_or(
            flags
                .into_iter()
                .filter(|(set, _)| *set)
                .map(|(_, flag)| p(&["support", flag])),
        );
        match (&a.default, flags) {
            // The common case: positional, no default, not written to.
            (None, None) => call_path(&["support", "arg"], [n, ty]),
            (default, flags) => {
                let flags = flags.unwrap_or_else(|| ast::literal(Literal::i64_unsuffixed(0)));
                let default = match default {
                    Some(v) => ast::some(ast::closure(false, [], defaults::ivalue_expr(v))),
                    None => p(&["None"]),
                };
                call_path(&["support", "arg_full"], [n, ty, flags, default])
            }
        }
    });
    let rets = op.f.func.returns.iter().map(|r| {
        ast::str_lit(&annotated_type(
            &r.to_string(),
            r.name.as_deref().unwrap_or(""),
            None,
        ))
    });
    let type_id = ast::with_generics(
        ast::global_path(&["std", "any", "TypeId", "of"]),
        [ast::ty("Sig")],
        true,
    );
    let signature = ast::closure(false, [], ast::call(ast::path_expr(type_id), []));
    let fields = [
        ("name", ast::str_lit(&op.qualified)),
        ("schema", ast::str_lit(&op.schema)),
        ("args", ast::reference(ast::array(args))),
        ("returns", ast::reference(ast::array(rets))),
        ("signature", signature),
    ];
    let value = ast::struct_expr(
        ast::path(&["OpDef"]),
        fields.into_iter().map(|(f, e)| (ast::id(f), e)),
    );
    let doc = member_doc("The operator's definition for the dispatcher.");
    ast::static_item(vec![doc], ast::public(), "DEF", ast::ty("OpDef"), value)
}

/// `ALL_DEFS`, `def_all`, `register_backend_select` and `init` (once per output).
pub(crate) fn def_all(_cx: &Ctx, plan: &Plan) -> TokenStream {
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
        /// the BackendSelect kernels of the factory operators. Fails first with any
        /// registration the dispatcher could not make when it was created.
        pub fn def_all(d: &Dispatcher) -> Result<()> {
            d.startup_result()?;
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
