//! Element types: [`DType`], the Rust element trait [`Element`], complex numbers, the
//! type promotion lattice and `result_type` semantics.
//!
//! Owns: which dtypes exist, their sizes and names, promotion ([`promote_types`]),
//! result-type computation over tensors and scalars ([`ResultType`]) and the
//! process-wide default float dtype. Must not: know about storage, devices or dispatch.

#![warn(missing_docs)]

use crate::error::{ErrorKind, OpalError, Result};
use half::{bf16, f16};
use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};

/// A tensor element type (PyTorch's `ScalarType`).
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum DType {
    /// `torch.bool`, one byte, 0 or 1.
    Bool,
    /// `torch.uint8`.
    U8,
    /// `torch.int8`.
    I8,
    /// `torch.int16`.
    I16,
    /// `torch.int32`.
    I32,
    /// `torch.int64`.
    I64,
    /// `torch.float16` (IEEE half, [`half::f16`]).
    F16,
    /// `torch.bfloat16` ([`half::bf16`]).
    BF16,
    /// `torch.float32`.
    F32,
    /// `torch.float64`.
    F64,
    /// `torch.complex64`: two f32 ([`Complex<f32>`]).
    C64,
    /// `torch.complex128`: two f64 ([`Complex<f64>`]).
    C128,
}

/// PyTorch's name for [`DType`], used by generated code for `ScalarType` arguments.
pub type ScalarType = DType;

/// Category of a dtype for promotion: bool < integral < floating < complex.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Category {
    /// `bool`.
    Bool,
    /// Signed and unsigned integers.
    Integral,
    /// Real floating point.
    Floating,
    /// Complex.
    Complex,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 12] = [
        DType::Bool,
        DType::U8,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::C64,
        DType::C128,
    ];

    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 | DType::C64 => 8,
            DType::C128 => 16,
        }
    }

    /// Promotion category.
    pub const fn category(self) -> Category {
        match self {
            DType::Bool => Category::Bool,
            DType::U8 | DType::I8 | DType::I16 | DType::I32 | DType::I64 => Category::Integral,
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 => Category::Floating,
            DType::C64 | DType::C128 => Category::Complex,
        }
    }

    /// True for real floating-point dtypes.
    pub const fn is_floating_point(self) -> bool {
        matches!(self.category(), Category::Floating)
    }

    /// True for complex dtypes.
    pub const fn is_complex(self) -> bool {
        matches!(self.category(), Category::Complex)
    }

    /// True for integer dtypes; `include_bool` also counts `Bool`.
    pub const fn is_integral(self, include_bool: bool) -> bool {
        match self.category() {
            Category::Integral => true,
            Category::Bool => include_bool,
            _ => false,
        }
    }

    /// True for signed dtypes (everything but `Bool` and `U8`).
    pub const fn is_signed(self) -> bool {
        !matches!(self, DType::Bool | DType::U8)
    }

    /// The complex dtype whose components have this real dtype's precision
    /// (`F64 -> C128`, other floats `-> C64`); complex dtypes map to themselves.
    pub const fn to_complex(self) -> DType {
        match self {
            DType::F64 | DType::C128 => DType::C128,
            _ => DType::C64,
        }
    }

    /// The real dtype of a complex dtype's components; real dtypes map to themselves.
    pub const fn to_real(self) -> DType {
        match self {
            DType::C64 => DType::F32,
            DType::C128 => DType::F64,
            d => d,
        }
    }

    /// PyTorch's name without the `torch.` prefix (`float32`, `int64`, `bool`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::C64 => "complex64",
            DType::C128 => "complex128",
        }
    }

    /// Parses PyTorch names and common aliases (`float32`, `float`, `torch.int64`,
    /// `long`, `half`, `f32`, `cfloat`, ...).
    pub fn parse(s: &str) -> Result<DType> {
        let s = s.strip_prefix("torch.").unwrap_or(s);
        Ok(match s {
            "bool" => DType::Bool,
            "uint8" | "u8" | "byte" => DType::U8,
            "int8" | "i8" | "char" => DType::I8,
            "int16" | "i16" | "short" => DType::I16,
            "int32" | "i32" | "int" => DType::I32,
            "int64" | "i64" | "long" => DType::I64,
            "float16" | "f16" | "half" => DType::F16,
            "bfloat16" | "bf16" => DType::BF16,
            "float32" | "f32" | "float" => DType::F32,
            "float64" | "f64" | "double" => DType::F64,
            "complex64" | "c64" | "cfloat" => DType::C64,
            "complex128" | "c128" | "cdouble" => DType::C128,
            _ => return Err(OpalError::msg(format!("unknown dtype '{s}'"))),
        })
    }

    /// Integer bit width for integral dtypes (used by promotion).
    const fn int_bits(self) -> u32 {
        match self {
            DType::U8 | DType::I8 => 8,
            DType::I16 => 16,
            DType::I32 => 32,
            DType::I64 => 64,
            _ => 0,
        }
    }

    /// Floating rank: half types < f32 < f64 (complex: rank of components).
    const fn float_rank(self) -> u32 {
        match self {
            DType::F16 | DType::BF16 => 1,
            DType::F32 | DType::C64 => 2,
            DType::F64 | DType::C128 => 3,
            _ => 0,
        }
    }
}

impl fmt::Display for DType {
    /// Prints like PyTorch: `torch.float32`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "torch.{}", self.name())
    }
}

impl std::str::FromStr for DType {
    type Err = OpalError;
    fn from_str(s: &str) -> Result<Self> {
        DType::parse(s)
    }
}

/// PyTorch's `promote_types`: the smallest dtype both `a` and `b` convert to
/// without leaving their category.
///
/// Rules: same -> same; bool yields to anything; `u8` with `i8` -> `i16`, `u8` with a
/// wider signed int -> that int; ints widen; an int with a float/complex -> the
/// float/complex; `f16` with `bf16` -> `f32`; floats widen; a float with a complex ->
/// the complex of the wider component precision (`f64` + `c64` -> `c128`).
pub const fn promote_types(a: DType, b: DType) -> DType {
    use Category::*;
    if a as u8 == b as u8 {
        return a;
    }
    let (ca, cb) = (a.category(), b.category());
    match (ca, cb) {
        (Bool, _) => b,
        (_, Bool) => a,
        (Integral, Integral) => {
            let (ua, ub) = (!a.is_signed(), !b.is_signed());
            if ua || ub {
                // Exactly one is u8 (both u8 was handled by equality).
                let other = if ua { b } else { a };
                if other.int_bits() > 8 {
                    other
                } else {
                    DType::I16
                }
            } else if a.int_bits() >= b.int_bits() {
                a
            } else {
                b
            }
        }
        (Integral, _) => b,
        (_, Integral) => a,
        (Floating, Floating) => {
            let (ra, rb) = (a.float_rank(), b.float_rank());
            if ra == 1 && rb == 1 {
                DType::F32 // f16 with bf16: neither holds the other
            } else if ra >= rb {
                a
            } else {
                b
            }
        }
        _ => {
            // At least one complex.
            if a.float_rank() >= 3 || b.float_rank() >= 3 {
                DType::C128
            } else {
                DType::C64
            }
        }
    }
}

static DEFAULT_DTYPE: AtomicU8 = AtomicU8::new(DType::F32 as u8);

/// The default floating dtype (`torch.get_default_dtype()`), initially `F32`.
pub fn default_dtype() -> DType {
    DType::ALL[DEFAULT_DTYPE.load(Ordering::Relaxed) as usize]
}

/// Sets the default floating dtype; only real floating dtypes are accepted.
pub fn set_default_dtype(d: DType) -> Result<()> {
    if !d.is_floating_point() {
        return Err(OpalError::msg(format!(
            "default dtype must be a floating point type, got {d}"
        )));
    }
    DEFAULT_DTYPE.store(d as u8, Ordering::Relaxed);
    Ok(())
}

/// The default complex dtype: `C128` when the default dtype is `F64`, else `C64`.
pub fn default_complex_dtype() -> DType {
    default_dtype().to_complex()
}

/// PyTorch's `result_type` state: operands are grouped by priority
/// (dimensioned tensors > zero-dim tensors > Python scalars); a lower group only
/// matters when its category is higher than every higher group's.
///
/// ```
/// use opal::{DType, Scalar, dtype::ResultType};
/// let mut r = ResultType::new();
/// r.tensor(DType::I32, 1).scalar(&Scalar::Float(2.5));
/// assert_eq!(r.finish().unwrap(), DType::F32); // int tensor + float scalar -> default dtype
/// ```
#[derive(Copy, Clone, Debug, Default)]
pub struct ResultType {
    dim: Option<DType>,
    zero: Option<DType>,
    wrapped: Option<DType>,
}

impl ResultType {
    /// An empty state.
    pub const fn new() -> Self {
        ResultType {
            dim: None,
            zero: None,
            wrapped: None,
        }
    }

    fn fold(slot: &mut Option<DType>, d: DType) {
        *slot = Some(match *slot {
            None => d,
            Some(c) => promote_types(c, d),
        });
    }

    /// Adds a tensor operand with `dtype` and `dim` dimensions.
    pub fn tensor(&mut self, dtype: DType, dim: usize) -> &mut Self {
        if dim == 0 {
            Self::fold(&mut self.zero, dtype)
        } else {
            Self::fold(&mut self.dim, dtype)
        }
        self
    }

    /// Adds a Python-style scalar operand: only its category counts (int -> `I64`,
    /// float -> default dtype, complex -> default complex dtype).
    pub fn scalar(&mut self, s: &crate::Scalar) -> &mut Self {
        self.wrapped_of(s.dtype().category())
    }

    pub(crate) fn wrapped_of(&mut self, c: Category) -> &mut Self {
        let d = match c {
            Category::Bool => DType::Bool,
            Category::Integral => DType::I64,
            Category::Floating => default_dtype(),
            Category::Complex => default_complex_dtype(),
        };
        Self::fold(&mut self.wrapped, d);
        self
    }

    /// Combines a higher-priority group's dtype with a lower one's.
    fn combine(higher: Option<DType>, lower: Option<DType>) -> Option<DType> {
        let (h, l) = match (higher, lower) {
            (None, l) => return l,
            (h, None) => return h,
            (Some(h), Some(l)) => (h, l),
        };
        Some(if h.is_complex() {
            h
        } else if l.is_complex() {
            // Keep the higher group's precision when it is floating.
            if h.is_floating_point() {
                h.to_complex()
            } else {
                l
            }
        } else if h.is_floating_point() {
            h
        } else if h == DType::Bool || l.is_floating_point() {
            promote_types(h, l)
        } else {
            h
        })
    }

    /// The result dtype; an error when no operand was added.
    pub fn finish(&self) -> Result<DType> {
        Self::combine(self.dim, Self::combine(self.zero, self.wrapped))
            .ok_or_else(|| ErrorKind::Msg("result_type needs at least one operand".into()).into())
    }
}

/// A complex number with components of type `T` (`Complex<f32>` is `C64`).
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Copy, Clone, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Complex<T> {
    /// Real part.
    pub re: T,
    /// Imaginary part.
    pub im: T,
}

impl<T> Complex<T> {
    /// A complex number from its parts.
    pub const fn new(re: T, im: T) -> Self {
        Complex { re, im }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// Rust types that are tensor elements, each mapping to one [`DType`].
///
/// Sealed: the set of element types is fixed by [`DType`]. Every implementor is
/// plain data for which every bit pattern of its size that Opal writes is valid.
pub trait Element: Copy + Send + Sync + PartialEq + fmt::Debug + 'static + sealed::Sealed {
    /// The dtype of this Rust type.
    const DTYPE: DType;
    /// Converts to a [`crate::Scalar`] (for `item` and printing).
    fn to_scalar(self) -> crate::Scalar;
    /// Converts from a [`crate::Scalar`] with C-like casting (floats truncate, etc.).
    fn from_scalar(s: &crate::Scalar) -> Self;
}

macro_rules! element_int {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn to_scalar(self) -> crate::Scalar { crate::Scalar::Int(self as i64) }
            fn from_scalar(s: &crate::Scalar) -> Self {
                match *s {
                    crate::Scalar::Int(i) => i as $t,
                    _ => s.to_f64() as $t,
                }
            }
        }
    )*};
}
element_int!(u8 => U8, i8 => I8, i16 => I16, i32 => I32, i64 => I64);

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn to_scalar(self) -> crate::Scalar {
        crate::Scalar::Bool(self)
    }
    fn from_scalar(s: &crate::Scalar) -> Self {
        s.to_bool()
    }
}

macro_rules! element_float {
    ($($t:ty => $d:ident, $from:expr, $to:expr),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn to_scalar(self) -> crate::Scalar { crate::Scalar::Float(($to)(self)) }
            fn from_scalar(s: &crate::Scalar) -> Self { ($from)(s.to_f64()) }
        }
    )*};
}
element_float!(
    f16 => F16, f16::from_f64, |x: f16| x.to_f64(),
    bf16 => BF16, bf16::from_f64, |x: bf16| x.to_f64(),
    f32 => F32, |x: f64| x as f32, |x: f32| x as f64,
    f64 => F64, |x: f64| x, |x: f64| x
);

impl sealed::Sealed for Complex<f32> {}
impl Element for Complex<f32> {
    const DTYPE: DType = DType::C64;
    fn to_scalar(self) -> crate::Scalar {
        crate::Scalar::Complex(self.re as f64, self.im as f64)
    }
    fn from_scalar(s: &crate::Scalar) -> Self {
        let (re, im) = s.to_complex();
        Complex::new(re as f32, im as f32)
    }
}
impl sealed::Sealed for Complex<f64> {}
impl Element for Complex<f64> {
    const DTYPE: DType = DType::C128;
    fn to_scalar(self) -> crate::Scalar {
        crate::Scalar::Complex(self.re, self.im)
    }
    fn from_scalar(s: &crate::Scalar) -> Self {
        let (re, im) = s.to_complex();
        Complex::new(re, im)
    }
}

/// Reads one element of dtype `dtype` from `bytes` (at least `dtype.size()` long,
/// native endianness) as a [`crate::Scalar`].
pub fn scalar_from_bytes(dtype: DType, bytes: &[u8]) -> Result<crate::Scalar> {
    use crate::Scalar;
    let n = dtype.size();
    let b = bytes
        .get(..n)
        .ok_or_else(|| OpalError::msg("scalar_from_bytes: too few bytes"))?;
    let arr8 = |b: &[u8]| -> [u8; 8] {
        let mut a = [0u8; 8];
        a[..b.len()].copy_from_slice(b);
        a
    };
    Ok(match dtype {
        DType::Bool => Scalar::Bool(b[0] != 0),
        DType::U8 => Scalar::Int(b[0] as i64),
        DType::I8 => Scalar::Int(b[0] as i8 as i64),
        DType::I16 => Scalar::Int(i16::from_ne_bytes([b[0], b[1]]) as i64),
        DType::I32 => Scalar::Int(i32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as i64),
        DType::I64 => Scalar::Int(i64::from_ne_bytes(arr8(b))),
        DType::F16 => Scalar::Float(f16::from_ne_bytes([b[0], b[1]]).to_f64()),
        DType::BF16 => Scalar::Float(bf16::from_ne_bytes([b[0], b[1]]).to_f64()),
        DType::F32 => Scalar::Float(f32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as f64),
        DType::F64 => Scalar::Float(f64::from_ne_bytes(arr8(b))),
        DType::C64 => Scalar::Complex(
            f32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as f64,
            f32::from_ne_bytes([b[4], b[5], b[6], b[7]]) as f64,
        ),
        DType::C128 => Scalar::Complex(
            f64::from_ne_bytes(arr8(&b[..8])),
            f64::from_ne_bytes(arr8(&b[8..16])),
        ),
    })
}

/// Writes `s` converted to `dtype` into `out` (at least `dtype.size()` long); a value
/// that overflows `dtype` is an error ([`crate::Scalar::fits`]), never a wrapped one.
pub fn scalar_to_bytes(s: &crate::Scalar, dtype: DType, out: &mut [u8]) -> Result<()> {
    s.check_fits(dtype, "scalar_to_bytes")?;
    let n = dtype.size();
    let out = out
        .get_mut(..n)
        .ok_or_else(|| OpalError::msg("scalar_to_bytes: buffer too small"))?;
    match dtype {
        DType::Bool => out[0] = s.to_bool() as u8,
        DType::U8 => out[0] = u8::from_scalar(s),
        DType::I8 => out.copy_from_slice(&i8::from_scalar(s).to_ne_bytes()),
        DType::I16 => out.copy_from_slice(&i16::from_scalar(s).to_ne_bytes()),
        DType::I32 => out.copy_from_slice(&i32::from_scalar(s).to_ne_bytes()),
        DType::I64 => out.copy_from_slice(&i64::from_scalar(s).to_ne_bytes()),
        DType::F16 => out.copy_from_slice(&f16::from_scalar(s).to_ne_bytes()),
        DType::BF16 => out.copy_from_slice(&bf16::from_scalar(s).to_ne_bytes()),
        DType::F32 => out.copy_from_slice(&f32::from_scalar(s).to_ne_bytes()),
        DType::F64 => out.copy_from_slice(&f64::from_scalar(s).to_ne_bytes()),
        DType::C64 => {
            let c = Complex::<f32>::from_scalar(s);
            out[..4].copy_from_slice(&c.re.to_ne_bytes());
            out[4..].copy_from_slice(&c.im.to_ne_bytes());
        }
        DType::C128 => {
            let c = Complex::<f64>::from_scalar(s);
            out[..8].copy_from_slice(&c.re.to_ne_bytes());
            out[8..].copy_from_slice(&c.im.to_ne_bytes());
        }
    }
    Ok(())
}
