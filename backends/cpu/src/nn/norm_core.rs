//! Layer-norm and batch-norm numerics over contiguous compute-type buffers.
//!
//! Owns: per-row / per-channel statistics and the normalize-scale-shift loops,
//! layer-norm backward. Must not: know about tensors, dtypes or op names.

use super::vecmath::RowMath;

const PARALLEL_MIN: usize = 1 << 14;

/// Layer norm over `rows` rows of `n` elements. Writes `y`, and per row `mean` and
/// `rstd = 1/sqrt(var + eps)` (biased variance).
#[allow(clippy::too_many_arguments)]
pub(crate) fn layer_norm_forward<C: RowMath>(
    x: &[C],
    n: usize,
    gamma: Option<&[C]>,
    beta: Option<&[C]>,
    eps: C,
    y: &mut [C],
    mean: &mut [C],
    rstd: &mut [C],
) {
    if n == 0 {
        for (m, r) in mean.iter_mut().zip(rstd.iter_mut()) {
            *m = C::zero();
            *r = C::nan();
        }
        return;
    }
    let nf = C::from(n).unwrap_or_else(C::one);
    let row = |xr: &[C], yr: &mut [C], m: &mut C, r: &mut C| {
        let (mu, m2) = C::mean_m2(xr);
        let rs = C::one() / (m2 / nf + eps).sqrt();
        *m = mu;
        *r = rs;
        C::normalize(xr, yr, mu, rs, gamma, beta);
    };
    let rows = |yc: &mut [C], xc: &[C], mc: &mut [C], rc: &mut [C]| {
        for ((yr, xr), (m, r)) in yc
            .chunks_mut(n)
            .zip(xc.chunks(n))
            .zip(mc.iter_mut().zip(rc.iter_mut()))
        {
            row(xr, yr, m, r);
        }
    };
    if x.len() >= PARALLEL_MIN {
        // About four tasks of whole rows per thread; each task owns its pieces of
        // the three outputs.
        let per_task = mean.len().div_ceil(4 * rayon::current_num_threads()).max(1);
        let mut tasks: Vec<_> = y
            .chunks_mut(per_task * n)
            .zip(x.chunks(per_task * n))
            .zip(mean.chunks_mut(per_task).zip(rstd.chunks_mut(per_task)))
            .collect();
        crate::parallel::fork_each_mut(&mut tasks, |((yc, xc), (mc, rc))| rows(yc, xc, mc, rc));
    } else {
        rows(y, x, mean, rstd);
    }
}

/// Gradients of layer norm. `dx`, `dgamma`, `dbeta` are written when present.
#[allow(clippy::too_many_arguments)]
pub(crate) fn layer_norm_backward<C: RowMath>(
    dy: &[C],
    x: &[C],
    n: usize,
    mean: &[C],
    rstd: &[C],
    gamma: Option<&[C]>,
    dx: Option<&mut [C]>,
    dgamma: Option<&mut [C]>,
    dbeta: Option<&mut [C]>,
) {
    if n == 0 {
        return;
    }
    let rows = x.len() / n;
    if let Some(dx) = dx {
        let per_row = x
            .chunks_exact(n)
            .zip(dy.chunks_exact(n))
            .zip(dx.chunks_exact_mut(n))
            .zip(mean.iter().zip(rstd));
        for (((xr, dyr), dxr), (&mu, &rs)) in per_row.take(rows) {
            C::layer_norm_dx(dyr, xr, mu, rs, gamma, dxr);
        }
    }
    let (mut dgamma, mut dbeta) = (dgamma, dbeta);
    for sums in [dgamma.as_deref_mut(), dbeta.as_deref_mut()]
        .into_iter()
        .flatten()
    {
        sums.fill(C::zero());
    }
    if dgamma.is_some() || dbeta.is_some() {
        let per_row = x
            .chunks_exact(n)
            .zip(dy.chunks_exact(n))
            .zip(mean.iter().zip(rstd));
        for ((xr, dyr), (&mu, &rs)) in per_row.take(rows) {
            C::layer_norm_param_grads(dyr, xr, mu, rs, dgamma.as_deref_mut(), dbeta.as_deref_mut());
        }
    }
}

/// Per-channel `(mean, biased variance)` of an `[n, c, inner]` buffer.
pub(crate) fn channel_stats<C: RowMath>(x: &[C], n: usize, c: usize, inner: usize) -> Vec<(C, C)> {
    let count = C::from(n * inner).unwrap_or_else(C::one);
    (0..c)
        .map(|ch| {
            let mut s = C::zero();
            for b in 0..n {
                s = s + C::row_sum(&x[(b * c + ch) * inner..(b * c + ch + 1) * inner]);
            }
            let mu = s / count;
            let mut m2 = C::zero();
            for b in 0..n {
                for &v in &x[(b * c + ch) * inner..(b * c + ch + 1) * inner] {
                    m2 = m2 + (v - mu) * (v - mu);
                }
            }
            (mu, m2 / count)
        })
        .collect()
}

/// `y = (x - mean[ch]) * invstd[ch] * w[ch] + b[ch]` over an `[n, c, inner]` buffer.
#[allow(clippy::too_many_arguments)]
pub(crate) fn channel_normalize<C: RowMath>(
    x: &[C],
    y: &mut [C],
    n: usize,
    c: usize,
    inner: usize,
    mean: &[C],
    invstd: &[C],
    w: Option<&[C]>,
    b: Option<&[C]>,
) {
    let _ = n;
    let plane = |p: usize, ys: &mut [C]| {
        let ch = p % c;
        let scale = invstd[ch] * w.map_or(C::one(), |w| w[ch]);
        let shift = b.map_or(C::zero(), |b| b[ch]) - mean[ch] * scale;
        for (o, &v) in ys.iter_mut().zip(&x[p * inner..(p + 1) * inner]) {
            *o = v * scale + shift;
        }
    };
    if inner == 0 {
        return;
    }
    if y.len() < 1 << 15 {
        for (p, ys) in y.chunks_mut(inner).enumerate() {
            plane(p, ys);
        }
        return;
    }
    // Whole planes per task, about 32K elements each.
    let planes_per_task = (32_768 / inner).max(1);
    crate::parallel::fork_chunks_mut(y, planes_per_task * inner, |t, ys| {
        for (k, yp) in ys.chunks_mut(inner).enumerate() {
            plane(t * planes_per_task + k, yp);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_norm_rows_are_standardized() {
        let x: Vec<f64> = (0..8).map(|i| (i * i) as f64).collect();
        let (mut y, mut m, mut r) = (vec![0.0; 8], vec![0.0; 2], vec![0.0; 2]);
        layer_norm_forward(&x, 4, None, None, 0.0, &mut y, &mut m, &mut r);
        assert_eq!(m[0], 3.5);
        for row in y.chunks(4) {
            let mu: f64 = row.iter().sum::<f64>() / 4.0;
            let var: f64 = row.iter().map(|v| v * v).sum::<f64>() / 4.0;
            assert!(mu.abs() < 1e-12 && (var - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn layer_norm_backward_matches_finite_difference() {
        let x = [0.3f64, -1.2, 2.0, 0.5, 1.0, 1.5];
        let w = [0.5, 2.0, -1.0];
        let dy = [1.0, -2.0, 0.5, 0.25, 0.1, 0.3];
        let fwd = |x: &[f64]| {
            let (mut y, mut m, mut r) = (vec![0.0; 6], vec![0.0; 2], vec![0.0; 2]);
            layer_norm_forward(x, 3, Some(&w), None, 1e-5, &mut y, &mut m, &mut r);
            (y, m, r)
        };
        let (y, m, r) = fwd(&x);
        let mut dx = vec![0.0; 6];
        let mut dg = vec![0.0; 3];
        layer_norm_backward(
            &dy,
            &x,
            3,
            &m,
            &r,
            Some(&w),
            Some(&mut dx),
            Some(&mut dg),
            None,
        );
        for k in 0..6 {
            let mut xp = x;
            xp[k] += 1e-7;
            let (yp, _, _) = fwd(&xp);
            let fd: f64 = (0..6).map(|i| dy[i] * (yp[i] - y[i]) / 1e-7).sum();
            assert!((fd - dx[k]).abs() < 1e-5, "k={k} fd={fd} dx={}", dx[k]);
        }
        let xhat0 = (x[0] - m[0]) * r[0];
        let xhat3 = (x[3] - m[1]) * r[1];
        assert!((dg[0] - (dy[0] * xhat0 + dy[3] * xhat3)).abs() < 1e-12);
    }

    #[test]
    fn batch_stats_per_channel() {
        // [n=2, c=2, inner=2]
        let x = [1.0f64, 3.0, 10.0, 10.0, 5.0, 7.0, 20.0, 20.0];
        let st = channel_stats(&x, 2, 2, 2);
        assert_eq!(st[0], (4.0, 5.0));
        assert_eq!(st[1], (15.0, 25.0));
    }
}
