//! Backward kernels of element-wise activations: `threshold_backward`,
//! `gelu_backward`, `sigmoid_backward`, `tanh_backward` (functional and
//! `grad_input=` forms).
//!
//! Owns: these gradient formulas. Must not: handle layout or out= rules itself.

use super::{binary_driver, float_result, result_type2, scalar_as, Special};
use crate::dtype_dispatch::Float;
use crate::iter::map2;
use crate::nn::io::{make_output, with_slice};
use crate::nn::vecmath::gelu_backward_f32;
use crate::out::Dest;
use crate::{dispatch_float, dispatch_numeric};
use opal::{DType, Result, Scalar, Tensor};

/// Floating gradient kernel `f(g, x)` over the promoted dtype of both operands.
macro_rules! float_grad {
    ($name:expr, $g:expr, $x:expr, $dest:expr, |$gv:ident : $C:ident, $xv:ident| $body:expr) => {{
        let dt = float_result(result_type2($g, $x)?, $name)?;
        binary_driver($g, $x, $dest, dt, dt, $name, |o, a, b| {
            dispatch_float!(dt, $name, |T, $C| map2::<T, T, T>(
                o,
                a,
                b,
                $name,
                |p: T, q: T| {
                    let ($gv, $xv): ($C, $C) = (p.up(), q.up());
                    T::down($body)
                }
            ))
        })
    }};
}

fn threshold_backward_impl(
    grad: &Tensor,
    self_: &Tensor,
    threshold: &Scalar,
    dest: Dest<'_>,
) -> Result<Tensor> {
    let op = "threshold_backward";
    let dt = result_type2(grad, self_)?;
    binary_driver(grad, self_, dest, dt, dt, op, |o, a, b| {
        dispatch_numeric!(dt, op, |T| {
            let th: T = scalar_as(threshold);
            map2::<T, T, T>(
                o,
                a,
                b,
                op,
                move |g, x| if x <= th { T::default() } else { g },
            )
        })
    })
}
/// `threshold_backward`: `grad` where `self > threshold`, else 0.
pub fn threshold_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    threshold: &Scalar,
) -> Result<Tensor> {
    threshold_backward_impl(grad_output, self_, threshold, Dest::New)
}
/// `threshold_backward.grad_input`.
pub fn threshold_backward_grad_input(
    grad_output: &Tensor,
    self_: &Tensor,
    threshold: &Scalar,
    grad_input: &Tensor,
) -> Result<Tensor> {
    threshold_backward_impl(grad_output, self_, threshold, Dest::Out(grad_input))
}

fn gelu_backward_impl(
    grad: &Tensor,
    self_: &Tensor,
    approximate: &str,
    dest: Dest<'_>,
) -> Result<Tensor> {
    let op = "gelu_backward";
    if approximate == "none"
        && grad.dtype() == DType::F32
        && self_.dtype() == DType::F32
        && grad.is_contiguous()
        && self_.is_contiguous()
        && grad.sizes() == self_.sizes()
        && matches!(dest, Dest::New)
    {
        // The common case: a new contiguous result from the vectorized kernel.
        return with_slice::<f32, _>(grad, |g| {
            with_slice::<f32, _>(self_, |x| {
                make_output::<f32>(self_.sizes(), DType::F32, |y| {
                    let grain = crate::iter::COSTLY_GRAIN;
                    crate::parallel::fork_chunks_mut(y, grain, |c, piece| {
                        let r = c * grain..c * grain + piece.len();
                        gelu_backward_f32(&g[r.clone()], &x[r], piece)
                    });
                    Ok(())
                })
            })
        });
    }
    match approximate {
        "none" => float_grad!(op, grad, self_, dest, |g: C, x| {
            let k1: C = scalar_as(&Scalar::Float(std::f64::consts::FRAC_1_SQRT_2));
            let k2: C = scalar_as(&Scalar::Float(0.398_942_280_401_432_7)); // 1/sqrt(2*pi)
            let cdf = 0.5 * (1.0 + Special::erf(x * k1));
            let pdf = k2 * (-0.5 * x * x).exp();
            g * (cdf + x * pdf)
        }),
        "tanh" => float_grad!(op, grad, self_, dest, |g: C, x| {
            let beta: C = scalar_as(&Scalar::Float(0.797_884_560_802_865_4));
            let kappa: C = 0.044715;
            let x2 = x * x;
            let inner = beta * (x + kappa * x2 * x);
            let t = inner.tanh();
            let left = 0.5 * x;
            let right = 1.0 + t;
            let dleft = 0.5 * right;
            let dinner = beta * (1.0 + 3.0 * kappa * x2);
            let dright = left * (1.0 - t * t) * dinner;
            g * (dleft + dright)
        }),
        other => Err(opal::OpalError::msg(format!(
            "{op}: approximate argument must be either none or tanh, got '{other}'"
        ))),
    }
}
/// `gelu_backward`.
pub fn gelu_backward(grad_output: &Tensor, self_: &Tensor, approximate: &str) -> Result<Tensor> {
    gelu_backward_impl(grad_output, self_, approximate, Dest::New)
}
/// `gelu_backward.grad_input`.
pub fn gelu_backward_grad_input(
    grad_output: &Tensor,
    self_: &Tensor,
    approximate: &str,
    grad_input: &Tensor,
) -> Result<Tensor> {
    gelu_backward_impl(grad_output, self_, approximate, Dest::Out(grad_input))
}

/// `sigmoid_backward`: `grad * (1 - y) * y` for the forward output `y`.
pub fn sigmoid_backward(grad_output: &Tensor, output: &Tensor) -> Result<Tensor> {
    float_grad!(
        "sigmoid_backward",
        grad_output,
        output,
        Dest::New,
        |g: C, y| g * (1.0 - y) * y
    )
}
/// `sigmoid_backward.grad_input`.
pub fn sigmoid_backward_grad_input(
    grad_output: &Tensor,
    output: &Tensor,
    grad_input: &Tensor,
) -> Result<Tensor> {
    float_grad!(
        "sigmoid_backward",
        grad_output,
        output,
        Dest::Out(grad_input),
        |g: C, y| g * (1.0 - y) * y
    )
}
/// `tanh_backward`: `grad * (1 - y^2)` for the forward output `y`.
pub fn tanh_backward(grad_output: &Tensor, output: &Tensor) -> Result<Tensor> {
    float_grad!(
        "tanh_backward",
        grad_output,
        output,
        Dest::New,
        |g: C, y| g * (1.0 - y * y)
    )
}
/// `tanh_backward.grad_input`.
pub fn tanh_backward_grad_input(
    grad_output: &Tensor,
    output: &Tensor,
    grad_input: &Tensor,
) -> Result<Tensor> {
    float_grad!(
        "tanh_backward",
        grad_output,
        output,
        Dest::Out(grad_input),
        |g: C, y| g * (1.0 - y * y)
    )
}
