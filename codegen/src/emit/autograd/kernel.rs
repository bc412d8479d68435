//! One autograd kernel's body: the forward call below autograd, the early return
//! when nothing is recorded, and the backward node (what it saves, its gradient
//! slots, the formulas' compute blocks).
//!
//! Owns: the order of a kernel's statements and the node's gradient slots. Must
//! not: translate formulas (see `super::formula`) or decide what is saved (see
//! `KernelCtx::save_inputs` and `KernelCtx::save_outputs`).

use std::collections::BTreeSet;

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};

use crate::derivatives::model::{Formula, Mode, OutputDifferentiable};
use crate::diagnostics::Diagnostic;
use crate::model::Type;

use super::types::{Ty, Val};
use super::{tensor_arg, InputSaves, KernelCtx, TensorArg};

/// The op's results as the kernel binds them (`result`, or `result0`, `result1`,
/// ...) and which of them are differentiable.
struct Outputs {
    vars: Vec<Ident>,
    differentiable: Vec<bool>,
}

impl Outputs {
    /// `let result = __out;` or `let (result0, ..) = __out;`.
    fn bind(&self) -> TokenStream {
        let vars = &self.vars;
        if vars.len() == 1 {
            quote!(let result = __out;)
        } else {
            quote!(let (#(#vars),*) = __out;)
        }
    }

    /// What the kernel returns.
    fn ret_expr(&self) -> TokenStream {
        let vars = &self.vars;
        if vars.len() == 1 {
            quote!(result)
        } else {
            quote!((#(#vars),*))
        }
    }
}

/// The node's gradient slot of each tensor input: declared empty, filled by the
/// formulas that cover it, pushed in input order.
struct Slots {
    decls: Vec<TokenStream>,
    pushes: Vec<TokenStream>,
}

impl<'a> KernelCtx<'a, '_> {
    /// The entry's backward formulas (its default section) and every name they read.
    fn backward_formulas(&self) -> (Vec<&'a Formula>, BTreeSet<String>) {
        let entry = self.entry;
        let section = entry
            .section(None)
            .or_else(|| entry.section(Some("Default")));
        let formulas: Vec<&Formula> = section
            .map(|s| {
                s.formulas
                    .iter()
                    .filter(|f| f.mode == Mode::Backward)
                    .collect()
            })
            .unwrap_or_default();
        let mut used = BTreeSet::new();
        for f in &formulas {
            if let Some(e) = f.expr() {
                e.walk(&mut |x| {
                    if let Some(n) = x.as_ident() {
                        used.insert(n.to_string());
                    }
                });
            }
        }
        (formulas, used)
    }

    fn outputs(&self) -> Outputs {
        let returns = &self.op.f.func.returns;
        let vars = if returns.len() == 1 {
            vec![format_ident!("result")]
        } else {
            (0..returns.len())
                .map(|i| format_ident!("result{i}"))
                .collect()
        };
        let differentiable = (0..returns.len())
            .map(|i| {
                let declared = self
                    .entry
                    .output_differentiability
                    .as_ref()
                    .and_then(|o| o.values.get(i))
                    .is_none_or(|v| !matches!(v, OutputDifferentiable::Always(false)));
                declared && tensor_arg(&returns[i].ty).is_some()
            })
            .collect();
        Outputs {
            vars,
            differentiable,
        }
    }

    pub(super) fn kernel(&self) -> Result<TokenStream, Vec<Diagnostic>> {
        let op = self.op;
        let (formulas, used) = self.backward_formulas();
        let id = op.ident();
        let params: Vec<TokenStream> = op
            .args
            .iter()
            .map(|a| {
                let (n, t) = (a.ident(), self.cx.types.arg(a.ty()));
                quote!(#n: #t)
            })
            .collect();
        let names: Vec<Ident> = op.args.iter().map(|a| a.ident()).collect();
        let ret = self
            .cx
            .types
            .result_type(self.cx.types.returns_type(op.return_types()));
        let outputs = self.outputs();
        let ret_expr = outputs.ret_expr();
        let bind = outputs.bind();
        let forward = quote! {
            let __out = ops::#id::redispatch(ks.below(DispatchKey::AutogradOther), #(#names),*)?;
            #bind
        };
        let mut body = Vec::new();
        if formulas.is_empty() || !outputs.differentiable.iter().any(|d| *d) {
            // Nothing differentiable: the op only has to run below autograd.
            body.push(forward);
            return Ok(self.finish(&id, &params, &ret, body, ret_expr));
        }
        let tensor_args: Vec<(usize, TensorArg)> = op
            .args
            .iter()
            .enumerate()
            .filter_map(|(i, a)| tensor_arg(a.ty()).map(|k| (i, k)))
            .collect();
        if !self.inplace {
            body.push(forward.clone());
        }
        body.push(self.record_check(&tensor_args, &names, &outputs, &forward, &ret_expr));
        body.push(self.record(&formulas, &used, &tensor_args, &names, &outputs, forward)?);
        Ok(self.finish(&id, &params, &ret, body, ret_expr))
    }

    /// The inputs the node is recorded on, the early return when none needs a
    /// gradient (an in-place op runs its forward there), and `__needs`, which of
    /// them does.
    fn record_check(
        &self,
        tensor_args: &[(usize, TensorArg)],
        names: &[Ident],
        outputs: &Outputs,
        forward: &TokenStream,
        ret_expr: &TokenStream,
    ) -> TokenStream {
        let undef_needed = tensor_args.iter().any(|(_, k)| *k == TensorArg::Optional)
            || outputs.differentiable.iter().any(|d| !d);
        let undef = undef_needed.then(|| quote!(let __undef = Tensor::undefined();));
        let mut inputs = Vec::new();
        let mut needs = Vec::new();
        for (i, k) in tensor_args {
            let n = &names[*i];
            let (input, need) = match k {
                TensorArg::One => (quote!(__inputs.push(#n);), quote!(#n.requires_grad())),
                TensorArg::Optional => (
                    quote!(__inputs.push(#n.unwrap_or(&__undef));),
                    quote!(#n.is_some_and(|t| t.requires_grad())),
                ),
                TensorArg::List => (
                    quote!(__inputs.extend(#n.iter());),
                    quote!(#n.iter().any(|t| t.requires_grad())),
                ),
            };
            inputs.push(input);
            needs.push(need);
        }
        let early_return = if self.inplace {
            let name = &self.op.op_name;
            let first = &names[0];
            quote! {
                if !h::should_record(&__inputs) {
                    drop(__inputs);
                    #forward
                    return Ok(#ret_expr);
                }
                h::check_inplace(#first, #name)?;
            }
        } else {
            quote! {
                if !h::should_record(&__inputs) {
                    return Ok(#ret_expr);
                }
            }
        };
        quote! {
            #undef
            let mut __inputs: Vec<&Tensor> = Vec::new();
            #(#inputs)*
            #early_return
            let __needs = [#(#needs),*];
        }
    }

    /// The saves of what the formulas read and the `record` call with the node,
    /// which rebinds them and fills the gradient slots the formulas cover.
    fn record(
        &self,
        formulas: &[&Formula],
        used: &BTreeSet<String>,
        tensor_args: &[(usize, TensorArg)],
        names: &[Ident],
        outputs: &Outputs,
        forward: TokenStream,
    ) -> Result<TokenStream, Vec<Diagnostic>> {
        let node = &self.node;
        let InputSaves {
            mut saves,
            value_saves,
            mut loads,
            mut vars,
        } = self.save_inputs(used)?;
        let out_saves = self.save_outputs(&outputs.vars, used, &mut loads, &mut vars)?;
        if used.contains("grad") {
            loads.push(quote!(let grad = h::grad_at(__grads, 0);));
            vars.insert("grad".into(), Val::place(quote!(grad), Ty::Tensor));
        }
        if used.contains("grads") {
            loads.push(quote!(let grads: Vec<Tensor> = (0..__grads.len()).map(|i| h::grad_at(__grads, i)).collect();));
            vars.insert(
                "grads".into(),
                Val::place(quote!(grads), Ty::List(Box::new(Ty::Tensor))),
            );
        }
        // One gradient variable per tensor input, filled by the formulas.
        let mut computes = Vec::new();
        let mut errs = Vec::new();
        let mut covered = vec![false; tensor_args.len()];
        for f in formulas {
            if let Some((slots, block)) = self.formula_compute(f, &vars, tensor_args, &mut errs) {
                for s in slots {
                    covered[s] = true;
                }
                computes.push(block);
            }
        }
        if !errs.is_empty() {
            return Err(errs);
        }
        let Slots { decls, pushes } = slots(tensor_args, names, &covered, &mut saves);
        let recorded = self.recorded_outputs(outputs, names);
        let forward_here = if self.inplace { forward } else { quote!() };
        Ok(quote! {
            #(#saves)*
            #forward_here
            #(#value_saves)*
            #(#out_saves)*
            #recorded
            record(
                #node,
                &__inputs,
                &__outputs,
                Box::new(move |__grads: &[Option<Tensor>]| {
                    #(#loads)*
                    #(#decls)*
                    #(#computes)*
                    let mut __result: Vec<Option<Tensor>> = Vec::new();
                    #(#pushes)*
                    Ok(__result)
                }),
            )?;
        })
    }

    /// `__outputs`, the outputs the node is recorded on (an undefined tensor for
    /// one that is not differentiable); a view op also marks its input viewed.
    fn recorded_outputs(&self, outputs: &Outputs, names: &[Ident]) -> TokenStream {
        let returns = &self.op.f.func.returns;
        let outs = outputs
            .vars
            .iter()
            .zip(&outputs.differentiable)
            .map(|(v, d)| if *d { quote!(&#v) } else { quote!(&__undef) });
        let list = if matches!(returns[0].ty, Type::List { .. }) {
            quote!(let __outputs: Vec<&Tensor> = result.iter().collect();)
        } else {
            quote!(let __outputs: Vec<&Tensor> = vec![#(#outs),*];)
        };
        // A view op's result shares its input's storage: the input is marked so an
        // in-place update of it (which the view's history would not see) is refused.
        let is_view = returns.len() == 1
            && returns[0].annotation.as_ref().is_some_and(|a| !a.is_write)
            && returns[0].ty.is_tensor_like();
        let mark = is_view.then(|| {
            let first = &names[0];
            quote!(h::mark_viewed(#first);)
        });
        quote! {
            #list
            #mark
        }
    }
}

/// The gradient slot of each tensor input; a list input also saves its length,
/// so an absent gradient still takes its place. A slot no formula covers is a
/// constant `None`.
fn slots(
    tensor_args: &[(usize, TensorArg)],
    names: &[Ident],
    covered: &[bool],
    saves: &mut Vec<TokenStream>,
) -> Slots {
    let mut decls = Vec::new();
    let mut pushes = Vec::new();
    for (s, (i, k)) in tensor_args.iter().enumerate() {
        let g = format_ident!("__g{}", s);
        let n = &names[*i];
        let ty = if *k == TensorArg::List {
            let count = format_ident!("__count{}", s);
            saves.push(quote!(let #count = #n.len();));
            pushes.push(quote!(h::push_list(&mut __result, #g, #count);));
            quote!(Option<Vec<Tensor>>)
        } else {
            pushes.push(quote!(__result.push(#g.filter(Tensor::is_defined));));
            quote!(Option<Tensor>)
        };
        decls.push(if covered[s] {
            quote!(let mut #g: #ty = None;)
        } else {
            // Not differentiable here: always no gradient.
            quote!(let #g: #ty = None;)
        });
    }
    Slots { decls, pushes }
}
