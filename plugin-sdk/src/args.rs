//! Typed access to a kernel's boxed arguments, by position and schema name, and
//! conversion of typed returns: what the code `opal-codegen backend --plugin`
//! generates calls (and what hand-written kernels may use). Every mismatch is an
//! error naming the argument and what it got.
//!
//! Owns: argument unpacking and return packing. Must not: call the host.

use crate::abi::tag;
use crate::{DType, Device, Error, Result, Scalar, Tensor, Value};

fn get<'a>(a: &'a [Value], i: usize, name: &str) -> Result<&'a Value> {
    a.get(i).ok_or_else(|| {
        Error::msg(format!(
            "argument {i} ('{name}') is missing: the kernel got {} arguments",
            a.len()
        ))
    })
}

fn wrong<T>(name: &str, want: &str, got: &Value) -> Result<T> {
    Err(Error::msg(format!(
        "argument '{name}': expected {want}, got {got:?}"
    )))
}

macro_rules! getters {
    ($($(#[$doc:meta])* $f:ident, $opt:ident -> $t:ty, $want:literal, |$v:ident| $conv:expr;)*) => {$(
        $(#[$doc])*
        pub fn $f(a: &[Value], i: usize, name: &str) -> Result<$t> {
            let $v = get(a, i, name)?;
            match $conv {
                Some(x) => Ok(x),
                None => wrong(name, $want, $v),
            }
        }

        /// The optional form (`None` for an absent value).
        pub fn $opt(a: &[Value], i: usize, name: &str) -> Result<Option<$t>> {
            match get(a, i, name)? {
                Value::None => Ok(None),
                _ => $f(a, i, name).map(Some),
            }
        }
    )*};
}

getters! {
    /// `int`, `SymInt`, `DeviceIndex`.
    int, opt_int -> i64, "an int", |v| match v { Value::Int(x) => Some(*x), _ => None };
    /// `float` (ints count).
    float, opt_float -> f64, "a float", |v| match v {
        Value::Double(x) => Some(*x),
        Value::Int(x) => Some(*x as f64),
        _ => None
    };
    /// `bool`.
    boolean, opt_boolean -> bool, "a bool", |v| match v { Value::Bool(x) => Some(*x), _ => None };
    /// `Scalar` (plain numbers count).
    scalar, opt_scalar -> Scalar, "a Scalar", |v| v.scalar().ok();
    /// `ScalarType`.
    dtype, opt_dtype -> DType, "a ScalarType", |v| match v { Value::DType(x) => Some(*x), _ => None };
    /// `Device`.
    device, opt_device -> Device, "a Device", |v| match v { Value::Device(x) => Some(*x), _ => None };
    /// `Layout` (its code).
    layout, opt_layout -> i64, "a Layout", |v| match v { Value::Layout(x) => Some(*x), _ => None };
    /// `MemoryFormat` (its code).
    memory_format, opt_memory_format -> i64, "a MemoryFormat", |v| match v {
        Value::MemoryFormat(x) => Some(*x),
        _ => None
    };
    /// `int[]`, `SymInt[]`, `int[N]`.
    int_list, opt_int_list -> Vec<i64>, "an int list", |v| match v {
        Value::List(_, items) => items
            .iter()
            .map(|x| match x { Value::Int(i) => Some(*i), _ => None })
            .collect::<Option<Vec<i64>>>(),
        _ => None
    };
    /// `Tensor[]` (owned handles to the same tensors).
    tensor_list, opt_tensor_list -> Vec<Tensor>, "a tensor list", |v| match v {
        Value::List(e, items) if *e == tag::TENSOR => items
            .iter()
            .map(|x| match x { Value::Tensor(t) => Some(t.clone()), _ => None })
            .collect::<Option<Vec<Tensor>>>(),
        _ => None
    };
}

/// `Tensor`.
pub fn tensor<'a>(a: &'a [Value], i: usize, name: &str) -> Result<&'a Tensor> {
    match get(a, i, name)? {
        Value::Tensor(t) => Ok(t),
        v => wrong(name, "a tensor", v),
    }
}

/// `Tensor?`.
pub fn opt_tensor<'a>(a: &'a [Value], i: usize, name: &str) -> Result<Option<&'a Tensor>> {
    match get(a, i, name)? {
        Value::None => Ok(None),
        _ => tensor(a, i, name).map(Some),
    }
}

/// A kernel's typed returns as boxed values.
pub trait IntoReturns {
    /// The values, in schema order.
    fn into_returns(self) -> Vec<Value>;
}

impl IntoReturns for () {
    fn into_returns(self) -> Vec<Value> {
        Vec::new()
    }
}

impl IntoReturns for Tensor {
    fn into_returns(self) -> Vec<Value> {
        vec![Value::Tensor(self)]
    }
}

impl IntoReturns for i64 {
    fn into_returns(self) -> Vec<Value> {
        vec![Value::Int(self)]
    }
}

impl IntoReturns for f64 {
    fn into_returns(self) -> Vec<Value> {
        vec![Value::Double(self)]
    }
}

impl IntoReturns for bool {
    fn into_returns(self) -> Vec<Value> {
        vec![Value::Bool(self)]
    }
}

impl IntoReturns for Scalar {
    fn into_returns(self) -> Vec<Value> {
        vec![Value::Scalar(self)]
    }
}

impl IntoReturns for (Tensor, Tensor) {
    fn into_returns(self) -> Vec<Value> {
        vec![Value::Tensor(self.0), Value::Tensor(self.1)]
    }
}

impl IntoReturns for (Tensor, Tensor, Tensor) {
    fn into_returns(self) -> Vec<Value> {
        vec![
            Value::Tensor(self.0),
            Value::Tensor(self.1),
            Value::Tensor(self.2),
        ]
    }
}
