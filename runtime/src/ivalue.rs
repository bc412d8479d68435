//! [`IValue`]: the boxed value of one schema argument or return, the [`Stack`] of
//! boxed calling, and the conversions [`IntoIValue`] / [`FromIValue`] that generated
//! adapters use between typed and boxed calls.
//!
//! Owns: the boxed value representation and its conversions (including the
//! coercions PyTorch's boxed calling allows: int -> float, number -> Scalar, int ->
//! `int[N]`). Must not: dispatch.

#![warn(missing_docs)]

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{OpalError, Result};
use crate::generator::Generator;
use crate::keys::DispatchKeySet;
use crate::scalar::Scalar;
use crate::tensor::{Storage, Tensor};
use crate::types::{Dimname, Layout, MemoryFormat, Opaque, QScheme, Stream};

/// One boxed value.
#[derive(Clone, Debug)]
pub enum IValue {
    /// `None` (an absent optional).
    None,
    /// A tensor.
    Tensor(Tensor),
    /// `int`, `SymInt`, `DeviceIndex`.
    Int(i64),
    /// `float`.
    Double(f64),
    /// `bool`.
    Bool(bool),
    /// `str`.
    Str(String),
    /// `Scalar`.
    Scalar(Scalar),
    /// `ScalarType`.
    DType(DType),
    /// `Layout`.
    Layout(Layout),
    /// `Device`.
    Device(Device),
    /// `MemoryFormat`.
    MemoryFormat(MemoryFormat),
    /// `Generator`.
    Generator(Generator),
    /// `Dimname`.
    Dimname(Dimname),
    /// `Storage`.
    Storage(Storage),
    /// `Stream`.
    Stream(Stream),
    /// `QScheme`.
    QScheme(QScheme),
    /// Opaque values (`ConstQuantizerPtr`, `GraphModule`, ...).
    Opaque(Opaque),
    /// `int[]`.
    IntList(Vec<i64>),
    /// `float[]`.
    DoubleList(Vec<f64>),
    /// `bool[]`.
    BoolList(Vec<bool>),
    /// `str[]`.
    StrList(Vec<String>),
    /// `Scalar[]`.
    ScalarList(Vec<Scalar>),
    /// `Tensor[]`.
    TensorList(Vec<Tensor>),
    /// `Tensor?[]`.
    OptionalTensorList(Vec<Option<Tensor>>),
    /// A tuple (several returns packed as one value).
    Tuple(Vec<IValue>),
    /// Any other list (`Dimname[]`, `ScalarType[]`, ...). Addition to design.md.
    List(Vec<IValue>),
}

/// The stack of boxed calling: arguments are pushed in schema order; a kernel pops
/// them and pushes its returns.
pub type Stack = Vec<IValue>;

impl IValue {
    /// The variant's name (for error messages).
    pub fn type_name(&self) -> &'static str {
        match self {
            IValue::None => "None",
            IValue::Tensor(_) => "Tensor",
            IValue::Int(_) => "int",
            IValue::Double(_) => "float",
            IValue::Bool(_) => "bool",
            IValue::Str(_) => "str",
            IValue::Scalar(_) => "Scalar",
            IValue::DType(_) => "ScalarType",
            IValue::Layout(_) => "Layout",
            IValue::Device(_) => "Device",
            IValue::MemoryFormat(_) => "MemoryFormat",
            IValue::Generator(_) => "Generator",
            IValue::Dimname(_) => "Dimname",
            IValue::Storage(_) => "Storage",
            IValue::Stream(_) => "Stream",
            IValue::QScheme(_) => "QScheme",
            IValue::Opaque(_) => "Opaque",
            IValue::IntList(_) => "int[]",
            IValue::DoubleList(_) => "float[]",
            IValue::BoolList(_) => "bool[]",
            IValue::StrList(_) => "str[]",
            IValue::ScalarList(_) => "Scalar[]",
            IValue::TensorList(_) => "Tensor[]",
            IValue::OptionalTensorList(_) => "Tensor?[]",
            IValue::Tuple(_) => "Tuple",
            IValue::List(_) => "List",
        }
    }

    /// True for `None`.
    pub fn is_none(&self) -> bool {
        matches!(self, IValue::None)
    }

    /// The tensor, if this is one.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            IValue::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// Calls `f` on every defined tensor inside this value (lists and tuples too).
    pub fn for_each_tensor(&self, mut f: impl FnMut(&Tensor)) {
        self.visit_tensors(&mut f)
    }

    fn visit_tensors(&self, f: &mut dyn FnMut(&Tensor)) {
        match self {
            IValue::Tensor(t) if t.is_defined() => f(t),
            IValue::TensorList(ts) => ts.iter().filter(|t| t.is_defined()).for_each(f),
            IValue::OptionalTensorList(ts) => {
                ts.iter().flatten().filter(|t| t.is_defined()).for_each(f)
            }
            IValue::Tuple(vs) | IValue::List(vs) => vs.iter().for_each(|v| v.visit_tensors(f)),
            _ => {}
        }
    }

    /// The dispatch keys of every tensor inside this value (lists and tuples too).
    pub fn tensor_keys(&self) -> DispatchKeySet {
        match self {
            IValue::Tensor(t) => t.key_set(),
            IValue::TensorList(ts) => DispatchKeySet::empty().with_tensors(ts),
            IValue::OptionalTensorList(ts) => DispatchKeySet::empty().with_opt_tensors(ts),
            IValue::Tuple(vs) | IValue::List(vs) => vs
                .iter()
                .fold(DispatchKeySet::empty(), |s, v| s | v.tensor_keys()),
            _ => DispatchKeySet::empty(),
        }
    }
}

#[cold]
fn wrong(expected: &str, got: &IValue) -> OpalError {
    OpalError::boxed(format!(
        "expected a value of type {expected}, got {}",
        got.type_name()
    ))
}

/// Conversion of a typed argument or return into an [`IValue`].
pub trait IntoIValue {
    /// Boxes the value.
    fn into_ivalue(self) -> IValue;
}

/// Conversion of an [`IValue`] into a typed (owned) value; wrong types are errors.
pub trait FromIValue: Sized {
    /// Unboxes the value.
    fn from_ivalue(v: IValue) -> Result<Self>;
}

/// Types that box as one variant.
macro_rules! into_variant {
    ($($t:ty => $v:ident),* $(,)?) => {$(
        impl IntoIValue for $t {
            #[inline]
            fn into_ivalue(self) -> IValue { IValue::$v(self) }
        }
    )*};
}

/// Types that box as one variant and unbox from it alone.
macro_rules! by_value {
    ($($t:ty => $v:ident),* $(,)?) => {$(
        into_variant!($t => $v);
        impl FromIValue for $t {
            #[inline]
            fn from_ivalue(v: IValue) -> Result<Self> {
                match v { IValue::$v(x) => Ok(x), other => Err(wrong(stringify!($v), &other)) }
            }
        }
    )*};
}
by_value!(
    bool => Bool, String => Str, DType => DType, Layout => Layout,
    Device => Device, MemoryFormat => MemoryFormat, Generator => Generator, Dimname => Dimname,
    Storage => Storage, Stream => Stream, QScheme => QScheme, Opaque => Opaque,
    Vec<f64> => DoubleList, Vec<bool> => BoolList, Vec<String> => StrList,
    Vec<Tensor> => TensorList, Vec<Option<Tensor>> => OptionalTensorList,
);

/// An undefined tensor boxes as `None`, as PyTorch shows it in Python, and `None`
/// unboxes to an undefined tensor where a `Tensor` is expected: that is how a
/// kernel's "not computed" output (e.g. a gradient `output_mask` did not request)
/// crosses boxed calls and the CPU fallback. A `None` for a plain `Tensor` argument
/// therefore reaches the kernel as an undefined tensor, exactly as a typed call
/// passing [`Tensor::undefined`] does.
impl IntoIValue for Tensor {
    #[inline]
    fn into_ivalue(self) -> IValue {
        if self.is_defined() {
            IValue::Tensor(self)
        } else {
            IValue::None
        }
    }
}
impl FromIValue for Tensor {
    #[inline]
    fn from_ivalue(v: IValue) -> Result<Self> {
        match v {
            IValue::Tensor(t) => Ok(t),
            IValue::None => Ok(Tensor::undefined()),
            other => Err(wrong("Tensor", &other)),
        }
    }
}

// These unbox from more than their own variant (an int where a float or a list is
// expected, ...), so only their boxing is the common one.
into_variant!(i64 => Int, f64 => Double, Scalar => Scalar, Vec<i64> => IntList, Vec<Scalar> => ScalarList);

impl FromIValue for i64 {
    fn from_ivalue(v: IValue) -> Result<Self> {
        match v {
            IValue::Int(x) => Ok(x),
            IValue::Bool(b) => Ok(b as i64),
            other => Err(wrong("int", &other)),
        }
    }
}
impl FromIValue for f64 {
    fn from_ivalue(v: IValue) -> Result<Self> {
        match v {
            IValue::Double(x) => Ok(x),
            IValue::Int(i) => Ok(i as f64),
            other => Err(wrong("float", &other)),
        }
    }
}
impl FromIValue for Scalar {
    fn from_ivalue(v: IValue) -> Result<Self> {
        match v {
            IValue::Scalar(s) => Ok(s),
            IValue::Int(i) => Ok(Scalar::Int(i)),
            IValue::Double(d) => Ok(Scalar::Float(d)),
            IValue::Bool(b) => Ok(Scalar::Bool(b)),
            IValue::Tensor(t) if t.numel() == 1 && t.dim() == 0 => t.item(),
            other => Err(wrong("Scalar", &other)),
        }
    }
}
impl FromIValue for Vec<i64> {
    fn from_ivalue(v: IValue) -> Result<Self> {
        match v {
            IValue::IntList(x) => Ok(x),
            // `int[1] dim=0` accepts a single int.
            IValue::Int(i) => Ok(vec![i]),
            other => Err(wrong("int[]", &other)),
        }
    }
}
impl FromIValue for Vec<Scalar> {
    fn from_ivalue(v: IValue) -> Result<Self> {
        match v {
            IValue::ScalarList(x) => Ok(x),
            IValue::IntList(x) => Ok(x.into_iter().map(Scalar::Int).collect()),
            IValue::DoubleList(x) => Ok(x.into_iter().map(Scalar::Float).collect()),
            other => Err(wrong("Scalar[]", &other)),
        }
    }
}

/// Borrowed argument types box by cloning (a refcount bump for tensors).
macro_rules! borrowed {
    ($($t:ty => $e:expr),* $(,)?) => {$(
        impl IntoIValue for $t {
            #[inline]
            fn into_ivalue(self) -> IValue { ($e)(self) }
        }
    )*};
}
borrowed!(
    &Tensor => |t: &Tensor| t.clone().into_ivalue(),
    &[Tensor] => |t: &[Tensor]| IValue::TensorList(t.to_vec()),
    &[Option<Tensor>] => |t: &[Option<Tensor>]| IValue::OptionalTensorList(t.to_vec()),
    &[i64] => |t: &[i64]| IValue::IntList(t.to_vec()),
    &[f64] => |t: &[f64]| IValue::DoubleList(t.to_vec()),
    &[bool] => |t: &[bool]| IValue::BoolList(t.to_vec()),
    &str => |t: &str| IValue::Str(t.to_string()),
    &String => |t: &String| IValue::Str(t.clone()),
    &[String] => |t: &[String]| IValue::StrList(t.to_vec()),
    &Scalar => |t: &Scalar| IValue::Scalar(*t),
    &[Scalar] => |t: &[Scalar]| IValue::ScalarList(t.to_vec()),
    &Generator => |t: &Generator| IValue::Generator(t.clone()),
    &Storage => |t: &Storage| IValue::Storage(t.clone()),
    &Opaque => |t: &Opaque| IValue::Opaque(t.clone()),
    &Vec<i64> => |t: &Vec<i64>| IValue::IntList(t.clone()),
    &Vec<Tensor> => |t: &Vec<Tensor>| IValue::TensorList(t.clone()),
    () => |_: ()| IValue::None,
    IValue => |v: IValue| v,
);

/// Lists of other element types (`Dimname[]`, `ScalarType[]`, ...) as `IValue::List`.
macro_rules! generic_list {
    ($($t:ty),*) => {$(
        impl IntoIValue for &[$t] {
            fn into_ivalue(self) -> IValue { IValue::List(self.iter().map(|x| x.clone().into_ivalue()).collect()) }
        }
        impl IntoIValue for Vec<$t> {
            fn into_ivalue(self) -> IValue { IValue::List(self.into_iter().map(IntoIValue::into_ivalue).collect()) }
        }
        impl FromIValue for Vec<$t> {
            fn from_ivalue(v: IValue) -> Result<Self> {
                match v {
                    IValue::List(xs) | IValue::Tuple(xs) => xs.into_iter().map(<$t>::from_ivalue).collect(),
                    other => Err(wrong(concat!(stringify!($t), "[]"), &other)),
                }
            }
        }
    )*};
}
generic_list!(
    Dimname,
    DType,
    Layout,
    Device,
    MemoryFormat,
    QScheme,
    Stream,
    Generator,
    Opaque,
    Storage
);

impl<T: IntoIValue> IntoIValue for Option<T> {
    #[inline]
    fn into_ivalue(self) -> IValue {
        match self {
            Some(x) => x.into_ivalue(),
            None => IValue::None,
        }
    }
}

impl<T: FromIValue> FromIValue for Option<T> {
    #[inline]
    fn from_ivalue(v: IValue) -> Result<Self> {
        match v {
            IValue::None => Ok(None),
            v => T::from_ivalue(v).map(Some),
        }
    }
}

impl FromIValue for IValue {
    fn from_ivalue(v: IValue) -> Result<Self> {
        Ok(v)
    }
}

impl FromIValue for () {
    fn from_ivalue(v: IValue) -> Result<Self> {
        match v {
            IValue::None => Ok(()),
            IValue::Tuple(xs) if xs.is_empty() => Ok(()),
            other => Err(wrong("()", &other)),
        }
    }
}

macro_rules! tuples {
    ($( ($($n:ident),+) ),*) => {$(
        impl<$($n: IntoIValue),+> IntoIValue for ($($n,)+) {
            #[allow(non_snake_case)]
            fn into_ivalue(self) -> IValue {
                let ($($n,)+) = self;
                IValue::Tuple(vec![$($n.into_ivalue()),+])
            }
        }
        impl<$($n: FromIValue),+> FromIValue for ($($n,)+) {
            fn from_ivalue(v: IValue) -> Result<Self> {
                match v {
                    IValue::Tuple(xs) => {
                        let want = [$(stringify!($n)),+].len();
                        if xs.len() != want {
                            return Err(OpalError::boxed(format!("expected a tuple of {want} values, got {}", xs.len())));
                        }
                        let mut it = xs.into_iter();
                        Ok(($($n::from_ivalue(it.next().unwrap_or(IValue::None))?,)+))
                    }
                    other => Err(wrong("Tuple", &other)),
                }
            }
        }
    )*};
}
tuples!(
    (A),
    (A, B),
    (A, B, C),
    (A, B, C, D),
    (A, B, C, D, E),
    (A, B, C, D, E, F),
    (A, B, C, D, E, F, G)
);

/// Pops the last value of a stack and converts it (adapters pop arguments in reverse).
pub fn pop<T: FromIValue>(stack: &mut Stack) -> Result<T> {
    match stack.pop() {
        Some(v) => T::from_ivalue(v),
        None => Err(OpalError::boxed(
            "stack underflow: too few arguments on the stack",
        )),
    }
}

/// Removes the last `n` values of a stack (the arguments of a call), in order.
pub fn take_args(stack: &mut Stack, n: usize) -> Result<std::vec::Drain<'_, IValue>> {
    if stack.len() < n {
        return Err(OpalError::boxed(format!(
            "stack underflow: need {n} arguments, the stack has {}",
            stack.len()
        )));
    }
    let start = stack.len() - n;
    Ok(stack.drain(start..))
}
