//! Pinned-schema compatibility: decides, for an op a backend pinned to an older
//! schema, whether the current schema can be served by the old kernel through a
//! generated adapter, or is a codegen error.
//!
//! Compatible ("adapter") means the current schema differs from the pinned one only
//! by added arguments that have defaults (anywhere in the list) and by types Opal
//! represents by the same Rust type (`int`/`SymInt`, `int[]`/`SymInt[]`/`int[N]`, ...).
//! Everything else (a new required argument, a removed, renamed, reordered or retyped
//! argument, a changed alias annotation, changed returns) is an [`Incompatibility`].
//!
//! Owns: the classification on model values. Must not: read YAML, render
//! diagnostics or emit code.

use crate::emit::defaults::{self, Value};
use crate::ident::Types;
use crate::model::{Argument, FunctionSchema, Loc, Type};

/// How a supported op's kernel relates to the current schema.
#[derive(Clone, Debug, PartialEq)]
pub enum Compat {
    /// Same Rust signature: the kernel is registered as it is.
    Identical,
    /// The current schema adds defaulted arguments: registration wraps the kernel.
    Adapter { added: Vec<AddedArg> },
}

/// An argument of the current schema that the pinned kernel predates.
#[derive(Clone, Debug, PartialEq)]
pub struct AddedArg {
    /// Position in the current schema's argument list (schema order).
    pub index: usize,
    pub name: String,
    pub ty: Type,
    /// The default literal as written in the native YAML.
    pub default: String,
    /// The default as a value: what "the caller passed the default" means.
    pub(crate) value: Value,
    pub loc: Loc,
}

/// What is wrong with a pinned schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incompatibility {
    /// One-line description (`argument 'alpha' was retyped: int -> float`).
    pub message: String,
    /// Location in the pinned schema (backend YAML) to underline.
    pub pinned_loc: Loc,
    /// Location in the native YAML to underline.
    pub current_loc: Loc,
    /// What the backend author can do about it.
    pub hint: String,
}

/// Whether Opal gives both schema types the same Rust type (the argument form of
/// `crate::ident`, which also fixes the owned form).
pub(crate) fn same_repr(a: &Type, b: &Type) -> bool {
    let t = Types;
    a == b || t.arg(a).to_string() == t.arg(b).to_string()
}

fn describe(arg: &Argument) -> String {
    // The canonical form without the default: `int[] dims`, `Tensor(a!) out`.
    let mut a = arg.clone();
    a.default = None;
    a.to_string()
}

/// Classifies a pinned schema against the current one (same operator name).
pub fn classify(
    pinned: &FunctionSchema,
    current: &FunctionSchema,
) -> Result<Compat, Incompatibility> {
    let op = current.name.to_string();
    // Returns first: a kernel cannot produce values it never knew about.
    check_returns(&op, pinned, current)?;
    let p_args: Vec<&Argument> = pinned.arguments.all().collect();
    let p_out_start = pinned.arguments.positional.len() + pinned.arguments.kwarg_only.len();
    let c_out_start = current.arguments.positional.len() + current.arguments.kwarg_only.len();
    let mut added = Vec::new();
    let mut j = 0;
    for (i, c) in current.arguments.all().enumerate() {
        let c_is_out = i >= c_out_start;
        if let Some(p) = p_args.get(j).filter(|p| p.name == c.name) {
            check_kept(&op, p, j >= p_out_start, c, c_is_out)?;
            j += 1;
            continue;
        }
        // `c` is not the next pinned argument: it must be a new, defaulted one.
        let Some(default) = c.default.clone().filter(|_| !c_is_out) else {
            return Err(not_added(&op, pinned, &p_args[j..], c));
        };
        added.push(added_arg(&op, pinned, i, c, default)?);
    }
    if let Some(p) = p_args.get(j) {
        return Err(dropped(&op, p, current));
    }
    if added.is_empty() {
        Ok(Compat::Identical)
    } else {
        Ok(Compat::Adapter { added })
    }
}

/// The returns agree in count, Rust type and alias annotation.
fn check_returns(
    op: &str,
    pinned: &FunctionSchema,
    current: &FunctionSchema,
) -> Result<(), Incompatibility> {
    let same = pinned.returns.len() == current.returns.len()
        && pinned
            .returns
            .iter()
            .zip(&current.returns)
            .all(|(p, c)| same_repr(&p.ty, &c.ty) && p.annotation == c.annotation);
    if same {
        return Ok(());
    }
    let show = |s: &FunctionSchema| {
        let parts: Vec<String> = s
            .returns
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.name = None;
                r.to_string()
            })
            .collect();
        if parts.len() == 1 {
            parts[0].clone()
        } else {
            format!("({})", parts.join(", "))
        }
    };
    Err(Incompatibility {
        message: format!(
            "the returns of '{op}' changed: pinned {} -> current {}",
            show(pinned),
            show(current)
        ),
        pinned_loc: pinned.returns.first().map_or(pinned.loc, |r| r.loc),
        current_loc: current.returns.first().map_or(current.loc, |r| r.loc),
        hint: "an adapter can only supply defaulted arguments; update the kernel to the \
               current schema and its `func:` pin (or drop the pin)"
            .into(),
    })
}

/// An argument both schemas have (same name, same place): same Rust type, same
/// alias annotation, out= in both or in neither.
fn check_kept(
    op: &str,
    p: &Argument,
    p_is_out: bool,
    c: &Argument,
    c_is_out: bool,
) -> Result<(), Incompatibility> {
    let (message, hint) = if !same_repr(&p.ty, &c.ty) {
        (
            format!(
                "argument '{}' of '{op}' was retyped: pinned {} -> current {}",
                c.name, p.ty, c.ty
            ),
            "only types Opal represents identically (int/SymInt, \
             int[]/SymInt[]) are adapted; update the kernel's signature and pin",
        )
    } else if p.annotation != c.annotation {
        (
            format!(
                "the alias annotation of argument '{}' of '{op}' changed: pinned \
                 '{}' -> current '{}'",
                c.name,
                describe(p),
                describe(c)
            ),
            "a change in what an argument aliases or mutates changes what the \
             kernel must do; review the kernel and update its pin",
        )
    } else if p_is_out != c_is_out {
        (
            format!(
                "argument '{}' of '{op}' {} an out= argument",
                c.name,
                if c_is_out { "became" } else { "is no longer" }
            ),
            "update the kernel and its pin to the current schema",
        )
    } else {
        return Ok(());
    };
    Err(Incompatibility {
        message,
        pinned_loc: p.loc,
        current_loc: c.loc,
        hint: hint.into(),
    })
}

/// Why the current argument `c`, which is not the next pinned one (`rest[0]`,
/// if any), cannot be supplied by an adapter: reordered, renamed or new and
/// required.
fn not_added(
    op: &str,
    pinned: &FunctionSchema,
    rest: &[&Argument],
    c: &Argument,
) -> Incompatibility {
    let (message, hint) = match rest.first() {
        Some(p) if rest[1..].iter().any(|q| q.name == c.name) => (
            format!(
                "arguments of '{op}' were reordered: '{}' now comes before '{}'",
                c.name, p.name
            ),
            "the kernel's parameters follow the pinned order; update the kernel and \
             its pin"
                .to_string(),
        ),
        Some(p) if same_repr(&p.ty, &c.ty) => (
            format!(
                "argument '{}' of '{op}' is new and required (no default); was '{}' \
                 renamed to '{}'?",
                c.name, p.name, c.name
            ),
            format!(
                "if only the name changed, write '{}' in the pinned `func:`; otherwise \
                 the kernel must handle the new argument",
                describe(c)
            ),
        ),
        _ => (
            format!(
                "'{op}' has a new required argument '{}' (no default)",
                describe(c)
            ),
            "an old kernel cannot receive an argument it does not know and that has no \
             default; update the kernel and its pin to the current schema"
                .to_string(),
        ),
    };
    Incompatibility {
        message,
        pinned_loc: rest.first().map_or(pinned.loc, |p| p.loc),
        current_loc: c.loc,
        hint,
    }
}

/// A new defaulted argument at place `index`, with its default as a value.
fn added_arg(
    op: &str,
    pinned: &FunctionSchema,
    index: usize,
    c: &Argument,
    default: String,
) -> Result<AddedArg, Incompatibility> {
    let value = defaults::parse(&c.ty, &default).map_err(|why| Incompatibility {
        message: format!(
            "the default '{default}' of the new argument '{}' of '{op}' cannot be checked \
             at run time: {why}",
            describe(c)
        ),
        pinned_loc: pinned.loc,
        current_loc: c.loc,
        hint: "update the kernel and its pin to the current schema".into(),
    })?;
    Ok(AddedArg {
        index,
        name: c.name.clone(),
        ty: c.ty.clone(),
        default,
        value,
        loc: c.loc,
    })
}

/// A pinned argument the current schema does not have where the kernel expects it.
fn dropped(op: &str, p: &Argument, current: &FunctionSchema) -> Incompatibility {
    let hint = if current.arguments.all().any(|c| c.name == p.name) {
        "arguments were reordered; the kernel's parameters follow the pinned order"
    } else {
        "the kernel expects an argument the current schema no longer passes; update the \
         kernel and its pin"
    };
    Incompatibility {
        message: format!(
            "argument '{}' of the pinned schema is not in the current '{op}' (removed, \
             renamed or moved)",
            describe(p)
        ),
        pinned_loc: p.loc,
        current_loc: current.loc,
        hint: hint.into(),
    }
}
