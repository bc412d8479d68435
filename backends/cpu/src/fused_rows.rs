//! Row-wise fused steps over f32 for the graph interpreter of `opal-export`:
//! RMS normalization of each row of a contiguous matrix in one pass (the
//! exporter writes it as five or six element-wise and reduction nodes).
//!
//! Owns: the row loops (vectorized builds for AVX2 / AVX-512, split over
//! threads for large inputs). Must not: know about graphs, tensors or the
//! dispatcher.

use crate::nn::vecmath::{has_avx2, has_avx512, multiversion};

/// Below this many elements one thread does all rows.
const PARALLEL_MIN: usize = 1 << 15;
/// Independent partial sums per row (enough for the vector units to overlap).
const LANES: usize = 16;

/// `out = x * rsqrt(mean(x^2) + eps)` per row of `d` elements, then times
/// `w` (length `d`) when given; each step rounded to f32 as the decomposed
/// operators round it (`x * r`, then `w * (x * r)`). `x.len()` must equal
/// `out.len()` and be a multiple of `d`; otherwise nothing is written.
pub fn rms_norm_f32(x: &[f32], w: Option<&[f32]>, d: usize, eps: f32, out: &mut [f32]) {
    if d == 0
        || x.len() != out.len()
        || !x.len().is_multiple_of(d)
        || w.is_some_and(|w| w.len() != d)
    {
        return;
    }
    let rows = x.len() / d;
    if x.len() < PARALLEL_MIN || rayon::current_num_threads() < 2 {
        rms_rows(x, w, d, eps, out);
        return;
    }
    let parts = rayon::current_num_threads().min(rows);
    let per = rows.div_ceil(parts);
    crate::parallel::fork_chunks_mut(out, per * d, |c, o| {
        let xs = &x[c * per * d..][..o.len()];
        rms_rows(xs, w, d, eps, o);
    });
}

multiversion!(rms_rows(x: &[f32], w: Option<&[f32]>, d: usize, eps: f32, out: &mut [f32]) -> () {
    for (xr, or) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
        let mut acc = [0.0f32; LANES];
        let mut it = xr.chunks_exact(LANES);
        for c in &mut it {
            for (a, &v) in acc.iter_mut().zip(c) {
                *a += v * v;
            }
        }
        for (a, &v) in acc.iter_mut().zip(it.remainder()) {
            *a += v * v;
        }
        let ss: f32 = acc.iter().sum();
        let r = 1.0 / (ss / d as f32 + eps).sqrt();
        match w {
            Some(w) => {
                for ((o, &v), &g) in or.iter_mut().zip(xr).zip(w) {
                    *o = g * (v * r);
                }
            }
            None => {
                for (o, &v) in or.iter_mut().zip(xr) {
                    *o = v * r;
                }
            }
        }
    }
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_match_the_definition() {
        for (rows, d) in [(3, 1), (2, 17), (5, 64), (600, 64)] {
            let x: Vec<f32> = (0..rows * d)
                .map(|i| ((i * 13) % 29) as f32 * 0.25 - 3.0)
                .collect();
            let w: Vec<f32> = (0..d).map(|i| 1.0 + i as f32 * 0.125).collect();
            for weight in [None, Some(&w[..])] {
                let mut y = vec![f32::NAN; x.len()];
                rms_norm_f32(&x, weight, d, 1e-6, &mut y);
                for r in 0..rows {
                    let row = &x[r * d..(r + 1) * d];
                    let ms = row.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / d as f64;
                    let s = 1.0 / (ms + 1e-6).sqrt();
                    for j in 0..d {
                        let want = row[j] as f64 * s * weight.map_or(1.0, |w| w[j] as f64);
                        let got = y[r * d + j] as f64;
                        assert!(
                            (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                            "rows {rows} d {d} ({r}, {j}): {got} vs {want}"
                        );
                    }
                }
            }
        }
        // Lengths that do not fit write nothing.
        let mut y = vec![7.0; 4];
        rms_norm_f32(&[1.0; 4], None, 3, 1e-6, &mut y);
        assert_eq!(y, [7.0; 4]);
    }
}
