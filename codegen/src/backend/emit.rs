//! Rust code for one backend: the kernel trait (one associated fn per supported op,
//! typed, pinned signature where pinned), the fallback helpers, the
//! defaulted-argument adapters for pinned kernels, the registration function for the
//! backend's dispatch key, and (on request) a starter implementation.
//!
//! The output is self-contained: it carries its own copy of the per-op items
//! (`Sig`, `DEF`, `kernel`, `structured`, ...) of the ops it registers, emitted by
//! `crate::emit`, so it compiles against any native YAML and names the runtime only
//! by absolute paths (`::opal::...`).
//!
//! Owns: the backend-specific items. Must not: name things (`crate::ident`), or
//! re-implement per-op emission (`crate::emit`).

use std::collections::{HashMap, HashSet};

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use crate::diagnostics::Diagnostic;
use crate::emit::defaults::Value;
use crate::emit::plan::{self as eplan, ArgPlan, OpPlan};
use crate::emit::signature::{many_args_allow, names, params};
use crate::emit::{self, Ctx, RuntimePath};
use crate::model::{
    Argument, FunctionSchema, NativeFunction, NativeFunctions, OperatorName, Origin, SchemaKind,
};

use super::bodies;
use super::compat::Compat;
use super::plan::Plan;
use super::report::BackendDiagnostic;
use super::spec::{BackendKey, BackendSpec, FallbackPolicy};

/// Trait methods that move data for the CPU fallback (reserved: no op may map to
/// these names).
pub const TRANSFER_TO_CPU: &str = "transfer_to_cpu";
/// See [`TRANSFER_TO_CPU`].
pub const TRANSFER_FROM_CPU: &str = "transfer_from_cpu";

/// File name of the starter implementation written by `--init-skeleton`.
pub const SKELETON_FILE: &str = "kernels.rs";

/// What to generate besides the items every backend gets.
#[derive(Clone, Debug, Default)]
pub struct BackendEmitOptions {
    /// Shown in the header (where the backend YAML came from).
    pub backend_source: String,
    /// Shown in the header (where the native YAML came from).
    pub native_source: String,
    /// Declare `pub mod kernels;` (the starter implementation) in the output.
    pub with_skeleton_mod: bool,
    /// Also produce the starter implementation ([`BackendCode::skeleton`]).
    pub skeleton: bool,
    /// Where the per-op items of the native YAML already exist (`::opal::ops` when
    /// the native YAML is the one `opal` itself was generated from). `None`: the
    /// output carries its own copy of the per-op items of the ops it registers, so it
    /// compiles for any native YAML.
    pub ops_path: Option<String>,
}

/// The generated code: `mod.rs` (the whole backend module) and, when asked for, the
/// starter implementation (written only on request, never over an existing file).
#[derive(Clone, Debug)]
pub struct BackendCode {
    pub module: String,
    pub skeleton: Option<String>,
}

/// The name of the kernel trait of a backend (`Emu` -> `EmuKernels`).
pub fn trait_name(backend: &str) -> String {
    format!("{backend}Kernels")
}

fn err(loc: crate::model::Loc, code: &'static str, msg: String) -> BackendDiagnostic {
    Diagnostic::new(code, loc, msg).into()
}

/// One supported op, ready for emission.
struct Entry<'p> {
    /// The current schema's plan (what is registered).
    cur: &'p OpPlan<'p>,
    /// The kernel's plan (the pinned schema's when pinned, else `cur`).
    ker: &'p OpPlan<'p>,
    compat: &'p Compat,
    /// An `autograd:` op: the trait fn is `autograd_<op>`, registered at the
    /// backend's autograd key.
    autograd: bool,
    /// The kernel function the YAML names (the trait fn forwards to it).
    kernel: Option<&'p str>,
    /// For an autogen `out=` op with no named kernel, in a backend with `out_copy:`:
    /// the index in the entries of its functional op (the trait fn derives from it).
    autogen_from: Option<usize>,
}

impl Entry<'_> {
    /// The trait fn's name.
    fn fn_ident(&self) -> proc_macro2::Ident {
        if self.autograd {
            format_ident!("autograd_{}", self.cur.ident_str)
        } else {
            self.cur.ident()
        }
    }
}

/// Generates the backend module.
pub fn generate(
    spec: &BackendSpec,
    natives: &NativeFunctions,
    plan: &Plan<'_>,
    opts: &BackendEmitOptions,
) -> Result<BackendCode, Vec<BackendDiagnostic>> {
    let ns = spec.namespace.value.as_str();
    // Plan only the functions this output touches: the supported ops, the ops
    // derived from them, and the siblings a derivation calls (same delegate).
    let mut wanted: HashSet<&OperatorName> = plan
        .ops
        .iter()
        .chain(&plan.autograd)
        .map(|o| &o.func.func.name)
        .collect();
    let delegates: HashSet<&OperatorName> = plan
        .derived
        .iter()
        .filter_map(|d| d.func.structured_delegate.as_ref())
        .collect();
    wanted.extend(plan.derived.iter().map(|d| &d.func.func.name));
    let reduced: Vec<&NativeFunction> = natives
        .functions
        .iter()
        .filter(|f| {
            wanted.contains(&f.func.name)
                || f.structured_delegate
                    .as_ref()
                    .is_some_and(|d| delegates.contains(d))
        })
        .collect();
    let full = eplan::plan_functions(reduced.into_iter(), ns).map_err(|es| {
        es.into_iter()
            .map(|e| err(spec.backend.loc, "opal::backend::native", e.message))
            .collect::<Vec<_>>()
    })?;
    let by_name: HashMap<&str, usize> = full
        .ops
        .iter()
        .enumerate()
        .map(|(i, o)| (o.op_name.as_str(), i))
        .collect();
    let mut errors = Vec::new();

    // Pinned schemas get plans of their own (names and types of the kernel).
    let pinned_fns: Vec<NativeFunction> = plan
        .ops
        .iter()
        .filter_map(|o| {
            o.pinned.map(|p| NativeFunction {
                func: p.clone(),
                ..o.func.clone()
            })
        })
        .collect();
    let pinned_nf = NativeFunctions {
        functions: pinned_fns,
        known_tags: Vec::new(),
    };
    let pinned_plan = eplan::plan(&pinned_nf, ns).map_err(|es| {
        es.into_iter()
            .map(|e| err(e.loc, "opal::backend::pinned", e.message))
            .collect::<Vec<_>>()
    })?;
    for u in &pinned_plan.unsupported {
        errors.push(err(
            u.loc,
            "opal::backend::unsupported_op",
            format!(
                "the pinned schema of '{}' cannot be expressed in Rust: {}",
                u.op, u.reason
            ),
        ));
    }
    let pinned_by_name: HashMap<&str, &OpPlan> = pinned_plan
        .ops
        .iter()
        .map(|o| (o.op_name.as_str(), o))
        .collect();

    let mut entries: Vec<Entry> = Vec::new();
    let tagged = plan.ops.iter().map(|o| (o, false));
    for (o, autograd) in tagged.chain(plan.autograd.iter().map(|o| (o, true))) {
        let name = o.func.func.name.to_string();
        let Some(&i) = by_name.get(name.as_str()) else {
            let why = full
                .unsupported
                .iter()
                .find(|u| u.op == name)
                .map_or("unknown reason".to_string(), |u| u.reason.clone());
            errors.push(err(
                o.loc,
                "opal::backend::unsupported_op",
                format!("'{name}' cannot be expressed in Rust: {why}"),
            ));
            continue;
        };
        let cur = &full.ops[i];
        if cur.ident_str == TRANSFER_TO_CPU || cur.ident_str == TRANSFER_FROM_CPU {
            errors.push(err(
                o.loc,
                "opal::backend::reserved_name",
                format!(
                    "'{name}' maps to the Rust name `{}`, which the kernel trait reserves",
                    cur.ident_str
                ),
            ));
            continue;
        }
        let ker = match o.pinned {
            Some(_) => match pinned_by_name.get(name.as_str()) {
                Some(p) => *p,
                None => continue, // reported as unsupported above
            },
            None => cur,
        };
        if let Some(k) = o.kernel {
            if let Err(e) = bodies::kernel_path(&k.value) {
                errors.push(err(k.loc, "opal::backend::bad_kernel_path", e));
            }
        }
        entries.push(Entry {
            cur,
            ker,
            compat: &o.compat,
            autograd,
            kernel: o.kernel.map(|k| k.value.as_str()),
            autogen_from: None,
        });
    }
    if let Some(copy) = &spec.out_copy {
        if let Err(e) = bodies::kernel_path(&copy.value) {
            errors.push(err(copy.loc, "opal::backend::bad_kernel_path", e));
        }
        link_autogen_outs(&mut entries);
    }
    if !errors.is_empty() {
        return Err(errors);
    }

    // Derived structured ops whose derivation the emitter supports, and the ops
    // their derivation calls.
    let mut derived: Vec<&OpPlan> = Vec::new();
    for d in &plan.derived {
        let name = d.func.func.name.to_string();
        if let Some(&i) = by_name.get(name.as_str()) {
            if full.ops[i].structured.is_some() {
                derived.push(&full.ops[i]);
            }
        }
    }
    if let Some(path) = &opts.ops_path {
        syn::parse_str::<syn::Path>(path).map_err(|e| {
            vec![err(
                spec.backend.loc,
                "opal::backend::ops_path",
                format!("`{path}` is not a Rust path: {e}"),
            )]
        })?;
    }
    let parts = Parts {
        spec,
        opts,
        ns,
        entries: &entries,
        derived: &derived,
        carried: &full.ops,
        ops_path: opts.ops_path.as_deref(),
    };
    let header = format!(
        "// @generated by opal-codegen from {} against {} (backend `{}`, {}, device `{}`, fallback {}). Do not edit by hand.\n\n",
        opts.backend_source,
        opts.native_source,
        spec.backend.value,
        spec.dispatch_key.value.as_str(),
        spec.device.value,
        spec.fallback.value.as_str()
    );
    // The module's top-level items in three groups, built and formatted in parallel.
    let module = emit::format::format_parts(&header, 3, |i| match i {
        0 => parts.ops_module(),
        1 => parts.kernel_trait(),
        _ => parts.registration(),
    })
    .map_err(|e| vec![err(spec.backend.loc, "opal::backend::emit", e)])?;
    let skeleton = if opts.skeleton {
        let cx = Ctx::new(&RuntimePath::Opal);
        let trait_id = format_ident!("{}", trait_name(&spec.backend.value));
        Some(
            skeleton(&cx, spec, &entries, &trait_id)
                .map_err(|e| vec![err(spec.backend.loc, "opal::backend::emit", e)])?,
        )
    } else {
        None
    };
    Ok(BackendCode { module, skeleton })
}

/// What the groups of the backend module are built from (shared by the worker
/// threads: token streams are not `Send`, so each group is built where it is
/// formatted).
struct Parts<'a, 'p> {
    spec: &'a BackendSpec,
    opts: &'a BackendEmitOptions,
    ns: &'a str,
    entries: &'a [Entry<'p>],
    derived: &'a [&'p OpPlan<'p>],
    /// Every planned op (carried in `mod ops` when there is no `ops_path`).
    carried: &'a [OpPlan<'p>],
    /// [`BackendEmitOptions::ops_path`], known to parse.
    ops_path: Option<&'a str>,
}

impl Parts<'_, '_> {
    fn trait_id(&self) -> proc_macro2::Ident {
        format_ident!("{}", trait_name(&self.spec.backend.value))
    }

    fn cpu_fallback(&self) -> bool {
        self.spec.fallback.value == FallbackPolicy::Cpu
    }

    /// The prelude import and `mod ops` (a re-export of `ops_path`, or the carried
    /// per-op items).
    fn ops_module(&self) -> TokenStream {
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
                let op_items = self.carried.iter().map(|o| emit::op_items(&cx, o));
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
                    /// definitions (`DEF`), entry points and kernel adapters, generated from the
                    /// native YAML.
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

    /// The constants and the kernel trait.
    fn kernel_trait(&self) -> TokenStream {
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

    /// The fallback helpers, the adapters, the CPU-fallback transfer, `register` and
    /// the `kernels` module declaration.
    fn registration(&self) -> TokenStream {
        let cx = Ctx::new(&RuntimePath::Opal);
        let (spec, entries) = (self.spec, self.entries);
        let b = &spec.backend.value;
        let key_name = spec.dispatch_key.value.as_str();
        let device = &spec.device.value;
        let trait_id = self.trait_id();
        let cpu_fallback = self.cpu_fallback();
        let fallback_mod = if cpu_fallback {
            fallback_module(entries)
        } else {
            quote!()
        };
        let adapters = adapters_module(&cx, entries, spec);
        // Registration.
        let autograd_key = format_ident!("{}", spec.dispatch_key.value.autograd_key());
        let impls = entries.iter().map(|e| {
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
        let rename = if spec.dispatch_key.value.is_private_use() {
            quote!(::opal::register_privateuse_backend(DISPATCH_KEY, DEVICE)?;)
        } else {
            quote!()
        };
        let fallback_reg = if cpu_fallback {
            let ty = device_type(spec.dispatch_key.value);
            quote! {
                ::opal::fallback::register_transfer(
                    ::opal::DeviceType::#ty,
                    ::std::boxed::Box::leak(::std::boxed::Box::new(Transfer::<K>(::std::marker::PhantomData))),
                );
                lib.fallback(::opal::fallback::kernel())?;
            }
        } else {
            quote!()
        };
        let transfer_struct = if cpu_fallback {
            quote! {
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
            }
        } else {
            quote!()
        };
        let n_native = entries.len();
        let n_derived = self.derived.len();
        let reg_doc = emit::doc(&format!(
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
        ));
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
                #(#derived_impls)*
                #fallback_reg
                ::std::result::Result::Ok(lib)
            }

            #skeleton_mod
        }
    }
}

fn device_type(k: BackendKey) -> proc_macro2::Ident {
    format_ident!(
        "{}",
        match k {
            BackendKey::Cpu => "Cpu",
            BackendKey::Meta => "Meta",
            BackendKey::PrivateUse1 => "PrivateUse1",
            BackendKey::PrivateUse2 => "PrivateUse2",
            BackendKey::PrivateUse3 => "PrivateUse3",
        }
    )
}

/// `Result<R>` of an op with several returns spelled as the tuple itself: the
/// backend's items live outside the op modules, where their `Output` alias is not in
/// scope.
fn ret(cx: &Ctx, op: &OpPlan) -> TokenStream {
    cx.types.result(cx.types.returns(op.return_types()))
}

/// Points each autogen `out=` entry without a kernel of its own at the entry of its
/// functional op, when the backend supports that op. The `autogen:` list may sit on
/// the in-place variant (`relu_` lists `relu.out`), so the functional op is found by
/// name and schema: same base name, the overload less its `out`/`_out` suffix,
/// functional kind, every non-`out` argument of the `out=` op present, and only
/// optional arguments besides.
fn link_autogen_outs(entries: &mut [Entry]) {
    let links: Vec<(usize, usize)> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| !e.autograd && e.kernel.is_none())
        .filter(|(_, e)| matches!(e.cur.f.origin, Origin::Autogen { .. }))
        .filter_map(|(i, e)| {
            let out = &e.cur.f.func;
            entries
                .iter()
                .position(|c| !c.autograd && is_functional_of(&c.cur.f.func, out))
                .map(|j| (i, j))
        })
        .collect();
    for (i, j) in links {
        entries[i].autogen_from = Some(j);
    }
}

/// Whether `functional` is the functional form of the `out=` schema `out`.
fn is_functional_of(functional: &FunctionSchema, out: &FunctionSchema) -> bool {
    // `relu.out` is the out= form of `relu`, `masked_fill.Scalar_out` of
    // `masked_fill.Scalar`.
    let overload = out.name.overload_name.as_str();
    let functional_overload = overload
        .strip_suffix("_out")
        .unwrap_or(if overload == "out" { "" } else { overload });
    if functional.kind() != SchemaKind::Functional
        || functional.name.name.base != out.name.name.base
        || functional.name.overload_name != functional_overload
    {
        return false;
    }
    let f_args: Vec<&Argument> = functional.arguments.all().collect();
    let inputs_present = out
        .arguments
        .all()
        .filter(|a| !out.arguments.out.iter().any(|o| o.name == a.name))
        .all(|a| f_args.iter().any(|f| f.name == a.name && f.ty == a.ty));
    let extras_optional = f_args
        .iter()
        .filter(|f| !out.arguments.all().any(|a| a.name == f.name))
        .all(|f| f.ty.is_optional());
    inputs_present && extras_optional
}

/// The body of a provided trait fn: forwarding to the named kernel, or the autogen
/// `out=` rule; `None` leaves the fn for the backend to implement.
fn provided_body(e: &Entry, entries: &[Entry], out_copy: Option<&str>) -> Option<TokenStream> {
    if let Some(k) = e.kernel {
        // Checked by `generate`.
        let path = bodies::kernel_path(k).ok()?;
        return Some(bodies::forward(&path, &e.ker.args, e.autograd));
    }
    let from = &entries[e.autogen_from?];
    let copy = bodies::kernel_path(out_copy?).ok()?;
    bodies::autogen_out(e.ker, &from.fn_ident(), from.ker, &copy)
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

/// `fallback`: per supported op, the CPU fallback with the kernel's signature
/// (added arguments at their defaults), and in `fallback::full`, for adapted ops,
/// with the current one.
fn fallback_module(entries: &[Entry]) -> TokenStream {
    let cx = Ctx::new(&RuntimePath::Opal);
    let boxed_call = |e: &Entry, path: TokenStream| {
        let id = e.cur.ident();
        let ns = names(e.cur.args.iter());
        quote! {
            ::opal::fallback::call(&#path::ops::#id::DEF, ks, ::std::vec![#(#ns.into_ivalue()),*])
        }
    };
    let full_fns: Vec<TokenStream> = entries
        .iter()
        .filter(|e| matches!(e.compat, Compat::Adapter { .. }))
        .map(|e| {
            let id = e.cur.ident();
            let ps = params(&cx, e.cur.args.iter());
            let ret = ret(&cx, e.cur);
            let allow = many_args_allow(ps.len() + 1);
            let body = boxed_call(e, quote!(super::super));
            let doc = emit::doc(&format!(
                "`{}` on the CPU, every argument of: `{}`",
                e.cur.qualified, e.cur.schema
            ));
            quote! {
                #doc
                #allow
                pub fn #id(ks: DispatchKeySet, #(#ps),*) -> #ret {
                    #body
                }
            }
        })
        .collect();
    let ker_fns: Vec<TokenStream> = entries
        .iter()
        .filter(|e| !std::ptr::eq(e.cur, e.ker))
        .map(|e| {
            let id = e.cur.ident();
            let ps = params(&cx, e.ker.args.iter());
            let ret = ret(&cx, e.ker);
            let allow = many_args_allow(ps.len() + 1);
            let body = match e.compat {
                Compat::Identical => boxed_call(e, quote!(super)),
                Compat::Adapter { .. } => {
                    let args = current_args(e);
                    quote!(self::full::#id(ks, #(#args),*))
                }
            };
            let doc = emit::doc(&format!(
                "`{}` on the CPU, with the kernel's signature: `{}`",
                e.cur.qualified, e.ker.schema
            ));
            quote! {
                #doc
                #allow
                pub fn #id(ks: DispatchKeySet, #(#ps),*) -> #ret {
                    #body
                }
            }
        })
        .collect();
    // An empty module imports nothing (an unused import warns under deny(warnings)).
    let prelude = (!ker_fns.is_empty()).then(|| {
        quote!(
            use super::ops::prelude::*;
        )
    });
    let full_prelude = (!full_fns.is_empty()).then(|| {
        quote!(
            use super::super::ops::prelude::*;
        )
    });
    quote! {
        /// The CPU fallback for the pinned ops, with each kernel's own signature, so a
        /// kernel can hand cases it does not handle (an unsupported dtype, say) to the
        /// CPU and keep doing so unchanged when its op gains defaulted arguments. (Any
        /// op: `::opal::fallback::call(&ops::<op>::DEF, ks, <boxed arguments>)`.)
        #[allow(dead_code, non_snake_case, reason = "kernels call the helpers they need; names follow operator names")]
        pub mod fallback {
            #prelude

            #(#ker_fns)*

            /// The same with the current schema's arguments, for adapted ops (what an
            /// adapter calls for argument values its pinned kernel predates).
            pub mod full {
                #full_prelude

                #(#full_fns)*
            }
        }
    }
}

/// The current schema's arguments, from a scope holding the kernel's parameters:
/// added arguments at their defaults.
fn current_args(e: &Entry) -> Vec<TokenStream> {
    let added: Vec<&str> = match e.compat {
        Compat::Adapter { added } => added.iter().map(|a| a.name.as_str()).collect(),
        Compat::Identical => Vec::new(),
    };
    e.cur
        .args
        .iter()
        .map(|a| {
            if added.contains(&a.arg.name.as_str()) {
                match &a.default {
                    Some(v) => emit::defaults::arg_expr(a.ty(), v),
                    None => quote!(::std::compile_error!("added argument without default")),
                }
            } else {
                let id = a.ident();
                quote!(#id)
            }
        })
        .collect()
}

/// `x == default` (or, with `negate`, `x != default`) for an added argument, in
/// its borrowed form, written the way clippy wants it.
fn default_test(a: &ArgPlan, v: &Value, negate: bool) -> TokenStream {
    let id = a.ident();
    let empty = |v: &Value| match v {
        Value::IntList(x) => x.is_empty(),
        Value::FloatList(x) => x.is_empty(),
        Value::BoolList(x) => x.is_empty(),
        Value::StrList(x) => x.is_empty(),
        _ => false,
    };
    match (v, negate) {
        (Value::None, false) => quote!(#id.is_none()),
        (Value::None, true) => quote!(#id.is_some()),
        (Value::Bool(b), _) if !a.ty().is_optional() => {
            if *b != negate {
                quote!(#id)
            } else {
                quote!(!#id)
            }
        }
        (v, _) if empty(v) => {
            let t = if a.ty().is_optional() {
                quote!(#id.is_some_and(|__v| __v.is_empty()))
            } else {
                quote!(#id.is_empty())
            };
            if negate {
                quote!(!#t)
            } else {
                t
            }
        }
        (v, false) => {
            let e = emit::defaults::arg_expr(a.ty(), v);
            quote!(#id == #e)
        }
        (v, true) => {
            let e = emit::defaults::arg_expr(a.ty(), v);
            quote!(#id != #e)
        }
    }
}

/// `adapters`: per pinned op with added defaulted arguments, the current-schema
/// kernel that runs the old kernel when the defaults are passed.
fn adapters_module(cx: &Ctx, entries: &[Entry], spec: &BackendSpec) -> TokenStream {
    let trait_id = format_ident!("{}", trait_name(&spec.backend.value));
    let b = &spec.backend.value;
    let cpu = spec.fallback.value == FallbackPolicy::Cpu;
    let fns: Vec<TokenStream> = entries
        .iter()
        .filter_map(|e| {
            let Compat::Adapter { added } = e.compat else {
                return None;
            };
            let id = e.cur.ident();
            let ps = params(cx, e.cur.args.iter());
            let ret = ret(cx, e.cur);
            let allow = many_args_allow(ps.len() + 1);
            let snake = cx.non_snake(e.cur);
            let old_args = names(e.ker.args.iter());
            let all_args = names(e.cur.args.iter());
            let added_plans: Vec<(&ArgPlan, &Value)> = added
                .iter()
                .filter_map(|ad| {
                    let a = e.cur.args.iter().find(|a| a.arg.name == ad.name)?;
                    Some((a, a.default.as_ref()?))
                })
                .collect();
            let checks: Vec<TokenStream> = added_plans
                .iter()
                .map(|(a, v)| default_test(a, v, false))
                .collect();
            let other = if cpu {
                quote!(super::fallback::full::#id(ks, #(#all_args),*))
            } else {
                // Name the first argument that is not at its default.
                let arms = added_plans.iter().map(|(a, v)| {
                    let differs = default_test(a, v, true);
                    let aid = a.ident();
                    let msg = format!(
                        "'{}': argument '{}' = {{:?}} is not supported by backend {b}: its kernel \
                         was written against `{}`, which predates '{}' (only the default {} runs \
                         there), and the backend has no fallback",
                        e.cur.qualified,
                        a.arg.name,
                        e.ker.schema,
                        a.arg.name,
                        a.arg.default.as_deref().unwrap_or("?")
                    );
                    quote! {
                        if #differs {
                            return ::std::result::Result::Err(::opal::OpalError::msg(::std::format!(#msg, #aid)));
                        }
                    }
                });
                quote! {{
                    #(#arms)*
                    ::std::result::Result::Err(::opal::OpalError::msg("unreachable: adapter without a non-default argument"))
                }}
            };
            let doc = emit::doc(&format!(
                "Adapter of the pinned kernel of `{}`: current schema `{}`, kernel written \
                 against `{}`.",
                e.cur.qualified, e.cur.schema, e.ker.schema
            ));
            Some(quote! {
                #doc
                #allow
                #snake
                #[inline]
                pub fn #id<K: #trait_id>(ks: DispatchKeySet, #(#ps),*) -> #ret {
                    if #(#checks)&&* {
                        K::#id(ks, #(#old_args),*)
                    } else {
                        #other
                    }
                }
            })
        })
        .collect();
    if fns.is_empty() {
        return quote!();
    }
    quote! {
        /// Defaulted-argument adapters: kernels for the current schemas that run the
        /// pinned kernels when every argument they predate holds its default.
        #[allow(non_snake_case, reason = "adapter names follow operator names")]
        pub mod adapters {
            use super::ops::prelude::*;
            use super::#trait_id;

            #(#fns)*
        }
    }
}

/// The starter implementation (`kernels.rs`).
fn skeleton(
    cx: &Ctx,
    spec: &BackendSpec,
    entries: &[Entry],
    trait_id: &proc_macro2::Ident,
) -> Result<String, String> {
    let b = &spec.backend.value;
    let ty = format_ident!("{}", b);
    let out_copy = spec.out_copy.as_ref().map(|c| c.value.as_str());
    // Fns the trait provides (named kernels, autogen out= ops) need no starter.
    let required = entries
        .iter()
        .filter(|e| provided_body(e, entries, out_copy).is_none());
    let fns = required.map(|e| {
        let id = e.fn_ident();
        let ps = e.ker.args.iter().map(|a| {
            let name = format_ident!("_{}", a.ident().to_string().trim_start_matches("r#"));
            let t = cx.types.arg(a.ty());
            quote!(#name: #t)
        });
        let ret = ret(cx, e.ker);
        let allow = many_args_allow(e.ker.args.len() + 1);
        let snake = cx.non_snake(e.cur);
        let q = &e.cur.qualified;
        quote! {
            #allow
            #snake
            fn #id(_ks: DispatchKeySet, #(#ps),*) -> #ret {
                ::std::result::Result::Err(OpalError::not_implemented(#q, #b))
            }
        }
    });
    let transfer = if spec.fallback.value == FallbackPolicy::Cpu {
        quote! {
            fn transfer_to_cpu(_src: &Tensor) -> Result<Tensor> {
                ::std::result::Result::Err(OpalError::not_implemented("transfer_to_cpu", #b))
            }
            fn transfer_from_cpu(_src: &Tensor, _dst: &Tensor) -> Result<()> {
                ::std::result::Result::Err(OpalError::not_implemented("transfer_from_cpu", #b))
            }
        }
    } else {
        quote!()
    };
    let ty_doc = emit::doc(&format!("The kernels of backend `{b}`."));
    let tokens = quote! {
        use super::ops::prelude::*;

        #ty_doc
        pub struct #ty;

        #[allow(non_snake_case, reason = "kernel names follow operator names")]
        impl super::#trait_id for #ty {
            #(#fns)*
            #transfer
        }

        /// Registers the backend for the rest of the process.
        pub fn init() -> Result<()> {
            super::register::<#ty>()?.leak();
            ::std::result::Result::Ok(())
        }
    };
    let header = format!(
        "// Starter kernels for backend `{b}`, written once by `opal-codegen backend --init-skeleton`.\n\
         // This file is yours: the generator never overwrites it. Each kernel returns a\n\
         // NotImplemented error until you write it.\n\n"
    );
    emit::format_file(&header, tokens)
}

#[cfg(test)]
mod tests {
    use super::trait_name;

    #[test]
    fn names() {
        assert_eq!(trait_name("Emu"), "EmuKernels");
    }
}
