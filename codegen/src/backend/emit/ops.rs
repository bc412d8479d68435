//! The backend module's prelude import and `mod ops`: a re-export of the ops path,
//! or the carried per-op items of the ops the backend registers.

use std::collections::HashSet;

use proc_macro2::TokenStream;
use quote::quote;

use crate::emit::plan::{self as eplan};
use crate::emit::{self, Ctx, RuntimePath};

use super::Parts;

impl Parts<'_, '_> {
    /// The prelude import and `mod ops` (a re-export of `ops_path`, or the carried
    /// per-op items).
    pub(super) fn ops_module(&self) -> TokenStream {
        let cx = Ctx::new(&RuntimePath::Opal);
        let ops_module = match &self.ops_path {
            Some(path) => {
                // Checked by `generate`; a path that does not parse is left out.
                let path: Option<syn::Path> = syn::parse_str(path).ok();
                let doc = emit::doc(&format!(
                    "The operators this backend registers (`Sig`, `DEF`, `kernel`, ...), generated \
                     from the same native YAML into `{}`.",
                    quote!(#path).to_string().replace(' ', "")
                ));
                quote! {
                    #doc
                    pub use #path as ops;
                }
            }
            None => {
                // Entry points only where something calls them: the out= and meta
                // operators of structured derivations, and factory operators (their
                // BackendSelect kernel redispatches). Callers of the ops themselves use
                // the runtime's generated items.
                let called: HashSet<&str> = self
                    .carried
                    .iter()
                    .flat_map(|o| {
                        let s = o.structured.as_ref();
                        let factory = o.factory_device.map(|_| o.ident_str.as_str());
                        [
                            s.map(|s| s.out_op.as_str()),
                            s.map(|s| s.meta_op.as_str()),
                            factory,
                        ]
                    })
                    .flatten()
                    .collect();
                let op_items = self.carried.iter().map(|o| {
                    let entry_points =
                        self.opts.carry_entry_points || called.contains(o.ident_str.as_str());
                    emit::op_items(&cx, o, emit::OpItems::Registration { entry_points })
                });
                // Definitions and BackendSelect kernels of exactly the ops this output carries.
                let sub = eplan::Plan {
                    namespace: self.ns.to_string(),
                    ops: self.carried.to_vec(),
                    unsupported: Vec::new(),
                };
                let def_all = emit::registry::def_all(&cx, &sub);
                let prelude = emit::support::prelude(&cx);
                let support = emit::support::support(&cx);
                quote! {
                    /// The operators this backend registers: their typed signatures (`Sig`),
                    /// definitions (`DEF`) and kernel adapters, generated from the native YAML
                    /// (entry points only for the operators derivations call; callers use the
                    /// runtime's).
                    #[allow(dead_code, unused_imports, non_snake_case, clippy::all, reason = "generated per-op items; not all are used by every backend")]
                    pub mod ops {
                        #prelude
                        use self::prelude::*;
                        #support
                        #def_all
                        #(#op_items)*
                    }
                }
            }
        };
        quote! {
            #[allow(unused_imports, reason = "runtime names used by the generated items below")]
            use self::ops::prelude::*;

            #ops_module
        }
    }
}
