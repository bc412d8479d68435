//! The functions torchgen adds to a file: an out= variant (and, when a group then
//! has one, a functional variant) for every group of same-signature functions whose
//! `autogen:` asks for it. Generated functions must be exactly the ones the group's
//! `autogen:` lists name.
//!
//! Owns: signature grouping and the schema transformations (in-place/mutable/
//! functional -> out=, any -> functional). Must not: parse text.

use std::collections::{BTreeMap, HashMap};

use rayon::prelude::*;

use super::FastHash;

use crate::diagnostics::Diagnostic;
use crate::model::{
    Annotation, Argument, Arguments, BackendKernel, BaseOperatorName, DeviceCheck, FunctionSchema,
    NativeFunction, OperatorName, Origin, Return, SchemaKind, SmallMap, Type,
};

fn strip(a: &Argument) -> Argument {
    Argument {
        annotation: None,
        ..a.clone()
    }
}

/// Arguments without annotations, tensor options and out arguments.
fn arguments_signature(f: &FunctionSchema) -> Arguments {
    let opts = f.tensor_options_range();
    Arguments {
        positional: f.arguments.positional.iter().map(strip).collect(),
        kwarg_only: f
            .arguments
            .kwarg_only
            .iter()
            .enumerate()
            .filter(|(i, _)| !opts.as_ref().is_some_and(|r| r.contains(i)))
            .map(|(_, a)| strip(a))
            .collect(),
        out: Vec::new(),
    }
}

/// torchgen's `FunctionSchema.signature()`: what in-place, out=, mutable and
/// functional variants of one operator have in common. Written arguments that no
/// return aliases become extra returns (named `<arg>_out` when `keep_return_names`).
pub fn signature(f: &FunctionSchema, keep_return_names: bool) -> FunctionSchema {
    let mut returns: Vec<Return> = f
        .returns
        .iter()
        .map(|r| Return {
            name: if keep_return_names {
                r.name.clone()
            } else {
                None
            },
            annotation: None,
            ..r.clone()
        })
        .collect();
    let self_arg = f.self_arg().into_iter();
    for a in self_arg
        .chain(&f.arguments.out)
        .chain(f.post_self_positional())
    {
        let written = a.annotation.as_ref().filter(|an| an.is_write);
        if let Some(an) = written {
            if !f.returns.iter().any(|r| r.annotation.as_ref() == Some(an)) {
                returns.push(Return {
                    name: keep_return_names.then(|| format!("{}_out", a.name)),
                    ty: a.ty.clone(),
                    annotation: None,
                    loc: a.loc,
                });
            }
        }
    }
    let mut arguments = arguments_signature(f);
    // bernoulli.p spells its default differently from its in-place sibling; torchgen
    // patches it so the two group together.
    if f.name.to_string() == "bernoulli.p" {
        for a in arguments.positional.iter_mut().filter(|a| a.name == "p") {
            a.default.get_or_insert_with(|| "0.5".into());
        }
    }
    FunctionSchema {
        name: OperatorName {
            name: BaseOperatorName {
                base: f.name.name.base.clone(),
                inplace: false,
                dunder_method: f.name.name.dunder_method,
                functional_overload: false,
            },
            overload_name: String::new(),
        },
        arguments,
        returns,
        loc: f.loc,
    }
}

fn out_overload(f: &FunctionSchema) -> String {
    if f.name.overload_name.is_empty() {
        "out".into()
    } else {
        format!("{}_out", f.name.overload_name)
    }
}

fn without_inplace(f: &FunctionSchema, overload: String) -> OperatorName {
    OperatorName {
        name: BaseOperatorName {
            inplace: false,
            ..f.name.name.clone()
        },
        overload_name: overload,
    }
}

/// New out arguments for the tensor-like returns of `f`, with fresh alias sets.
fn out_args_from_returns(f: &FunctionSchema) -> (Vec<Return>, Vec<Argument>) {
    let used: Vec<&String> = f
        .arguments
        .all()
        .filter_map(|a| a.annotation.as_ref())
        .flat_map(|a| a.alias_set.iter())
        .collect();
    let free: Vec<String> = ('a'..='z')
        .map(String::from)
        .filter(|c| !used.contains(&c))
        .collect();
    let all_plain = f
        .returns
        .iter()
        .all(|r| r.ty == Type::Base(crate::model::BaseTy::Tensor));
    let mut rets = Vec::new();
    let mut outs = Vec::new();
    for (i, r) in f.returns.iter().enumerate() {
        if r.ty.is_tensor_like() {
            let annotation = Annotation {
                alias_set: vec![free.get(i).cloned().unwrap_or_else(|| format!("o{i}"))],
                is_write: true,
                alias_set_after: Vec::new(),
            };
            let name = if f.returns.len() == 1 {
                "out".to_string()
            } else {
                format!("out{i}")
            };
            if all_plain {
                rets.push(Return {
                    name: None,
                    ty: r.ty.clone(),
                    annotation: Some(annotation.clone()),
                    loc: r.loc,
                });
            }
            outs.push(Argument {
                name,
                ty: r.ty.clone(),
                default: None,
                annotation: Some(annotation),
                loc: r.loc,
            });
        } else {
            rets.push(r.clone());
        }
    }
    (rets, outs)
}

/// Appends `t` as [`Type`]'s `Display` writes it, without the formatting machinery.
fn push_type(k: &mut String, t: &Type) {
    match t {
        Type::Base(b) => k.push_str(b.as_str()),
        Type::Optional(t) => {
            push_type(k, t);
            k.push('?');
        }
        Type::List { elem, size } => {
            push_type(k, elem);
            k.push('[');
            if let Some(n) = size {
                k.push_str(&n.to_string());
            }
            k.push(']');
        }
    }
}

/// Appends `ty name=default,` with the default length-prefixed, so no default can
/// run into the next argument.
fn push_arg(k: &mut String, a: &Argument, default: Option<&str>) {
    push_type(k, &a.ty);
    k.push(' ');
    k.push_str(&a.name);
    match default {
        None => k.push_str("=,"),
        Some(d) => {
            k.push_str("=\"");
            k.push_str(&d.len().to_string());
            k.push(':');
            k.push_str(d);
            k.push(',');
        }
    }
}

/// A string equal for exactly the functions whose [`signature`] is equal, written
/// without building the signature schema (this runs for every function, so the
/// loader computes it with the per-function rules, on the parsing threads).
pub fn signature_key(f: &NativeFunction) -> String {
    let s = &f.func;
    let n = &s.name.name;
    let mut k = String::with_capacity(160);
    k.push_str(&f.namespace);
    k.push_str("::");
    if n.dunder_method {
        k.push_str("__");
    }
    k.push_str(&n.base);
    k.push('(');
    let opts = s.tensor_options_range();
    // bernoulli.p spells its default differently; see `signature`.
    let bernoulli_p = n.base == "bernoulli" && !n.inplace && s.name.overload_name == "p";
    for a in &s.arguments.positional {
        let default = match &a.default {
            None if bernoulli_p && a.name == "p" => Some("0.5"),
            d => d.as_deref(),
        };
        push_arg(&mut k, a, default);
    }
    k.push('*');
    for (i, a) in s.arguments.kwarg_only.iter().enumerate() {
        if !opts.as_ref().is_some_and(|r| r.contains(&i)) {
            push_arg(&mut k, a, a.default.as_deref());
        }
    }
    k.push_str(")->");
    for r in &s.returns {
        push_type(&mut k, &r.ty);
        k.push(',');
    }
    let self_arg = s.self_arg().into_iter();
    for a in self_arg
        .chain(&s.arguments.out)
        .chain(s.post_self_positional())
    {
        if let Some(an) = a.annotation.as_ref().filter(|an| an.is_write) {
            if !s.returns.iter().any(|r| r.annotation.as_ref() == Some(an)) {
                push_type(&mut k, &a.ty);
                k.push(',');
            }
        }
    }
    k
}

/// The out= schema torchgen derives from an in-place, mutable or functional schema.
pub fn to_out(f: &FunctionSchema) -> FunctionSchema {
    let (arguments, returns) = match f.kind() {
        // In-place: `self` loses its annotation to a new `out` argument; returns stay.
        SchemaKind::Inplace => {
            let mut arguments = f.arguments.clone();
            if let Some(i) = f.self_index() {
                let s = &mut arguments.positional[i];
                let out = Argument {
                    name: "out".into(),
                    default: None,
                    ..s.clone()
                };
                s.annotation = None;
                arguments.out.push(out);
            }
            (arguments, f.returns.clone())
        }
        // Mutable keeps its annotated arguments; functional ones are stripped.
        kind => {
            let (returns, outs) = out_args_from_returns(f);
            let mut arguments = if kind == SchemaKind::Mutable {
                f.arguments.clone()
            } else {
                arguments_signature(f)
            };
            arguments.out = outs;
            (arguments, returns)
        }
    };
    FunctionSchema {
        name: without_inplace(f, out_overload(f)),
        arguments,
        returns,
        loc: f.loc,
    }
}

/// The functional schema torchgen derives from an in-place, mutable or out= schema.
pub fn to_functional(f: &FunctionSchema) -> FunctionSchema {
    let mut s = signature(f, true);
    s.name = OperatorName {
        name: BaseOperatorName {
            base: s.name.name.base.clone(),
            inplace: false,
            dunder_method: f.name.name.dunder_method,
            functional_overload: f.kind() == SchemaKind::Mutable,
        },
        overload_name: f.name.overload_name.clone(),
    };
    s
}

/// `set_` is an in-place view op that torchgen still groups like a normal one.
fn is_set(n: &BaseOperatorName) -> bool {
    n.base == "set" && n.inplace && !n.dunder_method && !n.functional_overload
}

fn is_view_op(f: &NativeFunction) -> bool {
    let non_mutating_view = f
        .func
        .returns
        .iter()
        .any(|r| r.annotation.as_ref().is_some_and(|a| !a.is_write));
    let inplace_view = f.tags.iter().any(|t| t == "inplace_view") && {
        let name = f.func.name.to_string();
        name != "resize_" && name != "resize_as_"
    };
    let wildcard = f.func.arguments.all().any(|a| {
        a.annotation
            .as_ref()
            .is_some_and(|an| an.alias_set_after.iter().any(|s| s == "*"))
    });
    non_mutating_view || inplace_view || wildcard
}

/// A generated function built from `base` with schema `func`.
fn generated(base: &NativeFunction, func: FunctionSchema) -> NativeFunction {
    let mut kernel = if func.kind() == SchemaKind::Out {
        format!("{}_{}", func.name.name, func.name.overload_name)
    } else {
        func.name.name.to_string()
    };
    if base.func.has_symint() {
        kernel.push_str("_symint");
    }
    let mut tags: Vec<String> = base
        .tags
        .iter()
        .filter(|t| {
            ["nondeterministic_seeded", "view_copy", "pt2_compliant_tag"].contains(&t.as_str())
        })
        .cloned()
        .collect();
    tags.push("generated".into());
    let mut dispatch = SmallMap::with_capacity(1);
    dispatch.insert(
        "CompositeExplicitAutograd".to_string(),
        BackendKernel {
            kernel,
            implicit: false,
            loc: base.loc,
        },
    );
    let origin = Origin::Autogen {
        from: base.func.name.clone(),
    };
    let mut f = NativeFunction::new(base.namespace.clone(), func, origin, base.loc);
    f.dispatch = dispatch;
    f.tags = tags;
    f.device_check = DeviceCheck::NoCheck;
    f.device_guard = false;
    f.use_const_ref_for_mutable_tensors = base.use_const_ref_for_mutable_tensors;
    f.is_abstract = base.is_abstract;
    f.has_composite_explicit_autograd_kernel = true;
    f
}

/// The functions `autogen:` asks for, given `keys[i]` = [`signature_key`]`(&fns[i])`.
pub fn generate_with_keys(
    fns: &[NativeFunction],
    keys: &[String],
    errs: &mut Vec<Diagnostic>,
) -> Vec<NativeFunction> {
    // Groups in order of first appearance, each mapping schema kind -> function.
    let mut groups: Vec<BTreeMap<SchemaKind, usize>> = Vec::with_capacity(fns.len());
    let mut by_key: HashMap<&str, usize, FastHash> =
        HashMap::with_capacity_and_hasher(fns.len(), FastHash::default());
    for (i, (f, key)) in fns.iter().zip(keys).enumerate() {
        let g = *by_key.entry(key.as_str()).or_insert_with(|| {
            groups.push(BTreeMap::new());
            groups.len() - 1
        });
        groups[g].insert(f.func.kind(), i);
    }
    // Groups are independent: generate them on rayon's threads, in group order.
    let per_group: Vec<Result<Vec<NativeFunction>, Diagnostic>> =
        groups.par_iter().map(|g| generate_group(fns, g)).collect();
    let made: usize = per_group.iter().flatten().map(Vec::len).sum();
    let mut out = Vec::with_capacity(made);
    for r in per_group {
        match r {
            Ok(made) => out.extend(made),
            Err(e) => errs.push(e),
        }
    }
    out
}

/// The functions one group's `autogen:` asks for, or why they differ from what
/// can be generated.
fn generate_group(
    fns: &[NativeFunction],
    g: &BTreeMap<SchemaKind, usize>,
) -> Result<Vec<NativeFunction>, Diagnostic> {
    let members: Vec<&NativeFunction> = g.values().map(|&i| &fns[i]).collect();
    let requested: Vec<(&NativeFunction, &OperatorName)> = members
        .iter()
        .flat_map(|f| f.autogen.iter().map(move |n| (*f, n)))
        .collect();
    let mut made: Vec<NativeFunction> = Vec::new();
    let has = |k| g.contains_key(&k);
    let wants = has(SchemaKind::Mutable) || has(SchemaKind::Inplace) || has(SchemaKind::Functional);
    let skip = members.iter().all(|f| f.manual_cpp_binding)
        || members
            .iter()
            .any(|f| is_view_op(f) && !is_set(&f.func.name.name))
        // Composite-implicit ops decompose, so only `core` ones get variants.
        || (members.iter().all(|f| f.has_composite_implicit_autograd_kernel)
            && !members.iter().any(|f| f.tags.iter().any(|t| t == "core")))
        || (has(SchemaKind::Out) && g.len() == 1);
    if wants && !skip {
        let base = [
            SchemaKind::Mutable,
            SchemaKind::Inplace,
            SchemaKind::Out,
            SchemaKind::Functional,
        ]
        .iter()
        .find_map(|k| g.get(k))
        .map(|&i| &fns[i])
        .unwrap_or(members[0]);
        let base_valid = base.func.kind() == SchemaKind::Inplace
            || base.func.returns.iter().any(|r| r.ty.is_tensor_like());
        let needs_out = base.autogen.iter().any(|n| n.to_string().contains("out"));
        let gets_out = !has(SchemaKind::Out) && base_valid && needs_out;
        if gets_out {
            made.push(generated(base, to_out(&base.func)));
        }
        if !has(SchemaKind::Functional) && (has(SchemaKind::Out) || gets_out) {
            made.push(generated(base, to_functional(&base.func)));
        }
    }
    let mut want: Vec<String> = requested.iter().map(|(_, n)| n.to_string()).collect();
    want.sort();
    want.dedup();
    let mut got: Vec<String> = made.iter().map(|f| f.func.name.to_string()).collect();
    got.sort();
    // torchgen compares the two only for groups that end up with an out=
    // variant; elsewhere `autogen:` is ignored.
    let grouped = has(SchemaKind::Out) || made.iter().any(|f| f.func.kind() == SchemaKind::Out);
    if grouped && want != got {
        let at = requested.first().map(|(f, _)| *f).unwrap_or(members[0]);
        let loc = at.key_locs.get("autogen").copied().unwrap_or(at.func.loc);
        let list = |v: &[String]| {
            if v.is_empty() {
                "nothing".to_string()
            } else {
                v.join(", ")
            }
        };
        return Err(
            Diagnostic::new(
                "opal::autogen_mismatch",
                loc,
                format!(
                    "`autogen` of `{}` asks for {}, but its variants allow generating {}",
                    at.func.name,
                    list(&want),
                    list(&got)
                ),
            )
            .label("autogen list")
            .hint(if got.is_empty() {
                "autogen only makes an out= variant (and a functional one when missing) for ops with a tensor return that are not views, composite-implicit or manual bindings".to_string()
            } else {
                format!("write `autogen: {}`", got.join(", "))
            }),
        );
    }
    Ok(made)
}
