//! `native_group_norm` and `native_group_norm_backward`: normalization over
//! groups of channels of an `[N, C, *]` input (`HxW` elements per channel), with
//! per-channel affine weight and bias; statistics are `[N, group]`.
//!
//! Owns: the per-(sample, group)
//! statistics and the backward's reductions. Rows of one (sample, group) are
//! contiguous, so the forward and the input gradient run in parallel over them.
//! Must not: touch batch / layer norm (`norm`).

use super::io::{compute_dtype, make_output, with_slice, Compute};
use opal::rules::norm::{GroupNorm, GroupNormBackward};
use opal::{DType, Result, Tensor};

/// Runs `f(first_row, rows)` over `out` cut into whole rows of `row` elements: as
/// about four tasks per thread when the op touches `total >= GRAIN` elements, else
/// in one call (waking threads costs more than a small normalization).
fn over_rows<T: Send>(out: &mut [T], row: usize, total: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    let nrows = out.len() / row.max(1);
    if total >= crate::iter::GRAIN && nrows > 1 {
        let per_task = nrows.div_ceil(4 * rayon::current_num_threads()).max(1);
        crate::parallel::fork_chunks_mut(out, per_task * row, |c, chunk| f(c * per_task, chunk));
    } else {
        f(0, out);
    }
}

fn param<C: Compute>(t: Option<&Tensor>) -> Result<Option<Vec<C>>> {
    t.map(crate::copy::to_vec_as::<C>).transpose()
}

/// Group normalization: `(output, mean, rstd)`, statistics of shape `[N, group]` in
/// the input's dtype (biased variance, `rstd = 1 / sqrt(var + eps)`), from the
/// arguments [`opal::rules::norm::native_group_norm`] checked.
pub fn native_group_norm(p: GroupNorm) -> Result<(Tensor, Tensor, Tensor)> {
    let cd = compute_dtype(p.input.dtype(), "native_group_norm")?;
    fn run<C: Compute>(p: &GroupNorm) -> Result<(Tensor, Tensor, Tensor)> {
        let (x, eps) = (p.input, p.eps);
        let (n, c, hxw, g) = p.dims;
        let (w, b) = (p.weight, p.bias);
        let (w, b) = (param::<C>(w)?, param::<C>(b)?);
        let cpg = c / g;
        let row = cpg * hxw;
        let rows = n * g;
        // One (mean, rstd) per row, computed first so the output pass can split rows
        // across threads too.
        let mut stats = vec![(num_traits::zero::<C>(), C::one()); rows];
        with_slice::<C, _>(x, |xs| {
            let count = C::from(row.max(1)).unwrap_or_else(C::one);
            let epsc = C::from(eps).unwrap_or_else(num_traits::zero::<C>);
            over_rows(&mut stats, 1, xs.len(), |r0, st| {
                for (j, s) in st.iter_mut().enumerate() {
                    let r = r0 + j;
                    *s = if row == 0 {
                        (num_traits::zero::<C>(), C::one() / epsc.sqrt())
                    } else {
                        let (mu, m2) = C::mean_m2(&xs[r * row..(r + 1) * row]);
                        (mu, C::one() / (m2 / count + epsc).sqrt())
                    };
                }
            });
            Ok(())
        })?;
        let dt = x.dtype();
        let y = with_slice::<C, _>(x, |xs| {
            make_output::<C>(x.sizes(), dt, |ys| {
                if row == 0 {
                    return Ok(());
                }
                let total = ys.len();
                over_rows(ys, row, total, |r0, yc| {
                    for (j, yr) in yc.chunks_mut(row).enumerate() {
                        let r = r0 + j;
                        let (mu, rstd) = stats[r];
                        let xr = &xs[r * row..(r + 1) * row];
                        for k in 0..cpg {
                            let ch = (r % g) * cpg + k;
                            let sc = rstd * w.as_ref().map_or(C::one(), |w| w[ch]);
                            let sh =
                                b.as_ref().map_or(num_traits::zero::<C>(), |b| b[ch]) - mu * sc;
                            for (y, &v) in yr[k * hxw..(k + 1) * hxw]
                                .iter_mut()
                                .zip(&xr[k * hxw..(k + 1) * hxw])
                            {
                                *y = v * sc + sh;
                            }
                        }
                    }
                });
                Ok(())
            })
        })?;
        let shape = [n as i64, g as i64];
        let m = make_output::<C>(&shape, dt, |o| {
            o.iter_mut().zip(&stats).for_each(|(o, s)| *o = s.0);
            Ok(())
        })?;
        let r = make_output::<C>(&shape, dt, |o| {
            o.iter_mut().zip(&stats).for_each(|(o, s)| *o = s.1);
            Ok(())
        })?;
        Ok((y, m, r))
    }
    match cd {
        DType::F64 => run::<f64>(&p),
        _ => run::<f32>(&p),
    }
}

/// Gradients of group norm w.r.t. input, weight and bias, each only when its
/// `output_mask` entry is set (undefined otherwise, as PyTorch returns), from the
/// arguments [`opal::rules::norm::native_group_norm_backward`] checked.
pub fn native_group_norm_backward(p: GroupNormBackward) -> Result<(Tensor, Tensor, Tensor)> {
    let cd = compute_dtype(p.input.dtype(), "native_group_norm_backward")?;
    fn run<C: Compute>(
        p: &GroupNormBackward,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (dy, x, mean, rstd, w) = (p.grad_out, p.input, p.mean, p.rstd, p.weight);
        let ((n, c, hxw, g), mask) = (p.dims, p.output_mask);
        let w = param::<C>(w)?;
        let gamma = |ch: usize| w.as_ref().map_or(C::one(), |w| w[ch]);
        let (mv, rv) = (
            crate::copy::to_vec_as::<C>(mean)?,
            crate::copy::to_vec_as::<C>(rstd)?,
        );
        let cpg = c / g;
        let row = cpg * hxw;
        let dt = x.dtype();
        with_slice::<C, _>(dy, |dys| {
            with_slice::<C, _>(x, |xs| {
                // Per (sample, channel): sum(dy * x) and sum(dy).
                let mut sums = vec![(num_traits::zero::<C>(), num_traits::zero::<C>()); n * c];
                over_rows(&mut sums, 1, xs.len(), |nc0, part| {
                    for (j, out) in part.iter_mut().enumerate() {
                        let nc = nc0 + j;
                        let (d, v) = (
                            &dys[nc * hxw..(nc + 1) * hxw],
                            &xs[nc * hxw..(nc + 1) * hxw],
                        );
                        let s = d
                            .iter()
                            .zip(v)
                            .fold(num_traits::zero::<C>(), |a, (&d, &v)| a + d * v);
                        *out = (s, C::row_sum(d));
                    }
                });
                let (ds, db): (Vec<C>, Vec<C>) = sums.into_iter().unzip();
                let dx = if mask[0] {
                    Some(make_output::<C>(x.sizes(), dt, |o| {
                        if row == 0 {
                            return Ok(());
                        }
                        let inv = C::one() / C::from(row).unwrap_or_else(C::one);
                        let total = o.len();
                        over_rows(o, row, total, |r0, oc| {
                            for (j, or) in oc.chunks_mut(row).enumerate() {
                                let r = r0 + j;
                                let (b, grp) = (r / g, r % g);
                                let (mu, rs) = (mv[r], rv[r]);
                                let (mut dsg, mut dbg) =
                                    (num_traits::zero::<C>(), num_traits::zero::<C>());
                                for k in 0..cpg {
                                    let ch = grp * cpg + k;
                                    dsg = dsg + ds[b * c + ch] * gamma(ch);
                                    dbg = dbg + db[b * c + ch] * gamma(ch);
                                }
                                let c2 = (dbg * mu - dsg) * rs * rs * rs * inv;
                                let c3 = -c2 * mu - dbg * rs * inv;
                                for k in 0..cpg {
                                    let ch = grp * cpg + k;
                                    let c1 = rs * gamma(ch);
                                    let off = r * row + k * hxw;
                                    for (j, o) in or[k * hxw..(k + 1) * hxw].iter_mut().enumerate()
                                    {
                                        *o = c1 * dys[off + j] + c2 * xs[off + j] + c3;
                                    }
                                }
                            }
                        });
                        Ok(())
                    })?)
                } else {
                    None
                };
                let pshape = [c as i64];
                let dw = if mask[1] {
                    Some(make_output::<C>(&pshape, dt, |o| {
                        for (ch, o) in o.iter_mut().enumerate() {
                            *o = (0..n).fold(num_traits::zero::<C>(), |a, b| {
                                let r = b * g + ch / cpg;
                                a + (ds[b * c + ch] - db[b * c + ch] * mv[r]) * rv[r]
                            });
                        }
                        Ok(())
                    })?)
                } else {
                    None
                };
                let dbias = if mask[2] {
                    Some(make_output::<C>(&pshape, dt, |o| {
                        for (ch, o) in o.iter_mut().enumerate() {
                            *o = (0..n).fold(num_traits::zero::<C>(), |a, b| a + db[b * c + ch]);
                        }
                        Ok(())
                    })?)
                } else {
                    None
                };
                Ok((dx, dw, dbias))
            })
        })
    }
    let (a, b, c) = match cd {
        DType::F64 => run::<f64>(&p),
        _ => run::<f32>(&p),
    }?;
    let d = |t: Option<Tensor>| t.unwrap_or_else(Tensor::undefined);
    Ok((d(a), d(b), d(c)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use opal::rules::norm::native_group_norm as rule;

    #[test]
    fn group_norm_stats_and_errors() {
        let x = Tensor::from_slice(&[1.0f64, 3.0, 5.0, 7.0], &[1, 2, 2]).unwrap();
        let (y, m, r) = native_group_norm(rule(&x, None, None, 1, 2, 2, 1, 0.0).unwrap()).unwrap();
        assert_eq!(m.sizes(), &[1, 1]);
        assert_eq!(m.to_vec::<f64>().unwrap(), vec![4.0]);
        assert!((r.to_vec::<f64>().unwrap()[0] - 1.0 / 5.0f64.sqrt()).abs() < 1e-12);
        assert!((y.to_vec::<f64>().unwrap()[0] + 3.0 / 5.0f64.sqrt()).abs() < 1e-12);
        let e = rule(&x, None, None, 1, 2, 2, 3, 0.0)
            .and_then(native_group_norm)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("native_group_norm") && e.contains("num_groups=3"),
            "{e}"
        );
        assert!(rule(&x, None, None, 1, 2, 3, 1, 0.0).is_err());
    }

    #[test]
    fn large_inputs_split_into_rows_alike() {
        // Past the parallel threshold: every (sample, group) row keeps its own
        // statistics, and each normalized row has mean 0 and variance 1.
        let (n, c, hxw, g) = (3usize, 6usize, 4096usize, 3usize);
        let v: Vec<f64> = (0..n * c * hxw)
            .map(|i| ((i * 7919) % 1000) as f64 / 100.0 + (i / (2 * hxw)) as f64)
            .collect();
        let x = Tensor::from_slice(&v, &[n as i64, c as i64, hxw as i64]).unwrap();
        let (n_, c_, hxw_, g_) = (n as i64, c as i64, hxw as i64, g as i64);
        let p = rule(&x, None, None, n_, c_, hxw_, g_, 0.0).unwrap();
        let (y, m, _) = native_group_norm(p).unwrap();
        let (y, m) = (y.to_vec::<f64>().unwrap(), m.to_vec::<f64>().unwrap());
        let row = c / g * hxw;
        for r in 0..n * g {
            let xs = &v[r * row..(r + 1) * row];
            let want = xs.iter().sum::<f64>() / row as f64;
            assert!((m[r] - want).abs() < 1e-9, "row {r}: {} vs {want}", m[r]);
            let ys = &y[r * row..(r + 1) * row];
            let mean = ys.iter().sum::<f64>() / row as f64;
            let var = ys.iter().map(|a| (a - mean) * (a - mean)).sum::<f64>() / row as f64;
            assert!(
                mean.abs() < 1e-9 && (var - 1.0).abs() < 1e-9,
                "row {r}: {mean} {var}"
            );
        }
    }
}
