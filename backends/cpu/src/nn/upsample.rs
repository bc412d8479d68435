//! Bilinear 2-d upsampling: `upsample_bilinear2d` and `upsample_bilinear2d_backward`
//! (+ their out= forms). Inputs are 4-d `[N, C, H, W]`; f16 / bf16 compute in f32.
//!
//! Owns: the interpolation loops and their split into parallel bands. Must not:
//! check shapes or compute source positions itself (`opal::rules::upsample` does,
//! for the Meta kernels too), nor know about autograd (the gradient formula in
//! `derivatives.yaml` calls the backward op).
//!
//! Both directions are separable. Forward: each input row a band needs is first
//! interpolated along the width (once, kept while the next output rows still read
//! it), then each output row is the height-weighted sum of two such rows, a
//! vectorized loop; the result is `h0 (w0 a + w1 b) + h1 (w0 c + w1 d)`, the order
//! PyTorch's kernel uses. Backward: each input row's gradient first gathers its
//! output rows along the height (vectorized), then scatters that row along the
//! width.

use super::io::{compute_dtype, make_output, with_slice, Compute};
use crate::nn::vecmath::{has_avx2, has_avx512, multiversion};
use opal::rules::upsample::{linear_upsample_taps, Bilinear2d, LinearTap};
use opal::{DType, Result, Tensor};

/// About this many output elements per parallel task.
const TASK: usize = 1 << 16;

/// Runs every band: in parallel when the whole op touches at least a task's
/// worth of elements, else in the caller (a small image is done before threads
/// would have woken up).
fn run_jobs<J: Send>(jobs: &mut [J], work: usize, run: impl Fn(&mut J) + Sync) {
    if work < TASK {
        jobs.iter_mut().for_each(run);
    } else {
        crate::parallel::fork_each_mut(jobs, run);
    }
}

/// One dim's taps as separate index and weight arrays in the compute type.
struct Taps<C> {
    i0: Vec<usize>,
    i1: Vec<usize>,
    w0: Vec<C>,
    w1: Vec<C>,
}

impl<C: Compute> Taps<C> {
    fn new(t: &[LinearTap]) -> Self {
        let cv = |v: f64| C::from(v).unwrap_or_else(num_traits::zero::<C>);
        Taps {
            i0: t.iter().map(|t| t.i0).collect(),
            i1: t.iter().map(|t| t.i1).collect(),
            w0: t.iter().map(|t| cv(t.w0)).collect(),
            w1: t.iter().map(|t| cv(t.w1)).collect(),
        }
    }
}

/// What both directions need: whether to compute in f64, the input plane
/// `(h, w)`, and the taps along the height and the width.
struct Plan {
    f64_math: bool,
    hw: (usize, usize),
    ty: Vec<LinearTap>,
    tx: Vec<LinearTap>,
}

/// The [`Plan`] of a resize of `[.., h, w]` planes to `[.., oh, ow]`.
fn plan(op: &str, b: &Bilinear2d) -> Result<Plan> {
    let f64_math = compute_dtype(b.input.dtype(), op)? == DType::F64;
    let [h, w] = [b.input_sizes[2], b.input_sizes[3]].map(|v| v as usize);
    let [oh, ow] = [b.output_sizes[2], b.output_sizes[3]].map(|v| v as usize);
    let ([scales_h, scales_w], align_corners) = (b.scales, b.align_corners);
    Ok(Plan {
        f64_math,
        hw: (h, w),
        ty: linear_upsample_taps(h, oh, align_corners, scales_h, f64_math),
        tx: linear_upsample_taps(w, ow, align_corners, scales_w, f64_math),
    })
}

/// `row[j] = w0[j] * src[i0[j]] + w1[j] * src[i1[j]]`: one row along the width.
#[inline(always)]
fn interp_row<C: Compute>(src: &[C], tx: &Taps<C>, row: &mut [C]) {
    let taps = tx.i0.iter().zip(&tx.i1).zip(tx.w0.iter().zip(&tx.w1));
    for (o, ((&a, &b), (&wa, &wb))) in row.iter_mut().zip(taps) {
        *o = wa * src[a] + wb * src[b];
    }
}

/// `out[j] = h0 * a[j] + h1 * b[j]`.
#[inline(always)]
fn blend<C: Compute>(a: &[C], b: &[C], h0: C, h1: C, out: &mut [C]) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = h0 * x + h1 * y;
    }
}

/// Output rows `first..first + band.len() / ow` of one plane `xp` (`w` wide).
#[inline(always)]
fn forward_band<C: Compute>(
    xp: &[C],
    w: usize,
    ty: &[LinearTap],
    hy: &[(C, C)],
    tx: &Taps<C>,
    first: usize,
    band: &mut [C],
) {
    let ow = tx.i0.len();
    // The width-interpolated rows held: (input row, values), lower then upper.
    let mut lo = (usize::MAX, vec![num_traits::zero::<C>(); ow]);
    let mut hi = (usize::MAX, vec![num_traits::zero::<C>(); ow]);
    for (r, out) in band.chunks_exact_mut(ow).enumerate() {
        let t = &ty[first + r];
        if hi.0 == t.i0 {
            std::mem::swap(&mut lo, &mut hi);
        }
        if lo.0 != t.i0 {
            interp_row(&xp[t.i0 * w..(t.i0 + 1) * w], tx, &mut lo.1);
            lo.0 = t.i0;
        }
        if hi.0 != t.i1 {
            interp_row(&xp[t.i1 * w..(t.i1 + 1) * w], tx, &mut hi.1);
            hi.0 = t.i1;
        }
        let (h0, h1) = hy[first + r];
        blend(&lo.1, &hi.1, h0, h1, out);
    }
}

multiversion!(forward_band_f32(xp: &[f32], w: usize, ty: &[LinearTap], hy: &[(f32, f32)], tx: &Taps<f32>, first: usize, band: &mut [f32]) -> () {
    forward_band(xp, w, ty, hy, tx, first, band)
});

/// The element types the band kernels run in: f32 through its multiversioned
/// build, f64 through the generic one.
trait Bands: Compute {
    fn forward_band(
        xp: &[Self],
        w: usize,
        ty: &[LinearTap],
        hy: &[(Self, Self)],
        tx: &Taps<Self>,
        first: usize,
        band: &mut [Self],
    );
}
impl Bands for f32 {
    fn forward_band(
        xp: &[f32],
        w: usize,
        ty: &[LinearTap],
        hy: &[(f32, f32)],
        tx: &Taps<f32>,
        first: usize,
        band: &mut [f32],
    ) {
        forward_band_f32(xp, w, ty, hy, tx, first, band)
    }
}
impl Bands for f64 {
    fn forward_band(
        xp: &[f64],
        w: usize,
        ty: &[LinearTap],
        hy: &[(f64, f64)],
        tx: &Taps<f64>,
        first: usize,
        band: &mut [f64],
    ) {
        forward_band(xp, w, ty, hy, tx, first, band)
    }
}

fn forward<C: Bands>(x: &Tensor, oshape: [i64; 4], p: &Plan) -> Result<Tensor> {
    let ((h, w), ty, tx) = (p.hw, &p.ty[..], &p.tx[..]);
    let cv = |v: f64| C::from(v).unwrap_or_else(num_traits::zero::<C>);
    let hy: Vec<(C, C)> = ty.iter().map(|t| (cv(t.w0), cv(t.w1))).collect();
    let txc = Taps::<C>::new(tx);
    let (oh, ow) = (ty.len(), tx.len());
    // Bands of whole rows, never crossing a plane.
    let rows_per_band = (TASK / ow.max(1)).clamp(1, oh.max(1));
    with_slice::<C, _>(x, |xs| {
        make_output::<C>(&oshape, x.dtype(), |ys| {
            if ys.is_empty() {
                return Ok(());
            }
            let ys_len = ys.len();
            let planes: Vec<&mut [C]> = ys.chunks_mut(oh * ow).collect();
            let mut jobs: Vec<(usize, usize, &mut [C])> = Vec::new();
            for (pl, plane) in planes.into_iter().enumerate() {
                for (b, band) in plane.chunks_mut(rows_per_band * ow).enumerate() {
                    jobs.push((pl, b * rows_per_band, band));
                }
            }
            let run = |(pl, first, band): &mut (usize, usize, &mut [C])| {
                let xp = &xs[*pl * h * w..(*pl + 1) * h * w];
                C::forward_band(xp, w, ty, &hy, &txc, *first, band);
            };
            run_jobs(&mut jobs, ys_len, run);
            Ok(())
        })
    })
}

/// Bilinear upsampling of the last two dims to `output_size` (see
/// [`linear_upsample_taps`] for `align_corners` and the scales).
pub fn upsample_bilinear2d(b: Bilinear2d) -> Result<Tensor> {
    let p = plan("upsample_bilinear2d", &b)?;
    if p.f64_math {
        forward::<f64>(b.input, b.output_sizes, &p)
    } else {
        forward::<f32>(b.input, b.output_sizes, &p)
    }
}

/// Input rows `first..first + band.len() / w` of one plane's gradient: each row
/// `i` sums `weight * g[oy]` over the output rows `oy` that read it (`readers[i]`),
/// then scatters that along the width.
#[inline(always)]
fn backward_band<C: Compute>(
    gp: &[C],
    ow: usize,
    readers: &[Vec<(usize, C)>],
    tx: &Taps<C>,
    first: usize,
    band: &mut [C],
    w: usize,
) {
    let mut v = vec![num_traits::zero::<C>(); ow];
    for (r, gin) in band.chunks_exact_mut(w).enumerate() {
        v.iter_mut().for_each(|e| *e = num_traits::zero::<C>());
        for &(oy, wt) in &readers[first + r] {
            for (e, &g) in v.iter_mut().zip(&gp[oy * ow..(oy + 1) * ow]) {
                *e = *e + wt * g;
            }
        }
        gin.iter_mut().for_each(|e| *e = num_traits::zero::<C>());
        for (j, &g) in v.iter().enumerate() {
            gin[tx.i0[j]] = gin[tx.i0[j]] + tx.w0[j] * g;
            gin[tx.i1[j]] = gin[tx.i1[j]] + tx.w1[j] * g;
        }
    }
}

fn backward<C: Compute>(grad: &Tensor, ishape: [i64; 4], p: &Plan) -> Result<Tensor> {
    let ((h, w), ty, tx) = (p.hw, &p.ty[..], &p.tx[..]);
    let cv = |v: f64| C::from(v).unwrap_or_else(num_traits::zero::<C>);
    let (oh, ow) = (ty.len(), tx.len());
    let txc = Taps::<C>::new(tx);
    let mut readers: Vec<Vec<(usize, C)>> = vec![Vec::new(); h];
    for (oy, t) in ty.iter().enumerate() {
        readers[t.i0].push((oy, cv(t.w0)));
        readers[t.i1].push((oy, cv(t.w1)));
    }
    let rows_per_band = (TASK / ow.max(1)).clamp(1, h.max(1));
    with_slice::<C, _>(grad, |gs| {
        make_output::<C>(&ishape, grad.dtype(), |ys| {
            if ys.is_empty() {
                return Ok(());
            }
            let mut jobs: Vec<(usize, usize, &mut [C])> = Vec::new();
            for (pl, plane) in ys.chunks_mut(h * w).enumerate() {
                for (b, band) in plane.chunks_mut(rows_per_band * w).enumerate() {
                    jobs.push((pl, b * rows_per_band, band));
                }
            }
            let run = |(pl, first, band): &mut (usize, usize, &mut [C])| {
                let gp = &gs[*pl * oh * ow..(*pl + 1) * oh * ow];
                backward_band(gp, ow, &readers, &txc, *first, band, w);
            };
            run_jobs(&mut jobs, gs.len(), run);
            Ok(())
        })
    })
}

/// The gradient of [`upsample_bilinear2d`] with respect to its input: each output
/// gradient spread back over the (up to) four input positions it was read from,
/// with the same weights.
pub fn upsample_bilinear2d_backward(b: Bilinear2d) -> Result<Tensor> {
    let p = plan("upsample_bilinear2d_backward", &b)?;
    if p.f64_math {
        backward::<f64>(b.input, b.input_sizes, &p)
    } else {
        backward::<f32>(b.input, b.input_sizes, &p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opal::rules::upsample as rule;

    fn up(x: &Tensor, o: &[i64], ac: bool) -> Result<Tensor> {
        rule::upsample_bilinear2d(x, o, ac, None, None).and_then(upsample_bilinear2d)
    }

    fn up_back(g: &Tensor, o: &[i64], i: &[i64], ac: bool) -> Result<Tensor> {
        rule::upsample_bilinear2d_backward(g, o, i, ac, None, None)
            .and_then(upsample_bilinear2d_backward)
    }

    #[test]
    fn bilinear_corners_and_errors() {
        let x = Tensor::from_slice(&[0.0f64, 1.0, 2.0, 3.0], &[1, 1, 2, 2]).unwrap();
        let y = up(&x, &[3, 3], true).unwrap();
        assert_eq!(
            y.to_vec::<f64>().unwrap(),
            vec![0.0, 0.5, 1.0, 1.0, 1.5, 2.0, 2.0, 2.5, 3.0]
        );
        let y = up(&x, &[4, 4], false).unwrap();
        assert_eq!(y.to_vec::<f64>().unwrap()[..4], [0.0, 0.25, 0.75, 1.0]);
        let e = up(&x, &[0, 3], false).unwrap_err().to_string();
        assert!(
            e.contains("upsample_bilinear2d") && e.contains("output"),
            "{e}"
        );
        let i = Tensor::from_slice(&[1i64, 2], &[1, 1, 1, 2]).unwrap();
        assert!(up(&i, &[2, 2], false).is_err());
    }

    /// Each element of the forward result against a direct evaluation of the four
    /// taps, across several bands and planes, f32 and f64.
    #[test]
    fn forward_matches_the_direct_formula() {
        let (n, c, h, w, oh, ow) = (2usize, 3usize, 7usize, 9usize, 300usize, 301usize);
        let v: Vec<f64> = (0..n * c * h * w)
            .map(|i| ((i * 37) % 101) as f64 * 0.1 - 5.0)
            .collect();
        for ac in [false, true] {
            let ty = linear_upsample_taps(h, oh, ac, None, true);
            let tx = linear_upsample_taps(w, ow, ac, None, true);
            let x = Tensor::from_vec(v.clone(), &[n as i64, c as i64, h as i64, w as i64]).unwrap();
            let y = up(&x, &[oh as i64, ow as i64], ac)
                .unwrap()
                .to_vec::<f64>()
                .unwrap();
            for pl in 0..n * c {
                let xp = &v[pl * h * w..];
                for (oy, a) in ty.iter().enumerate() {
                    for (ox, b) in tx.iter().enumerate() {
                        let at = |i: usize, j: usize| xp[i * w + j];
                        let want = a.w0 * (b.w0 * at(a.i0, b.i0) + b.w1 * at(a.i0, b.i1))
                            + a.w1 * (b.w0 * at(a.i1, b.i0) + b.w1 * at(a.i1, b.i1));
                        assert_eq!(y[(pl * oh + oy) * ow + ox], want);
                    }
                }
            }
            let x32 = crate::elementwise::unary::cast(&x, DType::F32).unwrap();
            let y32 = up(&x32, &[oh as i64, ow as i64], ac)
                .unwrap()
                .to_vec::<f32>()
                .unwrap();
            for (a, b) in y32.iter().zip(&y) {
                assert!((*a as f64 - b).abs() < 1e-5, "{a} vs {b}");
            }
        }
    }

    /// The backward is the forward's adjoint: <up(x), g> == <x, up^T(g)>.
    #[test]
    fn backward_is_the_adjoint() {
        let (h, w, oh, ow) = (5usize, 6usize, 13usize, 4usize);
        let x: Vec<f64> = (0..2 * h * w)
            .map(|i| ((i * 13) % 17) as f64 - 8.0)
            .collect();
        let g: Vec<f64> = (0..2 * oh * ow)
            .map(|i| ((i * 7) % 11) as f64 - 5.0)
            .collect();
        for ac in [false, true] {
            let xt = Tensor::from_vec(x.clone(), &[1, 2, h as i64, w as i64]).unwrap();
            let gt = Tensor::from_vec(g.clone(), &[1, 2, oh as i64, ow as i64]).unwrap();
            let y = up(&xt, &[oh as i64, ow as i64], ac)
                .unwrap()
                .to_vec::<f64>()
                .unwrap();
            let gx = up_back(
                &gt,
                &[oh as i64, ow as i64],
                &[1, 2, h as i64, w as i64],
                ac,
            )
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
            let lhs: f64 = y.iter().zip(&g).map(|(a, b)| a * b).sum();
            let rhs: f64 = x.iter().zip(&gx).map(|(a, b)| a * b).sum();
            assert!(
                (lhs - rhs).abs() < 1e-9 * lhs.abs().max(1.0),
                "{lhs} vs {rhs}"
            );
        }
        let gt = Tensor::from_vec(g.clone(), &[1, 2, oh as i64, ow as i64]).unwrap();
        let bad = up_back(&gt, &[oh as i64, 5], &[1, 2, 5, 6], false);
        assert!(bad.unwrap_err().to_string().contains("grad_output"));
    }
}
