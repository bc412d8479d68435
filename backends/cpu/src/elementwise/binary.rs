//! Binary arithmetic kernels: add, sub, mul, div (true / trunc / floor),
//! remainder and fmod, pow, atan2, maximum, minimum.
//!
//! Owns: the promotion and argument checks of these ops (alpha rules, bool
//! subtraction, integer division by zero) and their element loops. Must not:
//! handle layout or out= rules itself (uses `super::binary_driver`).

use super::{
    binary_driver, float_or_complex_result, float_result, result_type2, result_type_scalar,
    scalar_as, scalar_tensor,
};
use crate::dtype_dispatch::{Cplx, Elem, Float};
use crate::iter::map2;
use crate::out::Dest;
use crate::{dispatch_complex, dispatch_float, dispatch_int};
use opal::{DType, OpalError, Result, Scalar, Tensor};
use std::sync::atomic::{AtomicBool, Ordering};

// ---------------------------------------------------------------- add / sub

fn check_alpha(rt: DType, alpha: &Scalar, op: &str) -> Result<()> {
    // The schema default, valid for every dtype: most calls pass it.
    if let Scalar::Int(1) = alpha {
        return Ok(());
    }
    opal::rules::check_alpha(op, rt, alpha)?;
    // alpha is converted to the type the kernel computes in (f32 for half types).
    let compute = if matches!(rt, DType::F16 | DType::BF16) {
        DType::F32
    } else {
        rt
    };
    alpha.check_fits(compute, op)
}

fn check_sub_bool(a: DType, b: DType, op: &str) -> Result<()> {
    if a == DType::Bool && b == DType::Bool {
        return Err(OpalError::msg(format!(
            "{op}: subtraction, the `-` operator, with two bool tensors is not supported; use `^` or logical_xor() instead"
        )));
    }
    if a == DType::Bool || b == DType::Bool {
        return Err(OpalError::msg(format!(
            "{op}: subtraction, the `-` operator, with a bool tensor is not supported; to invert a mask use `~` or logical_not()"
        )));
    }
    Ok(())
}

/// `a + alpha * b` (or `a - alpha * b` when `negate`) in dtype `rt`.
#[allow(clippy::too_many_arguments)]
#[inline]
fn add_core(
    a: &Tensor,
    b: &Tensor,
    alpha: &Scalar,
    rt: DType,
    negate: bool,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    check_alpha(rt, alpha, op)?;
    binary_driver(a, b, dest, rt, rt, op, |o, x, y| {
        if rt.is_complex() {
            return dispatch_complex!(rt, op, |T, R| {
                let mut al = <T as opal::Element>::from_scalar(alpha);
                if negate {
                    al = al.neg();
                }
                // Always the complex product `alpha * other`, the default alpha
                // too, as PyTorch computes it: (1, 0) times an infinite part makes
                // its partner NaN (inf * 0), and the results must agree.
                map2::<T, T, T>(o, x, y, op, move |p, q| p.add(al.mul(q)))
            });
        }
        if rt == DType::Bool {
            let al = alpha.to_bool();
            return map2::<bool, bool, bool>(o, x, y, op, move |p, q| p || (al && q));
        }
        if rt.is_floating_point() {
            return dispatch_float!(rt, op, |T, C| {
                let mut al: C = scalar_as(alpha);
                if negate {
                    al = -al;
                }
                if al == 1.0 {
                    map2::<T, T, T>(o, x, y, op, |p, q| T::down(p.up() + q.up()))
                } else if al == -1.0 {
                    map2::<T, T, T>(o, x, y, op, |p, q| T::down(p.up() - q.up()))
                } else {
                    map2::<T, T, T>(o, x, y, op, move |p, q| T::down(p.up() + al * q.up()))
                }
            });
        }
        dispatch_int!(rt, op, |T| {
            let mut al: T = scalar_as(alpha);
            if negate {
                al = al.wrapping_neg();
            }
            if al == 1 {
                map2::<T, T, T>(o, x, y, op, |p, q| p.wrapping_add(q))
            } else {
                map2::<T, T, T>(o, x, y, op, move |p, q| p.wrapping_add(al.wrapping_mul(q)))
            }
        })
    })
}

/// `add.Tensor`: `self + alpha * other`.
pub fn add_tensor(self_: &Tensor, other: &Tensor, alpha: &Scalar) -> Result<Tensor> {
    add_core(
        self_,
        other,
        alpha,
        result_type2(self_, other)?,
        false,
        Dest::New,
        "add",
    )
}
/// `add.out`.
pub fn add_out(self_: &Tensor, other: &Tensor, alpha: &Scalar, out: &Tensor) -> Result<Tensor> {
    add_core(
        self_,
        other,
        alpha,
        result_type2(self_, other)?,
        false,
        Dest::Out(out),
        "add.out",
    )
}
/// `add_.Tensor`.
pub fn add_(self_: &Tensor, other: &Tensor, alpha: &Scalar) -> Result<Tensor> {
    add_core(
        self_,
        other,
        alpha,
        result_type2(self_, other)?,
        false,
        Dest::InPlace(self_),
        "add_",
    )
}
/// `add.Scalar`: `self + alpha * other` with a Python-scalar `other`.
pub fn add_scalar(self_: &Tensor, other: &Scalar, alpha: &Scalar) -> Result<Tensor> {
    add_scalar_impl(self_, other, alpha, Dest::New, "add.Scalar")
}
/// `add_.Scalar`.
pub fn add_scalar_(self_: &Tensor, other: &Scalar, alpha: &Scalar) -> Result<Tensor> {
    add_scalar_impl(self_, other, alpha, Dest::InPlace(self_), "add_.Scalar")
}
/// `add.Scalar_out`: an autogen out= op, so `out` must have the result's dtype
/// (see [`crate::autogen`]).
pub fn add_scalar_out(
    self_: &Tensor,
    other: &Scalar,
    alpha: &Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    const OP: &str = "add.Scalar_out";
    crate::autogen::check_out(OP, result_type_scalar(self_, other)?, out)?;
    add_scalar_impl(self_, other, alpha, Dest::Out(out), OP)
}
fn add_scalar_impl(
    self_: &Tensor,
    other: &Scalar,
    alpha: &Scalar,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    let rt = result_type_scalar(self_, other)?;
    let b = scalar_tensor(other, rt)?;
    add_core(self_, &b, alpha, rt, false, dest, op)
}

pub(crate) fn sub_impl(
    a: &Tensor,
    b: &Tensor,
    alpha: &Scalar,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    check_sub_bool(a.dtype(), b.dtype(), op)?;
    add_core(a, b, alpha, result_type2(a, b)?, true, dest, op)
}
/// `sub.Tensor`: `self - alpha * other`.
pub fn sub_tensor(self_: &Tensor, other: &Tensor, alpha: &Scalar) -> Result<Tensor> {
    sub_impl(self_, other, alpha, Dest::New, "sub")
}
/// `sub.out`.
pub fn sub_out(self_: &Tensor, other: &Tensor, alpha: &Scalar, out: &Tensor) -> Result<Tensor> {
    sub_impl(self_, other, alpha, Dest::Out(out), "sub.out")
}
/// `sub_.Tensor`.
pub fn sub_(self_: &Tensor, other: &Tensor, alpha: &Scalar) -> Result<Tensor> {
    sub_impl(self_, other, alpha, Dest::InPlace(self_), "sub_")
}

// ---------------------------------------------------------------- mul

fn mul_core(a: &Tensor, b: &Tensor, rt: DType, dest: Dest<'_>, op: &str) -> Result<Tensor> {
    binary_driver(a, b, dest, rt, rt, op, |o, x, y| {
        if rt.is_complex() {
            return dispatch_complex!(rt, op, |T, R| map2::<T, T, T>(o, x, y, op, |p, q| p.mul(q)));
        }
        if rt == DType::Bool {
            return map2::<bool, bool, bool>(o, x, y, op, |p, q| p && q);
        }
        if rt.is_floating_point() {
            return dispatch_float!(rt, op, |T, C| map2::<T, T, T>(o, x, y, op, |p, q| T::down(
                p.up() * q.up()
            )));
        }
        dispatch_int!(rt, op, |T| map2::<T, T, T>(o, x, y, op, |p, q| p
            .wrapping_mul(q)))
    })
}
/// `mul.Tensor`.
pub fn mul_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    mul_core(self_, other, result_type2(self_, other)?, Dest::New, "mul")
}
/// `mul.out`.
pub fn mul_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    mul_core(
        self_,
        other,
        result_type2(self_, other)?,
        Dest::Out(out),
        "mul.out",
    )
}
/// `mul_.Tensor`.
pub fn mul_(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    mul_core(
        self_,
        other,
        result_type2(self_, other)?,
        Dest::InPlace(self_),
        "mul_",
    )
}
fn mul_scalar_impl(self_: &Tensor, other: &Scalar, dest: Dest<'_>, op: &str) -> Result<Tensor> {
    let rt = result_type_scalar(self_, other)?;
    let b = scalar_tensor(other, rt)?;
    mul_core(self_, &b, rt, dest, op)
}
/// `mul.Scalar`.
pub fn mul_scalar(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    mul_scalar_impl(self_, other, Dest::New, "mul.Scalar")
}
/// `mul_.Scalar`.
pub fn mul_scalar_(self_: &Tensor, other: &Scalar) -> Result<Tensor> {
    mul_scalar_impl(self_, other, Dest::InPlace(self_), "mul_.Scalar")
}
/// `mul.Scalar_out`: an autogen out= op, so `out` must have the result's dtype
/// (see [`crate::autogen`]).
pub fn mul_scalar_out(self_: &Tensor, other: &Scalar, out: &Tensor) -> Result<Tensor> {
    const OP: &str = "mul.Scalar_out";
    crate::autogen::check_out(OP, result_type_scalar(self_, other)?, out)?;
    mul_scalar_impl(self_, other, Dest::Out(out), OP)
}

// ---------------------------------------------------------------- div

/// Floor division of floats the way PyTorch rounds it: through `fmod` so that the
/// quotient is consistent with `remainder`.
#[inline(always)]
fn floor_div_float<C: num_traits::Float>(a: C, b: C) -> C {
    if b == C::zero() {
        return a / b;
    }
    let m = a % b;
    let mut div = (a - m) / b;
    if m != C::zero() && (b < C::zero()) != (m < C::zero()) {
        div = div - C::one();
    }
    if div != C::zero() {
        let fl = div.floor();
        let half = C::one() / (C::one() + C::one());
        if div - fl > half {
            fl + C::one()
        } else {
            fl
        }
    } else {
        (C::zero()).copysign(a / b)
    }
}

#[allow(unused_comparisons, clippy::absurd_extreme_comparisons)] // sign tests are vacuous only for u8
pub(crate) fn div_impl(
    a: &Tensor,
    b: &Tensor,
    mode: Option<&str>,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    let rt = result_type2(a, b)?;
    match mode {
        None => {
            let ft = float_or_complex_result(rt, op)?;
            binary_driver(a, b, dest, ft, ft, op, |o, x, y| {
                if ft.is_complex() {
                    return dispatch_complex!(ft, op, |T, R| map2::<T, T, T>(o, x, y, op, |p, q| p
                        .div(q)));
                }
                dispatch_float!(ft, op, |T, C| map2::<T, T, T>(o, x, y, op, |p, q| T::down(
                    p.up() / q.up()
                )))
            })
        }
        Some(m @ ("trunc" | "floor")) => {
            let floor = m == "floor";
            if rt == DType::Bool {
                return Err(OpalError::msg(format!("{op}: rounding division is not supported for bool tensors")));
            }
            if rt.is_complex() {
                return Err(OpalError::msg(format!("{op}: rounding_mode '{m}' is not supported for complex tensors (dtype {rt})")));
            }
            binary_driver(a, b, dest, rt, rt, op, |o, x, y| {
                if rt.is_floating_point() {
                    return dispatch_float!(rt, op, |T, C| {
                        if floor {
                            map2::<T, T, T>(o, x, y, op, |p, q| T::down(floor_div_float(p.up(), q.up())))
                        } else {
                            map2::<T, T, T>(o, x, y, op, |p, q| T::down((p.up() / q.up()).trunc()))
                        }
                    });
                }
                let zero = AtomicBool::new(false);
                let r = dispatch_int!(rt, op, |T| map2::<T, T, T>(o, x, y, op, |p, q| {
                    if q == 0 {
                        zero.store(true, Ordering::Relaxed);
                        return 0;
                    }
                    let d = p.wrapping_div(q);
                    if floor && (p.wrapping_rem(q) != 0) && ((p < 0) != (q < 0)) {
                        d.wrapping_sub(1)
                    } else {
                        d
                    }
                }));
                if zero.load(Ordering::Relaxed) {
                    return Err(OpalError::msg(format!("{op}: ZeroDivisionError (integer division by zero)")));
                }
                r
            })
        }
        Some(other) => Err(OpalError::msg(format!(
            "{op}: div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{other}'"
        ))),
    }
}
/// `div.Tensor`: true division (integers promote to the default float dtype).
pub fn div_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    div_impl(self_, other, None, Dest::New, "div")
}
/// `div.out`.
pub fn div_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    div_impl(self_, other, None, Dest::Out(out), "div.out")
}
/// `div_.Tensor`.
pub fn div_(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    div_impl(self_, other, None, Dest::InPlace(self_), "div_")
}
/// `div.Tensor_mode`: `rounding_mode` None, "trunc" or "floor".
pub fn div_tensor_mode(
    self_: &Tensor,
    other: &Tensor,
    rounding_mode: Option<&str>,
) -> Result<Tensor> {
    div_impl(self_, other, rounding_mode, Dest::New, "div.Tensor_mode")
}
/// `div.out_mode`.
pub fn div_out_mode(
    self_: &Tensor,
    other: &Tensor,
    rounding_mode: Option<&str>,
    out: &Tensor,
) -> Result<Tensor> {
    div_impl(self_, other, rounding_mode, Dest::Out(out), "div.out_mode")
}
/// `div_.Tensor_mode`.
pub fn div_tensor_mode_(
    self_: &Tensor,
    other: &Tensor,
    rounding_mode: Option<&str>,
) -> Result<Tensor> {
    div_impl(
        self_,
        other,
        rounding_mode,
        Dest::InPlace(self_),
        "div_.Tensor_mode",
    )
}

// ---------------------------------------------------------------- remainder

pub(crate) fn remainder_impl(a: &Tensor, b: &Tensor, dest: Dest<'_>, op: &str) -> Result<Tensor> {
    modulo_impl(a, b, true, dest, op)
}

/// The remainder of `a / b` truncated toward zero (`fmod`, the sign of the dividend)
/// or, with `floor`, floored (`remainder`, Python's modulus: the sign of the divisor).
#[allow(unused_comparisons, clippy::absurd_extreme_comparisons)] // sign tests are vacuous only for u8
pub(crate) fn modulo_impl(
    a: &Tensor,
    b: &Tensor,
    floor: bool,
    dest: Dest<'_>,
    op: &str,
) -> Result<Tensor> {
    let rt = result_type2(a, b)?;
    if rt == DType::Bool {
        return Err(OpalError::msg(format!(
            "{op}: not supported for bool tensors"
        )));
    }
    binary_driver(a, b, dest, rt, rt, op, |o, x, y| {
        if rt.is_floating_point() {
            return dispatch_float!(rt, op, |T, C| map2::<T, T, T>(o, x, y, op, |p, q| {
                let (p, q) = (p.up(), q.up());
                let mut m = p % q;
                if floor && m != 0.0 && ((q < 0.0) != (m < 0.0)) {
                    m += q;
                }
                T::down(m)
            }));
        }
        let zero = AtomicBool::new(false);
        let r = dispatch_int!(rt, op, |T| map2::<T, T, T>(o, x, y, op, |p, q| {
            if q == 0 {
                zero.store(true, Ordering::Relaxed);
                return 0;
            }
            let m = p.wrapping_rem(q);
            if floor && m != 0 && ((m < 0) != (q < 0)) {
                m.wrapping_add(q)
            } else {
                m
            }
        }));
        if zero.load(Ordering::Relaxed) {
            return Err(OpalError::msg(format!(
                "{op}: ZeroDivisionError (integer remainder by zero)"
            )));
        }
        r
    })
}
/// `remainder.Tensor`: Python modulus (sign of the divisor).
pub fn remainder_tensor(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    remainder_impl(self_, other, Dest::New, "remainder")
}
/// `remainder.Tensor_out`.
pub fn remainder_tensor_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    remainder_impl(self_, other, Dest::Out(out), "remainder.Tensor_out")
}
/// `remainder_.Tensor`.
pub fn remainder_(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    remainder_impl(self_, other, Dest::InPlace(self_), "remainder_")
}

// ---------------------------------------------------------------- pow

/// Integer power with wrapping multiplication; negative exponents follow integer
/// semantics (1 stays 1, -1 alternates, everything else truncates to 0).
#[inline(always)]
fn ipow(base: i64, exp: i64) -> i64 {
    if exp < 0 {
        return match base {
            1 => 1,
            -1 => {
                if exp % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        };
    }
    let (mut r, mut b, mut e) = (1i64, base, exp);
    while e > 0 {
        if e & 1 == 1 {
            r = r.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        e >>= 1;
    }
    r
}

/// `x^y` for complex numbers as C's `cpow`, which PyTorch's CPU kernels call:
/// `exp(y log x)` with no shortcut for a zero base or exponent (so `0^0` is NaN
/// and `0^(-1)` infinite, as there).
#[inline]
fn cpow<T: Cplx>(x: T, y: T) -> T {
    T::from_nc(T::from_nc(x.nc().ln()).mul(y).nc().exp())
}

pub(crate) fn pow_tt_impl(a: &Tensor, b: &Tensor, dest: Dest<'_>, op: &str) -> Result<Tensor> {
    let rt = result_type2(a, b)?;
    if rt == DType::Bool {
        return Err(OpalError::msg(format!(
            "{op}: not supported for bool tensors"
        )));
    }
    binary_driver(a, b, dest, rt, rt, op, |o, x, y| {
        if rt.is_complex() {
            return dispatch_complex!(rt, op, |T, R| map2::<T, T, T>(o, x, y, op, cpow));
        }
        if rt.is_floating_point() {
            return dispatch_float!(rt, op, |T, C| map2::<T, T, T>(o, x, y, op, |p, q| T::down(
                p.up().powf(q.up())
            )));
        }
        dispatch_int!(rt, op, |T| map2::<T, T, T>(
            o,
            x,
            y,
            op,
            |p, q| T::from_i64(ipow(p.to_i64(), q.to_i64()))
        ))
    })
}
/// `pow.Tensor_Tensor`.
pub fn pow_tensor_tensor(self_: &Tensor, exponent: &Tensor) -> Result<Tensor> {
    pow_tt_impl(self_, exponent, Dest::New, "pow.Tensor_Tensor")
}
/// `pow.Tensor_Tensor_out`.
pub fn pow_tensor_tensor_out(self_: &Tensor, exponent: &Tensor, out: &Tensor) -> Result<Tensor> {
    pow_tt_impl(self_, exponent, Dest::Out(out), "pow.Tensor_Tensor_out")
}
/// `pow_.Tensor`.
pub fn pow_tensor_(self_: &Tensor, exponent: &Tensor) -> Result<Tensor> {
    pow_tt_impl(self_, exponent, Dest::InPlace(self_), "pow_.Tensor")
}

fn pow_ts_impl(a: &Tensor, e: &Scalar, dest: Dest<'_>, op: &str) -> Result<Tensor> {
    let rt = result_type_scalar(a, e)?;
    if rt == DType::Bool {
        return Err(OpalError::msg(format!(
            "{op}: not supported for bool tensors"
        )));
    }
    if rt.is_integral(false) && e.to_i64() < 0 && !e.is_floating_point() {
        return Err(OpalError::msg(format!(
            "{op}: integers to negative integer powers are not allowed"
        )));
    }
    super::unary_driver(a, dest, rt, rt, op, |o, x| {
        if rt.is_complex() {
            return dispatch_complex!(rt, op, |T, R| pow_complex_scalar::<T>(o, x, e, op));
        }
        if rt.is_floating_point() {
            return dispatch_float!(rt, op, |T, C| {
                let ev: C = scalar_as(e);
                // Common exponents take exact, faster paths (as PyTorch does).
                if ev == 2.0 {
                    crate::iter::map1::<T, T>(o, x, op, |p| {
                        let p = p.up();
                        T::down(p * p)
                    })
                } else if ev == 3.0 {
                    crate::iter::map1::<T, T>(o, x, op, |p| {
                        let p = p.up();
                        T::down(p * p * p)
                    })
                } else if ev == 0.5 {
                    crate::iter::map1::<T, T>(o, x, op, |p| T::down(p.up().sqrt()))
                } else if ev == -0.5 {
                    crate::iter::map1::<T, T>(o, x, op, |p| T::down(1.0 / p.up().sqrt()))
                } else if ev == -1.0 {
                    crate::iter::map1::<T, T>(o, x, op, |p| T::down(1.0 / p.up()))
                } else if ev == -2.0 {
                    crate::iter::map1::<T, T>(o, x, op, |p| {
                        let p = p.up();
                        T::down(1.0 / (p * p))
                    })
                } else {
                    crate::iter::map1::<T, T>(o, x, op, move |p| T::down(p.up().powf(ev)))
                }
            });
        }
        let ev = e.to_i64();
        dispatch_int!(rt, op, |T| crate::iter::map1::<T, T>(o, x, op, move |p| {
            T::from_i64(ipow(p.to_i64(), ev))
        }))
    })
}
/// `x^e` of complex `x` into `o`, with PyTorch's shortcuts for the common
/// exponents: each gives what its own op gives (`e = 2` multiplies, so that an
/// infinite part makes NaNs as `x * x` does, `e = 0.5` is `sqrt`'s principal
/// root), and every other exponent goes through [`cpow`] in `T`'s precision.
fn pow_complex_scalar<T: Cplx>(o: &Tensor, x: &Tensor, e: &Scalar, op: &str) -> Result<()> {
    let ev = <T as opal::Element>::from_scalar(e);
    let is = |v: f64| Elem::to_f64(ev.im()) == 0.0 && Elem::to_f64(ev.re()) == v;
    let one = T::from_re(<T::R as num_traits::One>::one());
    if is(0.0) {
        // PyTorch fills ones without reading the base: NaN^0 is 1 too.
        return crate::iter::map1::<T, T>(o, x, op, move |_| one);
    }
    if is(1.0) {
        crate::iter::map1::<T, T>(o, x, op, |p| p)
    } else if is(2.0) {
        crate::iter::map1::<T, T>(o, x, op, |p| p.mul(p))
    } else if is(3.0) {
        crate::iter::map1::<T, T>(o, x, op, |p| p.mul(p).mul(p))
    } else if is(0.5) {
        crate::iter::map1::<T, T>(o, x, op, |p| T::from_nc(p.nc().sqrt()))
    } else if is(-0.5) {
        crate::iter::map1::<T, T>(o, x, op, |p| T::from_nc(p.nc().sqrt()).recip())
    } else if is(-1.0) {
        crate::iter::map1::<T, T>(o, x, op, |p| p.recip())
    } else if is(-2.0) {
        crate::iter::map1::<T, T>(o, x, op, move |p| one.div(p.mul(p)))
    } else {
        crate::iter::map1::<T, T>(o, x, op, move |p| cpow(p, ev))
    }
}

/// `pow.Tensor_Scalar`.
pub fn pow_tensor_scalar(self_: &Tensor, exponent: &Scalar) -> Result<Tensor> {
    pow_ts_impl(self_, exponent, Dest::New, "pow.Tensor_Scalar")
}
/// `pow.Tensor_Scalar_out`.
pub fn pow_tensor_scalar_out(self_: &Tensor, exponent: &Scalar, out: &Tensor) -> Result<Tensor> {
    pow_ts_impl(self_, exponent, Dest::Out(out), "pow.Tensor_Scalar_out")
}
/// `pow_.Scalar`.
pub fn pow_scalar_(self_: &Tensor, exponent: &Scalar) -> Result<Tensor> {
    pow_ts_impl(self_, exponent, Dest::InPlace(self_), "pow_.Scalar")
}

// ---------------------------------------------------------------- atan2, maximum, minimum

fn atan2_impl(a: &Tensor, b: &Tensor, dest: Dest<'_>, op: &str) -> Result<Tensor> {
    let ft = float_result(result_type2(a, b)?, op)?;
    binary_driver(a, b, dest, ft, ft, op, |o, x, y| {
        dispatch_float!(ft, op, |T, C| map2::<T, T, T>(o, x, y, op, |p, q| T::down(
            p.up().atan2(q.up())
        )))
    })
}
/// `atan2`.
pub fn atan2(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    atan2_impl(self_, other, Dest::New, "atan2")
}
/// `atan2.out`.
pub fn atan2_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    atan2_impl(self_, other, Dest::Out(out), "atan2.out")
}
/// `atan2_`.
pub fn atan2_(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    atan2_impl(self_, other, Dest::InPlace(self_), "atan2_")
}

fn extreme_impl(a: &Tensor, b: &Tensor, max: bool, dest: Dest<'_>, op: &str) -> Result<Tensor> {
    let rt = result_type2(a, b)?;
    binary_driver(a, b, dest, rt, rt, op, |o, x, y| {
        if rt == DType::Bool {
            return if max {
                map2::<bool, bool, bool>(o, x, y, op, |p, q| p || q)
            } else {
                map2::<bool, bool, bool>(o, x, y, op, |p, q| p && q)
            };
        }
        if rt.is_floating_point() {
            return dispatch_float!(rt, op, |T, C| map2::<T, T, T>(o, x, y, op, |p, q| {
                let (pc, qc) = (p.up(), q.up());
                // NaN on either side propagates.
                if pc.is_nan() {
                    p
                } else if qc.is_nan() {
                    q
                } else if (pc > qc) == max {
                    p
                } else {
                    q
                }
            }));
        }
        dispatch_int!(rt, op, |T| map2::<T, T, T>(o, x, y, op, |p, q| if max {
            p.max(q)
        } else {
            p.min(q)
        }))
    })
}
/// `maximum`: element-wise max, NaN-propagating.
pub fn maximum(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    extreme_impl(self_, other, true, Dest::New, "maximum")
}
/// `maximum.out`.
pub fn maximum_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    extreme_impl(self_, other, true, Dest::Out(out), "maximum.out")
}
/// `minimum`: element-wise min, NaN-propagating.
pub fn minimum(self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    extreme_impl(self_, other, false, Dest::New, "minimum")
}
/// `minimum.out`.
pub fn minimum_out(self_: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
    extreme_impl(self_, other, false, Dest::Out(out), "minimum.out")
}

#[allow(dead_code)]
fn _elem_used<T: Elem>() {}
