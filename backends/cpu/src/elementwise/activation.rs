//! Activation kernels: relu, silu, gelu (exact and tanh), softplus, elu,
//! leaky_relu, hardtanh.
//!
//! Owns: these ops' functional, out= and in-place forms. Must not: handle layout
//! or out= rules itself (uses `super::unary_driver`). sigmoid and tanh live in
//! [`super::unary`] with the other math functions.

use super::{float_result, scalar_as, three_forms, unary_driver, Special};
use crate::dtype_dispatch::Float;
use crate::iter::map1;
use crate::nn::io::{make_output, with_slice};
use crate::nn::vecmath::gelu_f32;
use crate::out::Dest;
use crate::{dispatch_float, dispatch_numeric};
use opal::{DType, OpalError, Result, Scalar, Tensor};

/// 1/sqrt(2), for the exact GELU.
const FRAC_1_SQRT_2: f64 = std::f64::consts::FRAC_1_SQRT_2;
/// sqrt(2/pi), for the tanh GELU.
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;

fn relu_impl(self_: &Tensor, dest: Dest<'_>) -> Result<Tensor> {
    let dt = self_.dtype();
    if dt == DType::Bool {
        return Err(OpalError::msg("relu: not supported for bool tensors"));
    }
    unary_driver(self_, dest, dt, dt, "relu", |o, a| {
        if dt.is_floating_point() {
            // NaN stays NaN (the comparison is false).
            return dispatch_float!(dt, "relu", |T, C| map1::<T, T>(o, a, "relu", |v| {
                if v.up() < 0.0 {
                    T::down(0.0)
                } else {
                    v
                }
            }));
        }
        dispatch_numeric!(dt, "relu", |T| map1::<T, T>(o, a, "relu", |v| {
            if v < T::default() {
                T::default()
            } else {
                v
            }
        }))
    })
}
/// `relu`.
pub fn relu(self_: &Tensor) -> Result<Tensor> {
    relu_impl(self_, Dest::New)
}
/// `relu_`.
pub fn relu_(self_: &Tensor) -> Result<Tensor> {
    relu_impl(self_, Dest::InPlace(self_))
}

/// Floating-only activation whose body sees the compute-type input `x` and any
/// extra parameters the caller captured.
macro_rules! float_act {
    ($name:expr, $self_:expr, $dest:expr, |$x:ident : $C:ident| $body:expr) => {{
        let dt = float_result($self_.dtype(), $name)?;
        unary_driver($self_, $dest, dt, dt, $name, |o, a| {
            dispatch_float!(dt, $name, |T, $C| map1::<T, T>(o, a, $name, |v: T| {
                let $x: $C = v.up();
                T::down($body)
            }))
        })
    }};
}

fn silu_impl(self_: &Tensor, dest: Dest<'_>) -> Result<Tensor> {
    float_act!("silu", self_, dest, |x: C| x / (1.0 + (-x).exp()))
}
three_forms!(silu_impl, silu, silu_out, silu_, ());

fn check_approximate(approximate: &str, op: &str) -> Result<bool> {
    match approximate {
        "none" => Ok(false),
        "tanh" => Ok(true),
        other => Err(OpalError::msg(format!(
            "{op}: approximate argument must be either none or tanh, got '{other}'"
        ))),
    }
}

/// `f(input, output)` over matching pieces of contiguous f32 slices, in parallel
/// above [`crate::iter::COSTLY_GRAIN`] elements (`f` is a costly function).
pub(super) fn par_f32_pieces(x: &[f32], y: &mut [f32], f: impl Fn(&[f32], &mut [f32]) + Sync) {
    let grain = crate::iter::COSTLY_GRAIN;
    crate::parallel::fork_chunks_mut(y, grain, |c, piece| {
        f(&x[c * grain..c * grain + piece.len()], piece)
    });
}

/// The common case of a costly f32 function: a new result from a contiguous f32
/// input, computed by the vectorized slice kernel `f`; None for any other case.
pub(super) fn f32_new_result(
    self_: &Tensor,
    dest: &Dest<'_>,
    f: fn(&[f32], &mut [f32]),
) -> Option<Result<Tensor>> {
    if self_.dtype() != DType::F32 || !self_.is_contiguous() || !matches!(dest, Dest::New) {
        return None;
    }
    Some(with_slice::<f32, _>(self_, |x| {
        make_output::<f32>(self_.sizes(), DType::F32, |y| {
            par_f32_pieces(x, y, f);
            Ok(())
        })
    }))
}

fn gelu_impl(self_: &Tensor, approximate: &str, dest: Dest<'_>) -> Result<Tensor> {
    let exact = !check_approximate(approximate, "gelu")?;
    if exact {
        if let Some(r) = f32_new_result(self_, &dest, gelu_f32) {
            return r;
        }
    }
    if !exact {
        float_act!("gelu", self_, dest, |x: C| {
            let k: C = scalar_as(&Scalar::Float(SQRT_2_OVER_PI));
            let inner = k * (x + 0.044715 * x * x * x);
            0.5 * x * (1.0 + inner.tanh())
        })
    } else {
        float_act!("gelu", self_, dest, |x: C| {
            let k: C = scalar_as(&Scalar::Float(FRAC_1_SQRT_2));
            x * 0.5 * (1.0 + Special::erf(x * k))
        })
    }
}
three_forms!(gelu_impl, gelu, gelu_out, gelu_, (approximate: &str));

fn softplus_impl(
    self_: &Tensor,
    beta: &Scalar,
    threshold: &Scalar,
    dest: Dest<'_>,
) -> Result<Tensor> {
    float_act!("softplus", self_, dest, |x: C| {
        let b: C = scalar_as(beta);
        let th: C = scalar_as(threshold);
        if x * b > th {
            x
        } else {
            (x * b).exp().ln_1p() / b
        }
    })
}
/// `softplus`.
pub fn softplus(self_: &Tensor, beta: &Scalar, threshold: &Scalar) -> Result<Tensor> {
    softplus_impl(self_, beta, threshold, Dest::New)
}
/// `softplus.out`.
pub fn softplus_out(
    self_: &Tensor,
    beta: &Scalar,
    threshold: &Scalar,
    out: &Tensor,
) -> Result<Tensor> {
    softplus_impl(self_, beta, threshold, Dest::Out(out))
}

fn elu_impl(
    self_: &Tensor,
    alpha: &Scalar,
    scale: &Scalar,
    input_scale: &Scalar,
    dest: Dest<'_>,
) -> Result<Tensor> {
    float_act!("elu", self_, dest, |x: C| {
        let (al, sc, isc): (C, C, C) = (scalar_as(alpha), scalar_as(scale), scalar_as(input_scale));
        if x > 0.0 {
            x * sc
        } else {
            (x * isc).exp_m1() * al * sc
        }
    })
}
three_forms!(elu_impl, elu, elu_out, elu_, (alpha: &Scalar, scale: &Scalar, input_scale: &Scalar));

fn leaky_relu_impl(self_: &Tensor, negative_slope: &Scalar, dest: Dest<'_>) -> Result<Tensor> {
    float_act!("leaky_relu", self_, dest, |x: C| {
        let s: C = scalar_as(negative_slope);
        if x > 0.0 {
            x
        } else {
            x * s
        }
    })
}
three_forms!(leaky_relu_impl, leaky_relu, leaky_relu_out, leaky_relu_, (negative_slope: &Scalar));

fn hardtanh_impl(
    self_: &Tensor,
    min_val: &Scalar,
    max_val: &Scalar,
    dest: Dest<'_>,
) -> Result<Tensor> {
    let dt = self_.dtype();
    if dt == DType::Bool {
        return Err(OpalError::msg("hardtanh: not supported for bool tensors"));
    }
    if dt.is_floating_point() {
        return float_act!("hardtanh", self_, dest, |x: C| {
            let (lo, hi): (C, C) = (scalar_as(min_val), scalar_as(max_val));
            if x.is_nan() {
                x
            } else {
                x.max(lo).min(hi)
            }
        });
    }
    unary_driver(self_, dest, dt, dt, "hardtanh", |o, a| {
        dispatch_numeric!(dt, "hardtanh", |T| {
            let (lo, hi): (T, T) = (scalar_as(min_val), scalar_as(max_val));
            map1::<T, T>(o, a, "hardtanh", move |v| {
                let v = if v < lo { lo } else { v };
                if v > hi {
                    hi
                } else {
                    v
                }
            })
        })
    })
}
three_forms!(hardtanh_impl, hardtanh, hardtanh_out, hardtanh_, (min_val: &Scalar, max_val: &Scalar));
