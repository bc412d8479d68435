//! Three-operand arithmetic kernels: `addcmul`, `addcdiv`, `lerp.Scalar`.
//!
//! Owns: these ops' promotion and element formulas. Must not: handle layout or
//! out= rules itself.

use super::scalar_as;
use crate::copy::to_dtype;
use crate::dtype_dispatch::Float;
use crate::iter::{map2, map3};
use crate::out::{write_result, Dest};
use crate::{dispatch_float, dispatch_int};
use opal::dtype::ResultType;
use opal::{DType, OpalError, Result, Scalar, Tensor};

fn addc_impl(
    self_: &Tensor,
    t1: &Tensor,
    t2: &Tensor,
    value: &Scalar,
    div: bool,
    dest: Dest<'_>,
) -> Result<Tensor> {
    let op = if div { "addcdiv" } else { "addcmul" };
    let rt = ResultType::of_tensors(&[self_, t1, t2])?;
    if div && t1.dtype().is_integral(true) && t2.dtype().is_integral(true) {
        return Err(OpalError::msg(
            "addcdiv: integer division with addcdiv is no longer supported; use addcmul with a reciprocal or cast to float",
        ));
    }
    if rt == DType::Bool {
        return Err(OpalError::msg(format!(
            "{op}: not supported for bool tensors"
        )));
    }
    let shape = opal::rules::broadcast_shapes(op, &[self_.sizes(), t1.sizes(), t2.sizes()])?;
    let (s, a, b) = (to_dtype(self_, rt)?, to_dtype(t1, rt)?, to_dtype(t2, rt)?);
    write_result(dest, &shape, rt, op, |o| {
        if rt.is_floating_point() {
            return dispatch_float!(rt, op, |T, C| {
                let v: C = scalar_as(value);
                if div {
                    map3::<T, T, T, T>(o, &s, &a, &b, op, move |x, p, q| {
                        T::down(x.up() + v * (p.up() / q.up()))
                    })
                } else {
                    map3::<T, T, T, T>(o, &s, &a, &b, op, move |x, p, q| {
                        T::down(x.up() + v * p.up() * q.up())
                    })
                }
            });
        }
        dispatch_int!(rt, op, |T| {
            let v: T = scalar_as(value);
            map3::<T, T, T, T>(o, &s, &a, &b, op, move |x, p, q| {
                x.wrapping_add(v.wrapping_mul(p).wrapping_mul(q))
            })
        })
    })
}
/// `addcmul`: `self + value * tensor1 * tensor2`.
pub fn addcmul(
    self_: &Tensor,
    tensor1: &Tensor,
    tensor2: &Tensor,
    value: &Scalar,
) -> Result<Tensor> {
    addc_impl(self_, tensor1, tensor2, value, false, Dest::New)
}
/// `addcmul.out`.
pub fn addcmul_out(
    self_: &Tensor,
    tensor1: &Tensor,
    tensor2: &Tensor,
    value: &Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    addc_impl(self_, tensor1, tensor2, value, false, Dest::Out(out))
}
/// `addcmul_`.
pub fn addcmul_(
    self_: &Tensor,
    tensor1: &Tensor,
    tensor2: &Tensor,
    value: &Scalar,
) -> Result<Tensor> {
    addc_impl(self_, tensor1, tensor2, value, false, Dest::InPlace(self_))
}
/// `addcdiv`: `self + value * tensor1 / tensor2` (floating only).
pub fn addcdiv(
    self_: &Tensor,
    tensor1: &Tensor,
    tensor2: &Tensor,
    value: &Scalar,
) -> Result<Tensor> {
    addc_impl(self_, tensor1, tensor2, value, true, Dest::New)
}
/// `addcdiv.out`.
pub fn addcdiv_out(
    self_: &Tensor,
    tensor1: &Tensor,
    tensor2: &Tensor,
    value: &Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    addc_impl(self_, tensor1, tensor2, value, true, Dest::Out(out))
}
/// `addcdiv_`.
pub fn addcdiv_(
    self_: &Tensor,
    tensor1: &Tensor,
    tensor2: &Tensor,
    value: &Scalar,
) -> Result<Tensor> {
    addc_impl(self_, tensor1, tensor2, value, true, Dest::InPlace(self_))
}

fn lerp_impl(self_: &Tensor, end: &Tensor, weight: &Scalar, dest: Dest<'_>) -> Result<Tensor> {
    let op = "lerp";
    if self_.dtype() != end.dtype() {
        return Err(OpalError::msg(format!(
            "lerp: expected dtype {} for `end` but got dtype {}",
            self_.dtype(),
            end.dtype()
        )));
    }
    let dt = self_.dtype();
    if !dt.is_floating_point() {
        return Err(OpalError::msg(format!(
            "lerp: expected a floating point tensor, got {dt}"
        )));
    }
    let shape = opal::rules::broadcast_shapes(op, &[self_.sizes(), end.sizes()])?;
    write_result(dest, &shape, dt, op, |o| {
        dispatch_float!(dt, op, |T, C| {
            let w: C = scalar_as(weight);
            map2::<T, T, T>(o, self_, end, op, move |s, e| {
                let (s, e) = (s.up(), e.up());
                // Two formulas keep the result exact at both ends of [0, 1].
                T::down(if w.abs() < 0.5 {
                    s + w * (e - s)
                } else {
                    e - (e - s) * (1.0 - w)
                })
            })
        })
    })
}
/// `lerp.Scalar`: `self + weight * (end - self)`.
pub fn lerp_scalar(self_: &Tensor, end: &Tensor, weight: &Scalar) -> Result<Tensor> {
    lerp_impl(self_, end, weight, Dest::New)
}
/// `lerp.Scalar_out`.
pub fn lerp_scalar_out(
    self_: &Tensor,
    end: &Tensor,
    weight: &Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    lerp_impl(self_, end, weight, Dest::Out(out))
}
/// `lerp_.Scalar`.
pub fn lerp_scalar_(self_: &Tensor, end: &Tensor, weight: &Scalar) -> Result<Tensor> {
    lerp_impl(self_, end, weight, Dest::InPlace(self_))
}
