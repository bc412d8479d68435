//! Default values: the literal forms of schema defaults (`1`, `-1`, `[0,1]`, `None`,
//! `"mean"`, `Mean`, `contiguous_format`, `long`, `1e-5`, `True`) translated into
//! Rust expressions, both as the owned Rust value (options fields) and as the
//! `IValue` an `ArgDef.default` fn produces.
//!
//! Owns: literal parsing per type and the two renderings. Must not: emit items or
//! decide names (see `crate::ident`).

use proc_macro2::{Literal, TokenStream};
use quote::quote;

use crate::ident::{Passing, Types};
use crate::model::{BaseTy, Type};

/// A parsed default literal.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
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
pub fn parse(ty: &Type, lit: &str) -> Result<Value, String> {
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
    match elem {
        Type::Base(BaseTy::Int | BaseTy::SymInt) => items
            .iter()
            .map(|s| parse_int(s))
            .collect::<Option<Vec<_>>>()
            .map(Value::IntList)
            .ok_or_else(err),
        Type::Base(BaseTy::Float) => items
            .iter()
            .map(|s| parse_float(s))
            .collect::<Option<Vec<_>>>()
            .map(Value::FloatList)
            .ok_or_else(err),
        Type::Base(BaseTy::Bool) => items
            .iter()
            .map(|s| parse_bool(s))
            .collect::<Option<Vec<_>>>()
            .map(Value::BoolList)
            .ok_or_else(err),
        Type::Base(BaseTy::Str) => items
            .iter()
            .map(|s| parse_str(s))
            .collect::<Option<Vec<_>>>()
            .map(Value::StrList)
            .ok_or_else(err),
        _ if items.is_empty() => Err(format!(
            "defaults of type `{list_ty}` are not supported (`{lit}`)"
        )),
        _ => Err(err()),
    }
}

fn float(v: f64) -> TokenStream {
    if v.is_nan() {
        quote!(f64::NAN)
    } else if v == f64::INFINITY {
        quote!(f64::INFINITY)
    } else if v == f64::NEG_INFINITY {
        quote!(f64::NEG_INFINITY)
    } else {
        let l = Literal::f64_unsuffixed(v);
        quote!(#l)
    }
}

fn int(v: i64) -> TokenStream {
    let l = Literal::i64_unsuffixed(v);
    quote!(#l)
}

fn string(s: &str) -> TokenStream {
    let l = Literal::string(s);
    quote!(String::from(#l))
}

/// The owned Rust value of a default (`Some(..)` for optional types).
pub fn owned_expr(ty: &Type, v: &Value) -> TokenStream {
    if let Type::Optional(inner) = ty {
        return match v {
            Value::None => quote!(None),
            v => {
                let e = owned_expr(inner, v);
                quote!(Some(#e))
            }
        };
    }
    value_expr(v)
}

/// The plain Rust expression of a value (no `Option` wrapping).
fn value_expr(v: &Value) -> TokenStream {
    match v {
        Value::None => quote!(None),
        Value::Int(i) => int(*i),
        Value::Float(f) => float(*f),
        Value::Bool(b) => quote!(#b),
        Value::Str(s) => string(s),
        Value::ScalarInt(i) => {
            let i = int(*i);
            quote!(Scalar::Int(#i))
        }
        Value::ScalarFloat(f) => {
            let f = float(*f);
            quote!(Scalar::Float(#f))
        }
        Value::ScalarBool(b) => quote!(Scalar::Bool(#b)),
        Value::DType(d) => {
            let d = crate::ident::ident(d);
            quote!(DType::#d)
        }
        Value::MemoryFormat(m) => {
            let m = crate::ident::ident(m);
            quote!(MemoryFormat::#m)
        }
        Value::Layout(l) => {
            let l = crate::ident::ident(l);
            quote!(Layout::#l)
        }
        Value::IntList(xs) => {
            let xs = xs.iter().map(|x| int(*x));
            quote!(vec![#(#xs),*])
        }
        Value::FloatList(xs) => {
            let xs = xs.iter().map(|x| float(*x));
            quote!(vec![#(#xs),*])
        }
        Value::BoolList(xs) => quote!(vec![#(#xs),*]),
        Value::StrList(xs) => {
            let xs = xs.iter().map(|s| string(s));
            quote!(vec![#(#xs),*])
        }
    }
}

/// A value in borrowed argument form (see `crate::ident::Passing`): `&[0, 1]` for
/// lists, `"mean"` for strings, `&Scalar::Int(1)`, `Some(&[..])` for optional lists.
pub fn arg_expr(ty: &Type, v: &Value) -> TokenStream {
    match (Types::passing(ty), v) {
        (Passing::Value, _) => owned_expr(ty, v),
        (_, Value::None) => quote!(None),
        (Passing::Ref, _) => borrowed(v),
        (Passing::OptRef | Passing::OptDeref, _) => {
            let e = borrowed(v);
            quote!(Some(#e))
        }
    }
}

/// `&value` without allocating where a literal slice or `&str` does.
fn borrowed(v: &Value) -> TokenStream {
    match v {
        Value::Str(s) => {
            let l = Literal::string(s);
            quote!(#l)
        }
        Value::IntList(xs) => {
            let xs = xs.iter().map(|x| int(*x));
            quote!(&[#(#xs),*])
        }
        Value::FloatList(xs) => {
            let xs = xs.iter().map(|x| float(*x));
            quote!(&[#(#xs),*])
        }
        Value::BoolList(xs) => quote!(&[#(#xs),*]),
        Value::StrList(xs) => {
            let xs = xs.iter().map(|s| string(s));
            quote!(&[#(#xs),*])
        }
        v => {
            let e = value_expr(v);
            quote!(&#e)
        }
    }
}

/// The `IValue` a default stands for (optional types hold their inner value).
pub fn ivalue_expr(v: &Value) -> TokenStream {
    let iv = quote!(IValue);
    let e = value_expr(v);
    match v {
        Value::None => quote!(#iv::None),
        Value::Int(_) => quote!(#iv::Int(#e)),
        Value::Float(_) => quote!(#iv::Double(#e)),
        Value::Bool(_) => quote!(#iv::Bool(#e)),
        Value::Str(_) => quote!(#iv::Str(#e)),
        Value::ScalarInt(_) | Value::ScalarFloat(_) | Value::ScalarBool(_) => {
            quote!(#iv::Scalar(#e))
        }
        Value::DType(_) => quote!(#iv::DType(#e)),
        Value::MemoryFormat(_) => quote!(#iv::MemoryFormat(#e)),
        Value::Layout(_) => quote!(#iv::Layout(#e)),
        Value::IntList(_) => quote!(#iv::IntList(#e)),
        Value::FloatList(_) => quote!(#iv::DoubleList(#e)),
        Value::BoolList(_) => quote!(#iv::BoolList(#e)),
        Value::StrList(_) => quote!(#iv::StrList(#e)),
    }
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
        let s = |t: TokenStream| t.to_string().replace(' ', "");
        assert_eq!(
            s(owned_expr(
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
