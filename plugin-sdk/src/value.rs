//! [`Value`]: a boxed argument or return on the plugin side, and its conversion to
//! and from [`OpalValue`].
//!
//! Owns: value marshalling on the plugin side. Must not: call the host.

use crate::abi::{self, scalar_kind, tag, OpalTensor, OpalValue};
use crate::{DType, Device, Error, Result, Tensor};

/// A `Scalar` argument.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Scalar {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A complex number.
    Complex(f64, f64),
}

impl Scalar {
    /// As `f64` (the real part of a complex).
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
            Scalar::Bool(b) => f64::from(u8::from(b)),
            Scalar::Complex(re, _) => re,
        }
    }
}

/// One boxed value.
#[derive(Clone, Debug)]
pub enum Value {
    /// None / an absent optional.
    None,
    /// A tensor.
    Tensor(Tensor),
    /// `int`.
    Int(i64),
    /// `float`.
    Double(f64),
    /// `bool`.
    Bool(bool),
    /// `str` (arguments only in ABI 1.0).
    Str(String),
    /// `Scalar`.
    Scalar(Scalar),
    /// `ScalarType`.
    DType(DType),
    /// `Device`.
    Device(Device),
    /// `Layout` (0: strided).
    Layout(i64),
    /// `MemoryFormat` code.
    MemoryFormat(i64),
    /// A list, with the tag of its elements (arguments only in ABI 1.0).
    List(u32, Vec<Value>),
    /// (1.4) `Generator` (arguments only: borrowed for the call).
    Generator(crate::Generator),
}

impl Value {
    /// The tensor, or an error naming what was expected.
    pub fn tensor(&self) -> Result<&Tensor> {
        match self {
            Value::Tensor(t) => Ok(t),
            v => Err(Error::msg(format!("expected a tensor, got {v:?}"))),
        }
    }

    /// The scalar (ints and floats count).
    pub fn scalar(&self) -> Result<Scalar> {
        match self {
            Value::Scalar(s) => Ok(*s),
            Value::Int(i) => Ok(Scalar::Int(*i)),
            Value::Double(d) => Ok(Scalar::Float(*d)),
            v => Err(Error::msg(format!("expected a scalar, got {v:?}"))),
        }
    }

    /// True for [`Value::None`].
    pub fn is_none(&self) -> bool {
        matches!(self, Value::None)
    }
}

/// Borrowed ABI values of plugin values (lists live in `lists`).
#[derive(Default)]
pub(crate) struct Marshal {
    pub values: Vec<OpalValue>,
    lists: Vec<Vec<OpalValue>>,
}

impl Marshal {
    pub fn push(&mut self, v: &Value) -> Result<()> {
        let x = self.convert(v)?;
        self.values.push(x);
        Ok(())
    }

    fn convert(&mut self, v: &Value) -> Result<OpalValue> {
        Ok(match v {
            Value::List(elem, items) => {
                let mut out = Vec::with_capacity(items.len());
                for i in items {
                    out.push(self.convert(i)?);
                }
                let r = OpalValue::list(*elem, out.as_ptr(), out.len());
                // The heap buffer does not move when `lists` grows.
                self.lists.push(out);
                r
            }
            Value::Str(s) => OpalValue {
                ptr: s.as_ptr() as *mut _,
                len: s.len(),
                ..OpalValue::with_i(tag::STR, 0)
            },
            other => scalar_like(other)?,
        })
    }
}

/// Values without pointers, and borrowed tensors.
fn scalar_like(v: &Value) -> Result<OpalValue> {
    Ok(match v {
        Value::None => OpalValue::NONE,
        Value::Tensor(t) => OpalValue::tensor(t.handle()),
        Value::Int(i) => OpalValue::with_i(tag::INT, *i),
        Value::Double(d) => OpalValue {
            d: *d,
            ..OpalValue::with_i(tag::DOUBLE, 0)
        },
        Value::Bool(b) => OpalValue::with_i(tag::BOOL, i64::from(*b)),
        Value::Scalar(s) => match *s {
            Scalar::Int(i) => OpalValue::scalar(scalar_kind::INT, i, 0.0, 0.0),
            Scalar::Float(f) => OpalValue::scalar(scalar_kind::FLOAT, 0, f, 0.0),
            Scalar::Bool(b) => OpalValue::scalar(scalar_kind::BOOL, i64::from(b), 0.0, 0.0),
            Scalar::Complex(re, im) => OpalValue::scalar(scalar_kind::COMPLEX, 0, re, im),
        },
        Value::DType(d) => OpalValue::with_i(tag::DTYPE, i64::from(d.code())),
        Value::Device(d) => OpalValue {
            aux: d.index.map_or(0, |i| i as u32 + 1),
            ..OpalValue::with_i(tag::DEVICE, i64::from(d.code()))
        },
        Value::Layout(l) => OpalValue::with_i(tag::LAYOUT, *l),
        Value::MemoryFormat(m) => OpalValue::with_i(tag::MEMORY_FORMAT, *m),
        // Borrowed for the call (a host refuses one returned by a kernel).
        Value::Generator(g) => OpalValue {
            ptr: g.handle().0,
            ..OpalValue::with_i(tag::GENERATOR, 0)
        },
        Value::Str(_) | Value::List(..) => {
            return Err(Error::msg(
                "strings and lists cannot be returned in ABI 1.0",
            ))
        }
    })
}

/// A kernel return: tensors become owned handles the host takes over.
pub(crate) fn into_return(v: Value) -> Result<OpalValue> {
    match v {
        Value::Tensor(t) => Ok(OpalValue::tensor(t.into_owned_handle()?)),
        other => scalar_like(&other),
    }
}

/// The plugin value of an ABI value: `owned` tensors are taken over, borrowed
/// ones wrapped for the call.
///
/// # Safety
/// `v` follows the ABI's rules for the given ownership.
pub(crate) unsafe fn from_abi(v: &OpalValue, owned: bool) -> Result<Value> {
    Ok(match v.tag {
        tag::NONE => Value::None,
        tag::TENSOR => Value::Tensor(Tensor::from_handle(OpalTensor(v.ptr), owned)?),
        tag::INT => Value::Int(v.i),
        tag::DOUBLE => Value::Double(v.d),
        tag::BOOL => Value::Bool(v.i != 0),
        tag::SCALAR => Value::Scalar(match v.aux {
            scalar_kind::INT => Scalar::Int(v.i),
            scalar_kind::FLOAT => Scalar::Float(v.d),
            scalar_kind::BOOL => Scalar::Bool(v.i != 0),
            _ => Scalar::Complex(v.d, v.d2),
        }),
        tag::DTYPE => Value::DType(DType::from_code(v.i)?),
        tag::DEVICE => Value::Device(Device::from_code(v.i, i64::from(v.aux) - 1)?),
        tag::LAYOUT => Value::Layout(v.i),
        tag::GENERATOR if !owned => {
            Value::Generator(crate::Generator::borrowed(abi::OpalGenerator(v.ptr))?)
        }
        tag::MEMORY_FORMAT => Value::MemoryFormat(v.i),
        tag::STR if !owned => {
            let s = crate::abi::OpalStr {
                ptr: v.ptr as *const u8,
                len: v.len,
            };
            // SAFETY: forwarded contract (borrowed bytes for the call).
            Value::Str(
                unsafe { s.as_str() }
                    .ok_or_else(|| Error::msg("a string is not UTF-8"))?
                    .to_string(),
            )
        }
        tag::LIST if !owned => {
            // SAFETY: forwarded contract (`len` borrowed values).
            let items = unsafe { crate::abi::slice(v.ptr as *const OpalValue, v.len) }
                .ok_or_else(|| Error::msg("a list with a null pointer"))?;
            let mut out = Vec::with_capacity(items.len());
            for i in items {
                // SAFETY: forwarded contract.
                out.push(unsafe { from_abi(i, false) }?);
            }
            Value::List(v.aux, out)
        }
        t => return Err(Error::msg(format!("value tag {t} not accepted here"))),
    })
}
