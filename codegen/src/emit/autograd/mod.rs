//! Autograd kernels from `derivatives.yaml`: one kernel per entry, registered at the
//! `Autograd` alias key so every backend's tensors get it.
//!
//! A kernel runs the op below the autograd keys, and when grad mode is on and an
//! input requires grad, records a backward node (`autograd::record`) that saves
//! only what the entry's backward formulas read: the inputs and outputs they name
//! (as `SavedTensor`s, checked against in-place changes) and the non-tensor
//! arguments (cloned). The node computes only the gradients of inputs that need
//! one. Each formula is translated by `formula`; one that does not translate is an
//! error located in the derivatives file, so the build stops naming it.
//!
//! Owns: the layout of the generated `autograd.rs` and what a kernel saves (the
//! order of its body is `kernel`'s). Must not: parse formulas (see
//! `crate::derivatives`) or decide Rust names and types of arguments (see
//! `crate::ident`).

mod formula;
mod kernel;
mod types;

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use crate::derivatives::model::{Body, DerivativeEntry, Derivatives, Formula};
use crate::diagnostics::Diagnostic;
use crate::emit::plan::{self, OpPlan};
use crate::emit::{format_file, Ctx, RuntimePath};
use crate::ident::{Passing, Types};
use crate::model::{BaseTy, NativeFunctions, Type};
use formula::{helper_table, NativeIndex, Scope};
use types::{Ty, Val};

/// The generated `autograd.rs`: one kernel per entry and `register`.
pub fn generate(
    native: &NativeFunctions,
    derivs: &Derivatives,
    namespace: &str,
    runtime: &RuntimePath,
    source: &str,
) -> Result<String, Vec<Diagnostic>> {
    let cx = Ctx::new(runtime);
    let plan = plan::plan(native, namespace).map_err(|errs| {
        errs.into_iter()
            .map(|e| Diagnostic::new("opal::autograd_plan", e.loc, e.message))
            .collect::<Vec<_>>()
    })?;
    let ops: BTreeMap<&str, &OpPlan> = plan.ops.iter().map(|o| (o.op_name.as_str(), o)).collect();
    let index = NativeIndex::new(native);
    let helpers = helper_table().map_err(|e| {
        vec![Diagnostic::new(
            "opal::autograd_helper",
            Default::default(),
            e,
        )]
    })?;
    let mut errs = Vec::new();
    let mut kernels = Vec::new();
    let mut regs = Vec::new();
    let mut node_names: BTreeMap<String, usize> = BTreeMap::new();
    for entry in &derivs.entries {
        let name = entry.schema.name.to_string();
        let Some(op) = ops.get(name.as_str()) else {
            errs.push(
                Diagnostic::new(
                    "opal::autograd_no_op",
                    entry.schema.loc,
                    format!("`{name}` has no generated operator to differentiate"),
                )
                .hint("the operator is missing from native_functions.yaml or cannot be expressed in Rust"),
            );
            continue;
        };
        let camel = camel(&entry.schema.name.name.base);
        let n = node_names.entry(camel.clone()).or_insert(0);
        let node = format!("{camel}Backward{n}");
        *n += 1;
        // The functional op, and its in-place variant (`add_.Tensor` for
        // `add.Tensor`) with the same formulas: `self` is the value before the
        // update, `result` the updated tensor.
        let inplace_name = {
            let mut n = entry.schema.name.clone();
            n.name.inplace = true;
            n.to_string()
        };
        // Only an in-place op over the same argument types is that variant: `pow_.Scalar`
        // updates a tensor base, so it belongs to `pow.Tensor_Scalar`, not to
        // `pow.Scalar` (whose base is a Scalar).
        let types =
            |o: &OpPlan| -> Vec<Type> { o.f.func.arguments.all().map(|a| a.ty.clone()).collect() };
        let variants = std::iter::once((*op, false)).chain(
            ops.get(inplace_name.as_str())
                .filter(|o| types(o) == types(op))
                .map(|o| (*o, true)),
        );
        for (op, inplace) in variants {
            let node = if inplace {
                format!("{node}_")
            } else {
                node.clone()
            };
            let ctx = KernelCtx {
                cx: &cx,
                op,
                entry,
                node,
                index: &index,
                helpers: &helpers,
                inplace,
            };
            match ctx.kernel() {
                Ok(k) => {
                    kernels.push(k);
                    let id = op.ident();
                    regs.push(quote!((ops::#id::DEF.name, ops::#id::kernel(#id))));
                }
                Err(mut e) => errs.append(&mut e),
            }
        }
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let rt = cx.rt();
    let count = regs.len();
    let tokens = quote! {
        use #rt::autograd::helpers as h;
        use #rt::derivatives as d;
        use #rt::derivatives::TensorOptions;
        use #rt::autograd::{record, SavedTensor};
        use #rt::dispatch::{DispatchKey, DispatchKeySet, Dispatcher, KernelFunction};
        use #rt::ops;
        use #rt::{DType, Device, Layout, MemoryFormat, Result, Scalar, Tensor};

        /// The kernels, one per derivatives.yaml entry. Translated formulas take
        /// shapes a person would not write (nested parentheses, clones of `Copy`
        /// values, unused bindings of an unused gradient); the allowance covers the
        /// whole module once instead of each kernel.
        #[allow(clippy::too_many_arguments, clippy::vec_init_then_push, clippy::unnecessary_to_owned, clippy::useless_vec, clippy::nonminimal_bool, clippy::clone_on_copy, unused_variables, unused_parens, clippy::double_parens, clippy::unnecessary_cast, unused_mut, clippy::let_and_return, clippy::redundant_clone, clippy::useless_conversion, clippy::approx_constant, non_snake_case, reason = "generated from formulas")]
        mod formulas {
            use super::*;

            #(#kernels)*
        }
        use formulas::*;

        /// The generated autograd kernels: (operator name, kernel), for registration
        /// at the `Autograd` alias key.
        pub(crate) fn kernels() -> [(&'static str, KernelFunction); #count] {
            [#(#regs),*]
        }

        /// Registers every generated autograd kernel with `d` at the `Autograd` alias
        /// key; returns the operators whose registration failed, with the reason.
        pub(crate) fn register(d: &Dispatcher) -> Vec<(&'static str, String)> {
            let mut failed = Vec::new();
            for (name, k) in kernels() {
                match d.register_impl(name, DispatchKey::Autograd, k) {
                    Ok(h) => h.leak(),
                    Err(e) => failed.push((name, e.to_string())),
                }
            }
            failed
        }
    };
    let header = format!(
        "// @generated by opal-codegen from {source} (derivatives.yaml): autograd kernels. Do not edit.\n"
    );
    format_file(&header, tokens).map_err(|e| {
        vec![Diagnostic::new(
            "opal::autograd_format",
            Default::default(),
            format!("generated autograd code does not parse: {e}"),
        )]
    })
}

/// `max_pool2d_with_indices` -> `MaxPool2DWithIndices`.
fn camel(s: &str) -> String {
    s.split('_')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// What a tensor input of the op is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TensorArg {
    One,
    Optional,
    List,
}

fn tensor_arg(t: &Type) -> Option<TensorArg> {
    match t {
        Type::Base(BaseTy::Tensor) => Some(TensorArg::One),
        Type::Optional(inner) if **inner == Type::Base(BaseTy::Tensor) => Some(TensorArg::Optional),
        Type::List { elem, .. } if **elem == Type::Base(BaseTy::Tensor) => Some(TensorArg::List),
        _ => None,
    }
}

/// What a kernel saves of its arguments (see `KernelCtx::save_inputs`).
struct InputSaves {
    /// Tensor saves, before recording.
    saves: Vec<TokenStream>,
    /// Clones of non-tensor values, after the forward call.
    value_saves: Vec<TokenStream>,
    /// The rebinding of each saved value inside the node.
    loads: Vec<TokenStream>,
    /// The formulas' variables.
    vars: BTreeMap<String, Val>,
}

struct KernelCtx<'a, 'm> {
    cx: &'a Ctx,
    op: &'a OpPlan<'m>,
    entry: &'a DerivativeEntry,
    node: String,
    index: &'a NativeIndex<'m>,
    helpers: &'a BTreeMap<String, Vec<formula::HelperSig>>,
    /// The in-place variant of the entry's op (`self` is written).
    inplace: bool,
}

impl KernelCtx<'_, '_> {
    /// The compute block of one backward formula (its gradients, each computed
    /// when needed) and the tensor inputs it fills; `None` when the formula has no
    /// gradient here or does not translate (the reason then goes to `errs`).
    fn formula_compute(
        &self,
        f: &Formula,
        vars: &BTreeMap<String, Val>,
        tensor_args: &[(usize, TensorArg)],
        errs: &mut Vec<Diagnostic>,
    ) -> Option<(Vec<usize>, TokenStream)> {
        let op = self.op;
        let arg_slot = |name: &str| -> Option<usize> {
            tensor_args
                .iter()
                .position(|(i, _)| op.args[*i].arg.name == name)
        };
        if f.body == Body::NonDifferentiable {
            return None;
        }
        let mut slots = Vec::new();
        for k in &f.keys {
            match arg_slot(&k.name) {
                Some(s) => slots.push(s),
                None => errs.push(self.error(
                    k.loc,
                    format!("`{}` is not a tensor argument of `{}`", k.name, op.op_name),
                )),
            }
        }
        if slots.len() != f.keys.len() {
            return None;
        }
        let expr = match &f.body {
            Body::NonDifferentiable => return None,
            Body::Expr(e) => e,
            _ => return None,
        };
        let mut scope_vars = vars.clone();
        if f.uses_grad_input_mask() {
            let m = slots.iter().map(|s| {
                let s = proc_macro2::Literal::usize_unsuffixed(*s);
                quote!(__needs[#s])
            });
            scope_vars.insert(
                "grad_input_mask".into(),
                Val::new(quote!(vec![#(#m),*]), Ty::List(Box::new(Ty::Bool))),
            );
        }
        let scope = Scope {
            vars: scope_vars,
            native: self.index,
            helpers: self.helpers,
        };
        let val = match scope.expr(expr) {
            Ok(v) => v,
            Err(u) => {
                let start = u.span.start as usize;
                let end = u.span.end as usize;
                errs.push(self.error(
                    f.loc_of(start, end),
                    format!(
                            "cannot translate the formula of `{}` for {}: {}",
                            op.op_name,
                            f.keys
                                .iter()
                                .map(|k| k.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", "),
                            u.reason
                        ),
                ));
                return None;
            }
        };
        let cond = slots.iter().map(|s| {
            let s = proc_macro2::Literal::usize_unsuffixed(*s);
            quote!(__needs[#s])
        });
        let value = val.owned();
        let gvars: Vec<_> = slots.iter().map(|s| format_ident!("__g{}", s)).collect();
        let list_slot = |s: usize| tensor_args[s].1 == TensorArg::List;
        let expected = if slots.len() == 1 {
            if list_slot(slots[0]) {
                Ty::List(Box::new(Ty::Tensor))
            } else {
                Ty::Tensor
            }
        } else {
            Ty::Tuple(slots.len())
        };
        if val.ty != expected {
            errs.push(self.error(
                f.loc,
                format!(
                    "the formula of `{}` for {} gives a value of type {}, expected {}",
                    op.op_name,
                    f.keys.iter().map(|k| k.name.as_str()).collect::<Vec<_>>().join(", "),
                    val.ty,
                    expected
                ),
            ));
            return None;
        }
        let block = if slots.len() == 1 {
            let g = &gvars[0];
            quote! {
                if #(#cond)||* {
                    #g = Some(#value);
                }
            }
        } else {
            let tmp: Vec<_> = slots.iter().map(|s| format_ident!("__t{}", s)).collect();
            quote! {
                if #(#cond)||* {
                    let (#(#tmp),*) = #value;
                    #(#gvars = Some(#tmp);)*
                }
            }
        };
        Some((slots, block))
    }

    /// The outputs the formulas read (under every name they may use: `result`,
    /// `resultN`, the return's own name), saved after the forward call: the saves,
    /// with their loads inside the node and their variables for the formulas.
    fn save_outputs(
        &self,
        out_vars: &[proc_macro2::Ident],
        used: &BTreeSet<String>,
        loads: &mut Vec<TokenStream>,
        vars: &mut BTreeMap<String, Val>,
    ) -> Result<Vec<TokenStream>, Vec<Diagnostic>> {
        let (entry, node) = (self.entry, &self.node);
        let returns = &self.op.f.func.returns;
        let single = returns.len() == 1;
        let mut out_saves = Vec::new();
        for (i, r) in returns.iter().enumerate() {
            let v = &out_vars[i];
            let mut aliases = vec![if single {
                "result".to_string()
            } else {
                format!("result{i}")
            }];
            if let Some(n) = &r.name {
                aliases.push(n.clone());
            }
            if single {
                aliases.push("result0".to_string());
            }
            if !aliases.iter().any(|a| used.contains(a)) {
                continue;
            }
            let Some(ty) = Ty::of_schema(&r.ty) else {
                return Err(vec![self.error(entry.loc, "an output formulas cannot use")]);
            };
            let s = format_ident!("__saved_{}", v);
            let label = aliases[0].as_str();
            if ty == Ty::Tensor {
                out_saves.push(quote!(let #s = SavedTensor::output(&#v, #node, #label)?;));
                loads.push(quote!(let #v = #s.get()?;));
            } else {
                return Err(vec![
                    self.error(entry.loc, "a saved output that is not one tensor")
                ]);
            }
            for a in aliases {
                vars.insert(a, Val::place(quote!(#v), ty.clone()));
            }
        }
        Ok(out_saves)
    }

    /// The arguments the formulas read: tensors saved before recording (the
    /// original of an in-place `self`), other values cloned after the forward call;
    /// with their loads inside the node and their variables for the formulas.
    fn save_inputs(&self, used: &BTreeSet<String>) -> Result<InputSaves, Vec<Diagnostic>> {
        let (op, entry, node) = (self.op, self.entry, &self.node);
        let mut saves = Vec::new();
        let mut value_saves = Vec::new();
        let mut loads = Vec::new();
        let mut vars: BTreeMap<String, Val> = BTreeMap::new();
        for a in &op.args {
            if !used.contains(&a.arg.name) {
                continue;
            }
            let n = a.ident();
            let s = format_ident!("__saved_{}", a.arg.name);
            let aname = &a.arg.name;
            let Some(ty) = Ty::of_schema(a.ty()) else {
                return Err(vec![self.error(
                    entry.loc,
                    format!("argument `{aname}` has a type formulas cannot use"),
                )]);
            };
            match tensor_arg(a.ty()) {
                Some(TensorArg::One) if self.inplace && a.arg.is_write() => {
                    saves.push(
                        quote!(let #s = SavedTensor::input(&h::original(#n)?, #node, #aname);),
                    );
                    loads.push(quote!(let #n = #s.get()?;));
                }
                Some(TensorArg::One) => {
                    saves.push(quote!(let #s = SavedTensor::input(#n, #node, #aname);));
                    loads.push(quote!(let #n = #s.get()?;));
                }
                Some(TensorArg::Optional) => {
                    saves.push(quote!(let #s = #n.map(|t| SavedTensor::input(t, #node, #aname));));
                    loads.push(quote!(let #n = #s.as_ref().map(SavedTensor::get).transpose()?;));
                }
                Some(TensorArg::List) => {
                    saves.push(quote!(let #s: Vec<SavedTensor> = #n.iter().map(|t| SavedTensor::input(t, #node, #aname)).collect();));
                    loads.push(quote!(let #n = #s.iter().map(SavedTensor::get).collect::<Result<Vec<Tensor>>>()?;));
                }
                None => {
                    // After the forward call, which still takes the parameter.
                    // (A value parameter is moved into the node as it is.)
                    if Types::passing(a.ty()) != Passing::Value {
                        let owned = arg_to_owned(quote!(#n), a.ty());
                        value_saves.push(quote!(let #n = #owned;));
                    }
                }
            }
            vars.insert(a.arg.name.clone(), Val::place(quote!(#n), ty));
        }
        Ok(InputSaves {
            saves,
            value_saves,
            loads,
            vars,
        })
    }

    fn finish(
        &self,
        id: &proc_macro2::Ident,
        params: &[TokenStream],
        ret: &syn::Type,
        body: Vec<TokenStream>,
        ret_expr: TokenStream,
    ) -> TokenStream {
        let doc = format!(
            " Autograd kernel of `{}` (backward node `{}`).",
            self.op.op_name, self.node
        );
        let schema = format!(" Schema: `{}`", self.op.schema);
        quote! {
            #[doc = #doc]
            #[doc = ""]
            #[doc = #schema]
            pub(crate) fn #id(ks: DispatchKeySet, #(#params),*) -> #ret {
                #(#body)*
                Ok(#ret_expr)
            }
        }
    }

    fn error(&self, loc: crate::model::Loc, msg: impl Into<String>) -> Diagnostic {
        Diagnostic::new("opal::autograd_formula", loc, msg)
            .hint("use the operators of native_functions.yaml and the helpers listed in codegen/src/derivatives/helpers.rs (IMPLEMENTED)")
    }
}

/// An argument in kernel-parameter form, made owned so a node can keep it.
fn arg_to_owned(n: TokenStream, t: &Type) -> TokenStream {
    match Types::passing(t) {
        Passing::Value => n,
        Passing::Ref => quote!(#n.to_owned()),
        Passing::OptRef => quote!(#n.cloned()),
        Passing::OptDeref => quote!(#n.map(|v| v.to_owned())),
    }
}
