//! Backward formulas of neural-network ops: `nan_to_num`, `elu`, pooling,
//! nearest upsampling, batch norm, losses, and the double-backward formulas of
//! `gelu`, `softmax`, `mse_loss`, max pooling and `embedding`.
//!
//! Owns: these formulas and the separable-matrix form pooling and upsampling
//! gradients share. Must not: record graph nodes.

use super::{cmp, scalar_like};
use crate::error::{OpalError, Result};
use crate::rules::pool::{adaptive_window, avg_pool_windows};
use crate::{ops, Scalar, Tensor};

/// A host-built `rows x cols` matrix in `like`'s dtype and device (shape only on
/// a meta device).
fn matrix_like(like: &Tensor, values: &[f64], rows: i64, cols: i64) -> Result<Tensor> {
    let m = Tensor::from_slice(values, &[rows, cols])?;
    super::host_constant(&m, like.dtype(), like.device())
}

pub fn nan_to_num_backward(grad: &Tensor, self_: &Tensor) -> Result<Tensor> {
    let nan = ops::isnan(self_)?;
    let inf = cmp(
        ops::eq_tensor,
        &ops::abs(self_)?,
        &Scalar::Float(f64::INFINITY),
    )?;
    let bad = ops::logical_or(&nan, &inf)?;
    ops::masked_fill_scalar(grad, &bad, &Scalar::Int(0))
}

pub fn elu_backward(
    grad: &Tensor,
    alpha: &Scalar,
    scale: &Scalar,
    input_scale: &Scalar,
    _is_result: bool,
    self_: &Tensor,
) -> Result<Tensor> {
    let (a, s, i) = (alpha.to_f64(), scale.to_f64(), input_scale.to_f64());
    // x > 0: scale; else scale * input_scale * alpha * exp(x * input_scale).
    let neg = ops::mul_scalar(
        &ops::exp(&ops::mul_scalar(self_, &Scalar::Float(i))?)?,
        &Scalar::Float(s * i * a),
    )?;
    let pos = ops::full_like::call(self_, &Scalar::Float(s), None, None, None, None, None)?;
    let d = ops::where_self(&cmp(ops::gt_tensor, self_, &Scalar::Int(0))?, &pos, &neg)?;
    ops::mul_tensor(grad, &d)
}

/// `grad_input = A_h^T @ grad @ A_w` for a 2-d op that is linear and separable:
/// `out = A_h @ x @ A_w^T` over the last two dims (average pooling, nearest
/// upsampling), with `a_h` `oh x h` and `a_w` `ow x w` given row by row.
fn separable_backward(grad: &Tensor, a_h: &[f64], a_w: &[f64], h: i64, w: i64) -> Result<Tensor> {
    let (oh, ow) = (grad.sizes()[grad.dim() - 2], grad.sizes()[grad.dim() - 1]);
    let ah = matrix_like(grad, a_h, oh, h)?;
    let aw = matrix_like(grad, a_w, ow, w)?;
    let left = ops::matmul(&ops::t(&ah)?, grad)?;
    ops::matmul(&left, &aw)
}

#[allow(clippy::too_many_arguments)]
pub fn avg_pool2d_backward(
    grad: &Tensor,
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    _ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: &Option<i64>,
) -> Result<Tensor> {
    let two = |v: &[i64], d: i64| -> (i64, i64) {
        match v {
            [] => (d, d),
            [a] => (*a, *a),
            [a, b, ..] => (*a, *b),
        }
    };
    let (kh, kw) = two(kernel_size, 1);
    let (sh, sw) = if stride.is_empty() {
        (kh, kw)
    } else {
        two(stride, 1)
    };
    let (ph, pw) = two(padding, 0);
    let nd = self_.dim();
    let (h, w) = (self_.sizes()[nd - 2], self_.sizes()[nd - 1]);
    let (oh, ow) = (grad.sizes()[nd - 2], grad.sizes()[nd - 1]);
    let rows = avg_pool_windows(h, oh, kh, sh, ph, count_include_pad);
    let cols = avg_pool_windows(w, ow, kw, sw, pw, count_include_pad);
    let mut a_h = vec![0.0; (oh * h) as usize];
    let mut a_w = vec![0.0; (ow * w) as usize];
    // With a divisor override the divisor is not separable: put it all in a_h.
    for (o, &(s, e, div)) in rows.iter().enumerate() {
        let d = match *divisor_override {
            Some(d) => d as f64,
            None => div as f64,
        };
        for i in s..e {
            a_h[o * h as usize + i as usize] = 1.0 / d;
        }
    }
    for (o, &(s, e, div)) in cols.iter().enumerate() {
        let d = if divisor_override.is_some() {
            1.0
        } else {
            div as f64
        };
        for i in s..e {
            a_w[o * w as usize + i as usize] = 1.0 / d;
        }
    }
    separable_backward(grad, &a_h, &a_w, h, w)
}

pub fn _adaptive_avg_pool2d_backward(grad: &Tensor, self_: &Tensor) -> Result<Tensor> {
    let nd = self_.dim();
    let (h, w) = (self_.sizes()[nd - 2], self_.sizes()[nd - 1]);
    let (oh, ow) = (grad.sizes()[nd - 2], grad.sizes()[nd - 1]);
    let weights = |n: i64, out: i64| -> Vec<f64> {
        let mut a = vec![0.0; (out * n) as usize];
        for o in 0..out {
            let (s, e) = adaptive_window(o, n, out);
            for i in s..e {
                a[(o * n + i) as usize] = 1.0 / (e - s) as f64;
            }
        }
        a
    };
    separable_backward(grad, &weights(h, oh), &weights(w, ow), h, w)
}

pub fn upsample_nearest2d_backward(
    grad: &Tensor,
    output_size: &[i64],
    input_size: &[i64],
    scales_h: &Option<f64>,
    scales_w: &Option<f64>,
) -> Result<Tensor> {
    let nd = input_size.len();
    if nd < 2 || output_size.len() != 2 {
        return Err(OpalError::msg("upsample_nearest2d backward: bad sizes"));
    }
    let (h, w) = (input_size[nd - 2], input_size[nd - 1]);
    let (oh, ow) = (output_size[0], output_size[1]);
    let weights = |n: i64, out: i64, scale: Option<f64>| -> Vec<f64> {
        let ratio = match scale {
            Some(s) if s > 0.0 => 1.0 / s,
            _ => n as f64 / out as f64,
        };
        let mut a = vec![0.0; (out * n) as usize];
        for o in 0..out {
            let src = ((o as f64 * ratio).floor() as i64).min(n - 1);
            a[(o * n + src) as usize] = 1.0;
        }
        a
    };
    separable_backward(
        grad,
        &weights(h, oh, *scales_h),
        &weights(w, ow, *scales_w),
        h,
        w,
    )
}

#[allow(clippy::too_many_arguments)]
pub fn native_batch_norm_backward(
    grad: &Tensor,
    input: &Tensor,
    weight: &Option<Tensor>,
    running_mean: &Option<Tensor>,
    running_var: &Option<Tensor>,
    save_mean: &Tensor,
    save_invstd: &Tensor,
    training: bool,
    eps: f64,
    mask: &[bool],
) -> Result<(Tensor, Tensor, Tensor)> {
    let nd = input.dim();
    let dims: Vec<i64> = (0..nd as i64).filter(|&d| d != 1).collect();
    // Per-channel statistics, shaped to broadcast over the input.
    let mut shape = vec![1i64; nd];
    if nd > 1 {
        shape[1] = input.sizes()[1];
    }
    let (mean, invstd) = if training {
        (save_mean.clone(), save_invstd.clone())
    } else {
        let (Some(rm), Some(rv)) = (running_mean, running_var) else {
            return Err(OpalError::msg(
                "native_batch_norm backward: evaluation mode needs running_mean and running_var",
            ));
        };
        let invstd = ops::rsqrt(&ops::add_scalar(rv, &Scalar::Float(eps))?)?;
        (rm.clone(), invstd)
    };
    let mean_b = ops::reshape(&mean, &shape)?;
    let invstd_b = ops::reshape(&invstd, &shape)?;
    let xhat = ops::mul_tensor(&ops::sub_tensor(input, &mean_b)?, &invstd_b)?;
    let sum_g = ops::sum_dim_intlist::call(grad, Some(&dims), false, None)?;
    let sum_gx =
        ops::sum_dim_intlist::call(&ops::mul_tensor(grad, &xhat)?, Some(&dims), false, None)?;
    let gamma = match weight {
        Some(w) => ops::reshape(w, &shape)?,
        None => scalar_like(input, Scalar::Int(1))?,
    };
    let gi = if mask.first() == Some(&true) {
        if training {
            let n: i64 = dims.iter().map(|&d| input.sizes()[d as usize]).product();
            let n = n as f64;
            // (gamma * invstd / n) * (n * g - sum(g) - xhat * sum(g * xhat))
            let t = ops::sub_tensor(
                &ops::sub_tensor(
                    &ops::mul_scalar(grad, &Scalar::Float(n))?,
                    &ops::reshape(&sum_g, &shape)?,
                )?,
                &ops::mul_tensor(&xhat, &ops::reshape(&sum_gx, &shape)?)?,
            )?;
            let scale = ops::mul_scalar(
                &ops::mul_tensor(&gamma, &invstd_b)?,
                &Scalar::Float(1.0 / n),
            )?;
            ops::mul_tensor(&t, &scale)?
        } else {
            ops::mul_tensor(grad, &ops::mul_tensor(&gamma, &invstd_b)?)?
        }
    } else {
        Tensor::undefined()
    };
    let gw = if mask.get(1) == Some(&true) {
        sum_gx
    } else {
        Tensor::undefined()
    };
    let gb = if mask.get(2) == Some(&true) {
        sum_g
    } else {
        Tensor::undefined()
    };
    Ok((gi, gw, gb))
}

/// The reduction's scale of an element-wise loss gradient: `grad` expanded, and
/// divided by the element count for `Mean` (1).
fn loss_grad_scale(grad: &Tensor, like: &Tensor, reduction: i64) -> Result<Tensor> {
    let g = ops::expand(grad, like.sizes())?;
    if reduction == 1 {
        ops::mul_scalar(&g, &Scalar::Float(1.0 / like.numel().max(1) as f64))
    } else {
        Ok(g)
    }
}

fn times_weight(t: Tensor, weight: &Option<Tensor>) -> Result<Tensor> {
    match weight {
        Some(w) => ops::mul_tensor(&t, w),
        None => Ok(t),
    }
}

pub fn binary_cross_entropy_backward(
    grad: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    weight: &Option<Tensor>,
    reduction: i64,
) -> Result<Tensor> {
    // (x - y) / max(x (1 - x), eps)
    let one_minus = ops::add_scalar(&ops::neg(self_)?, &Scalar::Int(1))?;
    let denom = ops::clamp::call(
        &ops::mul_tensor(self_, &one_minus)?,
        Some(&Scalar::Float(1e-12)),
        None,
    )?;
    let d = ops::div_tensor(&ops::sub_tensor(self_, target)?, &denom)?;
    let g = ops::mul_tensor(&loss_grad_scale(grad, self_, reduction)?, &d)?;
    times_weight(g, weight)
}

pub fn binary_cross_entropy_target_backward(
    grad: &Tensor,
    self_: &Tensor,
    _target: &Tensor,
    weight: &Option<Tensor>,
    reduction: i64,
) -> Result<Tensor> {
    // -(log x - log(1 - x)), each log clamped at -100 as the forward is.
    let lo = Scalar::Int(-100);
    let log_x = ops::clamp::call(&ops::log(self_)?, Some(&lo), None)?;
    let log_1mx = ops::clamp::call(&ops::log1p(&ops::neg(self_)?)?, Some(&lo), None)?;
    let d = ops::neg(&ops::sub_tensor(&log_x, &log_1mx)?)?;
    let g = ops::mul_tensor(&loss_grad_scale(grad, self_, reduction)?, &d)?;
    times_weight(g, weight)
}

pub fn gelu_double_backward(
    grad: &Tensor,
    grad_output: &Tensor,
    self_: &Tensor,
    approximate: &str,
) -> Result<Tensor> {
    let x = self_;
    let x2 = ops::mul_tensor(x, x)?;
    let second = if approximate == "tanh" {
        // f'' = (1 - t^2) * (u' + x/2 * (u'' - 2 t u'^2)), u = k (x + c x^3)
        let k = (2.0 / std::f64::consts::PI).sqrt();
        let c = 0.044715;
        let u = ops::mul_scalar(
            &ops::add_tensor(
                x,
                &ops::mul_scalar(&ops::mul_tensor(&x2, x)?, &Scalar::Float(c))?,
            )?,
            &Scalar::Float(k),
        )?;
        let t = ops::tanh(&u)?;
        let du = ops::mul_scalar(
            &ops::add_scalar(
                &ops::mul_scalar(&x2, &Scalar::Float(3.0 * c))?,
                &Scalar::Int(1),
            )?,
            &Scalar::Float(k),
        )?;
        let ddu = ops::mul_scalar(x, &Scalar::Float(6.0 * k * c))?;
        let sech2 = ops::add_scalar(&ops::neg(&ops::mul_tensor(&t, &t)?)?, &Scalar::Int(1))?;
        let inner = ops::sub_tensor(
            &ddu,
            &ops::mul_scalar(
                &ops::mul_tensor(&t, &ops::mul_tensor(&du, &du)?)?,
                &Scalar::Int(2),
            )?,
        )?;
        let bracket = ops::add_tensor(
            &du,
            &ops::mul_scalar(&ops::mul_tensor(x, &inner)?, &Scalar::Float(0.5))?,
        )?;
        ops::mul_tensor(&sech2, &bracket)?
    } else {
        // f'' = phi(x) (2 - x^2), phi the standard normal density.
        let phi = ops::mul_scalar(
            &ops::exp(&ops::mul_scalar(&x2, &Scalar::Float(-0.5))?)?,
            &Scalar::Float(1.0 / (2.0 * std::f64::consts::PI).sqrt()),
        )?;
        ops::mul_tensor(&phi, &ops::add_scalar(&ops::neg(&x2)?, &Scalar::Int(2))?)?
    };
    ops::mul_tensor(&ops::mul_tensor(grad, grad_output)?, &second)
}

pub fn softmax_double_backward(
    grad: &Tensor,
    grad_output: &Tensor,
    dim: i64,
    output: &Tensor,
) -> Result<Tensor> {
    // d/dy of y * (go - sum(go y)): go * (g - sum(g y)) - g * sum(go y)
    let d = [dim];
    let s_gy = ops::sum_dim_intlist::call(&ops::mul_tensor(grad, output)?, Some(&d), true, None)?;
    let s_goy =
        ops::sum_dim_intlist::call(&ops::mul_tensor(grad_output, output)?, Some(&d), true, None)?;
    ops::sub_tensor(
        &ops::mul_tensor(grad_output, &ops::sub_tensor(grad, &s_gy)?)?,
        &ops::mul_tensor(grad, &s_goy)?,
    )
}

pub fn mse_loss_double_backward_grad_output(
    grad: &Tensor,
    grad_output: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    reduction: i64,
) -> Result<Tensor> {
    let d = ops::mul_scalar(
        &ops::mul_tensor(grad, &ops::sub_tensor(self_, target)?)?,
        &Scalar::Int(2),
    )?;
    match reduction {
        0 => Ok(d),
        1 => ops::mul_scalar(
            &ops::sum(&d)?,
            &Scalar::Float(1.0 / self_.numel().max(1) as f64),
        ),
        _ => ops::sum(&d),
    }
    .and_then(|g| {
        if g.sizes() == grad_output.sizes() {
            Ok(g)
        } else {
            ops::reshape(&g, grad_output.sizes())
        }
    })
}

pub fn mse_loss_double_backward(grad: &Tensor, self_: &Tensor, reduction: i64) -> Result<Tensor> {
    let g = ops::mul_scalar(&ops::expand(grad, self_.sizes())?, &Scalar::Int(2))?;
    if reduction == 1 {
        ops::mul_scalar(&g, &Scalar::Float(1.0 / self_.numel().max(1) as f64))
    } else {
        Ok(g)
    }
}

pub fn max_pool_double_backward(grad: &Tensor, indices: &Tensor, dims: i64) -> Result<Tensor> {
    // Gather `grad` (input-shaped) at each output's argmax over the last `dims` dims.
    let nd = grad.dim() as i64;
    let g = ops::flatten_using_ints::call(grad, nd - dims, -1)?;
    let i = ops::flatten_using_ints::call(indices, nd - dims, -1)?;
    let out = ops::gather(&g, nd - dims, &i)?;
    ops::reshape(&out, indices.sizes())
}

pub fn embedding_dense_double_backward_symint(
    grad: &Tensor,
    indices: &Tensor,
    padding_idx: i64,
) -> Result<Tensor> {
    let flat = ops::reshape(indices, &[-1])?;
    let rows = ops::index_select(grad, 0, &flat)?;
    let mut shape = indices.sizes().to_vec();
    shape.push(grad.sizes().get(1).copied().unwrap_or(1));
    let rows = ops::reshape(&rows, &shape)?;
    if padding_idx < 0 {
        return Ok(rows);
    }
    let pad = ops::unsqueeze(
        &cmp(ops::eq_tensor, indices, &Scalar::Int(padding_idx))?,
        -1,
    )?;
    ops::masked_fill_scalar(&rows, &pad, &Scalar::Int(0))
}
