//! Softmax / log-softmax forward and backward over contiguous buffers laid out as
//! `[outer, dim, inner]` (the reduced dimension in the middle).
//!
//! Owns: the numerics (max subtraction, sums, threading over the outer blocks).
//! Must not: know about tensors or dtypes other than the f32/f64 compute type.

use super::vecmath::RowMath;
use rayon::prelude::*;

/// Below this many elements the work stays on the calling thread.
const PARALLEL_MIN: usize = 1 << 14;

/// Runs `f(block_index, in_block, out_block)` over `[outer]` blocks of `block` elements,
/// in parallel when the tensor is large.
fn for_blocks<C: Send + Sync>(
    x: &[C],
    y: &mut [C],
    block: usize,
    f: impl Fn(&[C], &mut [C]) + Send + Sync,
) {
    if block == 0 {
        return;
    }
    if x.len() >= PARALLEL_MIN {
        // Group blocks so each rayon task has at least ~4K elements of work.
        let per_task = (4096 / block).max(1) * block;
        y.par_chunks_mut(per_task)
            .zip(x.par_chunks(per_task))
            .for_each(|(yc, xc)| {
                for (yb, xb) in yc.chunks_mut(block).zip(xc.chunks(block)) {
                    f(xb, yb);
                }
            });
    } else {
        for (yb, xb) in y.chunks_mut(block).zip(x.chunks(block)) {
            f(xb, yb);
        }
    }
}

/// `y = softmax(x)` (or `log_softmax` when `log`) along the middle axis.
pub(crate) fn softmax_forward<C: RowMath>(
    x: &[C],
    y: &mut [C],
    dim: usize,
    inner: usize,
    log: bool,
) {
    let block = dim * inner;
    if inner == 1 {
        for_blocks(x, y, block, |xr, yr| {
            let m = C::row_max(xr);
            // A row of -inf (everything masked) has max -inf; subtracting it would
            // give NaN, so shift by 0 instead, as PyTorch does.
            let shift = if m.is_infinite() { C::zero() } else { m };
            let s = C::exp_sub_sum(xr, yr, shift);
            if log {
                let ls = s.ln() + shift;
                for (o, &i) in yr.iter_mut().zip(xr) {
                    *o = i - ls;
                }
            } else {
                C::scale(yr, C::one() / s);
            }
        });
        return;
    }
    for_blocks(x, y, block, |xb, yb| {
        let mut maxs = vec![C::neg_infinity(); inner];
        for d in 0..dim {
            for (m, &v) in maxs.iter_mut().zip(&xb[d * inner..(d + 1) * inner]) {
                if v > *m || v.is_nan() {
                    *m = v;
                }
            }
        }
        for m in maxs.iter_mut() {
            if m.is_infinite() {
                *m = C::zero();
            }
        }
        let mut sums = vec![C::zero(); inner];
        for d in 0..dim {
            let r = d * inner..(d + 1) * inner;
            for ((o, &v), (s, &m)) in yb[r.clone()]
                .iter_mut()
                .zip(&xb[r])
                .zip(sums.iter_mut().zip(&maxs))
            {
                let e = (v - m).exp();
                *o = e;
                *s = *s + e;
            }
        }
        for d in 0..dim {
            let r = d * inner..(d + 1) * inner;
            for ((o, &v), (s, &m)) in yb[r.clone()]
                .iter_mut()
                .zip(&xb[r])
                .zip(sums.iter().zip(&maxs))
            {
                *o = if log { v - m - s.ln() } else { *o / *s };
            }
        }
    });
}

/// Gradient of softmax (`log == false`: `y * (g - sum(g * y))`) or log-softmax
/// (`log == true`: `g - exp(y) * sum(g)`) given the forward output `y`.
pub(crate) fn softmax_backward<C: RowMath>(
    g: &[C],
    y: &[C],
    out: &mut [C],
    dim: usize,
    inner: usize,
    log: bool,
) {
    let block = dim * inner;
    if block == 0 {
        return;
    }
    // Pair g and y per block by zipping them into the input side.
    let paired: Vec<(C, C)> = g.iter().copied().zip(y.iter().copied()).collect();
    let run = |pb: &[(C, C)], ob: &mut [C]| {
        let mut sums = vec![C::zero(); inner];
        for d in 0..dim {
            for (s, &(gv, yv)) in sums.iter_mut().zip(&pb[d * inner..(d + 1) * inner]) {
                *s = *s + if log { gv } else { gv * yv };
            }
        }
        for d in 0..dim {
            let r = d * inner..(d + 1) * inner;
            for ((o, &(gv, yv)), &s) in ob[r.clone()].iter_mut().zip(&pb[r]).zip(&sums) {
                *o = if log {
                    gv - yv.exp() * s
                } else {
                    yv * (gv - s)
                };
            }
        }
    };
    if paired.len() >= PARALLEL_MIN {
        out.par_chunks_mut(block)
            .zip(paired.par_chunks(block))
            .for_each(|(ob, pb)| run(pb, ob));
    } else {
        for (ob, pb) in out.chunks_mut(block).zip(paired.chunks(block)) {
            run(pb, ob);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_rows_sum_to_one_and_match_definition() {
        let x: Vec<f64> = (0..12).map(|i| (i as f64 * 0.7).sin() * 3.0).collect();
        for inner in [1usize, 2, 3] {
            let dim = 12 / inner / 2;
            let mut y = vec![0.0; 12];
            softmax_forward(&x, &mut y, dim, inner, false);
            for o in 0..2 {
                for j in 0..inner {
                    let idx = |d: usize| o * dim * inner + d * inner + j;
                    let denom: f64 = (0..dim).map(|d| x[idx(d)].exp()).sum();
                    for d in 0..dim {
                        assert!((y[idx(d)] - x[idx(d)].exp() / denom).abs() < 1e-14);
                    }
                }
            }
            let mut ly = vec![0.0; 12];
            softmax_forward(&x, &mut ly, dim, inner, true);
            for (a, b) in ly.iter().zip(&y) {
                assert!((a - b.ln()).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn masked_row_gives_zero_not_nan() {
        let x = [f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY];
        let mut y = [0.0f32; 3];
        softmax_forward(&x, &mut y, 3, 1, false);
        assert_eq!(y, [0.0, 1.0, 0.0]);
    }

    #[test]
    fn backward_matches_finite_difference() {
        let x = [0.3f64, -1.2, 2.0, 0.5];
        let g = [1.0, -2.0, 0.5, 0.25];
        for log in [false, true] {
            let mut y = [0.0; 4];
            softmax_forward(&x, &mut y, 4, 1, log);
            let mut gi = [0.0; 4];
            softmax_backward(&g, &y, &mut gi, 4, 1, log);
            for k in 0..4 {
                let mut xp = x;
                xp[k] += 1e-6;
                let mut yp = [0.0; 4];
                softmax_forward(&xp, &mut yp, 4, 1, log);
                let fd: f64 = (0..4).map(|i| g[i] * (yp[i] - y[i]) / 1e-6).sum();
                assert!((fd - gi[k]).abs() < 1e-5, "log={log} k={k}");
            }
        }
    }
}
