//! Selection kernels: `where.self`, `masked_fill.Scalar`, `clamp`, `nan_to_num`,
//! `isnan`, `isinf`.
//!
//! Owns: ops that pick or replace values per element. Must not: handle layout or
//! out= rules itself.

use super::{scalar_as, three_forms, unary_driver};
use crate::copy::to_dtype;
use crate::dtype_dispatch::{Elem, Float};
use crate::iter::{map1, map2, map3};
use crate::out::{write_result, Dest};
use crate::{dispatch_all, dispatch_float, dispatch_numeric};
use opal::dtype::ResultType;
use opal::{DType, OpalError, Result, Scalar, Tensor};

fn where_impl(
    condition: &Tensor,
    self_: &Tensor,
    other: &Tensor,
    dest: Dest<'_>,
) -> Result<Tensor> {
    let op = "where";
    if !matches!(condition.dtype(), DType::Bool | DType::U8) {
        return Err(OpalError::msg(format!(
            "where: expected condition to be a boolean tensor, but got a tensor with dtype {}",
            condition.dtype()
        )));
    }
    let rt = ResultType::of_tensors(&[self_, other])?;
    let shape =
        opal::rules::broadcast_shapes(op, &[condition.sizes(), self_.sizes(), other.sizes()])?;
    let c = to_dtype(condition, DType::Bool)?;
    let (a, b) = (to_dtype(self_, rt)?, to_dtype(other, rt)?);
    write_result(dest, &shape, rt, op, |o| {
        if rt.is_complex() {
            return crate::dispatch_complex!(rt, op, |T, R| map3::<T, bool, T, T>(
                o,
                &c,
                &a,
                &b,
                op,
                |c, x, y| if c { x } else { y }
            ));
        }
        dispatch_all!(rt, op, |T| map3::<T, bool, T, T>(
            o,
            &c,
            &a,
            &b,
            op,
            |c, x, y| if c { x } else { y }
        ))
    })
}
/// `where.self`: `condition ? self : other`, broadcasting all three.
pub fn where_self(condition: &Tensor, self_: &Tensor, other: &Tensor) -> Result<Tensor> {
    where_impl(condition, self_, other, Dest::New)
}
/// `where.self_out`.
pub fn where_self_out(
    condition: &Tensor,
    self_: &Tensor,
    other: &Tensor,
    out: &Tensor,
) -> Result<Tensor> {
    where_impl(condition, self_, other, Dest::Out(out))
}

fn masked_fill_impl(
    self_: &Tensor,
    mask: &Tensor,
    value: &Scalar,
    in_place: bool,
) -> Result<Tensor> {
    let op = if in_place {
        "masked_fill_"
    } else {
        "masked_fill"
    };
    if mask.dtype() != DType::Bool {
        return Err(OpalError::msg(format!(
            "{op}: only supports boolean masks, but got mask with dtype {}",
            mask.dtype()
        )));
    }
    let dt = self_.dtype();
    value.check_fits(dt, op)?;
    let shape = if in_place {
        // The mask must broadcast to self; self is not expanded.
        opal::rules::broadcast_shapes(op, &[self_.sizes(), mask.sizes()])?;
        self_.sizes().to_vec()
    } else {
        opal::rules::broadcast_shapes(op, &[self_.sizes(), mask.sizes()])?
    };
    if in_place && shape != self_.sizes() {
        return Err(OpalError::shape(format!(
            "{op}: mask shape cannot be broadcast into self"
        )));
    }
    let dest = if in_place {
        Dest::InPlace(self_)
    } else {
        Dest::New
    };
    write_result(dest, &shape, dt, op, |o| {
        dispatch_all!(dt, op, |T| {
            let v: T = scalar_as(value);
            map2::<T, T, bool>(o, self_, mask, op, move |x, m| if m { v } else { x })
        })
    })
}
/// `masked_fill.Scalar`: `value` where `mask` is set.
pub fn masked_fill_scalar(self_: &Tensor, mask: &Tensor, value: &Scalar) -> Result<Tensor> {
    masked_fill_impl(self_, mask, value, false)
}
/// `masked_fill_.Scalar`.
pub fn masked_fill_scalar_(self_: &Tensor, mask: &Tensor, value: &Scalar) -> Result<Tensor> {
    masked_fill_impl(self_, mask, value, true)
}

/// `x` clamped to `[lo, hi]` (either bound optional; `hi` wins when `lo > hi`). A
/// NaN input stays NaN and a NaN bound propagates, as PyTorch's clamp does.
#[inline(always)]
pub(crate) fn clamp_float<C: num_traits::Float>(x: C, lo: Option<C>, hi: Option<C>) -> C {
    if x.is_nan() {
        return x;
    }
    let mut x = x;
    if let Some(l) = lo {
        x = if l.is_nan() || x < l { l } else { x };
    }
    if let Some(h) = hi {
        x = if h.is_nan() || x > h { h } else { x };
    }
    x
}

/// [`clamp_float`] for integers: `x` clamped to `[lo, hi]`, `hi` winning.
#[inline(always)]
pub(crate) fn clamp_ord<T: PartialOrd>(x: T, lo: Option<T>, hi: Option<T>) -> T {
    let mut x = x;
    if let Some(l) = lo {
        if x < l {
            x = l;
        }
    }
    if let Some(h) = hi {
        if x > h {
            x = h;
        }
    }
    x
}

fn clamp_impl(
    self_: &Tensor,
    min: Option<&Scalar>,
    max: Option<&Scalar>,
    dest: Dest<'_>,
) -> Result<Tensor> {
    let op = "clamp";
    if min.is_none() && max.is_none() {
        return Err(OpalError::msg(
            "clamp: at least one of 'min' or 'max' must not be None",
        ));
    }
    if self_.dtype() == DType::Bool {
        return Err(OpalError::msg("clamp: not supported for bool tensors"));
    }
    let mut r = ResultType::new();
    r.add_tensor(self_);
    for s in [min, max].into_iter().flatten() {
        r.scalar(s);
    }
    let rt = r.finish()?;
    // The bounds are converted to the result's element type, checked (PyTorch's
    // `to<scalar_t>`): a uint8 clamp to min=300 is an error, not a clamp to 44.
    for s in [min, max].into_iter().flatten() {
        s.check_fits(rt, op)?;
    }
    unary_driver(self_, dest, rt, rt, op, |o, a| {
        if rt.is_floating_point() {
            return dispatch_float!(rt, op, |T, C| {
                let lo: Option<C> = min.map(scalar_as);
                let hi: Option<C> = max.map(scalar_as);
                map1::<T, T>(o, a, op, move |v| T::down(clamp_float(v.up(), lo, hi)))
            });
        }
        dispatch_numeric!(rt, op, |T| {
            let lo: Option<T> = min.map(scalar_as);
            let hi: Option<T> = max.map(scalar_as);
            map1::<T, T>(o, a, op, move |x| clamp_ord(x, lo, hi))
        })
    })
}
three_forms!(clamp_impl, clamp, clamp_out, clamp_, (min: Option<&Scalar>, max: Option<&Scalar>));

fn nan_to_num_impl(
    self_: &Tensor,
    nan: Option<f64>,
    posinf: Option<f64>,
    neginf: Option<f64>,
    dest: Dest<'_>,
) -> Result<Tensor> {
    let op = "nan_to_num";
    let dt = self_.dtype();
    unary_driver(self_, dest, dt, dt, op, |o, a| {
        if !dt.is_floating_point() {
            // Integers and bool hold no NaN or infinity: a copy.
            return dispatch_all!(dt, op, |T| map1::<T, T>(o, a, op, |v| v));
        }
        dispatch_float!(dt, op, |T, C| {
            let (lo, hi) = float_limits::<T>();
            let n = T::from_f64(nan.unwrap_or(0.0));
            let p = posinf.map(T::from_f64).unwrap_or(hi);
            let m = neginf.map(T::from_f64).unwrap_or(lo);
            map1::<T, T>(o, a, op, move |v| {
                let x: C = v.up();
                if x.is_nan() {
                    n
                } else if x == C::INFINITY {
                    p
                } else if x == C::NEG_INFINITY {
                    m
                } else {
                    v
                }
            })
        })
    })
}
three_forms!(nan_to_num_impl, nan_to_num, nan_to_num_out, nan_to_num_, (nan: Option<f64>, posinf: Option<f64>, neginf: Option<f64>));

/// Lowest and largest finite values of a float element type.
fn float_limits<T: Float>() -> (T, T) {
    match T::DTYPE {
        DType::F16 => (T::from_f64(-65504.0), T::from_f64(65504.0)),
        DType::BF16 => (
            T::from_f64(-3.389_531_389_251_535_5e38),
            T::from_f64(3.389_531_389_251_535_5e38),
        ),
        DType::F32 => (T::from_f64(f32::MIN as f64), T::from_f64(f32::MAX as f64)),
        _ => (T::from_f64(f64::MIN), T::from_f64(f64::MAX)),
    }
}

/// Which floating-point class `isnan` / `isinf` test for.
#[derive(Clone, Copy)]
enum FloatClass {
    Nan,
    Inf,
}

/// True where the element is of `class` (always false for integers and bool).
fn float_class(self_: &Tensor, class: FloatClass, op: &str) -> Result<Tensor> {
    let dt = self_.dtype();
    write_result(Dest::New, self_.sizes(), DType::Bool, op, |o| {
        if !dt.is_floating_point() {
            return map1::<bool, bool>(o, &scalar_false()?, op, |v| v);
        }
        dispatch_float!(dt, op, |T, C| map1::<bool, T>(o, self_, op, |v| {
            let x = v.up();
            match class {
                FloatClass::Nan => x.is_nan(),
                FloatClass::Inf => x.is_infinite(),
            }
        }))
    })
}

/// `isnan`: true where the element is NaN.
pub fn isnan(self_: &Tensor) -> Result<Tensor> {
    float_class(self_, FloatClass::Nan, "isnan")
}

/// `isinf`: true where the element is +inf or -inf.
pub fn isinf(self_: &Tensor) -> Result<Tensor> {
    float_class(self_, FloatClass::Inf, "isinf")
}

fn scalar_false() -> Result<Tensor> {
    super::scalar_tensor(&Scalar::Bool(false), DType::Bool)
}
