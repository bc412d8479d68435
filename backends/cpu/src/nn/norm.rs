//! `native_layer_norm`, `native_layer_norm_backward` and `native_batch_norm`.
//!
//! Owns: shape checks with PyTorch's messages, statistics shapes, running-stat
//! updates, and the dtype policy (f16/bf16 computed in f32, outputs in the input
//! dtype). Must not: hold the numerics (those are in `norm_core`).

use super::io::{compute_dtype, err, make_output, numel, shape_err, with_slice, Compute};
use super::norm_core::{channel_normalize, channel_stats, layer_norm_backward, layer_norm_forward};
use crate::copy::copy_into;
use crate::out::empty_uninit;
use opal::tensor::KernelAccess;
use opal::{DType, Result, Tensor};

/// Reads an optional parameter as a `Vec<C>` (converted), checking its element count.
fn param<C: Compute>(t: Option<&Tensor>, n: usize, what: &str, op: &str) -> Result<Option<Vec<C>>> {
    match t {
        None => Ok(None),
        Some(t) => {
            if t.numel() as usize != n {
                return Err(shape_err(
                    op,
                    format!("{what} has {} elements, expected {n}", t.numel()),
                ));
            }
            Ok(Some(crate::copy::to_vec_as::<C>(t)?))
        }
    }
}

fn layer_norm_dims(
    input: &Tensor,
    normalized_shape: &[i64],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    op: &str,
) -> Result<(usize, usize, usize)> {
    let nd = normalized_shape.len();
    if nd == 0 {
        return Err(err(op, "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but got normalized_shape = []"));
    }
    for (what, t) in [("weight", weight), ("bias", bias)] {
        if let Some(t) = t {
            if t.sizes() != normalized_shape {
                return Err(shape_err(
                    op,
                    format!("Expected {what} to be of same shape as normalized_shape, but got {what} of shape {:?} and normalized_shape = {normalized_shape:?}", t.sizes()),
                ));
            }
        }
    }
    let s = input.sizes();
    if s.len() < nd || &s[s.len() - nd..] != normalized_shape {
        return Err(shape_err(
            op,
            format!("Given normalized_shape={normalized_shape:?}, expected input with shape [*, {}], but got input of size{s:?}",
                normalized_shape.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")),
        ));
    }
    let axis = s.len() - nd;
    Ok((axis, numel(&s[..axis]), numel(normalized_shape)))
}

/// Layer normalization over the trailing `normalized_shape` dims. Returns
/// `(output, mean, rstd)`; mean/rstd keep the leading dims and size 1 elsewhere.
pub fn native_layer_norm(
    input: &Tensor,
    normalized_shape: &[i64],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    const OP: &str = "native_layer_norm";
    let cd = compute_dtype(input.dtype(), OP)?;
    let (axis, rows, n) = layer_norm_dims(input, normalized_shape, weight, bias, OP)?;
    let mut stat_shape = input.sizes()[..axis].to_vec();
    stat_shape.extend(std::iter::repeat_n(1, normalized_shape.len()));
    fn run<C: Compute>(
        input: &Tensor,
        w: Option<&Tensor>,
        b: Option<&Tensor>,
        eps: f64,
        rows: usize,
        n: usize,
        stat_shape: &[i64],
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let (w, b) = (
            param::<C>(w, n, "weight", OP)?,
            param::<C>(b, n, "bias", OP)?,
        );
        let mut mean = vec![num_traits::zero::<C>(); rows];
        let mut rstd = vec![num_traits::zero::<C>(); rows];
        let eps = C::from(eps).unwrap_or_else(num_traits::zero::<C>);
        let y = with_slice::<C, _>(input, |xs| {
            make_output::<C>(input.sizes(), input.dtype(), |ys| {
                layer_norm_forward(
                    xs,
                    n,
                    w.as_deref(),
                    b.as_deref(),
                    eps,
                    ys,
                    &mut mean,
                    &mut rstd,
                );
                Ok(())
            })
        })?;
        let dt = input.dtype();
        let m = make_output::<C>(stat_shape, dt, |o| {
            o.copy_from_slice(&mean);
            Ok(())
        })?;
        let r = make_output::<C>(stat_shape, dt, |o| {
            o.copy_from_slice(&rstd);
            Ok(())
        })?;
        Ok((y, m, r))
    }
    match cd {
        DType::F64 => run::<f64>(input, weight, bias, eps, rows, n, &stat_shape),
        _ => run::<f32>(input, weight, bias, eps, rows, n, &stat_shape),
    }
}

/// Gradients of layer norm w.r.t. input, weight and bias, each computed only when
/// its `output_mask` entry is set (`None` otherwise; the kernel returns an
/// undefined tensor there, as PyTorch does).
#[allow(clippy::too_many_arguments)]
pub fn native_layer_norm_backward(
    grad_out: &Tensor,
    input: &Tensor,
    normalized_shape: &[i64],
    mean: &Tensor,
    rstd: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    output_mask: &[bool],
) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
    const OP: &str = "native_layer_norm_backward";
    let cd = compute_dtype(input.dtype(), OP)?;
    let (_, rows, n) = layer_norm_dims(input, normalized_shape, weight, bias, OP)?;
    if grad_out.sizes() != input.sizes() {
        return Err(shape_err(
            OP,
            format!(
                "grad_out of shape {:?} does not match input {:?}",
                grad_out.sizes(),
                input.sizes()
            ),
        ));
    }
    if mean.numel() as usize != rows || rstd.numel() as usize != rows {
        return Err(shape_err(
            OP,
            format!("mean and rstd must have {rows} elements"),
        ));
    }
    let mask = |i: usize| output_mask.get(i).copied().unwrap_or(false);
    fn run<C: Compute>(
        g: &Tensor,
        x: &Tensor,
        mean: &Tensor,
        rstd: &Tensor,
        w: Option<&Tensor>,
        n: usize,
        mask: [bool; 3],
        pshape: &[i64],
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let w = param::<C>(w, n, "weight", OP)?;
        // Read in place when contiguous in the compute type (no copies).
        with_slice::<C, _>(g, |gv| {
            with_slice::<C, _>(x, |xv| {
                with_slice::<C, _>(mean, |mv| {
                    with_slice::<C, _>(rstd, |rv| {
                        if x.dtype() == C::DTYPE {
                            return grads_in_place::<C>(
                                gv,
                                xv,
                                mv,
                                rv,
                                w.as_deref(),
                                n,
                                mask,
                                x,
                                pshape,
                            );
                        }
                        let mut dx = mask[0].then(|| vec![num_traits::zero::<C>(); xv.len()]);
                        let mut dw = mask[1].then(|| vec![num_traits::zero::<C>(); n]);
                        let mut db = mask[2].then(|| vec![num_traits::zero::<C>(); n]);
                        layer_norm_backward(
                            gv,
                            xv,
                            n,
                            mv,
                            rv,
                            w.as_deref(),
                            dx.as_deref_mut(),
                            dw.as_deref_mut(),
                            db.as_deref_mut(),
                        );
                        let dt = x.dtype();
                        let emit = |v: Option<Vec<C>>, shape: &[i64]| -> Result<Option<Tensor>> {
                            v.map(|v| {
                                make_output::<C>(shape, dt, |o| {
                                    o.copy_from_slice(&v);
                                    Ok(())
                                })
                            })
                            .transpose()
                        };
                        Ok((emit(dx, x.sizes())?, emit(dw, pshape)?, emit(db, pshape)?))
                    })
                })
            })
        })
    }
    /// The gradients written straight into their output tensors (when the input's
    /// dtype is the compute type): no zeroed buffers, no copies.
    #[allow(clippy::too_many_arguments)] // the backward's inputs, as `run` has them
    fn grads_in_place<C: Compute>(
        gv: &[C],
        xv: &[C],
        mv: &[C],
        rv: &[C],
        w: Option<&[C]>,
        n: usize,
        mask: [bool; 3],
        x: &Tensor,
        pshape: &[i64],
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let new = |on: bool, shape: &[i64]| on.then(|| empty_uninit(shape, C::DTYPE)).transpose();
        let (dx, dw, db) = (
            new(mask[0], x.sizes())?,
            new(mask[1], pshape)?,
            new(mask[2], pshape)?,
        );
        let outs: Vec<&Tensor> = [&dx, &dw, &db].into_iter().flatten().collect();
        let acc = KernelAccess::new(&[], &outs)?;
        let slice = |t: &Option<Tensor>| -> Result<Option<&mut [C]>> {
            t.as_ref()
                .map(|t| {
                    let p = acc.write_ptr::<C>(t)?;
                    // SAFETY: `t` is a new contiguous tensor of `numel` elements of C,
                    // distinct from the other outputs, and `acc` holds its storage
                    // exclusively while the slice lives.
                    Ok(unsafe { std::slice::from_raw_parts_mut(p, t.numel() as usize) })
                })
                .transpose()
        };
        layer_norm_backward(gv, xv, n, mv, rv, w, slice(&dx)?, slice(&dw)?, slice(&db)?);
        drop(acc);
        Ok((dx, dw, db))
    }
    let m = [mask(0), mask(1), mask(2)];
    match cd {
        DType::F64 => run::<f64>(grad_out, input, mean, rstd, weight, n, m, normalized_shape),
        _ => run::<f32>(grad_out, input, mean, rstd, weight, n, m, normalized_shape),
    }
}

/// Batch normalization over all dims but 1 (`[N, C, *]`). Training uses the batch
/// statistics and updates `running_mean` / `running_var` in place when given
/// (unbiased variance, `momentum` weight); evaluation uses the running statistics
/// and returns empty `save_mean` / `save_invstd`.
#[allow(clippy::too_many_arguments)]
pub fn native_batch_norm(
    input: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    const OP: &str = "native_batch_norm";
    let cd = compute_dtype(input.dtype(), OP)?;
    let s = input.sizes();
    if s.len() < 2 {
        return Err(shape_err(
            OP,
            format!("Expected 2D or more input, got input of size {s:?}"),
        ));
    }
    let (n, c, inner) = (s[0] as usize, s[1] as usize, numel(&s[2..]));
    if !training && (running_mean.is_none() || running_var.is_none()) {
        return Err(err(
            OP,
            "running_mean and running_var must be defined in evaluation mode",
        ));
    }
    if training && n * inner <= 1 {
        return Err(err(
            OP,
            format!("Expected more than 1 value per channel when training, got input size {s:?}"),
        ));
    }
    fn run<C: Compute>(
        input: &Tensor,
        w: Option<&Tensor>,
        b: Option<&Tensor>,
        rm: Option<&Tensor>,
        rv: Option<&Tensor>,
        training: bool,
        momentum: f64,
        eps: f64,
        dims: (usize, usize, usize),
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let (n, c, inner) = dims;
        let (w, b) = (
            param::<C>(w, c, "weight", OP)?,
            param::<C>(b, c, "bias", OP)?,
        );
        let rmv = param::<C>(rm, c, "running_mean", OP)?;
        let rvv = param::<C>(rv, c, "running_var", OP)?;
        let epsc = C::from(eps).unwrap_or_else(num_traits::zero::<C>);
        with_slice::<C, _>(input, |xv| {
            let (mean, invstd, var) = if training {
                let st = channel_stats(xv, n, c, inner);
                let mean: Vec<C> = st.iter().map(|p| p.0).collect();
                let var: Vec<C> = st.iter().map(|p| p.1).collect();
                let invstd: Vec<C> = var.iter().map(|&v| C::one() / (v + epsc).sqrt()).collect();
                (mean, invstd, Some(var))
            } else {
                let mean = rmv.clone().unwrap_or_default();
                let invstd = rvv
                    .as_deref()
                    .unwrap_or_default()
                    .iter()
                    .map(|&v| C::one() / (v + epsc).sqrt())
                    .collect();
                (mean, invstd, None)
            };
            let dt = input.dtype();
            let y = make_output::<C>(input.sizes(), dt, |ys| {
                channel_normalize(
                    xv,
                    ys,
                    n,
                    c,
                    inner,
                    &mean,
                    &invstd,
                    w.as_deref(),
                    b.as_deref(),
                );
                Ok(())
            })?;
            if let Some(var) = var {
                let mom = C::from(momentum).unwrap_or_else(num_traits::zero::<C>);
                let count = C::from(n * inner).unwrap_or_else(C::one);
                let unbias = count / (count - C::one());
                let update = |t: &Tensor, old: &[C], new: &[C], scale: C| -> Result<()> {
                    let upd: Vec<C> = old
                        .iter()
                        .zip(new)
                        .map(|(&o, &v)| (C::one() - mom) * o + mom * v * scale)
                        .collect();
                    let tmp = Tensor::from_vec(upd, t.sizes())?;
                    copy_into(t, &tmp, OP)
                };
                if let (Some(t), Some(old)) = (rm, &rmv) {
                    update(t, old, &mean, C::one())?;
                }
                if let (Some(t), Some(old)) = (rv, &rvv) {
                    update(t, old, &var, unbias)?;
                }
                let sm = make_output::<C>(&[c as i64], dt, |o| {
                    o.copy_from_slice(&mean);
                    Ok(())
                })?;
                let si = make_output::<C>(&[c as i64], dt, |o| {
                    o.copy_from_slice(&invstd);
                    Ok(())
                })?;
                Ok((y, sm, si))
            } else {
                let e0 = crate::out::empty(&[0], dt)?;
                let e1 = crate::out::empty(&[0], dt)?;
                Ok((y, e0, e1))
            }
        })
    }
    let dims = (n, c, inner);
    match cd {
        DType::F64 => run::<f64>(
            input,
            weight,
            bias,
            running_mean,
            running_var,
            training,
            momentum,
            eps,
            dims,
        ),
        _ => run::<f32>(
            input,
            weight,
            bias,
            running_mean,
            running_var,
            training,
            momentum,
            eps,
            dims,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_norm_shapes_and_values() {
        let x = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0, 2.0, 2.0], &[2, 3]).unwrap();
        let (y, m, r) = native_layer_norm(&x, &[3], None, None, 0.0).unwrap();
        assert_eq!(m.sizes(), &[2, 1]);
        assert_eq!(m.to_vec::<f64>().unwrap(), vec![2.0, 8.0 / 3.0]);
        let yv = y.to_vec::<f64>().unwrap();
        assert!((yv[0] + (1.5f64).sqrt()).abs() < 1e-12);
        assert!(r.to_vec::<f64>().unwrap()[0] > 0.0);
        let e = native_layer_norm(&x, &[2], None, None, 0.0)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("native_layer_norm") && e.contains("normalized_shape"),
            "{e}"
        );
    }

    #[test]
    fn batch_norm_training_updates_running_stats() {
        let x = Tensor::from_slice(&[1.0f64, 3.0, 10.0, 20.0], &[2, 2]).unwrap();
        let rm = Tensor::from_slice(&[0.0f64, 0.0], &[2]).unwrap();
        let rv = Tensor::from_slice(&[1.0f64, 1.0], &[2]).unwrap();
        let (y, sm, si) =
            native_batch_norm(&x, None, None, Some(&rm), Some(&rv), true, 0.5, 0.0).unwrap();
        // channel 0 holds [1, 10], channel 1 holds [3, 20]
        assert_eq!(sm.to_vec::<f64>().unwrap(), vec![5.5, 11.5]);
        assert!((si.to_vec::<f64>().unwrap()[0] - 1.0 / 4.5).abs() < 1e-12);
        assert_eq!(rm.to_vec::<f64>().unwrap(), vec![2.75, 5.75]);
        // unbiased var of [1, 10] is 40.5
        assert!((rv.to_vec::<f64>().unwrap()[0] - (0.5 + 0.5 * 40.5)).abs() < 1e-12);
        assert!((y.to_vec::<f64>().unwrap()[0] + 1.0).abs() < 1e-12);
        let (_, e, _) =
            native_batch_norm(&x, None, None, Some(&rm), Some(&rv), false, 0.1, 1e-5).unwrap();
        assert_eq!(e.sizes(), &[0]);
        assert!(native_batch_norm(&x, None, None, None, None, false, 0.1, 1e-5).is_err());
    }
}
