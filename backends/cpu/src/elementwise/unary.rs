//! Unary math kernels: sign manipulation, exponentials/logs, roots, trigonometry,
//! erf and rounding.
//!
//! Owns: `abs neg sign reciprocal sqrt rsqrt exp expm1 log log1p log10 log2 sin cos
//! tan tanh sinh cosh asin acos atan asinh acosh atanh sigmoid erf ceil floor round
//! trunc` in functional, out= and in-place forms.
//! Must not: handle layout or out= rules itself (uses `super::unary_driver`).

use super::transcendental::{
    cos_f32_slice, exp_f32_slice, log10_f32_slice, log2_f32_slice, log_f32_slice, sin_f32_slice,
};
use super::{float_result, three_forms, unary_driver, Special};
use crate::dtype_dispatch::{Cplx, Float};
use crate::iter::map1;
use crate::nn::vecmath::{sigmoid_f32_slice, tanh_f32_slice};
use crate::out::Dest;
use crate::{dispatch_complex, dispatch_float, dispatch_int};
use opal::{DType, OpalError, Result, Tensor};

/// Floating-only unary op: integers/bool promote to the default float dtype; f16
/// and bf16 compute in f32.
/// With `fast: f`, a new result from a contiguous f32 input comes from the
/// vectorized slice kernel `f` instead. With `complex |z| body`, complex tensors
/// keep their dtype and map each element as `num_complex`'s type `z`; without it
/// they are refused.
macro_rules! float_unary {
    ($impl_fn:ident, $f:ident, $f_out:ident, $f_:ident, $name:literal, |$x:ident| $body:expr
     $(, complex |$z:ident| $cbody:expr)?) => {
        float_unary!($impl_fn, $f, $f_out, $f_, $name, |$x| $body $(, complex |$z| $cbody)?, fast: None);
    };
    ($impl_fn:ident, $f:ident, $f_out:ident, $f_:ident, $name:literal, |$x:ident| $body:expr
     $(, complex |$z:ident| $cbody:expr)?, fast: $fast:expr) => {
        fn $impl_fn(self_: &Tensor, dest: Dest<'_>) -> Result<Tensor> {
            let fast: Option<fn(&[f32], &mut [f32])> = $fast;
            if let Some(r) = fast.and_then(|f| super::activation::f32_new_result(self_, &dest, f)) {
                return r;
            }
            $(
                let dt = self_.dtype();
                if dt.is_complex() {
                    return unary_driver(self_, dest, dt, dt, $name, |o, a| {
                        dispatch_complex!(dt, $name, |T, R| map1::<T, T>(o, a, $name, |v: T| {
                            let $z = v.nc();
                            T::from_nc($cbody)
                        }))
                    });
                }
            )?
            let dt = float_result(self_.dtype(), $name)?;
            unary_driver(self_, dest, dt, dt, $name, |o, a| {
                dispatch_float!(dt, $name, |T, C| map1::<T, T>(o, a, $name, |v: T| {
                    let $x: C = v.up();
                    T::down($body)
                }))
            })
        }
        three_forms!($impl_fn, $f, $f_out, $f_, ());
    };
}

float_unary!(
    sqrt_impl,
    sqrt,
    sqrt_out,
    sqrt_,
    "sqrt",
    |x| x.sqrt(),
    complex | z | z.sqrt()
);
float_unary!(
    rsqrt_impl,
    rsqrt,
    rsqrt_out,
    rsqrt_,
    "rsqrt",
    |x| 1.0 / x.sqrt(),
    complex | z | Cplx::recip(T::from_nc(z.sqrt())).nc()
);
float_unary!(exp_impl, exp, exp_out, exp_, "exp", |x| x.exp(), complex |z| z.exp(), fast: Some(exp_f32_slice));
float_unary!(
    expm1_impl,
    expm1,
    expm1_out,
    expm1_,
    "expm1",
    |x| x.exp_m1(),
    complex | z | z.exp() - 1.0
);
float_unary!(log_impl, log, log_out, log_, "log", |x| x.ln(), complex |z| z.ln(), fast: Some(log_f32_slice));
float_unary!(
    log1p_impl,
    log1p,
    log1p_out,
    log1p_,
    "log1p",
    |x| x.ln_1p(),
    complex | z | (z + 1.0).ln()
);
float_unary!(sin_impl, sin, sin_out, sin_, "sin", |x| x.sin(), complex |z| z.sin(), fast: Some(sin_f32_slice));
float_unary!(cos_impl, cos, cos_out, cos_, "cos", |x| x.cos(), complex |z| z.cos(), fast: Some(cos_f32_slice));
float_unary!(
    tan_impl,
    tan,
    tan_out,
    tan_,
    "tan",
    |x| x.tan(),
    complex | z | z.tan()
);
float_unary!(tanh_impl, tanh, tanh_out, tanh_, "tanh", |x| x.tanh(), complex |z| z.tanh(), fast: Some(tanh_f32_slice));
float_unary!(erf_impl, erf, erf_out, erf_, "erf", |x| Special::erf(x));
float_unary!(
    acos_impl,
    acos,
    acos_out,
    acos_,
    "acos",
    |x| x.acos(),
    complex | z | z.acos()
);
float_unary!(
    acosh_impl,
    acosh,
    acosh_out,
    acosh_,
    "acosh",
    |x| x.acosh(),
    complex | z | z.acosh()
);
float_unary!(
    asin_impl,
    asin,
    asin_out,
    asin_,
    "asin",
    |x| x.asin(),
    complex | z | z.asin()
);
float_unary!(
    asinh_impl,
    asinh,
    asinh_out,
    asinh_,
    "asinh",
    |x| x.asinh(),
    complex | z | z.asinh()
);
float_unary!(
    atan_impl,
    atan,
    atan_out,
    atan_,
    "atan",
    |x| x.atan(),
    complex | z | z.atan()
);
float_unary!(
    atanh_impl,
    atanh,
    atanh_out,
    atanh_,
    "atanh",
    |x| x.atanh(),
    complex | z | z.atanh()
);
float_unary!(
    cosh_impl,
    cosh,
    cosh_out,
    cosh_,
    "cosh",
    |x| x.cosh(),
    complex | z | z.cosh()
);
float_unary!(
    sinh_impl,
    sinh,
    sinh_out,
    sinh_,
    "sinh",
    |x| x.sinh(),
    complex | z | z.sinh()
);
float_unary!(log10_impl, log10, log10_out, log10_, "log10", |x| x.log10(), complex |z| z.log10(), fast: Some(log10_f32_slice));
float_unary!(log2_impl, log2, log2_out, log2_, "log2", |x| x.log2(), complex |z| z.log2(), fast: Some(log2_f32_slice));
float_unary!(
    sigmoid_impl,
    sigmoid,
    sigmoid_out,
    sigmoid_,
    "sigmoid",
    |x| 1.0 / (1.0 + (-x).exp()),
    complex | z | Cplx::recip(T::from_nc((-z).exp() + 1.0)).nc(),
    fast: Some(sigmoid_f32_slice)
);
float_unary!(
    reciprocal_impl,
    reciprocal,
    reciprocal_out,
    reciprocal_,
    "reciprocal",
    |x| 1.0 / x,
    complex | z | Cplx::recip(T::from_nc(z)).nc()
);

/// Same-dtype unary op over floats and integers with separate bodies; `bool`
/// handled by `$bool` (an expression returning `Result<()>` given `o`, `a`).
macro_rules! keep_dtype_unary {
    ($impl_fn:ident, $f:ident, $f_out:ident, $f_:ident, $name:literal,
     float |$x:ident| $fbody:expr, int |$y:ident| $ibody:expr, bool |$o:ident, $a:ident| $bbody:expr
     $(, complex |$w:ident| $cbody:expr)?) => {
        keep_dtype_unary!(@impl $impl_fn, $name, float |$x| $fbody, int |$y| $ibody,
            bool |$o, $a| $bbody $(, complex |$w| $cbody)?);
        three_forms!($impl_fn, $f, $f_out, $f_, ());
    };
    (@impl $impl_fn:ident, $name:literal,
     float |$x:ident| $fbody:expr, int |$y:ident| $ibody:expr, bool |$o:ident, $a:ident| $bbody:expr
     $(, complex |$w:ident| $cbody:expr)?) => {
        fn $impl_fn(self_: &Tensor, dest: Dest<'_>) -> Result<Tensor> {
            let dt = self_.dtype();
            unary_driver(self_, dest, dt, dt, $name, |$o, $a| {
                if dt == DType::Bool {
                    return $bbody;
                }
                $(
                    if dt.is_complex() {
                        return dispatch_complex!(dt, $name, |T, R| map1::<T, T>($o, $a, $name, |$w: T| $cbody));
                    }
                )?
                if dt.is_floating_point() {
                    return dispatch_float!(dt, $name, |T, C| map1::<T, T>(
                        $o,
                        $a,
                        $name,
                        |v: T| {
                            let $x: C = v.up();
                            T::down($fbody)
                        }
                    ));
                }
                dispatch_int!(dt, $name, |T| map1::<T, T>($o, $a, $name, |$y: T| $ibody))
            })
        }
    };
}

fn bool_copy(o: &Tensor, a: &Tensor, name: &str) -> Result<()> {
    map1::<bool, bool>(o, a, name, |v| v)
}

keep_dtype_unary!(
    @impl real_abs_impl,
    "abs",
    float | x | x.abs(),
    int | v | v.wrapping_abs_(),
    bool | o,
    a | bool_copy(o, a, "abs")
);
/// `abs`: a complex tensor's magnitudes are real (C64 -> F32, C128 -> F64), so
/// it has no in-place form, as in PyTorch.
fn abs_impl(self_: &Tensor, dest: Dest<'_>) -> Result<Tensor> {
    let dt = self_.dtype();
    if !dt.is_complex() {
        return real_abs_impl(self_, dest);
    }
    if let Dest::InPlace(_) = dest {
        return Err(OpalError::msg(format!(
            "abs_: in-place abs is not supported for complex tensors (self has dtype {dt})"
        )));
    }
    let rt = dt.to_real();
    unary_driver(self_, dest, dt, rt, "abs", |o, a| {
        dispatch_complex!(dt, "abs", |T, R| map1::<R, T>(o, a, "abs", |v| v.abs()))
    })
}
three_forms!(abs_impl, abs, abs_out, abs_, ());
keep_dtype_unary!(neg_impl, neg, neg_out, neg_, "neg",
    float |x| -x, int |v| v.wrapping_neg_(), bool |_o, _a| Err(OpalError::msg(
        "neg: negation, the `-` operator, on a bool tensor is not supported; use `~` or logical_not() instead"
    )), complex |z| z.neg());
keep_dtype_unary!(
    sign_impl,
    sign,
    sign_out,
    sign_,
    "sign",
    float
        | x
        | if x > 0.0 {
            1.0
        } else if x < 0.0 {
            -1.0
        } else {
            0.0
        },
    int | v | v.signum_(),
    bool | o,
    a | bool_copy(o, a, "sign")
);
keep_dtype_unary!(
    floor_impl,
    floor,
    floor_out,
    floor_,
    "floor",
    float | x | x.floor(),
    int | v | v,
    bool | o,
    a | bool_copy(o, a, "floor")
);
keep_dtype_unary!(
    ceil_impl,
    ceil,
    ceil_out,
    ceil_,
    "ceil",
    float | x | x.ceil(),
    int | v | v,
    bool | o,
    a | bool_copy(o, a, "ceil")
);
keep_dtype_unary!(
    trunc_impl,
    trunc,
    trunc_out,
    trunc_,
    "trunc",
    float | x | x.trunc(),
    int | v | v,
    bool | o,
    a | bool_copy(o, a, "trunc")
);
keep_dtype_unary!(
    round_impl,
    round,
    round_out,
    round_,
    "round",
    float | x | x.round_ties_even(),
    int | v | v,
    bool | o,
    a | bool_copy(o, a, "round")
);

/// Integer helpers with wrapping semantics (two's-complement, like C++).
pub(crate) trait IntOps: Copy {
    fn wrapping_abs_(self) -> Self;
    fn wrapping_neg_(self) -> Self;
    fn signum_(self) -> Self;
}
macro_rules! int_ops {
    ($($t:ty),*) => {$(
        impl IntOps for $t {
            #[inline(always)]
            fn wrapping_abs_(self) -> Self { self.wrapping_abs() }
            #[inline(always)]
            fn wrapping_neg_(self) -> Self { self.wrapping_neg() }
            #[inline(always)]
            fn signum_(self) -> Self { self.signum() }
        }
    )*};
}
int_ops!(i8, i16, i32, i64);
impl IntOps for u8 {
    #[inline(always)]
    fn wrapping_abs_(self) -> Self {
        self
    }
    #[inline(always)]
    fn wrapping_neg_(self) -> Self {
        self.wrapping_neg()
    }
    #[inline(always)]
    fn signum_(self) -> Self {
        (self > 0) as u8
    }
}

/// Copies `self_` converted to `dtype` (used by rounding identities and tests).
pub fn cast(self_: &Tensor, dtype: DType) -> Result<Tensor> {
    crate::copy::to_dtype(self_, dtype).and_then(|t| {
        if t.is_contiguous() {
            Ok(t)
        } else {
            crate::copy::contiguous(&t)
        }
    })
}
