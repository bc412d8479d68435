//! Rust code from the model: small functions model -> `TokenStream`, one module per
//! output concern, assembled here into formatted files.
//!
//! Owns: the layout of the output (`mod.rs` with the shared items and one
//! `include!` per chunk of operators, `ops_NNN.rs` chunks, `methods.rs`), per-file
//! formatting with prettyplease (files in parallel) and byte-determinism.
//! Must not: read or write files (see `crate::builder`, `crate::cli::generate`),
//! decide Rust names or types (see `crate::ident`).
//!
//! Per operator `op` (identifier by the naming rule of `crate::ident`) the output has
//! a free function `op(required args)` and a module `op` with `Sig`, `DEF`, `call`,
//! `redispatch`, `boxed`, `kernel`, and when they apply `Options` + `with`,
//! `backend_select`, `structured`.

pub mod backend_select;
pub mod boxing;
pub mod defaults;
pub mod methods;
pub mod options;
pub mod plan;
pub mod registry;
pub mod signature;
pub mod structured;
pub mod stubs;
pub mod support;

use proc_macro2::TokenStream;
use quote::quote;

use crate::ident::{self, Types};
use crate::model::NativeFunctions;
pub use plan::{EmitError, Unsupported};

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
pub struct Ctx {
    pub types: Types,
    /// The runtime root path (`::opal` or `crate`), used only by the prelude.
    rt: TokenStream,
}

impl Ctx {
    pub fn new(runtime: &RuntimePath) -> Self {
        let rt = match runtime {
            RuntimePath::Opal => quote!(::opal),
            RuntimePath::Crate => quote!(crate),
        };
        Ctx { types: Types, rt }
    }

    /// The runtime root path.
    pub fn rt(&self) -> &TokenStream {
        &self.rt
    }

    /// The support module as seen from an op module.
    pub fn support(&self) -> TokenStream {
        quote!(support)
    }

    /// `#[allow(non_snake_case)]` for ops named like `mT` or with arguments named like
    /// `LU` (PyTorch's names are kept).
    pub fn non_snake(&self, op: &plan::OpPlan) -> TokenStream {
        if ident::needs_non_snake_allow(&op.ident_str)
            || op
                .args
                .iter()
                .any(|a| ident::needs_non_snake_allow(&a.name))
        {
            quote!(#[allow(non_snake_case, reason = "operator and argument names from the schema")])
        } else {
            quote!()
        }
    }
}

/// Prefix of the placeholder doc attributes replaced after formatting.
const DOC_MARK: &str = "@@opal-doc:";

thread_local! {
    /// Doc texts of the file being built on this thread, by placeholder index.
    static DOCS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Doc comment for an item. Emitted as a short placeholder attribute and replaced by
/// the text, one `///` line per line, after prettyplease has formatted the file:
/// prettyplease prints doc comments verbatim, so the result is what it would print
/// for the full attributes, without parsing and printing every doc string twice.
pub fn doc(text: &str) -> TokenStream {
    let i = DOCS.with(|d| {
        let mut d = d.borrow_mut();
        d.push(text.to_string());
        d.len() - 1
    });
    let mark = format!(" {DOC_MARK}{i}");
    quote!(#[doc = #mark])
}

/// Replaces the doc placeholders of a formatted file (consuming this thread's docs).
fn expand_docs(formatted: &str) -> String {
    let docs = DOCS.with(|d| std::mem::take(&mut *d.borrow_mut()));
    let mut out =
        String::with_capacity(formatted.len() + docs.iter().map(|d| d.len() + 16).sum::<usize>());
    for line in formatted.lines() {
        let trimmed = line.trim_start();
        let text = trimmed
            .strip_prefix("/// ")
            .and_then(|r| r.strip_prefix(DOC_MARK))
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|i| docs.get(i));
        match text {
            Some(text) => {
                let indent = &line[..line.len() - trimmed.len()];
                for l in text.lines() {
                    out.push_str(indent);
                    out.push_str("///");
                    if !l.is_empty() {
                        out.push(' ');
                        out.push_str(l);
                    }
                    out.push('\n');
                }
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// An item's doc: a summary line, then the qualified schema.
pub fn op_doc(op: &plan::OpPlan, summary: &str) -> TokenStream {
    doc(&format!("{summary}\n\nSchema: `{}`", op.qualified_schema))
}

/// Everything about one operator: its free function and its module.
pub fn op_items(cx: &Ctx, op: &plan::OpPlan) -> TokenStream {
    let id = op.ident();
    let free = stubs::free_fn(cx, op);
    let sig = signature::sig(cx, op);
    let def = registry::def(cx, op);
    let entry = stubs::entry(cx, op);
    let options = options::options(cx, op);
    let adapters = boxing::adapters(cx, op);
    let bs = backend_select::backend_select(cx, op);
    let st = structured::structured(cx, op);
    let snake = cx.non_snake(op);
    let doc = op_doc(
        op,
        "The operator's typed signature (`Sig`), definition (`DEF`), entry points (`call`, `redispatch`) and kernel adapters (`boxed`, `kernel`).",
    );
    quote! {
        #free

        #doc
        #snake
        pub mod #id {
            use super::prelude::*;
            use super::support;

            #sig
            #def
            #entry
            #options
            #adapters
            #bs
            #st
        }
    }
}

/// Formats one file's tokens with prettyplease, behind the generated-file header.
pub fn format_file(header: &str, tokens: TokenStream) -> Result<String, String> {
    let file: syn::File = match syn::parse2(tokens) {
        Ok(f) => f,
        Err(e) => {
            DOCS.with(|d| d.borrow_mut().clear());
            return Err(format!("generated code does not parse: {e}"));
        }
    };
    let mut out = String::with_capacity(64 * 1024);
    out.push_str(header);
    out.push_str(&expand_docs(&prettyplease::unparse(&file)));
    Ok(out)
}

/// Generates the whole output from a loaded model.
pub fn generate(nf: &NativeFunctions, opts: &EmitOptions) -> Result<Generated, Vec<EmitError>> {
    let plan = plan::plan(nf, &opts.namespace)?;
    let cx = Ctx::new(&opts.runtime);
    let header = format!(
        "// @generated by opal-codegen from {} (namespace `{}`). Do not edit by hand.\n\n",
        opts.source, opts.namespace
    );
    // Token streams are not Send: each worker builds and formats its own files.
    let chunks: Vec<&[plan::OpPlan]> = plan.ops.chunks(CHUNK).collect();
    let mut names: Vec<String> = (0..chunks.len())
        .map(|i| format!("ops_{i:03}.rs"))
        .collect();
    names.push("methods.rs".to_string());
    let includes = names.iter().map(|n| quote!(include!(#n);));
    let runtime = opts.runtime.clone();
    let build = |i: usize| -> Result<String, String> {
        let cx = Ctx::new(&runtime);
        let tokens = if i < chunks.len() {
            let items = chunks[i].iter().map(|o| op_items(&cx, o));
            quote!(#(#items)*)
        } else {
            methods::tensor_ops(&cx, &plan)
        };
        format_file(&header, tokens)
    };
    let n = names.len();
    let workers = std::thread::available_parallelism()
        .map(|p| p.get())
        .unwrap_or(1)
        .clamp(1, 8);
    let mut bodies: Vec<Option<Result<String, String>>> = vec![None; n];
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let build = &build;
                s.spawn(move || {
                    (w..n)
                        .step_by(workers)
                        .map(|i| (i, build(i)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            match h.join() {
                Ok(done) => {
                    for (i, r) in done {
                        bodies[i] = Some(r);
                    }
                }
                Err(_) => {
                    // A worker panicked: report it as an error for its files below.
                }
            }
        }
    });
    let prelude = support::prelude(&cx);
    let support = support::support(&cx);
    let all = registry::def_all(&cx, &plan);
    let root = quote! {
        #prelude
        use self::prelude::*;
        #support
        #all
        #(#includes)*
    };
    let mut files = Vec::with_capacity(n + 1);
    let mut errors = Vec::new();
    match format_file(&header, root) {
        Ok(s) => files.push(("mod.rs".to_string(), s)),
        Err(e) => errors.push(e),
    }
    for (name, body) in names.into_iter().zip(bodies) {
        match body {
            Some(Ok(s)) => files.push((name, s)),
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
