//! `native_layer_norm`, `native_layer_norm_backward` and `native_batch_norm`.
//!
//! Owns: running-stat updates and the compute policy (f16/bf16 computed in f32,
//! outputs in the input dtype, statistics in the rule's dtype). Must not: check
//! shapes or arguments (`opal::rules::norm`, named as the rule in `backend.yaml`)
//! or hold the numerics (those are in `norm_core`).

use super::io::{compute_dtype, err, make_output, shape_err, with_slice, Compute};
use super::norm_core::{channel_normalize, channel_stats, layer_norm_backward, layer_norm_forward};
use crate::copy::copy_into;
use crate::out::empty_uninit;
use opal::rules::norm::{BatchNorm, LayerNorm, LayerNormBackward};
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

/// Layer normalization over the trailing `normalized_shape` dims. Returns
/// `(output, mean, rstd)`; mean/rstd keep the leading dims and size 1 elsewhere.
pub fn native_layer_norm(l: LayerNorm) -> Result<(Tensor, Tensor, Tensor)> {
    const OP: &str = "native_layer_norm";
    let cd = compute_dtype(l.input.dtype(), OP)?;
    let (input, weight, bias, eps) = (l.input, l.weight, l.bias, l.eps);
    let (rows, n, stat_shape) = (l.rows, l.row_len, &l.stat_sizes);
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
        DType::F64 => run::<f64>(input, weight, bias, eps, rows, n, stat_shape),
        _ => run::<f32>(input, weight, bias, eps, rows, n, stat_shape),
    }
}

/// Gradients of layer norm w.r.t. input, weight and bias, each computed only when
/// its `output_mask` entry is set (`None` otherwise; the kernel returns an
/// undefined tensor there, as PyTorch does).
pub fn native_layer_norm_backward(
    b: LayerNormBackward,
) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
    const OP: &str = "native_layer_norm_backward";
    let l = &b.norm;
    let cd = compute_dtype(l.input.dtype(), OP)?;
    #[allow(clippy::too_many_arguments)] // the backward's inputs
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
    let (g, x, w, n, m, ps) = (
        b.grad_out,
        l.input,
        l.weight,
        l.row_len,
        b.output_mask,
        l.normalized_shape,
    );
    match cd {
        DType::F64 => run::<f64>(g, x, b.mean, b.rstd, w, n, m, ps),
        _ => run::<f32>(g, x, b.mean, b.rstd, w, n, m, ps),
    }
}

/// Batch normalization over all dims but 1 (`[N, C, *]`). Training uses the batch
/// statistics and updates `running_mean` / `running_var` in place when given
/// (unbiased variance, `momentum` weight); evaluation uses the running statistics
/// and returns empty `save_mean` / `save_invstd`.
pub fn native_batch_norm(bn: BatchNorm) -> Result<(Tensor, Tensor, Tensor)> {
    const OP: &str = "native_batch_norm";
    let cd = compute_dtype(bn.input.dtype(), OP)?;
    let (n, _, inner) = bn.dims;
    if bn.training && n * inner <= 1 {
        return Err(err(
            OP,
            format!(
                "Expected more than 1 value per channel when training, got input size {:?}",
                bn.input.sizes()
            ),
        ));
    }
    fn run<C: Compute>(bn: &BatchNorm) -> Result<(Tensor, Tensor, Tensor)> {
        let (input, w, b, rm, rv) = (
            bn.input,
            bn.weight,
            bn.bias,
            bn.running_mean,
            bn.running_var,
        );
        let (training, momentum, eps, sd) = (bn.training, bn.momentum, bn.eps, bn.stat_dtype);
        let (n, c, inner) = bn.dims;
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
                let sm = make_output::<C>(&[c as i64], sd, |o| {
                    o.copy_from_slice(&mean);
                    Ok(())
                })?;
                let si = make_output::<C>(&[c as i64], sd, |o| {
                    o.copy_from_slice(&invstd);
                    Ok(())
                })?;
                Ok((y, sm, si))
            } else {
                let e0 = crate::out::empty(&[0], sd)?;
                let e1 = crate::out::empty(&[0], sd)?;
                Ok((y, e0, e1))
            }
        })
    }
    match cd {
        DType::F64 => run::<f64>(&bn),
        _ => run::<f32>(&bn),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_norm_shapes_and_values() {
        let x = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0, 2.0, 2.0], &[2, 3]).unwrap();
        let (y, m, r) = opal::rules::norm::native_layer_norm(&x, &[3], None, None, 0.0)
            .and_then(native_layer_norm)
            .unwrap();
        assert_eq!(m.sizes(), &[2, 1]);
        assert_eq!(m.to_vec::<f64>().unwrap(), vec![2.0, 8.0 / 3.0]);
        let yv = y.to_vec::<f64>().unwrap();
        assert!((yv[0] + (1.5f64).sqrt()).abs() < 1e-12);
        assert!(r.to_vec::<f64>().unwrap()[0] > 0.0);
        let e = opal::rules::norm::native_layer_norm(&x, &[2], None, None, 0.0)
            .and_then(native_layer_norm)
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
        let (y, sm, si) = opal::rules::norm::native_batch_norm(
            &x,
            None,
            None,
            Some(&rm),
            Some(&rv),
            true,
            0.5,
            0.0,
        )
        .and_then(native_batch_norm)
        .unwrap();
        // channel 0 holds [1, 10], channel 1 holds [3, 20]
        assert_eq!(sm.to_vec::<f64>().unwrap(), vec![5.5, 11.5]);
        assert!((si.to_vec::<f64>().unwrap()[0] - 1.0 / 4.5).abs() < 1e-12);
        assert_eq!(rm.to_vec::<f64>().unwrap(), vec![2.75, 5.75]);
        // unbiased var of [1, 10] is 40.5
        assert!((rv.to_vec::<f64>().unwrap()[0] - (0.5 + 0.5 * 40.5)).abs() < 1e-12);
        assert!((y.to_vec::<f64>().unwrap()[0] + 1.0).abs() < 1e-12);
        let (_, e, _) = opal::rules::norm::native_batch_norm(
            &x,
            None,
            None,
            Some(&rm),
            Some(&rv),
            false,
            0.1,
            1e-5,
        )
        .and_then(native_batch_norm)
        .unwrap();
        assert_eq!(e.sizes(), &[0]);
        assert!(
            opal::rules::norm::native_batch_norm(&x, None, None, None, None, false, 0.1, 1e-5)
                .and_then(native_batch_norm)
                .is_err()
        );
    }
}
