//! The types of formula values and how a value of one type becomes another.
//!
//! A formula works on a handful of kinds of value: tensors, numbers, scalars,
//! lists, optionals and a few metadata types. Every value the generated code holds
//! is *owned* (a `Tensor`, an `i64`, a `Vec<i64>`, ...); the generated code spells it,
//! [`coerce`] turns one into another where C++ would convert implicitly, and
//! [`Val::as_op_arg`] / [`Val::as_helper_arg`] borrow it the way a generated
//! operator or a runtime helper takes it.
//!
//! Owns: the type model of formulas and conversions. Must not: resolve names or
//! translate expressions (that is `formula`).

use proc_macro2::TokenStream;
use quote::quote;

use crate::ident::{Passing, Types};
use crate::model::{BaseTy, Type};

/// The type of a formula value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Ty {
    Tensor,
    Int,
    Float,
    Bool,
    Scalar,
    Str,
    DType,
    Device,
    Layout,
    MemoryFormat,
    /// `self.options()`: a tensor's dtype and device.
    Options,
    Opt(Box<Ty>),
    List(Box<Ty>),
    /// Several tensors returned at once (`std::tuple<Tensor, Tensor>`).
    Tuple(usize),
    /// `std::nullopt`: becomes any optional.
    Nullopt,
}

impl Ty {
    /// The formula type of a schema type (`None`: a type formulas cannot hold).
    pub fn of_schema(t: &Type) -> Option<Ty> {
        Some(match t {
            Type::Optional(inner) => Ty::Opt(Box::new(Ty::of_schema(inner)?)),
            Type::List { elem, .. } => Ty::List(Box::new(Ty::of_schema(elem)?)),
            Type::Base(b) => match b {
                BaseTy::Tensor => Ty::Tensor,
                BaseTy::Int | BaseTy::SymInt | BaseTy::DeviceIndex => Ty::Int,
                BaseTy::Float => Ty::Float,
                BaseTy::Bool | BaseTy::SymBool => Ty::Bool,
                BaseTy::Str => Ty::Str,
                BaseTy::Scalar => Ty::Scalar,
                BaseTy::ScalarType => Ty::DType,
                BaseTy::Device => Ty::Device,
                BaseTy::Layout => Ty::Layout,
                BaseTy::MemoryFormat => Ty::MemoryFormat,
                _ => return None,
            },
        })
    }

    /// Parses the type spelling of a helper signature: a schema type, or
    /// `TensorOptions`, `Tensor*N` (a tuple), `T[][]`.
    pub fn parse(s: &str) -> Option<Ty> {
        let s = s.trim();
        if let Some(inner) = s.strip_suffix('?') {
            return Some(Ty::Opt(Box::new(Ty::parse(inner)?)));
        }
        if let Some(inner) = s.strip_suffix("[]") {
            return Some(Ty::List(Box::new(Ty::parse(inner)?)));
        }
        if let Some(n) = s.strip_prefix("Tensor*") {
            return n.parse().ok().map(Ty::Tuple);
        }
        if s == "TensorOptions" {
            return Some(Ty::Options);
        }
        Ty::of_schema(&Type::Base(BaseTy::from_name(s)?))
    }

    /// Whether values are `Copy` (passed to helpers by value).
    pub fn is_copy(&self) -> bool {
        matches!(
            self,
            Ty::Int | Ty::Float | Ty::Bool | Ty::DType | Ty::Device | Ty::Layout | Ty::MemoryFormat
        )
    }

    pub fn is_number(&self) -> bool {
        matches!(self, Ty::Int | Ty::Float | Ty::Bool)
    }
}

impl std::fmt::Display for Ty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ty::Opt(t) => write!(f, "{t}?"),
            Ty::List(t) => write!(f, "{t}[]"),
            Ty::Tuple(n) => write!(f, "std::tuple of {n} tensors"),
            Ty::Nullopt => f.write_str("std::nullopt"),
            other => {
                let s = format!("{other:?}");
                f.write_str(match s.as_str() {
                    "Tensor" => "Tensor",
                    "Int" => "int",
                    "Float" => "float",
                    "Bool" => "bool",
                    "Scalar" => "Scalar",
                    "Str" => "str",
                    "DType" => "ScalarType",
                    "Device" => "Device",
                    "Layout" => "Layout",
                    "MemoryFormat" => "MemoryFormat",
                    _ => "TensorOptions",
                })
            }
        }
    }
}

/// A translated value: a Rust expression of an owned [`Ty`]. A `place` is a
/// variable: borrowing it needs no clone.
#[derive(Clone, Debug)]
pub(crate) struct Val {
    pub ts: TokenStream,
    pub ty: Ty,
    pub place: bool,
}

impl Val {
    pub fn new(ts: TokenStream, ty: Ty) -> Val {
        Val {
            ts,
            ty,
            place: false,
        }
    }

    pub fn place(ts: TokenStream, ty: Ty) -> Val {
        Val {
            ts,
            ty,
            place: true,
        }
    }

    /// The value as an owned expression (a variable is cloned unless `Copy`).
    pub fn owned(&self) -> TokenStream {
        let ts = &self.ts;
        if self.place && !self.ty.is_copy() {
            quote!(#ts.clone())
        } else {
            ts.clone()
        }
    }

    /// A shared borrow (`&x`), or the value itself for `Copy` types.
    pub fn as_helper_arg(&self) -> TokenStream {
        let ts = &self.ts;
        if self.ty.is_copy() {
            ts.clone()
        } else if self.place {
            quote!(&#ts)
        } else {
            quote!(&(#ts))
        }
    }

    /// The value as a generated operator takes an argument of schema type `t`.
    pub fn as_op_arg(&self, t: &Type) -> TokenStream {
        let ts = &self.ts;
        match Types::passing(t) {
            Passing::Value => self.owned(),
            Passing::Ref if self.place => quote!(&#ts),
            Passing::Ref => quote!(&(#ts)),
            Passing::OptRef => quote!((#ts).as_ref()),
            Passing::OptDeref => quote!((#ts).as_deref()),
        }
    }
}

/// How well an argument of type `from` fits a parameter of type `to`: `None` when
/// it does not, else the number of conversions (fewer is a better overload).
pub(crate) fn fit(from: &Ty, to: &Ty) -> Option<u32> {
    if from == to {
        return Some(0);
    }
    match (from, to) {
        (Ty::Nullopt, Ty::Opt(_)) => Some(1),
        (Ty::Int, Ty::Float | Ty::Scalar) => Some(1),
        (Ty::Float, Ty::Scalar) => Some(1),
        (Ty::Bool, Ty::Scalar) => Some(2),
        // C++'s IntArrayRef from one int: `sum(dim, true)`.
        (Ty::Int, Ty::List(e)) if **e == Ty::Int => Some(2),
        (Ty::List(a), Ty::List(b)) if **a == Ty::Nullopt => fit(&Ty::Int, b).map(|_| 0),
        (from, Ty::Opt(inner)) => fit(from, inner).map(|n| n + 1),
        _ => None,
    }
}

/// Converts `v` to type `to` (`fit` said it can).
pub(crate) fn coerce(v: &Val, to: &Ty) -> Option<Val> {
    if v.ty == *to {
        return Some(v.clone());
    }
    let owned = v.owned();
    let ts = match (&v.ty, to) {
        (Ty::Nullopt, Ty::Opt(_)) => quote!(None),
        (Ty::Int, Ty::Float) => quote!((#owned as f64)),
        (Ty::Int, Ty::Scalar) => quote!(Scalar::Int(#owned)),
        (Ty::Float, Ty::Scalar) => quote!(Scalar::Float(#owned)),
        (Ty::Bool, Ty::Scalar) => quote!(Scalar::Bool(#owned)),
        (Ty::Int, Ty::List(_)) => quote!(vec![#owned]),
        (Ty::List(a), Ty::List(_)) if **a == Ty::Nullopt => quote!(Vec::new()),
        (_, Ty::Opt(inner)) => {
            let inner = coerce(v, inner)?;
            let ts = inner.owned();
            quote!(Some(#ts))
        }
        _ => return None,
    };
    Some(Val::new(ts, to.clone()))
}
