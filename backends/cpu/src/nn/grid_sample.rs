//! 2-d grid sampling: `grid_sampler_2d` reads `input` `[N, C, H, W]` at the
//! normalized positions of `grid` `[N, Ho, Wo, 2]` (bilinear, nearest or bicubic,
//! with zero, border or reflection padding), and `grid_sampler_2d_backward` gives
//! the gradients of both. The forward runs (batch x channel) planes in parallel,
//! the backward runs batch entries in parallel (each owns its slices of both
//! gradients).
//!
//! Owns: the coordinate mapping (unnormalize, clip, reflect, with their
//! derivatives) and the three interpolations. Must not: restate the argument
//! checks or the result shape (`opal::rules::sampling`).

use super::io::{by_f32_f64, make_output, with_slice, Compute};
use crate::dtype_dispatch::Elem;
use crate::parallel::{fork_chunks_mut, fork_each_mut};
use opal::rules::sampling::{GridSample, GridSampleBackward, Interpolation, Padding};
use opal::{DType, Result, Tensor};

/// Bicubic convolution's `A` (the same as PyTorch's and OpenCV's).
const CUBIC_A: f64 = -0.75;

fn c<C: Compute>(v: f64) -> C {
    <C as Elem>::from_f64(v)
}

/// A whole pixel coordinate as an index (saturating; NaN reads as 0, which the
/// bounds checks and the NaN weights then handle).
fn idx<C: Compute>(v: C) -> i64 {
    <C as Elem>::to_i64(v)
}

/// The four cubic-convolution weights of the taps at offsets -1, 0, 1, 2 from a
/// sample `t` (in `[0, 1)`) past the first, each step's result passed through
/// `q` (the sampler's rounding).
fn cubic_weights<C: Compute>(t: C, q: impl Fn(C) -> C) -> [C; 4] {
    let a: C = c(CUBIC_A);
    let one = C::one();
    let near = |x: C| q(q(q(q(q((a + c(2.0)) * x) - (a + c(3.0))) * x) * x) + one);
    let far = |x: C| q(q(q(q(q(q(a * x) - a * c(5.0)) * x) + a * c(8.0)) * x) - a * c(4.0));
    let rest = q(one - t);
    [far(q(t + one)), near(t), near(rest), far(q(rest + one))]
}

/// Derivatives of [`cubic_weights`] with respect to `t`, negated (as the
/// backward subtracts them).
fn cubic_weight_grads<C: Compute>(t: C) -> [C; 4] {
    let a: C = c(CUBIC_A);
    let one = C::one();
    let x0 = -one - t;
    let x1 = -t;
    let x2 = one - t;
    let x3 = c::<C>(2.0) - t;
    [
        (c::<C>(-3.0) * a * x0 - c::<C>(10.0) * a) * x0 - c::<C>(8.0) * a,
        (c::<C>(-3.0) * (a + c(2.0)) * x1 - c::<C>(2.0) * (a + c(3.0))) * x1,
        (c::<C>(3.0) * (a + c(2.0)) * x2 - c::<C>(2.0) * (a + c(3.0))) * x2,
        (c::<C>(3.0) * a * x3 - c::<C>(10.0) * a) * x3 + c::<C>(8.0) * a,
    ]
}

/// The sampling setup shared by every pixel.
#[derive(Clone, Copy)]
struct Sampler {
    interp: Interpolation,
    pad: Padding,
    align_corners: bool,
    h: i64,
    w: i64,
    /// float16 or bfloat16 for a forward of such an input: PyTorch's CPU kernel
    /// computes every step of it in that type, so each step's result is rounded
    /// to it here too (the f32 steps alone differ from PyTorch by up to 0.2 in
    /// bfloat16).
    steps_in: Option<DType>,
}

impl Sampler {
    /// `v` rounded to [`Sampler::steps_in`]; unchanged when that is `None`.
    #[inline]
    fn q<C: Compute>(&self, v: C) -> C {
        match self.steps_in {
            None => v,
            Some(DType::F16) => c(half::f16::from_f64(<C as Elem>::to_f64(v)).to_f64()),
            Some(_) => c(half::bf16::from_f64(<C as Elem>::to_f64(v)).to_f64()),
        }
    }

    /// Normalized `[-1, 1]` coordinate to pixel units, and its derivative.
    fn unnormalize<C: Compute>(&self, v: C, size: i64) -> (C, C) {
        let s: C = c(size as f64);
        let two: C = c(2.0);
        let q = |v| self.q(v);
        if self.align_corners {
            (
                q(q(q(v + C::one()) / two) * (s - C::one())),
                (s - C::one()) / two,
            )
        } else {
            (q(q(q(q(v + C::one()) * s) - C::one()) / two), s / two)
        }
    }

    /// Applies the padding mode to a pixel coordinate; returns it with its
    /// derivative.
    fn pad_coordinate<C: Compute>(&self, x: C, size: i64) -> (C, C) {
        let clip = |x: C| {
            let hi: C = c((size - 1) as f64);
            if x <= C::default() {
                (C::default(), C::default())
            } else if x >= hi {
                (hi, C::default())
            } else {
                (x, C::one())
            }
        };
        match self.pad {
            Padding::Zeros => (x, C::one()),
            Padding::Border => clip(x),
            Padding::Reflection => {
                let (lo2, hi2) = if self.align_corners {
                    (0, 2 * (size - 1))
                } else {
                    (-1, 2 * size - 1)
                };
                if lo2 == hi2 {
                    return (C::default(), C::default());
                }
                let min: C = c(lo2 as f64 / 2.0);
                let span: C = c((hi2 - lo2) as f64 / 2.0);
                let q = |v| self.q(v);
                let mut v = q(x - min);
                let mut sign = C::one();
                if v < C::default() {
                    sign = -sign;
                    v = -v;
                }
                let extra = q(v % span);
                let flips = idx(q(v / span).floor());
                let (r, g) = if flips % 2 == 0 {
                    (q(extra + min), sign)
                } else {
                    (q(q(span - extra) + min), -sign)
                };
                let (r, gc) = clip(r);
                (r, g * gc)
            }
        }
    }

    /// The source pixel coordinate of normalized `v` along a dim of `size`, with
    /// its derivative.
    fn source<C: Compute>(&self, v: C, size: i64) -> (C, C) {
        let (u, gu) = self.unnormalize(v, size);
        let (p, gp) = self.pad_coordinate(u, size);
        (p, gu * gp)
    }

    /// The flat index of pixel `(x, y)`, if inside the image.
    #[inline]
    fn at(&self, x: i64, y: i64) -> Option<usize> {
        ((0..self.w).contains(&x) && (0..self.h).contains(&y)).then(|| (y * self.w + x) as usize)
    }

    /// Index of the integer tap `(x, y)` of bicubic sampling after padding.
    fn tap<C: Compute>(&self, x: i64, y: i64) -> Option<usize> {
        let px = self.pad_coordinate(c::<C>(x as f64), self.w).0;
        let py = self.pad_coordinate(c::<C>(y as f64), self.h).0;
        self.at(idx(px), idx(py))
    }

    /// The four bilinear taps of `(ix, iy)`: (index, weight, d weight / d ix,
    /// d weight / d iy).
    fn bilinear<C: Compute>(&self, ix: C, iy: C) -> [(Option<usize>, C, C, C); 4] {
        let q = |v| self.q(v);
        let (x0, y0) = (ix.floor(), iy.floor());
        let (x1, y1) = (q(x0 + C::one()), q(y0 + C::one()));
        let (xi, yi) = (idx(x0), idx(y0));
        // Distances to the far edges (`e`) and from the near ones (`w`).
        let (ex, ey, wx, wy) = (q(x1 - ix), q(y1 - iy), q(ix - x0), q(iy - y0));
        [
            (self.at(xi, yi), q(ex * ey), -ey, -ex),
            (self.at(xi.saturating_add(1), yi), q(wx * ey), ey, -wx),
            (self.at(xi, yi.saturating_add(1)), q(ex * wy), -wy, ex),
            (
                self.at(xi.saturating_add(1), yi.saturating_add(1)),
                q(wx * wy),
                wy,
                wx,
            ),
        ]
    }

    fn nearest<C: Compute>(&self, ix: C, iy: C) -> Option<usize> {
        let r = |v: C| <C as Elem>::to_f64(v).round_ties_even() as i64;
        self.at(r(ix), r(iy))
    }

    /// One sample of plane `img` at normalized `(gx, gy)`.
    fn sample<C: Compute>(&self, img: &[C], gx: C, gy: C) -> C {
        let read = |i: Option<usize>| i.map_or(C::default(), |i| img[i]);
        match self.interp {
            Interpolation::Bilinear => {
                let (ix, iy) = (self.source(gx, self.w).0, self.source(gy, self.h).0);
                self.bilinear(ix, iy)
                    .iter()
                    .fold(C::default(), |acc, &(i, wt, _, _)| {
                        self.q(acc + self.q(read(i) * wt))
                    })
            }
            Interpolation::Nearest => {
                let (ix, iy) = (self.source(gx, self.w).0, self.source(gy, self.h).0);
                read(self.nearest(ix, iy))
            }
            Interpolation::Bicubic => {
                let (ix, iy) = (
                    self.unnormalize(gx, self.w).0,
                    self.unnormalize(gy, self.h).0,
                );
                let (x0, y0) = (ix.floor(), iy.floor());
                let q = |v| self.q(v);
                let wx = cubic_weights(q(ix - x0), q);
                let wy = cubic_weights(q(iy - y0), q);
                let (xi, yi) = (idx(x0).saturating_sub(1), idx(y0).saturating_sub(1));
                let mut acc = C::default();
                for (i, &wyi) in wy.iter().enumerate() {
                    let row = wx.iter().enumerate().fold(C::default(), |r, (j, &wxj)| {
                        let tap =
                            self.tap::<C>(xi.saturating_add(j as i64), yi.saturating_add(i as i64));
                        q(r + q(read(tap) * wxj))
                    });
                    acc = q(acc + q(row * wyi));
                }
                acc
            }
        }
    }
}

fn sampler(p: &GridSample) -> Sampler {
    let s = p.input.sizes();
    Sampler {
        interp: p.interpolation,
        pad: p.padding,
        align_corners: p.align_corners,
        h: s[2],
        w: s[3],
        steps_in: matches!(p.input.dtype(), DType::F16 | DType::BF16).then(|| p.input.dtype()),
    }
}

/// Samples `input` at the positions of `grid` (arguments checked by
/// [`opal::rules::sampling::grid_sampler_2d`]).
pub fn grid_sampler_2d(p: GridSample) -> Result<Tensor> {
    let s = sampler(&p);
    let GridSample {
        input, grid, shape, ..
    } = p;
    fn run<C: Compute>(input: &Tensor, grid: &Tensor, shape: &[i64], s: Sampler) -> Result<Tensor> {
        let ch = shape[1] as usize;
        let plane_in = (s.h * s.w) as usize;
        let plane_out = (shape[2] * shape[3]) as usize;
        with_slice::<C, _>(input, |xs| {
            with_slice::<C, _>(grid, |gs| {
                make_output::<C>(shape, input.dtype(), |ys| {
                    if plane_out == 0 {
                        return Ok(());
                    }
                    let per = (1024 / plane_out).max(1);
                    fork_chunks_mut(ys, per * plane_out, |t, chunk| {
                        for (k, dst) in chunk.chunks_mut(plane_out).enumerate() {
                            let p = t * per + k;
                            let img = &xs[p * plane_in..(p + 1) * plane_in];
                            let g = &gs[(p / ch) * plane_out * 2..][..plane_out * 2];
                            for (o, xy) in dst.iter_mut().zip(g.chunks_exact(2)) {
                                *o = s.sample(img, xy[0], xy[1]);
                            }
                        }
                    });
                    Ok(())
                })
            })
        })
    }
    by_f32_f64!(input.dtype(), run(input, grid, &shape, s))
}

/// Gradients of one batch entry: adds into `gin` (`[C, H, W]`) and writes `ggrid`
/// (`[Ho, Wo, 2]`).
fn backward_entry<C: Compute>(
    s: &Sampler,
    gout: &[C],
    img: &[C],
    grid: &[C],
    gin: &mut [C],
    ggrid: &mut [C],
) {
    let plane_in = (s.h * s.w) as usize;
    let plane_out = grid.len() / 2;
    let channels = gout.len().checked_div(plane_out).unwrap_or(0);
    gin.fill(C::default());
    for (p, (xy, gg)) in grid
        .chunks_exact(2)
        .zip(ggrid.chunks_exact_mut(2))
        .enumerate()
    {
        let (mut gx, mut gy) = (C::default(), C::default());
        let (gxm, gym);
        match s.interp {
            Interpolation::Bilinear => {
                let (ix, mx) = s.source(xy[0], s.w);
                let (iy, my) = s.source(xy[1], s.h);
                (gxm, gym) = (mx, my);
                let taps = s.bilinear(ix, iy);
                for ch in 0..channels {
                    let go = gout[ch * plane_out + p];
                    let (im, gi) = (&img[ch * plane_in..], &mut gin[ch * plane_in..]);
                    for &(i, wt, dx, dy) in &taps {
                        if let Some(i) = i {
                            gi[i] = gi[i] + wt * go;
                            gx = gx + dx * im[i] * go;
                            gy = gy + dy * im[i] * go;
                        }
                    }
                }
            }
            Interpolation::Nearest => {
                let (ix, iy) = (s.source(xy[0], s.w).0, s.source(xy[1], s.h).0);
                (gxm, gym) = (C::default(), C::default());
                if let Some(i) = s.nearest(ix, iy) {
                    for ch in 0..channels {
                        let gi = &mut gin[ch * plane_in + i];
                        *gi = *gi + gout[ch * plane_out + p];
                    }
                }
            }
            Interpolation::Bicubic => {
                let (ix, mx) = s.unnormalize(xy[0], s.w);
                let (iy, my) = s.unnormalize(xy[1], s.h);
                (gxm, gym) = (mx, my);
                let (x0, y0) = (ix.floor(), iy.floor());
                let (wx, wy) = (cubic_weights(ix - x0, |v| v), cubic_weights(iy - y0, |v| v));
                let (dwx, dwy) = (cubic_weight_grads(ix - x0), cubic_weight_grads(iy - y0));
                let (xi, yi) = (idx(x0).saturating_sub(1), idx(y0).saturating_sub(1));
                for i in 0..4 {
                    for j in 0..4 {
                        let Some(at) =
                            s.tap::<C>(xi.saturating_add(j as i64), yi.saturating_add(i as i64))
                        else {
                            continue;
                        };
                        for ch in 0..channels {
                            let go = gout[ch * plane_out + p];
                            let v = img[ch * plane_in + at];
                            let gi = &mut gin[ch * plane_in + at];
                            *gi = *gi + go * wx[j] * wy[i];
                            gx = gx - v * dwx[j] * wy[i] * go;
                            gy = gy - v * dwy[i] * wx[j] * go;
                        }
                    }
                }
            }
        }
        gg[0] = gxm * gx;
        gg[1] = gym * gy;
    }
}

/// Gradients of `grid_sampler_2d` for `input` (undefined unless
/// `output_mask[0]`) and `grid`.
pub fn grid_sampler_2d_backward(p: GridSampleBackward) -> Result<(Tensor, Tensor)> {
    // The gradients compute in f32 for float16 and bfloat16 inputs.
    let s = Sampler {
        steps_in: None,
        ..sampler(&p.forward)
    };
    let (grad_output, input, grid) = (p.grad_output, p.forward.input, p.forward.grid);
    fn run<C: Compute>(t: [&Tensor; 3], s: Sampler) -> Result<(Tensor, Tensor)> {
        let [go, input, grid] = t;
        let n = input.sizes()[0].max(1) as usize;
        let mut gin = None;
        let ggrid = make_output::<C>(grid.sizes(), grid.dtype(), |gg| {
            gin = Some(make_output::<C>(input.sizes(), input.dtype(), |gi| {
                with_slice::<C, _>(go, |gos| {
                    with_slice::<C, _>(input, |xs| {
                        with_slice::<C, _>(grid, |gs| {
                            let (li, lg, lo) = (xs.len() / n, gs.len() / n, gos.len() / n);
                            let mut entries: Vec<_> = gi
                                .chunks_mut(li.max(1))
                                .zip(gg.chunks_mut(lg.max(1)))
                                .enumerate()
                                .collect();
                            fork_each_mut(&mut entries, |(b, (gin, ggrid))| {
                                let b = *b;
                                let (src, grd) = (&xs[b * li..][..li], &gs[b * lg..][..lg]);
                                backward_entry(&s, &gos[b * lo..][..lo], src, grd, gin, ggrid);
                            });
                            Ok(())
                        })
                    })
                })
            })?);
            Ok(())
        })?;
        Ok((gin.unwrap_or_else(Tensor::undefined), ggrid))
    }
    let (gin, ggrid) = by_f32_f64!(input.dtype(), run([grad_output, input, grid], s))?;
    let gin = if p.input_grad {
        gin
    } else {
        Tensor::undefined()
    };
    Ok((gin, ggrid))
}
