//! Row primitives for the nn kernels (max, sum, exp-and-sum, exp of columns,
//! scale, subtract, mean/variance) written so that LLVM vectorizes them, with
//! AVX-512 and AVX2+FMA builds of the hot ones chosen at run time.
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
    /// The sum of `exp(src[i] - sub)`, nothing stored.
    fn exp_sub_total(src: &[Self], sub: Self) -> Self;
    /// `dst[j] = exp(src[j] - sub[j])` and `acc[j] += dst[j]` (one step of a
    /// softmax over a non-last dim, vectorized along the inner dim).
    fn exp_sub_acc(src: &[Self], sub: &[Self], dst: &mut [Self], acc: &mut [Self]);
    /// `dst[i] = src[i] - c`.
    fn sub_into(src: &[Self], dst: &mut [Self], c: Self);
    /// `(mean, sum of squared deviations)` of the row, two-pass for accuracy.
    fn mean_m2(xs: &[Self]) -> (Self, Self);
    /// One row of layer norm's input gradient: with `g = dy * gamma` and
    /// `xhat = (x - mean) * rstd`, `dx = rstd * (g - mean(g) - xhat * mean(g * xhat))`.
    fn layer_norm_dx(
        dy: &[Self],
        x: &[Self],
        mean: Self,
        rstd: Self,
        gamma: Option<&[Self]>,
        dx: &mut [Self],
    ) {
        layer_norm_dx_generic(dy, x, mean, rstd, gamma, dx)
    }
    /// One row's share of layer norm's parameter gradients:
    /// `dgamma += dy * (x - mean) * rstd`, `dbeta += dy`.
    fn layer_norm_param_grads(
        dy: &[Self],
        x: &[Self],
        mean: Self,
        rstd: Self,
        dgamma: Option<&mut [Self]>,
        dbeta: Option<&mut [Self]>,
    ) {
        layer_norm_param_grads_generic(dy, x, mean, rstd, dgamma, dbeta)
    }
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
    /// `y = softmax(x)` (or log-softmax when `log`) of each `n`-long row, for a
    /// whole run of rows at once (short rows pay one call, not three per row).
    fn softmax_rows(x: &[Self], y: &mut [Self], n: usize, log: bool) {
        softmax_rows!(
            x,
            y,
            n,
            log,
            Self::row_max,
            Self::exp_sub_sum,
            Self::exp_sub_total,
            Self::sub_into,
            Self::scale
        )
    }
}

/// Softmax (or log-softmax when `log`) of each `n`-long row of `x` into `y`, from
/// the row primitives named: a macro rather than a generic function so that the
/// f32 build calls its primitives directly, compiled with its target features (a
/// function item called through `Fn` would go through a shim without them).
macro_rules! softmax_rows {
    ($x:expr, $y:expr, $n:expr, $log:expr, $max:path, $exp_sub_sum:path, $exp_sub_total:path, $sub_into:path, $scale:path) => {{
        let (x, y, n, log) = ($x, $y, $n, $log);
        if n > 0 {
            for (xr, yr) in x.chunks_exact(n).zip(y.chunks_exact_mut(n)) {
                let shift = softmax_shift($max(xr));
                if log {
                    let ls = $exp_sub_total(xr, shift).ln() + shift;
                    $sub_into(xr, yr, ls);
                } else {
                    let s = $exp_sub_sum(xr, yr, shift);
                    $scale(yr, s.recip());
                }
            }
        }
    }};
}
use softmax_rows;

/// The shift a softmax row subtracts before `exp`: its max, or 0 when the max is
/// infinite (all `-inf`, or a `+inf`), so that no `inf - inf` makes a NaN.
#[inline(always)]
pub(crate) fn softmax_shift<T: Float>(m: T) -> T {
    if m.is_infinite() {
        T::zero()
    } else {
        m
    }
}

#[inline(always)]
fn layer_norm_dx_generic<T: Float>(
    dy: &[T],
    x: &[T],
    mean: T,
    rstd: T,
    gamma: Option<&[T]>,
    dx: &mut [T],
) {
    match gamma {
        Some(w) => layer_norm_dx_row::<T, true>(dy, x, w, mean, rstd, dx),
        // The gamma slice is not read without gamma; `dy` stands in for its length.
        None => layer_norm_dx_row::<T, false>(dy, x, dy, mean, rstd, dx),
    }
}

/// [`RowMath::layer_norm_dx`] with (`G`) or without gamma, each loop branch-free;
/// the two sums use `LANES` accumulators each so they vectorize.
#[inline(always)]
fn layer_norm_dx_row<T: Float, const G: bool>(
    dy: &[T],
    x: &[T],
    gamma: &[T],
    mean: T,
    rstd: T,
    dx: &mut [T],
) {
    let n = dy.len().min(x.len()).min(gamma.len()).min(dx.len());
    let (dy, x, gamma, dx) = (&dy[..n], &x[..n], &gamma[..n], &mut dx[..n]);
    let g_of = |d: T, w: T| if G { d * w } else { d };
    let mut sum_g = [T::zero(); LANES];
    let mut sum_gx = [T::zero(); LANES];
    let chunks = dy
        .chunks_exact(LANES)
        .zip(x.chunks_exact(LANES))
        .zip(gamma.chunks_exact(LANES));
    for ((cd, cx), cw) in chunks {
        for l in 0..LANES {
            let g = g_of(cd[l], cw[l]);
            sum_g[l] = sum_g[l] + g;
            sum_gx[l] = sum_gx[l] + g * (cx[l] - mean);
        }
    }
    let (mut sg, mut sgx) = (T::zero(), T::zero());
    for l in 0..LANES {
        sg = sg + sum_g[l];
        sgx = sgx + sum_gx[l];
    }
    let tail = n - n % LANES;
    for i in tail..n {
        let g = g_of(dy[i], gamma[i]);
        sg = sg + g;
        sgx = sgx + g * (x[i] - mean);
    }
    let nf = T::from(n).unwrap_or_else(T::one);
    let mean_g = sg / nf;
    // mean(g * xhat) = rstd * mean(g * (x - mean)); its product with xhat gains
    // another rstd.
    let k = sgx / nf * rstd * rstd;
    for (((o, &d), &v), &w) in dx.iter_mut().zip(dy).zip(x).zip(gamma) {
        *o = rstd * (g_of(d, w) - mean_g - (v - mean) * k);
    }
}

#[inline(always)]
fn layer_norm_param_grads_generic<T: Float>(
    dy: &[T],
    x: &[T],
    mean: T,
    rstd: T,
    dgamma: Option<&mut [T]>,
    dbeta: Option<&mut [T]>,
) {
    if let Some(dg) = dgamma {
        for ((o, &d), &v) in dg.iter_mut().zip(dy).zip(x) {
            *o = *o + d * (v - mean) * rstd;
        }
    }
    if let Some(db) = dbeta {
        for (o, &d) in db.iter_mut().zip(dy) {
            *o = *o + d;
        }
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

#[inline(always)]
fn sub_into_generic<T: Float>(src: &[T], dst: &mut [T], c: T) {
    for (d, &v) in dst.iter_mut().zip(src) {
        *d = v - c;
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

/// Lanes of the max: four AVX-512 registers, so four independent `max` chains.
const MAX_LANES: usize = 64;

#[inline(always)]
fn max_lanes<T: Float>(xs: &[T]) -> T {
    if xs.len() < MAX_LANES {
        // A row shorter than the lanes (attention scores over 16 positions) would
        // pay for setting up and folding all 64 of them: about 310 instructions a
        // call in the GPT fixture's step (callgrind), most rows 16 long.
        let (mut m, mut any_nan) = (T::neg_infinity(), false);
        for &v in xs {
            any_nan |= v.is_nan();
            m = if v > m { v } else { m };
        }
        return if any_nan { T::nan() } else { m };
    }
    let mut acc = [T::neg_infinity(); MAX_LANES];
    // Per-lane NaN flags instead of one scalar flag: a scalar `|=` chain stops the
    // loop from vectorizing cleanly.
    let mut nan = [0u32; MAX_LANES];
    let chunks = xs.chunks_exact(MAX_LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..MAX_LANES {
            let v = c[l];
            nan[l] |= v.is_nan() as u32;
            acc[l] = if v > acc[l] { v } else { acc[l] };
        }
    }
    let mut m = T::neg_infinity();
    for a in acc {
        m = if a > m { a } else { m };
    }
    let mut any_nan = nan.iter().fold(0, |a, &b| a | b) != 0;
    for &v in rest {
        any_nan |= v.is_nan();
        m = if v > m { v } else { m };
    }
    if any_nan {
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

/// exp for f32, branch-free so that loops over it vectorize: `x = n ln2 + r` with
/// `|r| <= ln2/2` (Cody–Waite: `ln2` split so `n * LN2_HI` is exact), then
/// `exp(r) = 1 + r + r^2 P(r)` with `P` a degree-4 polynomial fitted for minimal
/// relative error on `[-0.354, 0.354]` (Lawson's algorithm; coefficients rounded to
/// f32), then `2^n` applied as two exact powers of two so that results in the
/// subnormal range round once, like libm's. Within 1 ulp of the exact value on all
/// of f32 (checked against f64 `exp` in the tests). Overflow gives `inf` (the input
/// is clamped to 89, where the scaling overflows), NaN stays NaN, and from -104
/// down (`-inf` included) the result is 0 by a final select: computing those lanes
/// would end in a multiply that underflows, and on Intel cores every such multiply
/// takes a microcode assist of ~100 cycles (a causal attention mask makes half of
/// every softmax row `-inf`; the select made the GPT step's softmax 5x faster
/// there). The multiply-adds are fused (`mul_add`): one instruction each in the AVX2+FMA and
/// AVX-512 builds and on aarch64 (a libm call on x86 CPUs without FMA, which only
/// the baseline build meets).
#[inline(always)]
pub(crate) fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 355.0 / 512.0; // 9 significant bits: n * LN2_HI is exact
    const LN2_LO: f32 = -2.121_944_4e-4; // ln2 - LN2_HI
    const P0: f32 = 0.499_999_94;
    const P1: f32 = 0.166_665_09;
    const P2: f32 = 0.041_668_527;
    const P3: f32 = 0.008_370_133;
    const P4: f32 = 0.001_381_164_2;
    // 1.5 * 2^23: adding it rounds to an integer held in the low mantissa bits.
    const MAGIC: f32 = 12_582_912.0;
    // Written as compare-and-pick so NaN passes through (maxps / minps order).
    // Lanes that end as 0 compute exp(0) instead (see above).
    let zero = x <= -104.0;
    let x = if zero { 0.0 } else { x };
    let x = if x > 89.0 { 89.0 } else { x };
    let t = x.mul_add(LOG2E, MAGIC);
    let n = t - MAGIC;
    let r = (-n).mul_add(LN2_LO, (-n).mul_add(LN2_HI, x));
    let p = r
        .mul_add(P4, P3)
        .mul_add(r, P2)
        .mul_add(r, P1)
        .mul_add(r, P0);
    let e = (r * r).mul_add(p, r) + 1.0;
    // n in [-150, 128]: each half is a normal exponent.
    let ni = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let n1 = ni >> 1;
    let n2 = ni - n1;
    let s1 = f32::from_bits(((n1 + 127) << 23) as u32);
    let s2 = f32::from_bits(((n2 + 127) << 23) as u32);
    let y = e * s1 * s2;
    if zero {
        0.0
    } else {
        y
    }
}

/// erf for f32, branch-free so that loops over it vectorize (within 3 ulp of the
/// exact value; checked against f64 `erf` in the tests). With `a = min(|x|, 4)`
/// (erf rounds to 1 beyond 3.92): below 1, `erf(a) = a P(a^2)`; from 1 on,
/// `erf(a) = 1 - exp(-a^2) R(a)` with `R(a) = erfc(a) exp(a^2)` a polynomial in
/// `(a - 2.5) / 1.5`. Both polynomials were fitted here for minimal relative error
/// (iteratively reweighted least squares at Chebyshev nodes, coefficients rounded
/// to f32). `a^2` is carried as a rounded square plus its exact remainder, so the
/// exponential sees the square to full precision. Both pieces are computed and one
/// is picked; the sign is copied from `x` (erf is odd), NaN stays NaN.
#[inline(always)]
pub(crate) fn erf_f32(x: f32) -> f32 {
    #[allow(
        clippy::approx_constant,
        reason = "a fitted coefficient, one f32 ulp below 2/sqrt(pi) (erf's Taylor term); the fit wants this value"
    )]
    const S: [f32; 7] = [
        1.128_379_1,
        -0.376_126_26,
        0.112_835_854,
        -0.026_853_828,
        0.005_188_355,
        -0.000_801_040_7,
        7.854_516e-5,
    ];
    const L: [f32; 11] = [
        0.210_806_37,
        -0.111_521_36,
        0.056_110_334,
        -0.026_998_29,
        0.012_489_158,
        -0.005_609_936,
        0.002_411_306_4,
        -0.000_918_030_3,
        0.000_384_738_5,
        -0.000_244_396_13,
        8.959_063e-5,
    ];
    let a = x.abs();
    // Compare-and-pick, so NaN passes through.
    let a = if a > 4.0 { 4.0 } else { a };
    let q = a * a;
    let mut p = S[6];
    for &c in S[..6].iter().rev() {
        p = p.mul_add(q, c);
    }
    let small = a * p;
    let t = (a - 2.5) * (1.0 / 1.5);
    let mut r = L[10];
    for &c in L[..10].iter().rev() {
        r = r.mul_add(t, c);
    }
    // a^2 = q + lo exactly; exp(-a^2) = exp(-q) exp(-lo) ~ exp(-q) (1 - lo).
    let lo = a.mul_add(a, -q);
    let e = exp_f32(-q) * (1.0 - lo);
    let large = (-e).mul_add(r, 1.0);
    let v = if a < 1.0 { small } else { large };
    v.copysign(x)
}

/// tanh for f32, branch-free so that loops over it vectorize (within 4 ulp of the
/// exact value; checked against f64 `tanh` in the tests). Below 0.4 in magnitude
/// its Taylor series to the x^15 term (the terms shrink by about (x / (pi/2))^2
/// each, under 2^-27 by the last); from there `1 - 2 / (exp(2|x|) + 1)`, which
/// loses under two bits to cancellation at 0.4 and saturates to 1 where the
/// exponential overflows. The sign is copied from `x`; NaN stays NaN.
#[inline(always)]
pub(crate) fn tanh_f32(x: f32) -> f32 {
    // tanh's Taylor coefficients: 1, -1/3, 2/15, -17/315, 62/2835, -1382/155925,
    // 21844/6081075, -929569/638512875.
    const T: [f32; 8] = [
        1.0,
        -0.333_333_34,
        0.133_333_33,
        -0.053_968_254,
        0.021_869_488,
        -0.008_863_236,
        0.003_592_128_6,
        -0.001_455_834_4,
    ];
    let a = x.abs();
    let q = a * a;
    let mut p = T[7];
    for &c in T[..7].iter().rev() {
        p = p.mul_add(q, c);
    }
    let small = a * p;
    // Compare-and-pick, so NaN passes through; at 10, 2/(exp(20)+1) is under a
    // quarter ulp of 1, so the result rounds to exactly 1.
    let c = if a > 10.0 { 10.0 } else { a };
    let large = 1.0 - 2.0 / (exp_f32(2.0 * c) + 1.0);
    let v = if a < 0.4 { small } else { large };
    v.copysign(x)
}

#[inline(always)]
fn tanh_f32_generic(x: &[f32], y: &mut [f32]) {
    for (o, &v) in y.iter_mut().zip(x) {
        *o = tanh_f32(v);
    }
}

/// The logistic function `1 / (1 + exp(-x))` with the vectorized [`exp_f32`].
#[inline(always)]
fn sigmoid_f32_generic(x: &[f32], y: &mut [f32]) {
    for (o, &v) in y.iter_mut().zip(x) {
        *o = 1.0 / (1.0 + exp_f32(-v));
    }
}

/// 1/sqrt(2) and 1/sqrt(2 pi), for the exact GELU.
const GELU_K1: f32 = std::f32::consts::FRAC_1_SQRT_2;
const GELU_K2: f32 = 0.398_942_3;

#[inline(always)]
fn gelu_f32_generic(x: &[f32], y: &mut [f32]) {
    for (o, &v) in y.iter_mut().zip(x) {
        *o = v * 0.5 * (1.0 + erf_f32(v * GELU_K1));
    }
}

#[inline(always)]
fn gelu_backward_f32_generic(g: &[f32], x: &[f32], y: &mut [f32]) {
    for ((o, &gv), &v) in y.iter_mut().zip(g).zip(x) {
        let cdf = 0.5 * (1.0 + erf_f32(v * GELU_K1));
        let pdf = GELU_K2 * exp_f32(-0.5 * v * v);
        *o = gv * (cdf + v * pdf);
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

#[inline(always)]
fn exp_sub_total_f32_generic(src: &[f32], sub: f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = src.chunks_exact(LANES);
    let rest = chunks.remainder();
    for s in chunks {
        for l in 0..LANES {
            acc[l] += exp_f32(s[l] - sub);
        }
    }
    let mut total: f32 = acc.iter().sum();
    for &s in rest {
        total += exp_f32(s - sub);
    }
    total
}

#[inline(always)]
fn exp_sub_acc_f32_generic(src: &[f32], sub: &[f32], dst: &mut [f32], acc: &mut [f32]) {
    let n = src.len().min(sub.len()).min(dst.len()).min(acc.len());
    let (src, sub, dst, acc) = (&src[..n], &sub[..n], &mut dst[..n], &mut acc[..n]);
    for (((d, a), &s), &m) in dst.iter_mut().zip(acc.iter_mut()).zip(src).zip(sub) {
        let e = exp_f32(s - m);
        *d = e;
        *a += e;
    }
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

pub(crate) use multiversion;

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
multiversion!(layer_norm_dx_f32(dy: &[f32], x: &[f32], mean: f32, rstd: f32, gamma: Option<&[f32]>, dx: &mut [f32]) -> () {
    layer_norm_dx_generic(dy, x, mean, rstd, gamma, dx)
});
multiversion!(layer_norm_param_grads_f32(dy: &[f32], x: &[f32], mean: f32, rstd: f32, dgamma: Option<&mut [f32]>, dbeta: Option<&mut [f32]>) -> () {
    layer_norm_param_grads_generic(dy, x, mean, rstd, dgamma, dbeta)
});
multiversion!(scale_f32(xs: &mut [f32], s: f32) -> () { scale_generic(xs, s) });

#[inline(always)]
fn scale_generic<T: Float>(xs: &mut [T], s: T) {
    for x in xs {
        *x = *x * s;
    }
}
multiversion!(exp_sub_total_f32(src: &[f32], sub: f32) -> f32 {
    exp_sub_total_f32_generic(src, sub)
});
multiversion!(exp_sub_acc_f32(src: &[f32], sub: &[f32], dst: &mut [f32], acc: &mut [f32]) -> () {
    exp_sub_acc_f32_generic(src, sub, dst, acc)
});
multiversion!(sub_into_f32(src: &[f32], dst: &mut [f32], c: f32) -> () {
    sub_into_generic(src, dst, c)
});

multiversion!(softmax_rows_f32(x: &[f32], y: &mut [f32], n: usize, log: bool) -> () {
    match n {
        8 => softmax_rows_fixed_f32::<8>(x, y, log),
        16 => softmax_rows_fixed_f32::<16>(x, y, log),
        32 => softmax_rows_fixed_f32::<32>(x, y, log),
        64 => softmax_rows_fixed_f32::<64>(x, y, log),
        1..LANES => softmax_rows_short_f32(x, y, n, log),
        _ => softmax_rows_f32_general(x, y, n, log),
    }
});

/// [`softmax_rows_f32_general`] for rows shorter than a vector (the MLP's 10
/// classes), with the same results: those rows never reach the general loop's
/// vector body, so each `exp` ran alone. Here a group of rows is first shifted
/// into `y`, then exponentiated in one vectorized pass, then summed and finished
/// row by row in the general loop's order.
#[inline(always)]
fn softmax_rows_short_f32(x: &[f32], y: &mut [f32], n: usize, log: bool) {
    const GROUP: usize = 64;
    let mut shifts = [0.0f32; GROUP];
    for (xg, yg) in x.chunks(GROUP * n).zip(y.chunks_mut(GROUP * n)) {
        for ((xr, yr), shift) in xg
            .chunks_exact(n)
            .zip(yg.chunks_exact_mut(n))
            .zip(&mut shifts)
        {
            *shift = softmax_shift(max_lanes(xr));
            sub_into_generic(xr, yr, *shift);
        }
        for v in yg.iter_mut() {
            *v = exp_f32(*v);
        }
        for ((xr, yr), &shift) in xg.chunks_exact(n).zip(yg.chunks_exact_mut(n)).zip(&shifts) {
            let total = yr.iter().fold(0.0f32, |s, &e| s + e);
            if log {
                sub_into_generic(xr, yr, total.ln() + shift);
            } else {
                scale_generic(yr, total.recip());
            }
        }
    }
}

/// [`softmax_rows_f32`] for rows of a length known at compile time: the same
/// primitives (so the same results), but each sees a constant length, so its
/// loops become straight vector code instead of a vector loop that a short row
/// (attention scores over 16 positions) skips for its scalar tail: about 4
/// instead of 15 instructions an element.
#[inline(always)]
fn softmax_rows_fixed_f32<const N: usize>(x: &[f32], y: &mut [f32], log: bool) {
    for (xr, yr) in x.chunks_exact(N).zip(y.chunks_exact_mut(N)) {
        let (Ok(xr), Ok(yr)) = (<&[f32; N]>::try_from(xr), <&mut [f32; N]>::try_from(yr)) else {
            continue; // never: chunks_exact gives N elements
        };
        softmax_rows_f32_general(&xr[..], &mut yr[..], N, log)
    }
}

/// The f32 row loop from the generic row primitives, for any row length.
#[inline(always)]
fn softmax_rows_f32_general(x: &[f32], y: &mut [f32], n: usize, log: bool) {
    softmax_rows!(
        x,
        y,
        n,
        log,
        max_lanes,
        exp_sub_sum_f32_generic,
        exp_sub_total_f32_generic,
        sub_into_generic,
        scale_generic
    )
}

multiversion!(gelu_f32_mv(x: &[f32], y: &mut [f32]) -> () {
    gelu_f32_generic(x, y)
});
multiversion!(gelu_backward_f32_mv(g: &[f32], x: &[f32], y: &mut [f32]) -> () {
    gelu_backward_f32_generic(g, x, y)
});
multiversion!(tanh_f32_mv(x: &[f32], y: &mut [f32]) -> () {
    tanh_f32_generic(x, y)
});
multiversion!(sigmoid_f32_mv(x: &[f32], y: &mut [f32]) -> () {
    sigmoid_f32_generic(x, y)
});

/// `y[i] = tanh(x[i])` over f32 slices (up to the shorter one), with the
/// vectorized [`tanh_f32`].
pub(crate) fn tanh_f32_slice(x: &[f32], y: &mut [f32]) {
    tanh_f32_mv(x, y)
}

/// `y[i] = 1 / (1 + exp(-x[i]))` over f32 slices (up to the shorter one).
pub(crate) fn sigmoid_f32_slice(x: &[f32], y: &mut [f32]) {
    sigmoid_f32_mv(x, y)
}

/// The exact GELU, `y[i] = x[i] / 2 * (1 + erf(x[i] / sqrt(2)))`, over f32 slices
/// (up to the shorter one), with the vectorized [`erf_f32`].
pub(crate) fn gelu_f32(x: &[f32], y: &mut [f32]) {
    gelu_f32_mv(x, y)
}

/// The exact GELU's gradient, `y[i] = g[i] * (cdf(x[i]) + x[i] * pdf(x[i]))`, over
/// f32 slices (up to the shortest one).
pub(crate) fn gelu_backward_f32(g: &[f32], x: &[f32], y: &mut [f32]) {
    gelu_backward_f32_mv(g, x, y)
}

impl RowMath for f32 {
    fn row_max(xs: &[f32]) -> f32 {
        max_f32(xs)
    }
    fn softmax_rows(x: &[f32], y: &mut [f32], n: usize, log: bool) {
        softmax_rows_f32(x, y, n, log)
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
    fn exp_sub_total(src: &[f32], sub: f32) -> f32 {
        exp_sub_total_f32(src, sub)
    }
    fn exp_sub_acc(src: &[f32], sub: &[f32], dst: &mut [f32], acc: &mut [f32]) {
        exp_sub_acc_f32(src, sub, dst, acc)
    }
    fn sub_into(src: &[f32], dst: &mut [f32], c: f32) {
        sub_into_f32(src, dst, c)
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
    fn layer_norm_dx(
        dy: &[f32],
        x: &[f32],
        mean: f32,
        rstd: f32,
        gamma: Option<&[f32]>,
        dx: &mut [f32],
    ) {
        layer_norm_dx_f32(dy, x, mean, rstd, gamma, dx)
    }
    fn layer_norm_param_grads(
        dy: &[f32],
        x: &[f32],
        mean: f32,
        rstd: f32,
        dgamma: Option<&mut [f32]>,
        dbeta: Option<&mut [f32]>,
    ) {
        layer_norm_param_grads_f32(dy, x, mean, rstd, dgamma, dbeta)
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
    fn exp_sub_total(src: &[f64], sub: f64) -> f64 {
        src.iter().map(|&s| (s - sub).exp()).sum()
    }
    fn exp_sub_acc(src: &[f64], sub: &[f64], dst: &mut [f64], acc: &mut [f64]) {
        for (((d, a), &s), &m) in dst.iter_mut().zip(acc.iter_mut()).zip(src).zip(sub) {
            *d = (s - m).exp();
            *a += *d;
        }
    }
    fn sub_into(src: &[f64], dst: &mut [f64], c: f64) {
        sub_into_generic(src, dst, c)
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

    /// Distance of `got` from the exact `want` in units of the last place of the f32
    /// nearest to `want` (subnormals: the smallest subnormal).
    fn ulps(got: f32, want: f64) -> f64 {
        let w = want as f32;
        let next = f32::from_bits(w.to_bits() + 1);
        let ulp = (next as f64 - w as f64)
            .abs()
            .max(f64::from(f32::from_bits(1)));
        (got as f64 - want).abs() / ulp
    }

    /// Rows of the lengths with a fixed-length or short-row path give exactly what the
    /// general row loop gives, for softmax and log-softmax, with rows of `-inf`
    /// (fully masked), a NaN and a `+inf` among ordinary ones.
    #[test]
    fn fixed_length_softmax_rows_match_the_general_loop() {
        for n in [1usize, 3, 8, 10, 15, 16, 32, 64] {
            let rows = 70; // more than one group of the short-row path
            let mut x: Vec<f32> = (0..rows * n)
                .map(|i| ((i * 37 % 23) as f32 - 11.0) / 3.0)
                .collect();
            x[n..2 * n].fill(f32::NEG_INFINITY);
            x[2 * n + 3] = f32::NAN;
            x[3 * n + 1] = f32::INFINITY;
            x[4 * n + n / 2..5 * n].fill(f32::NEG_INFINITY);
            for log in [false, true] {
                let (mut fast, mut general) = (vec![0.0f32; x.len()], vec![0.0f32; x.len()]);
                softmax_rows_f32(&x, &mut fast, n, log);
                softmax_rows_f32_general(&x, &mut general, n, log);
                for (i, (a, b)) in fast.iter().zip(&general).enumerate() {
                    assert!(
                        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                        "n={n} log={log} [{i}]: {a} vs {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn exp_f32_is_within_one_ulp_everywhere() {
        // Every 997th f32 bit pattern over the finite range where exp is neither 0
        // nor inf (subnormal results included), plus a dense sweep around 0.
        let (lo, hi) = (-103.97f32, 88.72f32);
        let mut worst = 0.0f64;
        let mut check = |x: f32| {
            let e = ulps(exp_f32(x), (x as f64).exp());
            assert!(e <= 1.0, "x={x:e}: {e} ulp");
            worst = worst.max(e);
        };
        for bits in (0..hi.to_bits()).step_by(997) {
            check(f32::from_bits(bits));
        }
        for bits in (0x8000_0000u32..lo.to_bits()).step_by(997) {
            check(f32::from_bits(bits));
        }
        let mut x = -1.0f32;
        while x < 1.0 {
            check(x);
            x += 1.0 / 4096.0;
        }
        assert!(worst > 0.0);
    }

    #[test]
    fn tanh_f32_is_within_four_ulp() {
        let mut worst = 0.0f64;
        let mut check = |x: f32| {
            let want = (x as f64).tanh();
            let e = ulps(tanh_f32(x), want);
            assert!(e <= 4.0, "x={x:e}: {e} ulp");
            worst = worst.max(e);
        };
        for bits in (0..12.0f32.to_bits()).step_by(101) {
            check(f32::from_bits(bits));
            check(-f32::from_bits(bits));
        }
        let mut x = -10.0f32;
        while x < 10.0 {
            check(x);
            x += 1.0 / 1024.0;
        }
        assert!(worst > 0.0);
        assert!(tanh_f32(f32::NAN).is_nan());
        assert_eq!(tanh_f32(f32::INFINITY), 1.0);
        assert_eq!(tanh_f32(f32::NEG_INFINITY), -1.0);
        assert!(tanh_f32(-0.0) == 0.0 && tanh_f32(-0.0).is_sign_negative());
        let xs: Vec<f32> = (-40..40).map(|i| i as f32 * 0.25).collect();
        let mut ys = vec![0.0; xs.len()];
        sigmoid_f32_slice(&xs, &mut ys);
        for (&x, &y) in xs.iter().zip(&ys) {
            let want = 1.0 / (1.0 + (-(x as f64)).exp());
            assert!(ulps(y, want) <= 4.0, "sigmoid({x}) = {y}, want {want}");
        }
        tanh_f32_slice(&xs, &mut ys);
        assert_eq!(ys[41], tanh_f32(xs[41]));
    }

    #[test]
    fn erf_f32_is_within_three_ulp() {
        let mut worst = 0.0f64;
        let mut check = |x: f32| {
            let want = libm::erf(x as f64);
            let e = ulps(erf_f32(x), want);
            assert!(e <= 3.0, "x={x:e}: {e} ulp");
            worst = worst.max(e);
        };
        // Every 101st bit pattern of [0, 5], both signs, and a dense sweep.
        for bits in (0..5.0f32.to_bits()).step_by(101) {
            check(f32::from_bits(bits));
            check(-f32::from_bits(bits));
        }
        let mut x = -6.0f32;
        while x < 6.0 {
            check(x);
            x += 1.0 / 1024.0;
        }
        assert!(worst > 0.0);
        assert!(erf_f32(f32::NAN).is_nan());
        assert_eq!(erf_f32(f32::INFINITY), 1.0);
        assert_eq!(erf_f32(f32::NEG_INFINITY), -1.0);
        assert_eq!(erf_f32(1e30), 1.0);
        assert!(erf_f32(-0.0) == 0.0 && erf_f32(-0.0).is_sign_negative());
    }

    #[test]
    fn gelu_slices_match_the_scalar_formulas() {
        let x: Vec<f32> = (0..203).map(|i| (i as f32 - 101.0) * 0.07).collect();
        let g: Vec<f32> = (0..203)
            .map(|i| ((i * 37) % 11) as f32 * 0.3 - 1.5)
            .collect();
        let (mut y, mut dy) = (vec![0.0; 203], vec![0.0; 203]);
        gelu_f32(&x, &mut y);
        gelu_backward_f32(&g, &x, &mut dy);
        for i in 0..203 {
            let v = x[i] as f64;
            let cdf = 0.5 * (1.0 + libm::erf(v * std::f64::consts::FRAC_1_SQRT_2));
            let pdf = (-0.5 * v * v).exp() / (2.0 * std::f64::consts::PI).sqrt();
            assert!(
                (y[i] as f64 - v * cdf).abs() <= 1e-6 * (1.0 + (v * cdf).abs()),
                "{v}"
            );
            let want = g[i] as f64 * (cdf + v * pdf);
            assert!(
                (dy[i] as f64 - want).abs() <= 1e-6 * (1.0 + want.abs()),
                "{v}"
            );
        }
    }

    #[test]
    fn exp_f32_special_values() {
        assert!(exp_f32(f32::NAN).is_nan());
        assert!(exp_f32(-f32::NAN).is_nan());
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_f32(-1000.0), 0.0);
        assert_eq!(exp_f32(-104.0), 0.0);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp_f32(88.73), f32::INFINITY);
        assert_eq!(exp_f32(1e30), f32::INFINITY);
        assert!(exp_f32(88.72).is_finite());
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(-0.0), 1.0);
        // Subnormal results are not flushed.
        let tiny = exp_f32(-100.0);
        assert!(tiny > 0.0 && tiny < f32::MIN_POSITIVE);
        // The vectorized primitives see the same values.
        let xs = [f32::NAN, f32::NEG_INFINITY, 0.0, 1.0, -100.0, 100.0];
        let mut out = [0.0f32; 6];
        let total = f32::exp_sub_sum(&xs[1..5], &mut out[1..5], 0.0);
        assert_eq!(&out[1..5], &[0.0, 1.0, exp_f32(1.0), tiny]);
        assert_eq!(total, f32::exp_sub_total(&xs[1..5], 0.0));
        let mut acc = [0.0f32; 6];
        f32::exp_sub_acc(&xs, &[0.0; 6], &mut out, &mut acc);
        assert!(out[0].is_nan() && out[5].is_infinite() && out[1] == 0.0);
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
