//! Row primitives for the nn kernels (max, sum, exp-and-sum, scale, mean/variance)
//! written so that LLVM vectorizes them, with an AVX2+FMA build of the hot ones
//! chosen at run time.
//!
//! Owns: the [`RowMath`] trait and the f32 polynomial `exp`.
//! Must not: know about tensors, shapes or ops.

use num_traits::Float;

/// Row-wise math the softmax / normalization kernels need, implemented for f32 and
/// f64. f32 gets a vectorizable polynomial `exp`; f64 uses libm's (exact to the
/// last bit, which the f64 golden tolerances of 1e-10 want).
pub(crate) trait RowMath: Float + Send + Sync + std::iter::Sum + 'static {
    /// Largest element (NaN-propagating: a NaN anywhere makes the result NaN).
    fn row_max(xs: &[Self]) -> Self;
    /// Sum of the elements.
    fn row_sum(xs: &[Self]) -> Self;
    /// `dst[i] = exp(src[i] - sub)`; returns the sum of the written values.
    fn exp_sub_sum(src: &[Self], dst: &mut [Self], sub: Self) -> Self;
    /// `xs[i] *= s`.
    fn scale(xs: &mut [Self], s: Self);
    /// `(mean, sum of squared deviations)` of the row, two-pass for accuracy.
    fn mean_m2(xs: &[Self]) -> (Self, Self);
    /// `y = (x - mean) * rstd * gamma + beta` (gamma / beta default to 1 / 0).
    fn normalize(
        x: &[Self],
        y: &mut [Self],
        mean: Self,
        rstd: Self,
        gamma: Option<&[Self]>,
        beta: Option<&[Self]>,
    ) {
        normalize_generic(x, y, mean, rstd, gamma, beta)
    }
}

#[inline(always)]
fn normalize_generic<T: Float>(
    x: &[T],
    y: &mut [T],
    mean: T,
    rstd: T,
    gamma: Option<&[T]>,
    beta: Option<&[T]>,
) {
    // One loop per parameter combination keeps each one branch-free (vectorizable).
    let n = x.len().min(y.len());
    let (x, y) = (&x[..n], &mut y[..n]);
    match (gamma, beta) {
        (Some(g), Some(b)) => {
            for (((o, &v), &gv), &bv) in y.iter_mut().zip(x).zip(&g[..n]).zip(&b[..n]) {
                *o = (v - mean) * rstd * gv + bv;
            }
        }
        (Some(g), None) => {
            for ((o, &v), &gv) in y.iter_mut().zip(x).zip(&g[..n]) {
                *o = (v - mean) * rstd * gv;
            }
        }
        (None, Some(b)) => {
            for ((o, &v), &bv) in y.iter_mut().zip(x).zip(&b[..n]) {
                *o = (v - mean) * rstd + bv;
            }
        }
        (None, None) => {
            for (o, &v) in y.iter_mut().zip(x) {
                *o = (v - mean) * rstd;
            }
        }
    }
}

const LANES: usize = 16;

/// Sum with `LANES` independent accumulators so the loop vectorizes (float adds are
/// not reassociated by the compiler on their own).
#[inline(always)]
fn sum_lanes<T: Float>(xs: &[T]) -> T {
    let mut acc = [T::zero(); LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..LANES {
            acc[l] = acc[l] + c[l];
        }
    }
    let mut s = T::zero();
    for a in acc {
        s = s + a;
    }
    for &x in rest {
        s = s + x;
    }
    s
}

#[inline(always)]
fn max_lanes<T: Float>(xs: &[T]) -> T {
    let mut acc = [T::neg_infinity(); LANES];
    let mut nan = false;
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..LANES {
            let v = c[l];
            // A flag instead of an early exit keeps the loop branch-free.
            nan |= v.is_nan();
            acc[l] = if v > acc[l] { v } else { acc[l] };
        }
    }
    let mut m = T::neg_infinity();
    for a in acc {
        m = if a > m { a } else { m };
    }
    for &v in rest {
        nan |= v.is_nan();
        m = if v > m { v } else { m };
    }
    if nan {
        T::nan()
    } else {
        m
    }
}

#[inline(always)]
fn m2_lanes<T: Float>(xs: &[T], mean: T) -> T {
    let mut acc = [T::zero(); LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..LANES {
            let d = c[l] - mean;
            acc[l] = acc[l] + d * d;
        }
    }
    let mut s = T::zero();
    for a in acc {
        s = s + a;
    }
    for &x in rest {
        let d = x - mean;
        s = s + d * d;
    }
    s
}

/// exp for f32 by range reduction `x = n ln2 + r`, |r| <= ln2/2, and a degree-7
/// Taylor polynomial (relative error ~1e-8, below f32's epsilon). Branch-free so a
/// loop over it vectorizes.
#[inline(always)]
pub(crate) fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // 1.5 * 2^23: adding it rounds to an integer held in the low mantissa bits.
    const MAGIC: f32 = 12_582_912.0;
    let xc = if x > 88.0 { 88.0 } else { x };
    let xc = if xc < -87.0 { -87.0 } else { xc };
    let t = xc * LOG2E + MAGIC;
    let n = t - MAGIC;
    let r = xc - n * LN2_HI - n * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0
                        + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    let bits = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let pow2 = f32::from_bits(((bits + 127) << 23) as u32);
    let y = p * pow2;
    // Outside the clamped range the true result is 0 / inf; NaN stays NaN.
    let y = if x < -87.0 { 0.0 } else { y };
    let y = if x > 88.0 { f32::INFINITY } else { y };
    if x.is_nan() {
        x
    } else {
        y
    }
}

#[inline(always)]
fn exp_sub_sum_f32_generic(src: &[f32], dst: &mut [f32], sub: f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let n = src.len().min(dst.len());
    let (src, dst) = (&src[..n], &mut dst[..n]);
    let mut sc = src.chunks_exact(LANES);
    let mut dc = dst.chunks_exact_mut(LANES);
    for (s, d) in (&mut sc).zip(&mut dc) {
        for l in 0..LANES {
            let e = exp_f32(s[l] - sub);
            d[l] = e;
            acc[l] += e;
        }
    }
    let mut total: f32 = acc.iter().sum();
    for (s, d) in sc.remainder().iter().zip(dc.into_remainder()) {
        let e = exp_f32(s - sub);
        *d = e;
        total += e;
    }
    total
}

/// Defines `fn $name(args) -> ret` running `$body` compiled for AVX-512, for
/// AVX2+FMA or for the baseline target, whichever the CPU supports (std caches the
/// feature detection). The body is generic code written to autovectorize.
macro_rules! multiversion {
    ($name:ident($($a:ident: $t:ty),*) -> $r:ty $body:block) => {
        fn $name($($a: $t),*) -> $r {
            #[inline(always)]
            fn imp($($a: $t),*) -> $r $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                unsafe fn v4($($a: $t),*) -> $r {
                    imp($($a),*)
                }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn v3($($a: $t),*) -> $r {
                    imp($($a),*)
                }
                if has_avx512() {
                    // SAFETY: the CPU supports avx512f, avx2 and fma (checked above).
                    return unsafe { v4($($a),*) };
                }
                if has_avx2() {
                    // SAFETY: the CPU supports avx2 and fma (checked just above).
                    return unsafe { v3($($a),*) };
                }
            }
            imp($($a),*)
        }
    };
}

/// True when the AVX2+FMA builds may run (cached by std's detection macro).
#[inline(always)]
pub(crate) fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// True when the AVX-512 builds may run.
#[inline(always)]
pub(crate) fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f") && has_avx2()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

multiversion!(max_f32(xs: &[f32]) -> f32 { max_lanes(xs) });
multiversion!(sum_f32(xs: &[f32]) -> f32 { sum_lanes(xs) });
multiversion!(m2_f32(xs: &[f32], mean: f32) -> f32 { m2_lanes(xs, mean) });
multiversion!(exp_sub_sum_f32(src: &[f32], dst: &mut [f32], sub: f32) -> f32 {
    exp_sub_sum_f32_generic(src, dst, sub)
});
multiversion!(normalize_f32(x: &[f32], y: &mut [f32], mean: f32, rstd: f32, gamma: Option<&[f32]>, beta: Option<&[f32]>) -> () {
    normalize_generic(x, y, mean, rstd, gamma, beta)
});
multiversion!(scale_f32(xs: &mut [f32], s: f32) -> () {
    for x in xs {
        *x *= s;
    }
});

impl RowMath for f32 {
    fn row_max(xs: &[f32]) -> f32 {
        max_f32(xs)
    }
    fn row_sum(xs: &[f32]) -> f32 {
        sum_f32(xs)
    }
    fn exp_sub_sum(src: &[f32], dst: &mut [f32], sub: f32) -> f32 {
        exp_sub_sum_f32(src, dst, sub)
    }
    fn scale(xs: &mut [f32], s: f32) {
        scale_f32(xs, s)
    }
    fn mean_m2(xs: &[f32]) -> (f32, f32) {
        let n = xs.len().max(1) as f32;
        let mean = sum_f32(xs) / n;
        (mean, m2_f32(xs, mean))
    }
    fn normalize(
        x: &[f32],
        y: &mut [f32],
        mean: f32,
        rstd: f32,
        gamma: Option<&[f32]>,
        beta: Option<&[f32]>,
    ) {
        normalize_f32(x, y, mean, rstd, gamma, beta)
    }
}

impl RowMath for f64 {
    fn row_max(xs: &[f64]) -> f64 {
        max_lanes(xs)
    }
    fn row_sum(xs: &[f64]) -> f64 {
        sum_lanes(xs)
    }
    fn exp_sub_sum(src: &[f64], dst: &mut [f64], sub: f64) -> f64 {
        let mut total = 0.0;
        for (s, d) in src.iter().zip(dst) {
            let e = (s - sub).exp();
            *d = e;
            total += e;
        }
        total
    }
    fn scale(xs: &mut [f64], s: f64) {
        for x in xs {
            *x *= s;
        }
    }
    fn mean_m2(xs: &[f64]) -> (f64, f64) {
        let n = xs.len().max(1) as f64;
        let mean = sum_lanes(xs) / n;
        (mean, m2_lanes(xs, mean))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_f32_is_accurate_over_range() {
        let mut x = -100.0f32;
        while x < 90.0 {
            let want = (x as f64).exp();
            let got = exp_f32(x) as f64;
            if x < -87.0 {
                // Flushed to zero just above f32's smallest normal (documented choice).
                assert!(got < 1e-37, "x={x}");
            } else if x > 88.0 {
                // Saturates to inf from 88 on (true overflow is at 88.72); callers
                // only feed it `x - max <= 0`.
                assert!(got.is_infinite());
            } else {
                assert!(
                    ((got - want) / want).abs() < 4e-7,
                    "x={x} got={got} want={want}"
                );
            }
            x += 0.0137;
        }
        assert!(exp_f32(f32::NAN).is_nan());
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp_f32(0.0), 1.0);
    }

    #[test]
    fn row_primitives_agree_with_scalar_loops() {
        let xs: Vec<f32> = (0..37).map(|i| ((i * 7919) % 23) as f32 - 11.0).collect();
        assert_eq!(f32::row_max(&xs), 11.0);
        assert_eq!(f32::row_sum(&xs), xs.iter().sum::<f32>());
        let mut out = vec![0.0; xs.len()];
        let s = f32::exp_sub_sum(&xs, &mut out, 11.0);
        let want: f32 = xs.iter().map(|x| (x - 11.0).exp()).sum();
        assert!((s - want).abs() < 1e-5 * want);
        let (mean, m2) = f64::mean_m2(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!((mean, m2), (2.5, 5.0));
        assert!(f32::row_max(&[1.0, f32::NAN, 3.0]).is_nan());
    }
}
