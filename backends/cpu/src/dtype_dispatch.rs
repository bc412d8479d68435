//! Element types and dtype dispatch for CPU kernels.
//!
//! Owns: the [`Elem`] trait (conversions every CPU element type supports), the
//! [`Float`] trait (floating element types and the type they compute in) and the
//! dispatch macros that turn a runtime [`DType`] into a concrete Rust type.
//! Must not: contain kernels or know about tensor layout.
//!
//! # Using the macros (for kernel authors)
//!
//! Every macro takes the dtype, an op name for the error message and a body in
//! which the chosen Rust type is bound to the identifier you name:
//!
//! ```ignore
//! dispatch_all!(t.dtype(), "sum", |T| { my_kernel::<T>(t) })      // all but complex
//! dispatch_float!(t.dtype(), "exp", |T, C| { ... })                // f32 f64 f16 bf16; C = compute type
//! dispatch_int!(t.dtype(), "bitwise_and", |T| { ... })             // u8 i8 i16 i32 i64
//! dispatch_int_bool!(..), dispatch_numeric!(..)                     // ints+bool; all but bool/complex
//! ```
//!
//! A dtype outside the macro's set makes the macro evaluate to
//! `Err(OpalError::msg("<op>: unsupported dtype X"))`, so the body must itself be an
//! `opal::Result<_>`. f16 and bf16 compute in f32 ([`Float::Compute`]); integer and
//! bool arithmetic stays in the element type (wrapping, as PyTorch does).

use half::{bf16, f16};
use opal::DType;

/// A CPU element type: plain-old-data, thread-safe, convertible to and from the
/// widest integer and float so any dtype can be cast to any other.
pub trait Elem: opal::Element + PartialOrd + Default {
    /// True for f16, bf16, f32, f64.
    const IS_FLOAT: bool;
    /// Value as f64 (exact for every type but i64 beyond 2^53).
    fn to_f64(self) -> f64;
    /// Value as i64 (floats truncate toward zero, saturating; NaN gives 0).
    fn to_i64(self) -> i64;
    /// From f64 with PyTorch's cast semantics (bool: != 0; ints: truncate).
    fn from_f64(v: f64) -> Self;
    /// From i64 (ints wrap like C casts; bool: != 0).
    fn from_i64(v: i64) -> Self;
    /// Value as bool (non-zero, NaN counts as true).
    fn to_bool(self) -> bool;
    /// Zero of this type.
    fn zero() -> Self {
        Self::default()
    }
    /// Converts between any two element types with PyTorch's `.to(dtype)` semantics.
    #[inline(always)]
    fn cast<U: Elem>(self) -> U {
        if U::DTYPE == DType::Bool {
            U::from_i64(self.to_bool() as i64)
        } else if Self::IS_FLOAT {
            U::from_f64(self.to_f64())
        } else {
            U::from_i64(self.to_i64())
        }
    }
}

macro_rules! int_elem {
    ($t:ty) => {
        impl Elem for $t {
            const IS_FLOAT: bool = false;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                // Through i64 so that e.g. -1.5 -> u8 wraps like C (255), not saturates to 0.
                (v as i64) as $t
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_bool(self) -> bool {
                self != 0
            }
        }
    };
}
int_elem!(u8);
int_elem!(i8);
int_elem!(i16);
int_elem!(i32);
int_elem!(i64);

impl Elem for bool {
    const IS_FLOAT: bool = false;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v != 0
    }
    #[inline(always)]
    fn to_bool(self) -> bool {
        self
    }
}

macro_rules! float_elem {
    ($t:ty, $to:expr, $from:expr) => {
        impl Elem for $t {
            const IS_FLOAT: bool = true;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                $to(self)
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                $to(self) as i64
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                $from(v)
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                $from(v as f64)
            }
            #[inline(always)]
            fn to_bool(self) -> bool {
                $to(self) != 0.0
            }
        }
    };
}
float_elem!(f32, |x: f32| x as f64, |v: f64| v as f32);
float_elem!(f64, |x: f64| x, |v: f64| v);
float_elem!(f16, |x: f16| x.to_f64(), f16::from_f64);
float_elem!(bf16, |x: bf16| x.to_f64(), bf16::from_f64);

/// A floating element type together with the type it computes in: f16 and bf16
/// widen to f32 (PyTorch's "opmath" type), f32 and f64 compute as themselves.
pub trait Float: Elem {
    /// Arithmetic type: f32 or f64.
    type Compute: num_traits::Float + Elem + Send + Sync + std::iter::Sum;
    /// Widen to the compute type.
    fn up(self) -> Self::Compute;
    /// Narrow from the compute type (round to nearest even).
    fn down(v: Self::Compute) -> Self;
}

macro_rules! float_impl {
    ($t:ty, $c:ty, |$x:ident| $up:expr, |$v:ident| $down:expr) => {
        impl Float for $t {
            type Compute = $c;
            #[inline(always)]
            fn up(self) -> $c {
                let $x = self;
                $up
            }
            #[inline(always)]
            fn down($v: $c) -> Self {
                $down
            }
        }
    };
}
float_impl!(f32, f32, |x| x, |v| v);
float_impl!(f64, f64, |x| x, |v| v);
float_impl!(f16, f32, |x| x.to_f32(), |v| f16::from_f32(v));
float_impl!(bf16, f32, |x| x.to_f32(), |v| bf16::from_f32(v));

/// Error for a dtype a kernel does not support, naming the op.
#[cold]
pub fn unsupported(op: &str, dtype: DType) -> opal::OpalError {
    opal::OpalError::msg(format!("{op}: unsupported dtype {dtype:?}"))
}

/// Dispatch over f32, f64, f16, bf16; binds the element type and its compute type.
#[macro_export]
macro_rules! dispatch_float {
    ($dt:expr, $op:expr, |$T:ident, $C:ident| $body:expr) => {
        match $dt {
            ::opal::DType::F32 => {
                type $T = f32;
                #[allow(dead_code)]
                type $C = f32;
                $body
            }
            ::opal::DType::F64 => {
                type $T = f64;
                #[allow(dead_code)]
                type $C = f64;
                $body
            }
            ::opal::DType::F16 => {
                type $T = ::half::f16;
                #[allow(dead_code)]
                type $C = f32;
                $body
            }
            ::opal::DType::BF16 => {
                type $T = ::half::bf16;
                #[allow(dead_code)]
                type $C = f32;
                $body
            }
            other => Err($crate::dtype_dispatch::unsupported($op, other)),
        }
    };
}

/// Dispatch over the integer types u8, i8, i16, i32, i64.
#[macro_export]
macro_rules! dispatch_int {
    ($dt:expr, $op:expr, |$T:ident| $body:expr) => {
        $crate::dispatch_int!(@arms $dt, $op, $T, $body, )
    };
    (@arms $dt:expr, $op:expr, $T:ident, $body:expr, $($extra:tt)*) => {
        match $dt {
            ::opal::DType::U8 => {
                type $T = u8;
                $body
            }
            ::opal::DType::I8 => {
                type $T = i8;
                $body
            }
            ::opal::DType::I16 => {
                type $T = i16;
                $body
            }
            ::opal::DType::I32 => {
                type $T = i32;
                $body
            }
            ::opal::DType::I64 => {
                type $T = i64;
                $body
            }
            $($extra)*
            // Unreachable for `dispatch_every!`, which names every dtype of today.
            #[allow(unreachable_patterns)]
            other => Err($crate::dtype_dispatch::unsupported($op, other)),
        }
    };
}

/// Dispatch over the integer types and bool.
#[macro_export]
macro_rules! dispatch_int_bool {
    ($dt:expr, $op:expr, |$T:ident| $body:expr) => {
        $crate::dispatch_int!(@arms $dt, $op, $T, $body, ::opal::DType::Bool => {
            type $T = bool;
            $body
        })
    };
}

/// Dispatch over every real dtype except bool (ints and floats).
#[macro_export]
macro_rules! dispatch_numeric {
    ($dt:expr, $op:expr, |$T:ident| $body:expr) => {
        $crate::dispatch_int!(@arms $dt, $op, $T, $body,
            ::opal::DType::F32 => { type $T = f32; $body }
            ::opal::DType::F64 => { type $T = f64; $body }
            ::opal::DType::F16 => { type $T = ::half::f16; $body }
            ::opal::DType::BF16 => { type $T = ::half::bf16; $body }
        )
    };
}

/// Dispatch over every real dtype: ints, bool and floats (no complex).
#[macro_export]
macro_rules! dispatch_all {
    ($dt:expr, $op:expr, |$T:ident| $body:expr) => {
        $crate::dispatch_all!(@arms $dt, $op, $T, $body, )
    };
    (@arms $dt:expr, $op:expr, $T:ident, $body:expr, $($extra:tt)*) => {
        $crate::dispatch_int!(@arms $dt, $op, $T, $body,
            ::opal::DType::Bool => { type $T = bool; $body }
            ::opal::DType::F32 => { type $T = f32; $body }
            ::opal::DType::F64 => { type $T = f64; $body }
            ::opal::DType::F16 => { type $T = ::half::f16; $body }
            ::opal::DType::BF16 => { type $T = ::half::bf16; $body }
            $($extra)*
        )
    };
}

/// Dispatch over every dtype: [`dispatch_all!`]'s and the complex ones, for kernels
/// that only move elements or add them ([`AddElem`]).
#[macro_export]
macro_rules! dispatch_every {
    ($dt:expr, $op:expr, |$T:ident| $body:expr) => {
        $crate::dispatch_all!(@arms $dt, $op, $T, $body,
            ::opal::DType::C64 => { type $T = ::opal::Complex<f32>; $body }
            ::opal::DType::C128 => { type $T = ::opal::Complex<f64>; $body }
        )
    };
}

/// An element type of any dtype, complex included, with PyTorch's element sum:
/// what kernels that move elements and accumulate them (`scatter_add`,
/// `index_put` with `accumulate`) need, where [`Elem`] would shut complex out.
pub trait AddElem: opal::Element + Default {
    /// `self + o`: float add, wrapping integer add, logical or for bool, complex
    /// add by parts.
    fn add_elem(self, o: Self) -> Self;
}

impl<T: Elem> AddElem for T {
    #[inline]
    fn add_elem(self, o: Self) -> Self {
        if T::IS_FLOAT {
            // One f64 add rounded back is the exact f32/f16/bf16 add (double
            // rounding cannot occur with 53 >= 2*24+2 bits).
            T::from_f64(self.to_f64() + o.to_f64())
        } else if T::DTYPE == DType::Bool {
            T::from_i64((self.to_bool() || o.to_bool()) as i64)
        } else {
            T::from_i64(self.to_i64().wrapping_add(o.to_i64()))
        }
    }
}

/// True for f16, bf16, f32, f64 (and complex, which CPU kernels reject).
pub fn is_floating(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
}

/// True for the integer dtypes (bool excluded).
pub fn is_integral(d: DType) -> bool {
    matches!(
        d,
        DType::U8 | DType::I8 | DType::I16 | DType::I32 | DType::I64
    )
}

/// A complex element type (C64, C128) with the arithmetic CPU kernels need.
/// Complex numbers have no order and no lossless real cast, so they are not
/// [`Elem`]s: kernels reach them through
/// [`dispatch_complex!`](crate::dispatch_complex) and the maps of [`crate::iter`],
/// which only need [`opal::Element`].
pub trait Cplx: opal::Element + Default {
    /// The component type: f32 for C64, f64 for C128.
    type R: Float<Compute = Self::R> + num_traits::Float + Send + Sync + std::iter::Sum;
    /// The number `re + im i`.
    fn new(re: Self::R, im: Self::R) -> Self;
    /// Real part.
    fn re(self) -> Self::R;
    /// Imaginary part.
    fn im(self) -> Self::R;
    /// A real number as complex.
    #[inline(always)]
    fn from_re(re: Self::R) -> Self {
        Self::new(re, Self::R::zero())
    }
    /// `self + o`.
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        Self::new(self.re() + o.re(), self.im() + o.im())
    }
    /// `self - o`.
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        Self::new(self.re() - o.re(), self.im() - o.im())
    }
    /// `self * o`.
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        let (a, b, c, d) = (self.re(), self.im(), o.re(), o.im());
        Self::new(a * c - b * d, a * d + b * c)
    }
    /// `self / o` by Smith's method: scaling by the larger of `o`'s parts keeps
    /// `c^2 + d^2` from overflowing or underflowing when the parts are large or
    /// small; a zero divisor gives the infinities and NaNs of real division.
    #[inline(always)]
    fn div(self, o: Self) -> Self {
        let (a, b, c, d) = (self.re(), self.im(), o.re(), o.im());
        let zero = Self::R::zero();
        if c.abs() >= d.abs() {
            if c == zero && d == zero {
                return Self::new(a / c.abs(), b / d.abs());
            }
            let r = d / c;
            let s = Self::R::one() / (c + d * r);
            Self::new((a + b * r) * s, (b - a * r) * s)
        } else {
            let r = c / d;
            let s = Self::R::one() / (d + c * r);
            Self::new((a * r + b) * s, (b * r - a) * s)
        }
    }
    /// `-self`.
    #[inline(always)]
    fn neg(self) -> Self {
        Self::new(-self.re(), -self.im())
    }
    /// `self * k` for a real `k`.
    #[inline(always)]
    fn scale(self, k: Self::R) -> Self {
        Self::new(self.re() * k, self.im() * k)
    }
    /// `|self|`, without overflow in the squares.
    #[inline(always)]
    fn abs(self) -> Self::R {
        self.re().hypot(self.im())
    }
    /// True when either part is NaN.
    #[inline(always)]
    fn is_nan(self) -> bool {
        self.re().is_nan() || self.im().is_nan()
    }
    /// `1 / self`.
    #[inline(always)]
    fn recip(self) -> Self {
        Self::from_re(Self::R::one()).div(self)
    }
    /// The same number as `num_complex`'s type, whose elementary functions
    /// (principal branches, C99's special values) the kernels use.
    #[inline(always)]
    fn nc(self) -> NumComplex<Self::R> {
        NumComplex::new(self.re(), self.im())
    }
    /// Back from `num_complex`'s type.
    #[inline(always)]
    fn from_nc(c: NumComplex<Self::R>) -> Self {
        Self::new(c.re, c.im)
    }
}

use num_traits::{Float as NumFloat, One};
use rustfft::num_complex::Complex as NumComplex;

macro_rules! cplx_elem {
    ($r:ty) => {
        impl Cplx for opal::Complex<$r> {
            type R = $r;
            #[inline(always)]
            fn new(re: $r, im: $r) -> Self {
                opal::Complex { re, im }
            }
            #[inline(always)]
            fn re(self) -> $r {
                self.re
            }
            #[inline(always)]
            fn im(self) -> $r {
                self.im
            }
        }
    };
}
cplx_elem!(f32);
cplx_elem!(f64);

impl AddElem for opal::Complex<f32> {
    #[inline]
    fn add_elem(self, o: Self) -> Self {
        Cplx::add(self, o)
    }
}
impl AddElem for opal::Complex<f64> {
    #[inline]
    fn add_elem(self, o: Self) -> Self {
        Cplx::add(self, o)
    }
}

/// Dispatch over the complex dtypes C64 and C128; binds the element type ([`Cplx`])
/// and its component type.
#[macro_export]
macro_rules! dispatch_complex {
    ($dt:expr, $op:expr, |$T:ident, $R:ident| $body:expr) => {
        match $dt {
            ::opal::DType::C64 => {
                type $T = ::opal::Complex<f32>;
                #[allow(dead_code)]
                type $R = f32;
                $body
            }
            ::opal::DType::C128 => {
                type $T = ::opal::Complex<f64>;
                #[allow(dead_code)]
                type $R = f64;
                $body
            }
            other => Err($crate::dtype_dispatch::unsupported($op, other)),
        }
    };
}
