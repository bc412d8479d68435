//! Rust code from the model: small functions model -> `syn` items, one module per
//! output concern, assembled here into formatted files.
//!
//! Owns: the layout of the output (`mod.rs` with the shared items and one module
//! per chunk of operators, `ops_NNN.rs` chunks, `methods.rs`, each module
//! `include!`ing its file and carrying the file's lint allowances), per-file
//! formatting with prettyplease (files in parallel) and byte-determinism. Per-op
//! items are built as syntax trees (see `ast`); the one-off shared items are quoted.
//! Must not: read or write files (see `crate::builder`, `crate::cli::generate`),
//! decide Rust names or types (see `crate::ident`).
//!
//! Per operator `op` (identifier by the naming rule of `crate::ident`) the output has
//! a free function `op(required args)` and a module `op` with `Sig`, `DEF`, `call`,
//! `redispatch`, `boxed`, `kernel`, and when they apply `Options` + `with`,
//! `backend_select`, `structured`.

pub mod autograd;
pub(crate) mod backend_select;
pub(crate) mod boxing;
pub(crate) mod checks;
pub(crate) mod composites;
pub(crate) mod defaults;
pub(crate) mod format;
pub(crate) mod methods;
#[cfg(test)]
mod names_tests;
pub(crate) mod options;
pub(crate) mod plan;
pub(crate) mod registry;
pub(crate) mod signature;
pub(crate) mod structured;
pub(crate) mod stubs;
mod summary;
pub(crate) mod support;

use proc_macro2::TokenStream;
use quote::{quote, ToTokens};

pub(crate) use crate::ast;
use crate::ident::{self, Types};
use crate::model::NativeFunctions;
pub(crate) use format::{doc, doc_attr, format_file};
pub use plan::{check_names, EmitError, Unsupported};

/// Operators per `ops_NNN.rs` file (files are formatted in parallel).
const CHUNK: usize = 128;

/// Where generated code finds the runtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuntimePath {
    /// `::opal` (any crate depending on `opal`; what the CLI writes).
    Opal,
    /// `crate` (generating into `opal` itself).
    Crate,
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct EmitOptions {
    /// Operator namespace (`aten`).
    pub namespace: String,
    pub runtime: RuntimePath,
    /// Shown in the header of every file (the YAML it was generated from).
    pub source: String,
}

impl Default for EmitOptions {
    fn default() -> Self {
        EmitOptions {
            namespace: "aten".to_string(),
            runtime: RuntimePath::Opal,
            source: "native_functions.yaml".to_string(),
        }
    }
}

/// Generated files (name relative to the output directory, formatted contents) and
/// the operators that could not be expressed.
#[derive(Clone, Debug)]
pub struct Generated {
    pub files: Vec<(String, String)>,
    pub unsupported: Vec<Unsupported>,
}

/// Context shared by the emitters.
pub(crate) struct Ctx {
    pub types: Types,
    /// The runtime root path (`::opal` or `crate`), used only by the prelude.
    rt: TokenStream,
}

impl Ctx {
    pub(crate) fn new(runtime: &RuntimePath) -> Self {
        let rt = match runtime {
            RuntimePath::Opal => quote!(::opal),
            RuntimePath::Crate => quote!(crate),
        };
        Ctx { types: Types, rt }
    }

    /// The runtime root path.
    pub(crate) fn rt(&self) -> &TokenStream {
        &self.rt
    }

    /// `#[allow(non_snake_case)]` for ops named like `mT` or with arguments named like
    /// `LU` (PyTorch's names are kept).
    pub(crate) fn non_snake_attr(&self, op: &plan::OpPlan) -> Option<syn::Attribute> {
        let needed = ident::needs_non_snake_allow(&op.ident_str)
            || op
                .args
                .iter()
                .any(|a| ident::needs_non_snake_allow(&a.name));
        needed.then(|| {
            ast::attr_list(
                "allow",
                quote!(
                    non_snake_case,
                    reason = "operator and argument names from the schema"
                ),
            )
        })
    }

    /// [`Ctx::non_snake_attr`] as tokens.
    pub(crate) fn non_snake(&self, op: &plan::OpPlan) -> TokenStream {
        self.non_snake_attr(op)
            .map(ToTokens::into_token_stream)
            .unwrap_or_default()
    }
}

/// An item's doc: what the op does (derived from its schema and tags, see
/// `summary`) and what the item is, as one first paragraph (the line rustdoc's
/// index shows), then the qualified schema.
pub(crate) fn op_doc(op: &plan::OpPlan, summary: &str) -> syn::Attribute {
    doc_attr(format!(
        "{}. {summary}\n\nSchema: `{}`",
        summary::op_summary(op.f, &op.op_name),
        op.qualified_schema
    ))
}

/// The doc of an item inside an operator's module: only what the item is. The
/// module's doc ([`op_doc`]) says what the op does and gives its schema, once per
/// op instead of once per item.
pub(crate) fn member_doc(what: &str) -> syn::Attribute {
    doc_attr(what.to_string())
}

/// The doc of an operator's free function: what the op does and `what`, pointing
/// to the module of the same name for the schema.
pub(crate) fn free_doc(op: &plan::OpPlan, what: &str) -> syn::Attribute {
    doc_attr(format!(
        "{}. {what}\n\nSchema, entry points and kernel adapters: the module `{}`.",
        summary::op_summary(op.f, &op.op_name),
        op.ident_str
    ))
}

/// Which of an operator's items an output holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpItems {
    /// Everything: the free function, `Sig`, `DEF`, the entry points, `Options`,
    /// the kernel adapters and derivations (the runtime's own operators).
    All,
    /// What registering kernels needs (`Sig`, `DEF`, `boxed`, `kernel`, the
    /// structured derivation), plus the entry points (`call`, `redispatch`) and the
    /// BackendSelect kernel when `entry_points` (ops that derivations or the
    /// dispatcher call): a backend carrying the items of ops it only registers.
    Registration { entry_points: bool },
}

/// Everything about one operator: its free function and its module.
pub(crate) fn op_item_list(cx: &Ctx, op: &plan::OpPlan) -> [syn::Item; 2] {
    let free = stubs::free_fn(cx, op);
    [free, op_module(cx, op, OpItems::All)]
}

/// The module of one operator, holding the items `which` selects.
fn op_module(cx: &Ctx, op: &plan::OpPlan, which: OpItems) -> syn::Item {
    let entry_points = match which {
        OpItems::All => true,
        OpItems::Registration { entry_points } => entry_points,
    };
    let mut items = vec![
        ast::use_item(&["super", "prelude", "*"]),
        ast::use_item(&["super", "support"]),
    ];
    signature::sig(cx, op, &mut items);
    items.push(registry::def(cx, op));
    if entry_points {
        stubs::entry(cx, op, &mut items);
    }
    if which == OpItems::All {
        options::options(cx, op, &mut items);
    }
    boxing::adapters(cx, op, &mut items);
    if entry_points {
        items.extend(backend_select::backend_select(cx, op));
    }
    items.extend(structured::structured(cx, op));
    let what = if entry_points {
        "The operator's typed signature (`Sig`), definition (`DEF`), entry points (`call`, `redispatch`) and kernel adapters (`boxed`, `kernel`)."
    } else {
        "The operator's typed signature (`Sig`), definition (`DEF`) and kernel adapters (`boxed`, `kernel`)."
    };
    syn::Item::Mod(syn::ItemMod {
        attrs: vec![op_doc(op, what)],
        vis: ast::public(),
        unsafety: None,
        mod_token: Default::default(),
        ident: op.ident(),
        content: Some((ast::brace(), items)),
        semi: None,
    })
}

/// The items `which` selects of one operator, as tokens (for the backend
/// generator, which carries op items).
pub(crate) fn op_items(cx: &Ctx, op: &plan::OpPlan, which: OpItems) -> TokenStream {
    match which {
        OpItems::All => {
            let mut tokens = TokenStream::new();
            for item in op_item_list(cx, op) {
                item.to_tokens(&mut tokens);
            }
            tokens
        }
        OpItems::Registration { .. } => op_module(cx, op, which).into_token_stream(),
    }
}

/// The module a generated file of `mod.rs` becomes, re-exported: it sees every name
/// of `mod.rs` as the file's items did when they were included straight into it, and
/// it carries the lint allowances of generated code once for the whole file (long
/// parameter lists, one per schema argument; PyTorch's names such as `mT`).
fn file_module(file: &str) -> TokenStream {
    let m = ident::ident(ident::file_module(file));
    quote! {
        #[allow(
            clippy::too_many_arguments,
            non_snake_case,
            reason = "one parameter per schema argument; operator and argument names from the schema"
        )]
        mod #m {
            use super::*;
            include!(#file);
        }
        pub use self::#m::*;
    }
}

/// Generates the whole output from a loaded model.
pub fn generate(nf: &NativeFunctions, opts: &EmitOptions) -> Result<Generated, Vec<EmitError>> {
    let plan = plan::plan(nf, &opts.namespace)?;
    let header = format!(
        "// @generated by opal-codegen from {} (namespace `{}`). Do not edit by hand.\n\n",
        opts.source, opts.namespace
    );
    // Syntax trees are not Send: each worker builds and formats its own files.
    // Job 0 is `mod.rs`, then one job per chunk of operators, then `methods.rs`.
    let chunks: Vec<&[plan::OpPlan]> = plan.ops.chunks(CHUNK).collect();
    let mut names: Vec<String> = vec!["mod.rs".to_string()];
    names.extend((0..chunks.len()).map(|i| format!("ops_{i:03}.rs")));
    names.push("methods.rs".to_string());
    let n = names.len();
    let runtime = &opts.runtime;
    let (planned, names_ref) = (&plan, &names);
    let bodies = format::parallel_map(n, |i| {
        let cx = Ctx::new(runtime);
        if i == 0 {
            let includes = names_ref[1..].iter().map(|n| file_module(n));
            let prelude = support::prelude(&cx);
            let support = support::support(&cx);
            let all = registry::def_all(&cx, planned);
            let tokens = quote! {
                #prelude
                use self::prelude::*;
                #support
                #all
                #(#includes)*
            };
            format_file(&header, tokens)
        } else if i < n - 1 {
            // One op at a time: its syntax tree stays small and in cache from being
            // built to being dropped.
            let mut out = String::with_capacity(1 << 20);
            out.push_str(&header);
            for o in chunks[i - 1] {
                format::append_items(op_item_list(&cx, o).into(), &mut out);
            }
            Ok(out)
        } else {
            Ok(format::format_items(
                &header,
                methods::tensor_ops(&cx, planned),
            ))
        }
    });
    let mut files = Vec::with_capacity(n);
    let mut errors = Vec::new();
    for (name, body) in names.into_iter().zip(bodies) {
        match body {
            Some(Ok(s)) => files.push((name, s)),
            Some(Err(e)) if name == "mod.rs" => errors.push(e),
            Some(Err(e)) => errors.push(format!("{name}: {e}")),
            None => errors.push(format!("{name}: generation failed")),
        }
    }
    if !errors.is_empty() {
        return Err(errors
            .into_iter()
            .map(|message| EmitError {
                message,
                loc: crate::model::Loc::SYNTHETIC,
                other: None,
            })
            .collect());
    }
    Ok(Generated {
        files,
        unsupported: plan.unsupported,
    })
}
