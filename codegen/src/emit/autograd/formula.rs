//! Formula expressions to Rust: each node of a parsed formula becomes a Rust
//! expression of a known [`Ty`], so a formula either translates whole into calls of
//! generated operators and runtime helpers, or fails with the place and reason.
//!
//! Names resolve, in order, to: the formula's variables (arguments, `grad`,
//! `result`, ...), constants (`M_2_SQRTPI`), the runtime's helper functions (their
//! signatures are data: `crate::derivatives::helpers::IMPLEMENTED`), then native
//! operators by overload resolution over the argument types (`_symint` names are
//! the plain operators: Opal's sizes are `i64`). Operators on tensors become
//! operators of the native set (`a * b` is `mul.Tensor`, `2 * a` is `mul.Scalar`).
//!
//! Owns: expression translation. Must not: decide what a kernel saves or how it
//! records (that is the parent module).

use std::collections::BTreeMap;

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::types::{coerce, fit, Ty, Val};
use crate::derivatives::expr::{BinOp, Expr, ExprKind, Span, UnOp};
use crate::derivatives::helpers::IMPLEMENTED;
use crate::emit::defaults;
use crate::ident;
use crate::model::{NativeFunction, NativeFunctions, SchemaKind};

/// Why a formula did not translate: a span of its text and the reason.
#[derive(Clone, Debug)]
pub(crate) struct Untranslatable {
    pub span: Span,
    pub reason: String,
}

type Res<T> = Result<T, Untranslatable>;

fn fail<T>(span: Span, reason: impl Into<String>) -> Res<T> {
    Err(Untranslatable {
        span,
        reason: reason.into(),
    })
}

/// One parameter of a callable: name, type and whether it may be left out.
#[derive(Clone, Debug)]
struct Param {
    ty: Ty,
    /// The argument to pass when left out (`None` when required).
    default: Option<TokenStream>,
}

/// A runtime helper's signature.
#[derive(Clone, Debug)]
pub(crate) struct HelperSig {
    /// The formula name.
    name: String,
    /// The Rust function (differs for an overload: Rust has none).
    rust: String,
    params: Vec<Param>,
    ret: Ty,
}

/// Parses `IMPLEMENTED`'s `name(Ty a, Ty b=None) -> Ty [@rust_name]` lines.
fn parse_helper(s: &str) -> Option<HelperSig> {
    let (s, rust) = match s.split_once('@') {
        Some((s, r)) => (s, Some(r.trim())),
        None => (s, None),
    };
    let (head, ret) = s.rsplit_once("->")?;
    let (name, params) = head.trim().strip_suffix(')')?.split_once('(')?;
    let mut out = Vec::new();
    for p in params.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (decl, optional) = match p.split_once('=') {
            Some((d, "None")) => (d.trim(), true),
            Some(_) => return None,
            None => (p, false),
        };
        let (ty, _name) = decl.rsplit_once(' ')?;
        let ty = Ty::parse(ty)?;
        // Helpers borrow what is not `Copy` (see `Val::as_helper_arg`).
        let default = match (optional, ty.is_copy()) {
            (false, _) => None,
            (true, true) => Some(quote!(None)),
            (true, false) => Some(quote!(&None)),
        };
        out.push(Param { ty, default });
    }
    Some(HelperSig {
        name: name.trim().to_string(),
        rust: rust.unwrap_or(name.trim()).to_string(),
        params: out,
        ret: Ty::parse(ret)?,
    })
}

/// The runtime helpers by name (overloads in table order).
pub(crate) fn helper_table() -> Result<BTreeMap<String, Vec<HelperSig>>, String> {
    let mut t: BTreeMap<String, Vec<HelperSig>> = BTreeMap::new();
    for line in IMPLEMENTED {
        let sig = parse_helper(line).ok_or_else(|| format!("bad helper signature `{line}`"))?;
        t.entry(sig.name.clone()).or_default().push(sig);
    }
    Ok(t)
}

/// Native operators by base name, with their Rust idents.
pub(crate) struct NativeIndex<'m> {
    by_base: BTreeMap<String, Vec<(&'m NativeFunction, String)>>,
}

impl<'m> NativeIndex<'m> {
    pub fn new(native: &'m NativeFunctions) -> Self {
        let mut by_base: BTreeMap<String, Vec<(&NativeFunction, String)>> = BTreeMap::new();
        for f in &native.functions {
            let kind = f.func.kind();
            if !matches!(kind, SchemaKind::Functional | SchemaKind::Inplace) {
                continue;
            }
            let Ok(id) = ident::op_ident(&f.func.name) else {
                continue;
            };
            by_base
                .entry(f.func.name.name.to_string())
                .or_default()
                .push((f, id));
        }
        NativeIndex { by_base }
    }

    pub fn overloads(&self, base: &str) -> &[(&'m NativeFunction, String)] {
        self.by_base.get(base).map_or(&[], Vec::as_slice)
    }
}

/// The formula's variables and the tables names resolve against.
pub(crate) struct Scope<'a, 'm> {
    pub vars: BTreeMap<String, Val>,
    pub native: &'a NativeIndex<'m>,
    pub helpers: &'a BTreeMap<String, Vec<HelperSig>>,
}

/// The Rust value of a native function's returns.
fn returns_ty(f: &NativeFunction) -> Option<Ty> {
    match f.func.returns.as_slice() {
        [] => None,
        [r] => Ty::of_schema(&r.ty),
        rs if rs
            .iter()
            .all(|r| r.ty == crate::model::Type::Base(crate::model::BaseTy::Tensor)) =>
        {
            Some(Ty::Tuple(rs.len()))
        }
        _ => None,
    }
}

/// C's math constants, as the names of `std::f64::consts`.
const CONSTANTS: &[(&str, &str)] = &[
    ("M_PI", "PI"),
    ("M_2_SQRTPI", "FRAC_2_SQRT_PI"),
    ("M_SQRT2", "SQRT_2"),
    ("M_SQRT1_2", "FRAC_1_SQRT_2"),
    ("M_LN2", "LN_2"),
    ("M_LN10", "LN_10"),
];

impl Scope<'_, '_> {
    /// Translates `e`.
    pub fn expr(&self, e: &Expr) -> Res<Val> {
        match &e.kind {
            ExprKind::Int(i) => Ok(Val::new(quote!(#i), Ty::Int)),
            ExprKind::Float(f) => Ok(Val::new(quote!(#f), Ty::Float)),
            ExprKind::Bool(b) => Ok(Val::new(quote!(#b), Ty::Bool)),
            ExprKind::Str(s) => Ok(Val::new(quote!(String::from(#s)), Ty::Str)),
            ExprKind::Nullopt => Ok(Val::new(quote!(None), Ty::Nullopt)),
            ExprKind::Ident(name) => self.name(name, e.span),
            ExprKind::Path { segments, .. } => match segments.as_slice() {
                [ns, name] if ns == "at" || ns == "std" => self.name(name, e.span),
                _ => fail(e.span, format!("unknown name `{}`", segments.join("::"))),
            },
            ExprKind::Call { callee, args } => self.call(callee, args, e.span),
            ExprKind::Member {
                receiver,
                arrow,
                name,
                template_args,
                args,
                ..
            } => self.member(
                receiver,
                *arrow,
                name,
                template_args,
                args.as_deref(),
                e.span,
            ),
            ExprKind::Index { base, index } => self.index(base, index, e.span),
            ExprKind::Unary { op, operand } => self.unary(*op, operand, e.span),
            ExprKind::Binary { op, lhs, rhs } => {
                let (a, b) = (self.expr(lhs)?, self.expr(rhs)?);
                self.binary(*op, &a, &b, e.span)
            }
            ExprKind::Ternary {
                cond,
                then,
                otherwise,
            } => self.ternary(cond, then, otherwise, e.span),
            ExprKind::Braces(items) => self.braces(items, e.span),
            ExprKind::Template { .. } | ExprKind::Lambda { .. } => fail(
                e.span,
                "not translatable to Rust: rewrite with a helper function",
            ),
        }
    }

    /// A member call, `recv.name(args)`, or through an optional, `recv->name(args)`
    /// (the call mapped over the value when there is one); `x.to<double>()` is
    /// `toDouble`.
    fn member(
        &self,
        receiver: &Expr,
        arrow: bool,
        name: &str,
        template_args: &[Expr],
        args: Option<&[Expr]>,
        span: Span,
    ) -> Res<Val> {
        let recv = self.expr(receiver)?;
        let args = args.unwrap_or(&[]);
        let is_double = template_args
            .first()
            .and_then(Expr::as_ident)
            .is_some_and(|t| t == "double");
        let name = if name == "to" && is_double {
            "toDouble"
        } else {
            name
        };
        if !arrow {
            return self.method(&recv, name, args, span);
        }
        let Ty::Opt(inner) = &recv.ty else {
            return fail(span, format!("`->{name}` on a value of type {}", recv.ty));
        };
        let x = Val::place(quote!(__x), (**inner).clone());
        let body = self.method(&x, name, args, span)?;
        let (r, b) = (recv.ts.clone(), body.owned());
        let map = if recv.place {
            quote!(#r.as_ref().map(|__x| -> Result<_> { Ok(#b) }).transpose()?)
        } else {
            quote!((#r).as_ref().map(|__x| -> Result<_> { Ok(#b) }).transpose()?)
        };
        Ok(Val::new(map, Ty::Opt(Box::new(body.ty))))
    }

    /// `base[index]` of a list, by a checked index.
    fn index(&self, base: &Expr, index: &Expr, span: Span) -> Res<Val> {
        let b = self.expr(base)?;
        let i = self.expr(index)?;
        if i.ty != Ty::Int {
            return fail(index.span, format!("an index of type {}", i.ty));
        }
        let (bt, it) = (b.ts.clone(), i.owned());
        match &b.ty {
            Ty::List(elem) => {
                let elem = (**elem).clone();
                let ts = if elem.is_copy() {
                    quote!((*d::at(&#bt, #it)?))
                } else {
                    quote!(d::at(&#bt, #it)?.clone())
                };
                Ok(Val::new(ts, elem))
            }
            t => fail(span, format!("indexing a value of type {t}")),
        }
    }

    /// A prefix operator; `*opt` unwraps an optional or fails naming it.
    fn unary(&self, op: UnOp, operand: &Expr, span: Span) -> Res<Val> {
        let v = self.expr(operand)?;
        let ts = v.owned();
        match (op, &v.ty) {
            (UnOp::Neg, Ty::Tensor) => Ok(Val::new(quote!(ops::neg(&(#ts))?), Ty::Tensor)),
            (UnOp::Neg, Ty::Int | Ty::Float) => Ok(Val::new(quote!((-#ts)), v.ty)),
            (UnOp::Plus, _) => Ok(v),
            (UnOp::Not, Ty::Bool) => Ok(Val::new(quote!((!#ts)), Ty::Bool)),
            (UnOp::Deref, Ty::Opt(inner)) => {
                let name = operand_name(operand);
                Ok(Val::new(quote!(d::value(#ts, #name)?), (**inner).clone()))
            }
            (op, t) => fail(span, format!("`{}` on a value of type {t}", op.as_str())),
        }
    }

    /// `cond ? then : otherwise`, one branch coerced to the other's type when
    /// they differ.
    fn ternary(&self, cond: &Expr, then: &Expr, otherwise: &Expr, span: Span) -> Res<Val> {
        let c = self.expr(cond)?;
        if c.ty != Ty::Bool {
            return fail(cond.span, format!("a condition of type {}", c.ty));
        }
        let (mut a, mut b) = (self.expr(then)?, self.expr(otherwise)?);
        if a.ty != b.ty {
            if let Some(x) = coerce(&a, &b.ty).filter(|_| fit(&a.ty, &b.ty).is_some()) {
                a = x;
            } else if let Some(y) = coerce(&b, &a.ty) {
                b = y;
            } else {
                return fail(
                    span,
                    format!("the branches have types {} and {}", a.ty, b.ty),
                );
            }
        }
        let (c, at, bt) = (c.owned(), a.owned(), b.owned());
        Ok(Val::new(quote!(if #c { #at } else { #bt }), a.ty))
    }

    /// `{a, b, ...}`: a list whose elements share one type (`{}` is an empty list
    /// of any type).
    fn braces(&self, items: &[Expr], span: Span) -> Res<Val> {
        if items.is_empty() {
            return Ok(Val::new(
                quote!(Vec::new()),
                Ty::List(Box::new(Ty::Nullopt)),
            ));
        }
        let vals = items
            .iter()
            .map(|i| self.expr(i))
            .collect::<Res<Vec<_>>>()?;
        let ty = vals[0].ty.clone();
        if vals.iter().any(|v| v.ty != ty) {
            return fail(span, "a list with elements of different types");
        }
        let ts = vals.iter().map(Val::owned);
        Ok(Val::new(quote!(vec![#(#ts),*]), Ty::List(Box::new(ty))))
    }

    fn name(&self, name: &str, span: Span) -> Res<Val> {
        if let Some(v) = self.vars.get(name) {
            return Ok(v.clone());
        }
        if let Some((_, c)) = CONSTANTS.iter().find(|c| c.0 == name) {
            let c = format_ident!("{}", c);
            return Ok(Val::new(quote!(::std::f64::consts::#c), Ty::Float));
        }
        fail(span, format!("`{name}` is not a variable of this formula"))
    }

    fn call(&self, callee: &Expr, args: &[Expr], span: Span) -> Res<Val> {
        // `std::tuple<Tensor, ...>()`: undefined tensors.
        if let ExprKind::Template { base, args: targs } = &callee.kind {
            let is_tuple = matches!(&base.kind, ExprKind::Path { segments, .. }
                if segments.last().is_some_and(|s| s == "tuple"));
            if is_tuple && args.is_empty() {
                let ts = targs.iter().map(|_| quote!(Tensor::undefined()));
                return Ok(Val::new(quote!((#(#ts),*)), Ty::Tuple(targs.len())));
            }
            // `std::get<N>(tuple)`.
            let is_get = matches!(&base.kind, ExprKind::Path { segments, .. }
                if segments.last().is_some_and(|s| s == "get"));
            if let (true, [ExprKind::Int(n)], [arg]) = (
                is_get,
                targs
                    .iter()
                    .map(|t| t.kind.clone())
                    .collect::<Vec<_>>()
                    .as_slice(),
                args,
            ) {
                let v = self.expr(arg)?;
                return match v.ty {
                    Ty::Tuple(len) if (*n as usize) < len => {
                        let (ts, i) = (v.owned(), syn::Index::from(*n as usize));
                        Ok(Val::new(quote!((#ts).#i), Ty::Tensor))
                    }
                    _ => fail(span, format!("`std::get<{n}>` of a value of type {}", v.ty)),
                };
            }
            return fail(
                span,
                "a template call other than `std::tuple<..>()` or `std::get<N>(..)`",
            );
        }
        let name = match &callee.kind {
            ExprKind::Ident(n) => n.clone(),
            ExprKind::Path { segments, .. } if segments.len() == 2 && segments[0] == "at" => {
                segments[1].clone()
            }
            _ => {
                return fail(
                    callee.span,
                    "a call of something that is not a function name",
                )
            }
        };
        let vals = args.iter().map(|a| self.expr(a)).collect::<Res<Vec<_>>>()?;
        self.resolve(&name, &vals, span)
    }

    /// A call of helper or operator `name` with `args`.
    fn resolve(&self, name: &str, args: &[Val], span: Span) -> Res<Val> {
        if let Some(sigs) = self.helpers.get(name) {
            for sig in sigs {
                if let Some(conv) = convert_args(args, &sig.params) {
                    let f = format_ident!("{}", sig.rust);
                    let ps = conv.iter().map(|(v, p)| match v {
                        Some(v) => v.as_helper_arg(),
                        None => p.default.clone().unwrap_or_default(),
                    });
                    return Ok(Val::new(quote!(d::#f(#(#ps),*)?), sig.ret.clone()));
                }
            }
            return fail(span, no_overload(name, args, "helper"));
        }
        let base = name.strip_suffix("_symint").unwrap_or(name);
        let cands = self.native.overloads(base);
        if cands.is_empty() {
            return fail(
                span,
                format!("`{name}` is neither a helper function (codegen/src/derivatives/helpers.rs, IMPLEMENTED) nor a native operator"),
            );
        }
        let mut best: Option<(u32, TokenStream, Ty)> = None;
        for (f, id) in cands {
            let Some(ret) = returns_ty(f) else { continue };
            let schema_args: Vec<_> = f
                .func
                .arguments
                .positional
                .iter()
                .chain(&f.func.arguments.kwarg_only)
                .collect();
            if args.len() > schema_args.len() {
                continue;
            }
            let mut score = 0;
            let mut parts = Vec::new();
            let mut ok = true;
            for (i, a) in schema_args.iter().enumerate() {
                let Some(pty) = Ty::of_schema(&a.ty) else {
                    ok = false;
                    break;
                };
                match args.get(i) {
                    Some(v) => match fit(&v.ty, &pty).and_then(|s| Some((s, coerce(v, &pty)?))) {
                        Some((s, c)) => {
                            score += s;
                            parts.push(c.as_op_arg(&a.ty));
                        }
                        None => {
                            ok = false;
                            break;
                        }
                    },
                    None => match a.default.as_deref().map(|d| defaults::parse(&a.ty, d)) {
                        Some(Ok(v)) => {
                            let e = defaults::arg_value(&a.ty, &v);
                            parts.push(quote!(#e));
                        }
                        _ => {
                            ok = false;
                            break;
                        }
                    },
                }
            }
            if ok && best.as_ref().is_none_or(|b| score < b.0) {
                let m = format_ident!("{}", id);
                best = Some((score, quote!(ops::#m::call(#(#parts),*)?), ret));
            }
        }
        match best {
            Some((_, ts, ty)) => Ok(Val::new(ts, ty)),
            None => fail(span, no_overload(name, args, "operator")),
        }
    }

    fn method(&self, recv: &Val, name: &str, args: &[Expr], span: Span) -> Res<Val> {
        let vals = args.iter().map(|a| self.expr(a)).collect::<Res<Vec<_>>>()?;
        let r = recv.as_helper_arg();
        let t = recv.ts.clone();
        let int_arg = |i: usize| -> Res<TokenStream> {
            match vals.get(i) {
                Some(v) if v.ty == Ty::Int => Ok(v.owned()),
                _ => fail(span, format!("`{name}` takes an int")),
            }
        };
        match (&recv.ty, name, vals.len()) {
            (Ty::Tensor, "sizes" | "sym_sizes", 0) => Ok(Val::new(
                quote!(#t.sizes().to_vec()),
                Ty::List(Box::new(Ty::Int)),
            )),
            (Ty::Tensor, "strides" | "sym_strides", 0) => Ok(Val::new(
                quote!(#t.strides().to_vec()),
                Ty::List(Box::new(Ty::Int)),
            )),
            (Ty::Tensor, "dim", 0) => Ok(Val::new(quote!((#t.dim() as i64)), Ty::Int)),
            (Ty::Tensor, "numel" | "sym_numel", 0) => Ok(Val::new(quote!(#t.numel()), Ty::Int)),
            (Ty::Tensor, "size" | "sym_size", 1) => {
                let d = int_arg(0)?;
                Ok(Val::new(quote!(d::size_at(#r, #d)?), Ty::Int))
            }
            (Ty::Tensor, "scalar_type", 0) => Ok(Val::new(quote!(#t.dtype()), Ty::DType)),
            (Ty::Tensor, "layout", 0) => Ok(Val::new(quote!(#t.layout()), Ty::Layout)),
            (Ty::Tensor, "device", 0) => Ok(Val::new(quote!(#t.device()), Ty::Device)),
            (Ty::Tensor, "options", 0) => Ok(Val::new(quote!(TensorOptions::of(#r)), Ty::Options)),
            (Ty::Tensor, "defined", 0) => Ok(Val::new(quote!(#t.is_defined()), Ty::Bool)),
            (Ty::Tensor, "is_floating_point", 0) => {
                Ok(Val::new(quote!(#t.dtype().is_floating_point()), Ty::Bool))
            }
            // Opal has no complex tensors: conjugation is the identity.
            (Ty::Tensor, "conj", 0) => Ok(recv.clone()),
            (Ty::Tensor, _, _) => {
                let mut all = vec![recv.clone()];
                all.extend(vals);
                self.resolve(name, &all, span)
            }
            (Ty::Opt(_), "has_value", 0) => Ok(Val::new(quote!(#t.is_some()), Ty::Bool)),
            (Ty::Opt(inner), "value", 0) => {
                let o = recv.owned();
                Ok(Val::new(quote!(d::value(#o, "value")?), (**inner).clone()))
            }
            (Ty::Scalar, "toDouble", 0) => Ok(Val::new(quote!(#t.to_f64()), Ty::Float)),
            (Ty::Scalar, "conj", 0) => Ok(recv.clone()),
            (ty, _, _) => fail(span, format!("no method `{name}` on a value of type {ty}")),
        }
    }

    fn binary(&self, op: BinOp, a: &Val, b: &Val, span: Span) -> Res<Val> {
        use BinOp::*;
        let numeric = |t: &Ty| matches!(t, Ty::Int | Ty::Float | Ty::Scalar);
        let (at, bt) = (a.owned(), b.owned());
        match (&a.ty, &b.ty) {
            (Ty::Tensor, Ty::Tensor) => {
                let Some(name) = tensor_op(op, true) else {
                    return fail(span, format!("`{}` on tensors", op.as_str()));
                };
                self.resolve(name, &[a.clone(), b.clone()], span)
            }
            (Ty::Tensor, t) if numeric(t) => {
                let Some(name) = tensor_op(op, false) else {
                    return fail(span, format!("`{}` on a tensor and a number", op.as_str()));
                };
                let s = coerce(b, &Ty::Scalar).expect("numbers become scalars");
                self.resolve(name, &[a.clone(), s.clone()], span)
                    .or_else(|_| {
                        // No `Scalar` overload in this operator set: the number as
                        // a 0-dim tensor of the other operand's dtype and device.
                        let (t, st) = (a.as_helper_arg(), s.owned());
                        let wrapped = Val::new(quote!(d::scalar_like(#t, #st)?), Ty::Tensor);
                        self.resolve(name, &[a.clone(), wrapped], span)
                    })
            }
            (t, Ty::Tensor) if numeric(t) => {
                let s = coerce(a, &Ty::Scalar).expect("numbers become scalars");
                match op {
                    Add | Mul => self.binary(op, b, a, span),
                    // s - t = (-t) + s; s / t = reciprocal(t) * s.
                    Sub => {
                        let n = self.resolve("neg", std::slice::from_ref(b), span)?;
                        self.resolve("add", &[n, s], span)
                    }
                    Div => {
                        let r = self.resolve("reciprocal", std::slice::from_ref(b), span)?;
                        self.resolve("mul", &[r, s], span)
                    }
                    _ => fail(span, format!("`{}` on a number and a tensor", op.as_str())),
                }
            }
            (x, y) if x.is_number() && y.is_number() => {
                let ty = if *x == Ty::Float || *y == Ty::Float {
                    Ty::Float
                } else {
                    x.clone()
                };
                let (l, r) = match ty {
                    Ty::Float => (
                        coerce(a, &Ty::Float).map_or(at.clone(), |v| v.owned()),
                        coerce(b, &Ty::Float).map_or(bt.clone(), |v| v.owned()),
                    ),
                    _ => (at.clone(), bt.clone()),
                };
                let (ts, ty) = match op {
                    Add => (quote!((#l + #r)), ty),
                    Sub => (quote!((#l - #r)), ty),
                    Mul => (quote!((#l * #r)), ty),
                    Div => (quote!((#l / #r)), ty),
                    Rem => (quote!((#l % #r)), ty),
                    Eq => (quote!((#l == #r)), Ty::Bool),
                    Ne => (quote!((#l != #r)), Ty::Bool),
                    Lt => (quote!((#l < #r)), Ty::Bool),
                    Gt => (quote!((#l > #r)), Ty::Bool),
                    Le => (quote!((#l <= #r)), Ty::Bool),
                    Ge => (quote!((#l >= #r)), Ty::Bool),
                    And => (quote!((#l && #r)), Ty::Bool),
                    Or => (quote!((#l || #r)), Ty::Bool),
                    _ => return fail(span, format!("`{}` on numbers", op.as_str())),
                };
                Ok(Val::new(ts, ty))
            }
            (x, y) => fail(
                span,
                format!("`{}` on values of types {x} and {y}", op.as_str()),
            ),
        }
    }
}

/// The native operator of C++ operator `op` on a tensor and a tensor (`both`) or
/// a tensor and a number; logical operators only between tensors.
fn tensor_op(op: BinOp, both: bool) -> Option<&'static str> {
    use BinOp::*;
    Some(match op {
        Add => "add",
        Sub => "sub",
        Mul => "mul",
        Div => "div",
        Eq => "eq",
        Ne => "ne",
        Lt => "lt",
        Gt => "gt",
        Le => "le",
        Ge => "ge",
        BitAnd | And if both => "logical_and",
        BitOr | Or if both => "logical_or",
        _ => return None,
    })
}

/// The name an operand is known by, for the "has no value" message.
fn operand_name(e: &Expr) -> String {
    e.as_ident().unwrap_or("value").to_string()
}

/// Matches `args` to `params` positionally: each argument converted, each left-out
/// parameter `None` (it has a default). `None` when they do not fit.
fn convert_args<'p>(args: &[Val], params: &'p [Param]) -> Option<Vec<(Option<Val>, &'p Param)>> {
    if args.len() > params.len() {
        return None;
    }
    params
        .iter()
        .enumerate()
        .map(|(i, p)| match args.get(i) {
            Some(v) => {
                fit(&v.ty, &p.ty)?;
                Some((Some(coerce(v, &p.ty)?), p))
            }
            None => p.default.as_ref().map(|_| (None, p)),
        })
        .collect()
}

fn no_overload(name: &str, args: &[Val], what: &str) -> String {
    let tys: Vec<String> = args.iter().map(|a| a.ty.to_string()).collect();
    format!("no overload of {what} `{name}` takes ({})", tys.join(", "))
}
