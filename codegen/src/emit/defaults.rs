//! Default values: the literal forms of schema defaults (`1`, `-1`, `[0,1]`, `None`,
//! `"mean"`, `Mean`, `contiguous_format`, `long`, `1e-5`, `True`) translated into
//! Rust expressions, both as the owned Rust value (options fields) and as the
//! `IValue` an `ArgDef.default` fn produces.
//!
//! Owns: literal parsing per type and the two renderings. Must not: emit items or
//! decide names (see `crate::ident`).

use proc_macro2::{Literal, TokenStream};
use quote::{quote, ToTokens};
use syn::Expr;

use super::ast::{self, call_path, p};
use crate::ident::{Passing, Types};
use crate::model::{BaseTy, Type};

/// A parsed default literal.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    /// `None` for an optional type.
    None,
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    /// `Scalar` defaults keep their numeric kind.
    ScalarInt(i64),
    ScalarFloat(f64),
    ScalarBool(bool),
    /// Variant name of `DType`.
    DType(&'static str),
    /// Variant name of `MemoryFormat`.
    MemoryFormat(&'static str),
    /// Variant name of `Layout`.
    Layout(&'static str),
    IntList(Vec<i64>),
    FloatList(Vec<f64>),
    BoolList(Vec<bool>),
    StrList(Vec<String>),
}

/// Parses the literal `lit` as a default of type `ty`. Errors say why the literal
/// does not belong to the type.
pub(crate) fn parse(ty: &Type, lit: &str) -> Result<Value, String> {
    let lit = lit.trim();
    match ty {
        Type::Optional(inner) => {
            if lit == "None" {
                Ok(Value::None)
            } else {
                parse(inner, lit)
            }
        }
        Type::List { elem, size } => parse_list(elem, *size, lit),
        Type::Base(b) => parse_base(*b, lit),
    }
}

fn bad(ty: impl std::fmt::Display, lit: &str) -> String {
    format!("default `{lit}` is not a value of type `{ty}`")
}

fn parse_int(lit: &str) -> Option<i64> {
    lit.parse::<i64>().ok()
}

fn parse_float(lit: &str) -> Option<f64> {
    match lit {
        "inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        "nan" => Some(f64::NAN),
        _ => lit.parse::<f64>().ok(),
    }
}

fn parse_bool(lit: &str) -> Option<bool> {
    match lit {
        "True" => Some(true),
        "False" => Some(false),
        _ => None,
    }
}

/// `"..."` or `'...'` with backslash escapes.
fn parse_str(lit: &str) -> Option<String> {
    let q = lit.chars().next()?;
    if (q != '"' && q != '\'') || lit.len() < 2 || !lit.ends_with(q) {
        return None;
    }
    let body = &lit[1..lit.len() - 1];
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                '0' => out.push('\0'),
                other => out.push(other),
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// PyTorch's spellings of dtypes in defaults -> `DType` variant names.
fn dtype(lit: &str) -> Option<&'static str> {
    Some(match lit {
        "bool" | "Bool" => "Bool",
        "uint8" | "byte" | "Byte" => "U8",
        "int8" | "char" | "Char" => "I8",
        "int16" | "short" | "Short" => "I16",
        "int32" | "int" | "Int" => "I32",
        "int64" | "long" | "Long" => "I64",
        "float16" | "half" | "Half" => "F16",
        "bfloat16" | "BFloat16" => "BF16",
        "float32" | "float" | "Float" => "F32",
        "float64" | "double" | "Double" => "F64",
        "complex64" | "cfloat" | "ComplexFloat" => "C64",
        "complex128" | "cdouble" | "ComplexDouble" => "C128",
        _ => return None,
    })
}

fn parse_base(b: BaseTy, lit: &str) -> Result<Value, String> {
    let err = || bad(b.as_str(), lit);
    match b {
        BaseTy::Int | BaseTy::SymInt | BaseTy::DeviceIndex => match lit {
            // at::Reduction, spelled by name in PyTorch's loss functions.
            "None" if b == BaseTy::Int => Err(err()),
            "Mean" => Ok(Value::Int(1)),
            "Sum" => Ok(Value::Int(2)),
            _ => parse_int(lit).map(Value::Int).ok_or_else(err),
        },
        BaseTy::Float => parse_float(lit).map(Value::Float).ok_or_else(err),
        BaseTy::Bool | BaseTy::SymBool => parse_bool(lit).map(Value::Bool).ok_or_else(err),
        BaseTy::Str => parse_str(lit).map(Value::Str).ok_or_else(err),
        BaseTy::Scalar => {
            if let Some(i) = parse_int(lit) {
                Ok(Value::ScalarInt(i))
            } else if let Some(b) = parse_bool(lit) {
                Ok(Value::ScalarBool(b))
            } else {
                parse_float(lit).map(Value::ScalarFloat).ok_or_else(err)
            }
        }
        BaseTy::ScalarType => dtype(lit).map(Value::DType).ok_or_else(err),
        BaseTy::MemoryFormat => match lit {
            "contiguous_format" => Ok(Value::MemoryFormat("Contiguous")),
            "preserve_format" => Ok(Value::MemoryFormat("Preserve")),
            "channels_last" => Ok(Value::MemoryFormat("ChannelsLast")),
            "channels_last_3d" => Ok(Value::MemoryFormat("ChannelsLast3d")),
            _ => Err(err()),
        },
        BaseTy::Layout => match lit {
            "strided" => Ok(Value::Layout("Strided")),
            _ => Err(err()),
        },
        BaseTy::DimVector => parse_list(&Type::Base(BaseTy::Int), None, lit),
        _ => Err(format!(
            "defaults of type `{}` are not supported (`{lit}`)",
            b.as_str()
        )),
    }
}

fn split_list(lit: &str) -> Option<Vec<&str>> {
    let body = lit.strip_prefix('[')?.strip_suffix(']')?.trim();
    if body.is_empty() {
        return Some(Vec::new());
    }
    Some(body.split(',').map(str::trim).collect())
}

fn parse_list(elem: &Type, size: Option<u32>, lit: &str) -> Result<Value, String> {
    let list_ty = Type::List {
        elem: Box::new(elem.clone()),
        size,
    };
    let err = || bad(&list_ty, lit);
    // A single value for a fixed-size list repeats it `size` times (`int[2] stride=1`).
    let items: Vec<&str> = match split_list(lit) {
        Some(items) => items,
        None => match size {
            Some(n) => std::iter::repeat_n(lit, n as usize).collect(),
            None => return Err(err()),
        },
    };
    // Every item read by `parse`, or none.
    fn each<T>(
        items: &[&str],
        parse: fn(&str) -> Option<T>,
        list: fn(Vec<T>) -> Value,
    ) -> Option<Value> {
        items
            .iter()
            .map(|s| parse(s))
            .collect::<Option<_>>()
            .map(list)
    }
    match elem {
        Type::Base(BaseTy::Int | BaseTy::SymInt) => {
            each(&items, parse_int, Value::IntList).ok_or_else(err)
        }
        Type::Base(BaseTy::Float) => each(&items, parse_float, Value::FloatList).ok_or_else(err),
        Type::Base(BaseTy::Bool) => each(&items, parse_bool, Value::BoolList).ok_or_else(err),
        Type::Base(BaseTy::Str) => each(&items, parse_str, Value::StrList).ok_or_else(err),
        _ if items.is_empty() => Err(format!(
            "defaults of type `{list_ty}` are not supported (`{lit}`)"
        )),
        _ => Err(err()),
    }
}

fn float(v: f64) -> Expr {
    if v.is_nan() {
        p(&["f64", "NAN"])
    } else if v == f64::INFINITY {
        p(&["f64", "INFINITY"])
    } else if v == f64::NEG_INFINITY {
        p(&["f64", "NEG_INFINITY"])
    } else {
        ast::literal(Literal::f64_unsuffixed(v))
    }
}

fn int(v: i64) -> Expr {
    ast::literal(Literal::i64_unsuffixed(v))
}

fn string(s: &str) -> Expr {
    call_path(&["String", "from"], [ast::str_lit(s)])
}

/// The owned Rust value of a default (`Some(..)` for optional types).
pub(crate) fn owned_value(ty: &Type, v: &Value) -> Expr {
    if let Type::Optional(inner) = ty {
        return match v {
            Value::None => p(&["None"]),
            v => ast::some(owned_value(inner, v)),
        };
    }
    value_expr(v)
}

/// `vec![items..]`.
fn vec_of(items: impl Iterator<Item = Expr>) -> Expr {
    ast::bracket_macro("vec", quote!(#(#items),*))
}

/// `&[items..]`.
fn slice_of(items: impl Iterator<Item = Expr>) -> Expr {
    ast::reference(ast::array(items))
}

/// The plain Rust expression of a value (no `Option` wrapping).
fn value_expr(v: &Value) -> Expr {
    match v {
        Value::None => p(&["None"]),
        Value::Int(i) => int(*i),
        Value::Float(f) => float(*f),
        Value::Bool(b) => ast::bool_lit(*b),
        Value::Str(s) => string(s),
        Value::ScalarInt(i) => call_path(&["Scalar", "Int"], [int(*i)]),
        Value::ScalarFloat(f) => call_path(&["Scalar", "Float"], [float(*f)]),
        Value::ScalarBool(b) => call_path(&["Scalar", "Bool"], [ast::bool_lit(*b)]),
        Value::DType(d) => p(&["DType", d]),
        Value::MemoryFormat(m) => p(&["MemoryFormat", m]),
        Value::Layout(l) => p(&["Layout", l]),
        Value::IntList(xs) => vec_of(xs.iter().map(|x| int(*x))),
        Value::FloatList(xs) => vec_of(xs.iter().map(|x| float(*x))),
        Value::BoolList(xs) => vec_of(xs.iter().map(|b| ast::bool_lit(*b))),
        Value::StrList(xs) => vec_of(xs.iter().map(|s| string(s))),
    }
}

/// A value in borrowed argument form (see `crate::ident::Passing`): `&[0, 1]` for
/// lists, `"mean"` for strings, `&Scalar::Int(1)`, `Some(&[..])` for optional lists.
pub(crate) fn arg_value(ty: &Type, v: &Value) -> Expr {
    match (Types::passing(ty), v) {
        (Passing::Value, _) => owned_value(ty, v),
        (_, Value::None) => p(&["None"]),
        (Passing::Ref, _) => borrowed(v),
        (Passing::OptRef | Passing::OptDeref, _) => ast::some(borrowed(v)),
    }
}

/// [`arg_value`] as tokens (for the backend generator).
pub(crate) fn arg_expr(ty: &Type, v: &Value) -> TokenStream {
    arg_value(ty, v).into_token_stream()
}

/// `&value` without allocating where a literal slice or `&str` does.
fn borrowed(v: &Value) -> Expr {
    match v {
        Value::Str(s) => ast::str_lit(s),
        Value::IntList(xs) => slice_of(xs.iter().map(|x| int(*x))),
        Value::FloatList(xs) => slice_of(xs.iter().map(|x| float(*x))),
        Value::BoolList(xs) => slice_of(xs.iter().map(|b| ast::bool_lit(*b))),
        Value::StrList(xs) => slice_of(xs.iter().map(|s| string(s))),
        v => ast::reference(value_expr(v)),
    }
}

/// The `IValue` a default stands for (optional types hold their inner value).
pub(crate) fn ivalue_expr(v: &Value) -> Expr {
    let variant = match v {
        Value::None => return p(&["IValue", "None"]),
        Value::Int(_) => "Int",
        Value::Float(_) => "Double",
        Value::Bool(_) => "Bool",
        Value::Str(_) => "Str",
        Value::ScalarInt(_) | Value::ScalarFloat(_) | Value::ScalarBool(_) => "Scalar",
        Value::DType(_) => "DType",
        Value::MemoryFormat(_) => "MemoryFormat",
        Value::Layout(_) => "Layout",
        Value::IntList(_) => "IntList",
        Value::FloatList(_) => "DoubleList",
        Value::BoolList(_) => "BoolList",
        Value::StrList(_) => "StrList",
    };
    call_path(&["IValue", variant], [value_expr(v)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(t: BaseTy) -> Type {
        Type::Base(t)
    }
    fn opt(t: Type) -> Type {
        Type::Optional(Box::new(t))
    }
    fn list(t: Type, size: Option<u32>) -> Type {
        Type::List {
            elem: Box::new(t),
            size,
        }
    }

    #[test]
    fn literal_forms() {
        assert_eq!(parse(&b(BaseTy::Int), "-1"), Ok(Value::Int(-1)));
        assert_eq!(parse(&b(BaseTy::Int), "Mean"), Ok(Value::Int(1)));
        assert_eq!(parse(&b(BaseTy::Float), "1e-05"), Ok(Value::Float(1e-5)));
        assert_eq!(parse(&b(BaseTy::Bool), "True"), Ok(Value::Bool(true)));
        assert_eq!(
            parse(&b(BaseTy::Str), r#""\"'\\""#),
            Ok(Value::Str("\"'\\".into()))
        );
        assert_eq!(
            parse(&b(BaseTy::Str), "'none'"),
            Ok(Value::Str("none".into()))
        );
        assert_eq!(parse(&b(BaseTy::Scalar), "1"), Ok(Value::ScalarInt(1)));
        assert_eq!(
            parse(&b(BaseTy::Scalar), "0.5"),
            Ok(Value::ScalarFloat(0.5))
        );
        assert_eq!(
            parse(&opt(b(BaseTy::ScalarType)), "long"),
            Ok(Value::DType("I64"))
        );
        assert_eq!(parse(&opt(b(BaseTy::Tensor)), "None"), Ok(Value::None));
        assert_eq!(
            parse(&b(BaseTy::MemoryFormat), "contiguous_format"),
            Ok(Value::MemoryFormat("Contiguous"))
        );
        assert_eq!(
            parse(&list(b(BaseTy::SymInt), Some(2)), "1"),
            Ok(Value::IntList(vec![1, 1]))
        );
        assert_eq!(
            parse(&list(b(BaseTy::Int), Some(1)), "[-2,-1]"),
            Ok(Value::IntList(vec![-2, -1]))
        );
        assert_eq!(
            parse(&list(b(BaseTy::Int), None), "[]"),
            Ok(Value::IntList(vec![]))
        );
        assert_eq!(
            parse(&list(b(BaseTy::Bool), Some(3)), "[True, False, True]"),
            Ok(Value::BoolList(vec![true, false, true]))
        );
        assert!(parse(&b(BaseTy::Tensor), "1").is_err());
        assert!(parse(&b(BaseTy::Int), "x").is_err());
        assert!(parse(&b(BaseTy::Int), "None").is_err());
    }

    #[test]
    fn renderings() {
        let s = |e: Expr| e.into_token_stream().to_string().replace(' ', "");
        assert_eq!(
            s(owned_value(
                &opt(b(BaseTy::ScalarType)),
                &Value::DType("I64")
            )),
            "Some(DType::I64)"
        );
        assert_eq!(
            s(ivalue_expr(&Value::ScalarInt(1))),
            "IValue::Scalar(Scalar::Int(1))"
        );
        assert_eq!(
            s(ivalue_expr(&Value::Float(1e-5))),
            "IValue::Double(0.00001)"
        );
        assert_eq!(
            s(value_expr(&Value::Float(f64::NEG_INFINITY))),
            "f64::NEG_INFINITY"
        );
        assert_eq!(
            s(ivalue_expr(&Value::IntList(vec![0, 1]))),
            "IValue::IntList(vec![0,1])"
        );
    }
}
