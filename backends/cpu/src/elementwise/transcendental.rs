//! Vectorizable f32 `sin`, `cos`, `log`, `log2`, `log10` and `exp` over slices, for
//! the contiguous-f32 fast path of the unary kernels.
//!
//! Owns: the branch-free polynomial forms and their slice kernels (AVX-512,
//! AVX2+FMA and baseline builds via [`multiversion`]). Must not: know about
//! tensors, layouts or dtypes other than f32.
//!
//! Each function is written as straight-line arithmetic and compare-and-pick so
//! that a loop over it vectorizes; accuracy (checked against f64 in the tests) is
//! within 2 ulp, comparable to the SLEEF 1-ulp routines PyTorch's CPU kernels use.

use crate::nn::vecmath::{exp_f32, has_avx2, has_avx512, multiversion};

/// Below this magnitude the three-part Cody-Waite reduction of `sin`/`cos` is
/// accurate (checked exhaustively below it by the tests' sampled sweep and once
/// over every f32); above it, and for inf/NaN, the slice kernels recompute the
/// element in f64, whose library reduction is exact for any f32 input.
const TRIG_LIMIT: f32 = 65_536.0;

/// `sin(x)` (`cos_shift` 0) or `cos(x)` (`cos_shift` 1) for `|x| < TRIG_LIMIT`: `x`
/// reduced by the nearest multiple `k` of pi/2 (pi/2 in three f32 parts, each
/// product fused, so the remainder `r` in [-pi/4, pi/4] is exact to well under an
/// ulp), then sin or cos of `r` by its Taylor polynomial (the first dropped term is
/// under 2^-28 of the result there) picked and signed by the quadrant.
#[inline(always)]
fn sin_cos_reduced(x: f32, cos_shift: i32) -> f32 {
    const FRAC_2_PI: f32 = std::f32::consts::FRAC_2_PI;
    const P1: f32 = 1.570_796_4;
    const P2: f32 = -4.371_139e-8;
    const P3: f32 = -1.715_124_5e-15;
    // 1.5 * 2^23: adding it rounds to an integer held in the low mantissa bits.
    const MAGIC: f32 = 12_582_912.0;
    let t = x.mul_add(FRAC_2_PI, MAGIC);
    let k = t - MAGIC;
    let q = (t.to_bits() as i32)
        .wrapping_sub(MAGIC.to_bits() as i32)
        .wrapping_add(cos_shift);
    let r = (-k).mul_add(P1, x);
    let r = (-k).mul_add(P2, r);
    let r = (-k).mul_add(P3, r);
    let r2 = r * r;
    // sin r = r + r^3 (-1/6 + r^2/120 - r^4/5040 + r^6/362880)
    let ps = r2
        .mul_add(2.755_732e-6, -1.984_127e-4)
        .mul_add(r2, 8.333_333e-3)
        .mul_add(r2, -0.166_666_67);
    let s = (r * r2).mul_add(ps, r);
    // cos r = 1 + r^2 (-1/2 + r^2 (1/24 - r^2/720 + r^4/40320 - r^6/3628800))
    let pc = r2
        .mul_add(-2.755_732e-7, 2.480_158_7e-5)
        .mul_add(r2, -1.388_888_9e-3)
        .mul_add(r2, 4.166_666_8e-2)
        .mul_add(r2, -0.5);
    let c = r2.mul_add(pc, 1.0);
    let v = if q & 1 == 1 { c } else { s };
    // Quadrants 2 and 3 negate: bit 1 of q moved to the sign bit.
    let v = f32::from_bits(v.to_bits() ^ (((q as u32) & 2) << 30));
    // sin(-0) = -0, whose sign the reduction's sums lose.
    if cos_shift == 0 && x == 0.0 {
        x
    } else {
        v
    }
}

/// `y[i] = sin(x[i])` (`cos_shift` 0) or `cos(x[i])` (1) over blocks: the
/// polynomial for the whole block, then the rare large or non-finite inputs again
/// in f64.
#[inline(always)]
fn sin_cos_generic(x: &[f32], y: &mut [f32], cos_shift: i32) {
    const BLOCK: usize = 256;
    for (xb, yb) in x.chunks(BLOCK).zip(y.chunks_mut(BLOCK)) {
        let mut big = false;
        for (o, &v) in yb.iter_mut().zip(xb) {
            *o = sin_cos_reduced(v, cos_shift);
            let reduced = v.abs() < TRIG_LIMIT; // false for NaN too
            big |= !reduced;
        }
        if big {
            for (o, &v) in yb.iter_mut().zip(xb) {
                let reduced = v.abs() < TRIG_LIMIT;
                if !reduced {
                    let w = v as f64;
                    *o = if cos_shift == 0 { w.sin() } else { w.cos() } as f32;
                }
            }
        }
    }
}

/// The multiplier of `e` (the binary exponent) and of `ln(m)` (the mantissa's
/// natural log) that make a logarithm of some base, each split in a high and a
/// low part: the high part of `E` has few bits, so `e * E.0` is exact.
struct LogBase {
    e: (f32, f32),
    m: (f32, f32),
}

const LN: LogBase = LogBase {
    e: (0.693_115_23, 3.194_618_3e-5),
    m: (1.0, 0.0),
};
const LOG2: LogBase = LogBase {
    e: (1.0, 0.0),
    m: (std::f32::consts::LOG2_E, 1.925_963e-8),
};
const LOG10: LogBase = LogBase {
    e: (0.301_025_4, 4.605_039e-6),
    m: (std::f32::consts::LOG10_E, -1.010_305e-8),
};

/// A logarithm of f32 `x` in `base`: `x = 2^e m` with `m` in [sqrt(1/2), sqrt(2)),
/// `ln(m) = 2 atanh(s)` with `s = (m - 1) / (m + 1)` (|s| < 0.172, so its odd
/// series to s^11 is exact to under 2^-30), `s` carried as a high part and the
/// remainder of its rounding (as is `m + 1`), and the sum
/// `e * E + ln(m) * M` formed high parts first, so the result rounds about once.
/// Subnormals are scaled by 2^23 first; `x < 0` and NaN give NaN, 0 gives -inf,
/// +inf gives +inf.
#[inline(always)]
fn log_any(x: f32, base: &LogBase) -> f32 {
    const SQRT_HALF_BITS: i32 = 0x3f35_04f3;
    let sub = x < f32::MIN_POSITIVE;
    let xs = if sub { x * 8_388_608.0 } else { x };
    let bits = xs.to_bits() as i32;
    let k = bits.wrapping_sub(SQRT_HALF_BITS) >> 23;
    let m = f32::from_bits(bits.wrapping_sub(k << 23) as u32);
    let e = (k - if sub { 23 } else { 0 }) as f32;
    let f = m - 1.0; // exact: m is within a factor 2 of 1
    let d = m + 1.0;
    let d_err = m - (d - 1.0); // m + 1 = d + d_err exactly
    let rcp = 1.0 / d;
    let s = f * rcp;
    let rem = (-s).mul_add(d, f); // f - s d, exact
    let s_lo = (-s).mul_add(d_err, rem) * rcp;
    let s2 = s * s;
    // 2 atanh(s) = 2s + s^3 (2/3 + 2 s^2/5 + 2 s^4/7 + 2 s^6/9 + 2 s^8/11)
    let p = s2
        .mul_add(0.181_818_18, 0.222_222_22)
        .mul_add(s2, 0.285_714_3)
        .mul_add(s2, 0.4)
        .mul_add(s2, 0.666_666_7);
    let u = 2.0 * s;
    let v = (s * s2).mul_add(p, 2.0 * s_lo);
    // ln(m) = u + v; the result is e E + (u + v) M.
    let a = e * base.e.0;
    let pm = u * base.m.0;
    let pm_err = u.mul_add(base.m.0, -pm);
    let small = e.mul_add(base.e.1, u.mul_add(base.m.1, v.mul_add(base.m.0, pm_err)));
    let hi = a + pm;
    let lo = (a - hi) + pm; // |a| >= |pm| whenever a != 0
    let y = hi + (lo + small);
    let y = if x == f32::INFINITY { x } else { y };
    let y = if x == 0.0 { f32::NEG_INFINITY } else { y };
    if x >= 0.0 {
        y
    } else {
        f32::NAN
    }
}

multiversion!(sin_mv(x: &[f32], y: &mut [f32]) -> () { sin_cos_generic(x, y, 0) });
multiversion!(cos_mv(x: &[f32], y: &mut [f32]) -> () { sin_cos_generic(x, y, 1) });
multiversion!(log_mv(x: &[f32], y: &mut [f32]) -> () {
    for (o, &v) in y.iter_mut().zip(x) {
        *o = log_any(v, &LN);
    }
});
multiversion!(log2_mv(x: &[f32], y: &mut [f32]) -> () {
    for (o, &v) in y.iter_mut().zip(x) {
        *o = log_any(v, &LOG2);
    }
});
multiversion!(log10_mv(x: &[f32], y: &mut [f32]) -> () {
    for (o, &v) in y.iter_mut().zip(x) {
        *o = log_any(v, &LOG10);
    }
});
multiversion!(exp_mv(x: &[f32], y: &mut [f32]) -> () {
    for (o, &v) in y.iter_mut().zip(x) {
        *o = exp_f32(v);
    }
});

/// `y[i] = sin(x[i])` over f32 slices (up to the shorter one).
pub(crate) fn sin_f32_slice(x: &[f32], y: &mut [f32]) {
    sin_mv(x, y)
}
/// `y[i] = cos(x[i])`.
pub(crate) fn cos_f32_slice(x: &[f32], y: &mut [f32]) {
    cos_mv(x, y)
}
/// `y[i] = ln(x[i])`.
pub(crate) fn log_f32_slice(x: &[f32], y: &mut [f32]) {
    log_mv(x, y)
}
/// `y[i] = log2(x[i])`.
pub(crate) fn log2_f32_slice(x: &[f32], y: &mut [f32]) {
    log2_mv(x, y)
}
/// `y[i] = log10(x[i])`.
pub(crate) fn log10_f32_slice(x: &[f32], y: &mut [f32]) {
    log10_mv(x, y)
}
/// `y[i] = exp(x[i])`.
pub(crate) fn exp_f32_slice(x: &[f32], y: &mut [f32]) {
    exp_mv(x, y)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance of `got` from the exact `want` in units of the last place of the f32
    /// nearest to `want` (subnormals: the smallest subnormal).
    fn ulps(got: f32, want: f64) -> f64 {
        if got.is_nan() && want.is_nan() {
            return 0.0;
        }
        if got.is_infinite() || want.is_infinite() {
            return if got as f64 == want {
                0.0
            } else {
                f64::INFINITY
            };
        }
        let w = want as f32;
        let next = f32::from_bits(w.abs().to_bits() + 1);
        let ulp = (next as f64 - w.abs() as f64).max(f64::from(f32::from_bits(1)));
        (got as f64 - want).abs() / ulp
    }

    /// Runs the slice kernel `k` over `xs` and returns the worst ulp distance from
    /// `exact`, asserting each is within `bound`.
    fn worst(xs: &[f32], k: fn(&[f32], &mut [f32]), exact: fn(f64) -> f64, bound: f64) -> f64 {
        let mut ys = vec![0.0f32; xs.len()];
        k(xs, &mut ys);
        let mut w = 0.0f64;
        for (&x, &y) in xs.iter().zip(&ys) {
            let e = ulps(y, exact(x as f64));
            assert!(
                e <= bound,
                "x={x:e} ({:#x}): got {y:e}, {e} ulp",
                x.to_bits()
            );
            w = w.max(e);
        }
        w
    }

    /// Every `step`-th bit pattern of the non-negative f32s up to `hi`, both signs.
    fn sweep(hi: f32, step: usize) -> Vec<f32> {
        (0..hi.to_bits())
            .step_by(step)
            .flat_map(|b| [f32::from_bits(b), -f32::from_bits(b)])
            .collect()
    }

    #[test]
    fn sin_and_cos_are_within_two_ulp() {
        let mut xs = sweep(1e6, 997);
        // Near multiples of pi/2, where the reduction cancels most.
        for k in 1..42_000i32 {
            let c = (k as f64 * std::f64::consts::FRAC_PI_2) as f32;
            xs.extend([
                c,
                f32::from_bits(c.to_bits() + 1),
                f32::from_bits(c.to_bits() - 1),
            ]);
        }
        let ws = worst(&xs, sin_f32_slice, f64::sin, 2.0);
        let wc = worst(&xs, cos_f32_slice, f64::cos, 2.0);
        assert!(ws > 0.0 && wc > 0.0);
    }

    #[test]
    fn sin_and_cos_special_values() {
        let xs = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            1e30,
            -3e9,
        ];
        let mut s = [0.0f32; 7];
        let mut c = [0.0f32; 7];
        sin_f32_slice(&xs, &mut s);
        cos_f32_slice(&xs, &mut c);
        assert!(s[..3].iter().all(|v| v.is_nan()) && c[..3].iter().all(|v| v.is_nan()));
        assert!(s[3] == 0.0 && s[3].is_sign_positive());
        assert!(s[4] == 0.0 && s[4].is_sign_negative());
        assert_eq!((c[3], c[4]), (1.0, 1.0));
        assert_eq!(s[5], f64::from(1e30f32).sin() as f32);
        assert_eq!(c[6], f64::from(-3e9f32).cos() as f32);
    }

    #[test]
    fn logs_are_within_two_ulp() {
        // Every positive f32 step (subnormals and the largest finite included).
        let mut xs: Vec<f32> = (1..f32::MAX.to_bits())
            .step_by(1021)
            .map(f32::from_bits)
            .collect();
        let mut x = 0.5f32;
        while x < 2.0 {
            xs.push(x);
            x = f32::from_bits(x.to_bits() + 37);
        }
        xs.push(f32::MAX);
        assert!(worst(&xs, log_f32_slice, f64::ln, 2.0) > 0.0);
        assert!(worst(&xs, log2_f32_slice, f64::log2, 2.0) > 0.0);
        assert!(worst(&xs, log10_f32_slice, f64::log10, 2.0) > 0.0);
    }

    #[test]
    fn logs_special_values_and_exact_powers() {
        let xs = [
            f32::NAN,
            -1.0,
            -0.0,
            0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1.0,
        ];
        for k in [log_f32_slice, log2_f32_slice, log10_f32_slice] {
            let mut y = [0.0f32; 7];
            k(&xs, &mut y);
            assert!(y[0].is_nan() && y[1].is_nan() && y[5].is_nan());
            assert_eq!(
                &y[2..5],
                &[f32::NEG_INFINITY, f32::NEG_INFINITY, f32::INFINITY]
            );
            assert!(y[6] == 0.0 && y[6].is_sign_positive());
        }
        // 2^e from its bits (powi overflows 2^149 on the way to 2^-149).
        let pow2 = |e: i32| {
            if e >= -126 {
                f32::from_bits(((e + 127) as u32) << 23)
            } else {
                f32::from_bits(1 << (e + 149))
            }
        };
        let pows: Vec<f32> = (-149..128).map(pow2).collect();
        let mut y = vec![0.0f32; pows.len()];
        log2_f32_slice(&pows, &mut y);
        for (i, &v) in y.iter().enumerate() {
            assert_eq!(v, i as f32 - 149.0);
        }
        let tens = [1.0f32, 10.0, 100.0, 1000.0, 1e4, 1e5, 1e6];
        let mut y = [0.0f32; 7];
        log10_f32_slice(&tens, &mut y);
        assert_eq!(y, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    }

    /// Every f32 below the reduction limit (and every positive f32 for the logs):
    /// too slow for the default run; `cargo test --release -p opal-cpu
    /// transcendental -- --ignored`.
    #[test]
    #[ignore]
    fn exhaustive_sin_cos_log() {
        let chunks = |hi: u32| {
            (0..hi).step_by(1 << 22).map(move |lo| {
                (lo..hi.min(lo + (1 << 22)))
                    .map(f32::from_bits)
                    .collect::<Vec<f32>>()
            })
        };
        for chunk in chunks(TRIG_LIMIT.to_bits()) {
            let both: Vec<f32> = chunk.iter().flat_map(|&v| [v, -v]).collect();
            worst(&both, sin_f32_slice, f64::sin, 2.0);
            worst(&both, cos_f32_slice, f64::cos, 2.0);
        }
        for chunk in chunks(f32::INFINITY.to_bits()) {
            worst(&chunk, log_f32_slice, f64::ln, 2.0);
            worst(&chunk, log2_f32_slice, f64::log2, 2.0);
            worst(&chunk, log10_f32_slice, f64::log10, 2.0);
        }
    }

    #[test]
    fn exp_slice_matches_the_scalar_form() {
        let xs: Vec<f32> = (-400..400).map(|i| i as f32 * 0.25).collect();
        let mut y = vec![0.0f32; xs.len()];
        exp_f32_slice(&xs, &mut y);
        for (&x, &v) in xs.iter().zip(&y) {
            assert_eq!(v.to_bits(), exp_f32(x).to_bits());
        }
    }
}
