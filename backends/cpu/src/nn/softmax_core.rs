//! Softmax / log-softmax forward and backward over contiguous buffers laid out as
//! `[outer, dim, inner]` (the reduced dimension in the middle).
//!
//! Owns: the numerics (max subtraction, sums, threading over the outer blocks with
//! a grain of whole rows). The vectorized row primitives are in `vecmath`.
//! Must not: know about tensors or dtypes other than the f32/f64 compute type.

use super::vecmath::{softmax_shift, RowMath};

/// Below this many elements the work stays on the calling thread.
const PARALLEL_MIN: usize = 1 << 13;

/// Rows shorter than this (a 16-lane f32 vector) are handled a run of rows at a
/// time where that lets the element-wise work vectorize.
const SHORT_ROW: usize = 16;

/// Elements per task: about four tasks per thread (load balance on a shared
/// machine) but never below 4K elements, so the per-task cost stays small against
/// the work; always whole blocks.
fn task_len(total: usize, block: usize) -> usize {
    let per_thread = total / (4 * rayon::current_num_threads()).max(1);
    (per_thread.max(4096) / block).max(1) * block
}

/// Runs `f(in_block, out_block)` over the `[outer]` blocks of `block` elements, in
/// parallel when the tensor is large (see [`for_row_runs`]).
fn for_blocks<C: Send + Sync>(
    x: &[C],
    y: &mut [C],
    block: usize,
    f: impl Fn(&[C], &mut [C]) + Send + Sync,
) {
    for_row_runs(x, y, block, |xc, yc| {
        for (yb, xb) in yc.chunks_mut(block).zip(xc.chunks(block)) {
            f(xb, yb);
        }
    })
}

/// Runs `f(in_run, out_run)` over runs of whole `block`-element blocks covering
/// the buffers: one run on the calling thread when small, else tasks of whole
/// blocks through [`crate::parallel::fork_chunks_mut`], where the calling thread
/// takes part.
fn for_row_runs<C: Send + Sync>(
    x: &[C],
    y: &mut [C],
    block: usize,
    f: impl Fn(&[C], &mut [C]) + Send + Sync,
) {
    if block == 0 {
        return;
    }
    let threads = rayon::current_num_threads();
    if x.len() < PARALLEL_MIN || x.len() <= block || threads < 2 {
        f(x, y);
        return;
    }
    let per_task = task_len(x.len(), block);
    crate::parallel::fork_chunks_mut(y, per_task, |c, yc| {
        let start = c * per_task;
        f(&x[start..start + yc.len()], yc)
    });
}

/// The shift that keeps `exp` in range: the max, or 0 when the max is infinite
/// (a row of -inf, everything masked, would otherwise give NaN; PyTorch does the
/// same).
fn shift_of<C: RowMath>(m: C) -> C {
    softmax_shift(m)
}

/// `y = softmax(x)` (or `log_softmax` when `log`) along the middle axis: per row
/// (`inner == 1`) one pass for the max, one fused `exp` + sum, one scale (or
/// subtract) pass; otherwise the same three steps vectorized along `inner`.
pub(crate) fn softmax_forward<C: RowMath>(
    x: &[C],
    y: &mut [C],
    dim: usize,
    inner: usize,
    log: bool,
) {
    let block = dim * inner;
    if inner == 1 {
        for_row_runs(x, y, block, |xr, yr| C::softmax_rows(xr, yr, block, log));
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
            *m = shift_of(*m);
        }
        let mut sums = vec![C::zero(); inner];
        for d in 0..dim {
            let r = d * inner..(d + 1) * inner;
            C::exp_sub_acc(&xb[r.clone()], &maxs, &mut yb[r], &mut sums);
        }
        if log {
            // log_softmax = x - max - ln(sum)
            for (m, s) in maxs.iter_mut().zip(&sums) {
                *m = *m + s.ln();
            }
            for d in 0..dim {
                let r = d * inner..(d + 1) * inner;
                for ((o, &v), &m) in yb[r.clone()].iter_mut().zip(&xb[r]).zip(&maxs) {
                    *o = v - m;
                }
            }
        } else {
            for s in sums.iter_mut() {
                *s = C::one() / *s;
            }
            for d in 0..dim {
                for (o, &inv) in yb[d * inner..(d + 1) * inner].iter_mut().zip(&sums) {
                    *o = *o * inv;
                }
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
    // One block: a last-dim row (`inner == 1`, the common case) is reduced with the
    // vectorized row primitives; other blocks accumulate `inner` sums at once.
    let run = |gb: &[C], yb: &[C], ob: &mut [C]| {
        if inner == 1 {
            if log {
                let s = C::row_sum(gb);
                C::exp_sub_sum(yb, ob, C::zero());
                for (o, &gv) in ob.iter_mut().zip(gb) {
                    *o = gv - *o * s;
                }
            } else {
                let s = dot_lanes(gb, yb);
                for ((o, &gv), &yv) in ob.iter_mut().zip(gb).zip(yb) {
                    *o = yv * (gv - s);
                }
            }
            return;
        }
        let mut sums = vec![C::zero(); inner];
        for d in 0..dim {
            let r = d * inner..(d + 1) * inner;
            for ((s, &gv), &yv) in sums.iter_mut().zip(&gb[r.clone()]).zip(&yb[r]) {
                *s = *s + if log { gv } else { gv * yv };
            }
        }
        for d in 0..dim {
            let r = d * inner..(d + 1) * inner;
            for (((o, &gv), &yv), &s) in ob[r.clone()]
                .iter_mut()
                .zip(&gb[r.clone()])
                .zip(&yb[r])
                .zip(&sums)
            {
                *o = if log {
                    gv - yv.exp() * s
                } else {
                    yv * (gv - s)
                };
            }
        }
    };
    // Whole blocks at once. Log-softmax rows shorter than a vector (the MLP's 10
    // classes) take `exp` of the whole run of rows in one vectorized pass first
    // (per element the same values as row by row).
    let run_blocks = |gs: &[C], ys: &[C], os: &mut [C]| {
        if log && inner == 1 && dim < SHORT_ROW {
            C::exp_sub_sum(ys, os, C::zero());
            for (ob, gb) in os.chunks_mut(block).zip(gs.chunks(block)) {
                let s = C::row_sum(gb);
                for (o, &gv) in ob.iter_mut().zip(gb) {
                    *o = gv - *o * s;
                }
            }
            return;
        }
        for ((ob, gb), yb) in os
            .chunks_mut(block)
            .zip(gs.chunks(block))
            .zip(ys.chunks(block))
        {
            run(gb, yb, ob);
        }
    };
    let n = out.len().min(g.len()).min(y.len());
    let (g, y, out) = (&g[..n], &y[..n], &mut out[..n]);
    if n >= PARALLEL_MIN && n > block {
        let per_task = task_len(n, block);
        crate::parallel::fork_chunks_mut(out, per_task, |c, oc| {
            let r = c * per_task..c * per_task + oc.len();
            run_blocks(&g[r.clone()], &y[r], oc);
        });
    } else {
        run_blocks(g, y, out);
    }
}

/// `sum(a[i] * b[i])` with independent lanes, so the loop vectorizes.
#[inline(always)]
fn dot_lanes<C: RowMath>(a: &[C], b: &[C]) -> C {
    const LANES: usize = 8;
    let mut acc = [C::zero(); LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..LANES {
            acc[l] = acc[l] + x[l] * y[l];
        }
    }
    let mut s = acc.iter().fold(C::zero(), |s, &v| s + v);
    for (&x, &y) in ra.iter().zip(rb) {
        s = s + x * y;
    }
    s
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

    /// f64 reference of softmax / log_softmax over `[outer, dim, inner]`.
    fn reference(x: &[f32], dim: usize, inner: usize, log: bool) -> Vec<f64> {
        let mut y = vec![0.0; x.len()];
        for o in 0..x.len() / (dim * inner) {
            for j in 0..inner {
                let at = |d: usize| o * dim * inner + d * inner + j;
                let m = (0..dim).map(|d| x[at(d)] as f64).fold(f64::MIN, f64::max);
                let s: f64 = (0..dim).map(|d| (x[at(d)] as f64 - m).exp()).sum();
                for d in 0..dim {
                    let v = x[at(d)] as f64 - m;
                    y[at(d)] = if log { v - s.ln() } else { v.exp() / s };
                }
            }
        }
        y
    }

    #[test]
    fn f32_paths_match_f64_reference() {
        // (dim, inner, outer): a parallel last-dim case with a ragged row length, and
        // the vectorized non-last-dim path, serial and parallel.
        for (dim, inner, outer) in [(1031usize, 1usize, 40usize), (33, 5, 7), (64, 33, 9)] {
            let n = dim * inner * outer;
            let x: Vec<f32> = (0..n)
                .map(|i| ((i as f32 * 0.618).sin() * 30.0) - (i % 7) as f32)
                .collect();
            for log in [false, true] {
                let mut y = vec![0.0f32; n];
                softmax_forward(&x, &mut y, dim, inner, log);
                let want = reference(&x, dim, inner, log);
                for (i, (&g, &w)) in y.iter().zip(&want).enumerate() {
                    let tol = if log {
                        2e-5 * w.abs().max(1.0)
                    } else {
                        1e-5 * w + 1e-30
                    };
                    assert!(
                        (g as f64 - w).abs() <= tol,
                        "dim={dim} inner={inner} log={log} i={i}: {g} vs {w}"
                    );
                }
            }
        }
    }

    #[test]
    fn nan_and_infinite_rows() {
        let mut y = [0.0f32; 4];
        softmax_forward(&[1.0, f32::NAN, 2.0, 3.0], &mut y, 4, 1, false);
        assert!(y.iter().all(|v| v.is_nan()));
        softmax_forward(&[1.0, f32::NAN, 2.0, 3.0], &mut y, 4, 1, true);
        assert!(y.iter().all(|v| v.is_nan()));
        // Columns: NaN and a fully masked column, the others unaffected.
        let x = [
            f32::NAN,
            f32::NEG_INFINITY,
            0.0,
            1.0,
            f32::NEG_INFINITY,
            0.0,
        ];
        let mut y = [0.0f32; 6];
        softmax_forward(&x, &mut y, 2, 3, false);
        assert!(y[0].is_nan() && y[3].is_nan());
        assert!(
            y[1].is_nan() && y[4].is_nan(),
            "all -inf column: 0/0 as in PyTorch"
        );
        assert_eq!((y[2], y[5]), (0.5, 0.5));
    }

    #[test]
    fn masked_row_gives_zero_not_nan() {
        let x = [f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY];
        let mut y = [0.0f32; 3];
        softmax_forward(&x, &mut y, 3, 1, false);
        assert_eq!(y, [0.0, 1.0, 0.0]);
    }

    /// Log-softmax gradients of rows shorter than a vector (exponentiated a run of
    /// rows at a time), serial and split across threads, against the formula in f64.
    #[test]
    fn short_row_log_backward_matches_the_formula() {
        for (dim, rows) in [(1usize, 9usize), (10, 64), (10, 1000), (15, 3)] {
            let n = dim * rows;
            let y: Vec<f32> = (0..n).map(|i| -((i * 13 % 17) as f32) / 4.0).collect();
            let g: Vec<f32> = (0..n).map(|i| ((i * 7 % 11) as f32 - 5.0) / 8.0).collect();
            let mut got = vec![0.0f32; n];
            softmax_backward(&g, &y, &mut got, dim, 1, true);
            for r in 0..rows {
                let row = r * dim..(r + 1) * dim;
                let s: f64 = g[row.clone()].iter().map(|&v| v as f64).sum();
                for i in row {
                    let want = g[i] as f64 - (y[i] as f64).exp() * s;
                    assert!(
                        (got[i] as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()),
                        "dim={dim} rows={rows} [{i}]: {} vs {want}",
                        got[i]
                    );
                }
            }
        }
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
