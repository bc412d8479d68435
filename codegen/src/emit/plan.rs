//! The emission plan: every native function with the Rust names, types and parsed
//! defaults the emitters need, plus the list of operators that cannot be expressed
//! (with the reason) and the naming collisions (hard errors).
//!
//! Owns: deciding, once per op, what gets emitted (method? factory? structured
//! derivation?). Must not: produce tokens (the emitters do) or invent names (that is
//! `crate::ident`).

use std::collections::HashMap;

use proc_macro2::Ident;

use super::defaults::{self, Value};
use crate::hash::FastHash;
use crate::ident;
use crate::model::{Argument, BaseTy, FunctionSchema, Loc, NativeFunction, NativeFunctions, Type};

/// An operator the generator skips, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported {
    /// `name.overload` as in the schema.
    pub op: String,
    pub loc: Loc,
    pub reason: String,
}

/// A hard error: generation cannot go on (e.g. two operators get the same Rust name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmitError {
    pub message: String,
    pub loc: Loc,
    /// A second location (the other side of a collision), if any.
    pub other: Option<Loc>,
}

/// One argument, ready for emission.
#[derive(Clone, Debug)]
pub(crate) struct ArgPlan<'a> {
    pub arg: &'a Argument,
    /// The Rust identifier as a string (`self` -> `self_`; keywords become raw
    /// identifiers in [`ArgPlan::ident`]).
    pub name: String,
    pub default: Option<Value>,
    pub kwarg_only: bool,
    pub out: bool,
}

impl ArgPlan<'_> {
    /// The Rust identifier.
    pub fn ident(&self) -> Ident {
        ident::ident(&self.name)
    }

    pub fn ty(&self) -> &Type {
        &self.arg.ty
    }
}

/// How the functional or in-place variant is derived from an out= kernel.
#[derive(Clone, Debug)]
pub(crate) struct StructuredPlan {
    /// Module identifier of the out= op the derivation calls.
    pub out_op: String,
    /// Module identifier of the functional op run on meta tensors.
    pub meta_op: String,
    /// Whether this is the in-place variant (writes into `self`).
    pub inplace: bool,
}

/// One operator, ready for emission.
#[derive(Clone, Debug)]
pub(crate) struct OpPlan<'a> {
    pub f: &'a NativeFunction,
    /// `name.overload`.
    pub op_name: String,
    /// `namespace::name.overload`.
    pub qualified: String,
    /// The canonical schema string.
    pub schema: String,
    /// `namespace::` + the canonical schema string (what docs show).
    pub qualified_schema: String,
    /// Identifier of the free function and of the op's module (see [`OpPlan::ident`]).
    pub ident_str: String,
    pub args: Vec<ArgPlan<'a>>,
    /// Whether a `Tensor` method is generated (`variants: method` with a `self` arg).
    pub method: Option<usize>,
    /// Whether the op is a factory op that gets a BackendSelect kernel: index of the
    /// `Device`/`Device?` argument.
    pub factory_device: Option<usize>,
    pub structured: Option<StructuredPlan>,
}

impl<'a> OpPlan<'a> {
    /// The Rust identifier of the free function and the op module.
    pub fn ident(&self) -> Ident {
        ident::ident(&self.ident_str)
    }

    pub fn schema_fn(&self) -> &'a FunctionSchema {
        &self.f.func
    }

    pub fn has_defaults(&self) -> bool {
        self.args.iter().any(|a| a.default.is_some())
    }

    pub fn return_types(&self) -> impl ExactSizeIterator<Item = &'a Type> {
        self.f.func.returns.iter().map(|r| &r.ty)
    }
}

/// The whole plan.
#[derive(Debug)]
pub(crate) struct Plan<'a> {
    pub namespace: String,
    pub ops: Vec<OpPlan<'a>>,
    pub unsupported: Vec<Unsupported>,
}

fn plan_args(f: &NativeFunction) -> Result<Vec<ArgPlan<'_>>, String> {
    let a = &f.func.arguments;
    let mut out: Vec<ArgPlan<'_>> = Vec::with_capacity(a.len());
    let groups = [
        (&a.positional, false, false),
        (&a.kwarg_only, true, false),
        (&a.out, true, true),
    ];
    for (args, kwarg_only, is_out) in groups {
        for arg in args.iter() {
            let name = ident::arg_ident(&arg.name)?;
            // A schema has a handful of arguments: a scan beats a map.
            if let Some(prev) = out.iter().find(|p| p.name == name) {
                return Err(format!(
                    "arguments `{}` and `{}` both become the Rust name `{name}`",
                    prev.arg.name, arg.name
                ));
            }
            let default = match &arg.default {
                Some(lit) => Some(
                    defaults::parse(&arg.ty, lit)
                        .map_err(|e| format!("argument `{}`: {e}", arg.name))?,
                ),
                None => None,
            };
            out.push(ArgPlan {
                arg,
                name,
                default,
                kwarg_only,
                out: is_out,
            });
        }
    }
    Ok(out)
}

/// Plans every function of `nf`, in file order.
pub(crate) fn plan<'a>(
    nf: &'a NativeFunctions,
    namespace: &str,
) -> Result<Plan<'a>, Vec<EmitError>> {
    plan_functions(nf.functions.iter(), namespace)
}

/// Checks what can stop generation of `nf` (Rust names that collide), without
/// building the rest of the plan: `Ok` here means planning succeeds.
pub fn check_names(nf: &NativeFunctions) -> Result<(), Vec<EmitError>> {
    // The argument plans are dropped on the threads that made them.
    name_functions(nf.functions.iter(), drop).map(drop)
}

/// From this many functions on, naming runs on rayon's threads.
const PARALLEL_FROM: usize = 512;

/// An op's Rust names and what naming keeps of its argument plans (`A`): the part
/// of planning that can fail.
struct Named<'a, A> {
    f: &'a NativeFunction,
    op_name: String,
    ident_str: String,
    args: A,
    method: Option<usize>,
    factory_device: Option<usize>,
    /// Some argument has a default (the method then has a `_with` form).
    has_default: bool,
}

/// What naming learns of one function on its own.
struct Separately<'a, A> {
    f: &'a NativeFunction,
    op_name: String,
    ident_str: Result<String, String>,
    /// The kept argument plans, where the self argument and the device are, and
    /// whether any argument has a default; or why the arguments are unsupported.
    args: Result<(A, Option<usize>, Option<usize>, bool), String>,
}

/// Every named op, and the ops that cannot be expressed.
type NamedAll<'a, A> = (Vec<Named<'a, A>>, Vec<Unsupported>);

/// Names one function; `keep` says what of its argument plans to keep.
fn name_one<'a, A>(
    f: &'a NativeFunction,
    keep: &impl Fn(Vec<ArgPlan<'a>>) -> A,
) -> Separately<'a, A> {
    let args = plan_args(f).map(|args| {
        let method = if f.variants.method {
            args.iter()
                .position(|a| !a.kwarg_only && a.arg.name == "self")
        } else {
            None
        };
        let factory_device = if f.func.has_tensor_arg() {
            None
        } else {
            args.iter()
                .position(|a| a.arg.name == "device" && a.ty().base() == BaseTy::Device)
        };
        let has_default = args.iter().any(|a| a.default.is_some());
        (keep(args), method, factory_device, has_default)
    });
    Separately {
        f,
        op_name: f.func.name.to_string(),
        ident_str: ident::op_ident(&f.func.name),
        args,
    }
}

/// Names every function of `fns`, keeping `keep(args)` of each one's argument
/// plans; the ops that cannot be expressed are returned beside them, and naming
/// collisions are the error.
fn name_functions<'a, A: Send>(
    fns: impl ExactSizeIterator<Item = &'a NativeFunction>,
    keep: impl Fn(Vec<ArgPlan<'a>>) -> A + Sync,
) -> Result<NamedAll<'a, A>, Vec<EmitError>> {
    // Each function's names on its own, on rayon's threads for a whole file; the
    // collisions between them in file order after.
    let fns: Vec<&'a NativeFunction> = fns.collect();
    let separately: Vec<Separately<'a, A>> = if fns.len() >= PARALLEL_FROM {
        use rayon::prelude::*;
        fns.par_iter().map(|f| name_one(f, &keep)).collect()
    } else {
        fns.iter().map(|f| name_one(f, &keep)).collect()
    };
    let mut named: Vec<Named<'a, A>> = Vec::with_capacity(fns.len());
    let mut unsupported = Vec::new();
    let mut errors = Vec::new();
    let mut by_ident: HashMap<&str, (&str, Loc), FastHash> =
        HashMap::with_capacity_and_hasher(fns.len(), FastHash::default());
    let mut unsupported_op = |op: &str, f: &NativeFunction, reason: String| {
        unsupported.push(Unsupported {
            op: op.to_string(),
            loc: f.loc,
            reason,
        })
    };
    for s in &separately {
        let ident_str = match &s.ident_str {
            Ok(i) => i,
            Err(reason) => {
                unsupported_op(&s.op_name, s.f, reason.clone());
                continue;
            }
        };
        if let Some((other, other_loc)) = by_ident.get(ident_str.as_str()) {
            errors.push(EmitError {
                message: format!(
                    "operators `{other}` and `{}` both map to the Rust name `{ident_str}`",
                    s.op_name
                ),
                loc: s.f.func.loc,
                other: Some(*other_loc),
            });
            continue;
        }
        by_ident.insert(ident_str, (&s.op_name, s.f.func.loc));
        if let Err(reason) = &s.args {
            unsupported_op(&s.op_name, s.f, reason.clone());
        }
    }
    drop(by_ident);
    for s in separately {
        let (Ok(ident_str), Ok((args, method, factory_device, has_default))) =
            (s.ident_str, s.args)
        else {
            continue;
        };
        named.push(Named {
            f: s.f,
            op_name: s.op_name,
            ident_str,
            args,
            method,
            factory_device,
            has_default,
        });
    }
    // Methods: `m` and `m_with` share the trait's namespace.
    let method_names: HashMap<&str, &str, FastHash> = named
        .iter()
        .filter(|o| o.method.is_some())
        .map(|o| (o.ident_str.as_str(), o.op_name.as_str()))
        .collect();
    for o in named.iter().filter(|o| o.method.is_some() && o.has_default) {
        let w = ident::with_method(&o.ident_str);
        if let Some(other) = method_names.get(w.as_str()) {
            errors.push(EmitError {
                message: format!(
                    "the `Tensor` method `{w}` of `{}` collides with the method of `{other}`",
                    o.op_name
                ),
                loc: o.f.loc,
                other: None,
            });
        }
    }
    if errors.is_empty() {
        Ok((named, unsupported))
    } else {
        Err(errors)
    }
}

/// Plans the functions `fns` (in the order given) as if they were a whole file.
pub(crate) fn plan_functions<'a>(
    fns: impl ExactSizeIterator<Item = &'a NativeFunction>,
    namespace: &str,
) -> Result<Plan<'a>, Vec<EmitError>> {
    let (named, unsupported) = name_functions(fns, |args| args)?;
    let mut ops: Vec<OpPlan<'a>> = named
        .into_iter()
        .map(|n| {
            let f = n.f;
            // A namespace written in `func:` wins; the default one (`aten`) is
            // replaced by the namespace the generator was asked for.
            let ns = if f.namespace.is_empty() || f.namespace == "aten" {
                namespace
            } else {
                f.namespace.as_str()
            };
            let schema = f.func.to_string();
            OpPlan {
                f,
                qualified_schema: format!("{ns}::{schema}"),
                schema,
                qualified: format!("{ns}::{}", n.op_name),
                op_name: n.op_name,
                ident_str: n.ident_str,
                args: n.args,
                method: n.method,
                factory_device: n.factory_device,
                structured: None,
            }
        })
        .collect();
    let structured = derive_structured(&ops);
    for (i, s) in structured {
        ops[i].structured = Some(s);
    }
    Ok(Plan {
        namespace: namespace.to_string(),
        ops,
        unsupported,
    })
}

/// Argument types in order, annotations ignored.
fn arg_types<'a>(args: impl Iterator<Item = &'a ArgPlan<'a>>) -> Vec<&'a Type> {
    args.map(|a| a.ty()).collect()
}

/// Finds the structured derivations: for each op with a `structured_delegate` whose
/// out= op takes exactly the op's arguments followed by one out tensor per return.
fn derive_structured(ops: &[OpPlan<'_>]) -> Vec<(usize, StructuredPlan)> {
    let index: HashMap<&str, usize, FastHash> = ops
        .iter()
        .enumerate()
        .map(|(i, o)| (o.op_name.as_str(), i))
        .collect();
    let mut found = Vec::new();
    for (i, o) in ops.iter().enumerate() {
        let Some(delegate) = &o.f.structured_delegate else {
            continue;
        };
        let Some(&d) = index.get(delegate.to_string().as_str()) else {
            continue;
        };
        let out_op = &ops[d];
        let inplace = o.f.func.name.name.inplace;
        let rets = &o.f.func.returns;
        let outs: Vec<&ArgPlan> = out_op.args.iter().filter(|a| a.out).collect();
        let ins: Vec<&ArgPlan> = out_op.args.iter().filter(|a| !a.out).collect();
        let tensor = Type::Base(BaseTy::Tensor);
        if arg_types(o.args.iter()) != arg_types(ins.iter().copied())
            || outs.len() != rets.len()
            || rets.iter().any(|r| r.ty != tensor)
            || outs.iter().any(|a| *a.ty() != tensor)
            || o.args.iter().any(|a| a.out)
            || !o.args.iter().any(|a| a.ty().is_tensor_like())
        {
            continue;
        }
        let meta = if inplace {
            if rets.len() != 1 || o.f.func.self_index() != Some(0) {
                continue;
            }
            // The functional sibling: same base name and overload, not in-place.
            let mut fname = o.f.func.name.clone();
            fname.name.inplace = false;
            match index.get(fname.to_string().as_str()) {
                Some(&m) if arg_types(ops[m].args.iter()) == arg_types(o.args.iter()) => m,
                _ => i,
            }
        } else {
            i
        };
        found.push((
            i,
            StructuredPlan {
                out_op: out_op.ident_str.clone(),
                meta_op: ops[meta].ident_str.clone(),
                inplace,
            },
        ));
    }
    found
}
