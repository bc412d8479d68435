//! Direct forward convolution for one input channel per group (depthwise, with
//! any channel multiplier): each input plane is copied once, zero-padded and split
//! by column phase, and each run of 8 or 16 output columns of a row sums all the
//! taps in registers. im2col would copy the input `kh * kw` times and then run
//! one product per channel too small for a GEMM to pay off; a tap-by-tap loop over
//! the unpadded plane spent most of its time on bounds for rows of 2 to 16
//! columns (MobileNet's and ConvNeXt's planes).
//!
//! Tiny planes of many channels (MobileNet's 2x2 to 8x8 planes of 24 to 144
//! channels, ConvNeXt's) run channels-last instead ([`channels_last`]): per
//! plane, the padded copy and the per-tap bounds cost more than its few dozen
//! multiply-adds, where one run over all channels per tap is a vector loop.
//!
//! Owns: those loops and their split over threads. Must not: know about
//! tensors, dtypes or op names (`conv` dispatches here from `conv_core::forward`).

use super::conv_core::{src_index, Geom};
use super::vecmath::{has_avx2, has_avx512, multiversion};
use crate::linalg::gemm_core::GemmFloat;
use std::any::TypeId;

/// Below this many multiply-adds a plane's work stays on the calling thread
/// (waking a helper costs about as much as this much arithmetic).
const PARALLEL_MACS: usize = 1 << 15;

/// True when [`forward`] handles `g`.
pub(crate) fn applies(g: &Geom) -> bool {
    g.cin == g.groups && g.groups > 1
}

/// `y = conv(x, w) + bias` for `g` with one input channel per group.
pub(crate) fn forward<C: GemmFloat>(x: &[C], w: &[C], bias: Option<&[C]>, g: &Geom, y: &mut [C]) {
    let osp = g.oh * g.ow;
    let planes = g.n * g.cout;
    if osp == 0 || planes == 0 {
        return;
    }
    let taps = g.kh * g.kw;
    if taps == 0 {
        // An empty kernel: every output is its channel's bias.
        for (p, out) in y.chunks_mut(osp).enumerate() {
            out.fill(bias.map_or(C::zero(), |bv| bv[p % g.cout]));
        }
        return;
    }
    if channels_last_applies(g) {
        return channels_last(x, w, bias, g, y);
    }
    let lay = Padded::new(g);
    let plane = |p: usize, scratch: &mut Vec<C>, out: &mut [C]| {
        let (b, oc) = (p / g.cout, p % g.cout);
        let ic = oc / (g.cout / g.cin);
        let src = &x[(b * g.cin + ic) * g.h * g.w..][..g.h * g.w];
        let wk = &w[oc * taps..(oc + 1) * taps];
        let b0 = bias.map_or(C::zero(), |bv| bv[oc]);
        if TypeId::of::<C>() == TypeId::of::<f32>() {
            // SAFETY: C is f32 (same TypeId), so these are the same slices
            // with their own element type.
            let cast =
                |s: &[C]| unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<f32>(), s.len()) };
            let (src, wk) = (cast(src), cast(wk));
            // SAFETY: as above, for the output plane and the scratch vector
            // (exclusively borrowed); a Vec<C> is a Vec<f32> when C is f32.
            let (out, scratch) = unsafe {
                (
                    std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<f32>(), out.len()),
                    &mut *(scratch as *mut Vec<C>).cast::<Vec<f32>>(),
                )
            };
            let b0 = cast(std::slice::from_ref(&b0))[0];
            one_plane_f32(src, wk, g, &lay, scratch, b0, out);
        } else {
            one_plane(src, wk, g, &lay, scratch, b0, out);
        }
    };
    let macs = planes * osp * taps;
    if macs < PARALLEL_MACS || rayon::current_num_threads() < 2 {
        let mut scratch = Vec::new();
        for (p, out) in y.chunks_mut(osp).enumerate() {
            plane(p, &mut scratch, out);
        }
        return;
    }
    // Two runs of planes per thread, for balance.
    let per = planes.div_ceil(2 * rayon::current_num_threads()).max(1);
    crate::parallel::fork_chunks_mut(y, per * osp, |t, ys| {
        let mut scratch = Vec::new();
        for (k, out) in ys.chunks_mut(osp).enumerate() {
            plane(t * per + k, &mut scratch, out);
        }
    });
}

/// The zero-padded copy of one input plane that the taps read: only the rows and
/// columns some output reads, the columns split by phase (`c % stride`) so that
/// every tap reads a contiguous run of one phase row for a run of output columns,
/// whatever the stride, and each phase row long enough for the last lane group.
struct Padded {
    rows: usize,
    /// Phases per row: the column stride.
    phases: usize,
    /// Elements of one phase row.
    width: usize,
    /// Output columns computed together (4, 8 or 16).
    lanes: usize,
    /// Where each kernel column's run starts in a padded row: its phase row,
    /// then its offset in it.
    taps: Vec<usize>,
    /// Every plane of the convolution skips the padded copy and sums only the
    /// taps inside the image (see [`direct_pays`]): decided once per call, the
    /// same for every plane.
    direct: bool,
}

impl Padded {
    fn new(g: &Geom) -> Padded {
        let lanes = match g.ow {
            0..=4 => 4,
            5..=8 => 8,
            _ => 16,
        };
        let width = (g.kw - 1) * g.dil[1] / g.stride[1] + g.ow.next_multiple_of(lanes);
        let (dw, sx) = (g.dil[1], g.stride[1]);
        let mut lay = Padded {
            rows: (g.oh - 1) * g.stride[0] + (g.kh - 1) * g.dil[0] + 1,
            phases: g.stride[1],
            width,
            lanes,
            taps: (0..g.kw)
                .map(|j| (j * dw % sx) * width + j * dw / sx)
                .collect(),
            direct: false,
        };
        lay.direct = direct_pays(g, &lay);
        lay
    }

    fn len(&self) -> usize {
        self.rows * self.phases * self.width
    }

    /// Copies `src` (an `h x w` plane) in, zeros where the padded position lies
    /// outside it.
    fn fill<C: GemmFloat>(&self, src: &[C], g: &Geom, dst: &mut [C]) {
        let (p, pad) = (self.phases, g.pad[1]);
        for (r, row) in dst.chunks_exact_mut(p * self.width).enumerate() {
            row.fill(C::zero());
            let Some(srow) = r
                .checked_sub(g.pad[0])
                .filter(|&iy| iy < g.h)
                .map(|iy| &src[iy * g.w..(iy + 1) * g.w])
            else {
                continue;
            };
            for (ph, prow) in row.chunks_exact_mut(self.width).enumerate() {
                // Entry q holds input column q * p + ph - pad: inside the row for
                // q in lo..hi.
                let lo = pad.saturating_sub(ph).div_ceil(p);
                let hi = (g.w + pad).saturating_sub(ph).div_ceil(p).min(self.width);
                if p == 1 && lo < hi {
                    // One phase: the row's inside part is one contiguous run.
                    prow[lo..hi].copy_from_slice(&srow[lo - pad..hi - pad]);
                    continue;
                }
                for (q, d) in prow.iter_mut().enumerate().take(hi).skip(lo) {
                    *d = srow[q * p + ph - pad];
                }
            }
        }
    }
}

multiversion!(one_plane_f32(src: &[f32], wk: &[f32], g: &Geom, lay: &Padded, scratch: &mut Vec<f32>, bias: f32, out: &mut [f32]) -> () {
    one_plane(src, wk, g, lay, scratch, bias, out)
});

/// One output plane: the input copied once into `scratch` (padded, see
/// [`Padded`]), then each run of `lanes` output columns of a row keeps its sums
/// in registers over all taps. The taps are summed in the same order as a
/// bounds-checked loop over the unpadded plane would, starting from the bias;
/// padded positions add `w * 0`.
#[inline(always)]
fn one_plane<C: GemmFloat>(
    src: &[C],
    wk: &[C],
    g: &Geom,
    lay: &Padded,
    scratch: &mut Vec<C>,
    bias: C,
    out: &mut [C],
) {
    if lay.direct {
        return direct(src, wk, g, bias, out);
    }
    scratch.resize(lay.len(), C::zero());
    lay.fill(src, g, scratch);
    match lay.lanes {
        4 => rows::<C, 4>(wk, g, lay, scratch, bias, out),
        8 => rows::<C, 8>(wk, g, lay, scratch, bias, out),
        _ => rows::<C, 16>(wk, g, lay, scratch, bias, out),
    }
}

/// True when summing only the taps inside the image costs less than the
/// padded copy and its full rows of lanes: a large kernel over a tiny plane
/// (MobileNet's 5x5 kernels over 2x2 planes touch the image with 4 of their
/// 25 taps).
fn direct_pays(g: &Geom, lay: &Padded) -> bool {
    let inside = |out: usize, k: usize, s: usize, p: usize, d: usize, size: usize| -> usize {
        (0..k)
            .map(|t| {
                let (lo, hi) = super::conv_core::valid_range(out, t, s, p, d, size);
                hi - lo
            })
            .sum()
    };
    let rows = inside(g.oh, g.kh, g.stride[0], g.pad[0], g.dil[0], g.h);
    let cols = inside(g.ow, g.kw, g.stride[1], g.pad[1], g.dil[1], g.w);
    // A scalar tap costs about two vector ones; the copy one per element.
    let direct = 2 * rows * cols;
    let padded = g.oh * g.ow.div_ceil(lay.lanes) * g.kh * g.kw + lay.len();
    direct < padded
}

/// One output plane from the unpadded input, each output summing the taps
/// inside the image in the same order as [`rows`] (padded taps add `w * 0`
/// there, which changes no sum), starting from the bias.
#[inline(always)]
fn direct<C: GemmFloat>(src: &[C], wk: &[C], g: &Geom, bias: C, out: &mut [C]) {
    for (oy, orow) in out.chunks_exact_mut(g.ow).enumerate() {
        for (ox, o) in orow.iter_mut().enumerate() {
            let mut acc = bias;
            for i in 0..g.kh {
                let iy = (oy * g.stride[0] + i * g.dil[0]) as isize - g.pad[0] as isize;
                if iy < 0 || iy >= g.h as isize {
                    continue;
                }
                let srow = &src[iy as usize * g.w..][..g.w];
                for j in 0..g.kw {
                    let ix = (ox * g.stride[1] + j * g.dil[1]) as isize - g.pad[1] as isize;
                    if ix >= 0 && (ix as usize) < g.w {
                        acc = acc + srow[ix as usize] * wk[i * g.kw + j];
                    }
                }
            }
            *o = acc;
        }
    }
}

#[inline(always)]
fn rows<C: GemmFloat, const L: usize>(
    wk: &[C],
    g: &Geom,
    lay: &Padded,
    pad: &[C],
    bias: C,
    out: &mut [C],
) {
    let sy = g.stride[0];
    let dh = g.dil[0];
    let row_len = lay.phases * lay.width;
    for (oy, orow) in out.chunks_exact_mut(g.ow).enumerate() {
        for c0 in (0..g.ow).step_by(L) {
            let mut acc = [bias; L];
            for i in 0..g.kh {
                let prow = &pad[(oy * sy + i * dh) * row_len..][..row_len];
                let wrow = &wk[i * g.kw..(i + 1) * g.kw];
                for (&wv, &t) in wrow.iter().zip(&lay.taps) {
                    // In bounds by construction (`Padded::width`).
                    let Some(seg) = prow
                        .get(t + c0..t + c0 + L)
                        .and_then(|s| <&[C; L]>::try_from(s).ok())
                    else {
                        continue;
                    };
                    for (a, &v) in acc.iter_mut().zip(seg) {
                        *a = *a + v * wv;
                    }
                }
            }
            let n = L.min(g.ow - c0);
            orow[c0..c0 + n].copy_from_slice(&acc[..n]);
        }
    }
}

/// Largest output plane that [`channels_last`] takes.
const CL_MAX_PLANE: usize = 256;
/// Most multiply-adds that [`channels_last`] takes (it runs on one thread).
const CL_MAX_MACS: usize = 1 << 21;
/// Channels summed together in registers by [`channels_last`]: one 256-bit
/// vector of f32 (a plain loop over 8 to 24 channels was left to the
/// vectorizer's scalar remainder, which takes runs shorter than its 32-wide
/// unrolled body).
const CL_LANES: usize = 8;

/// True for a convolution of one output channel per input channel, at least
/// one vector of channels wide, whose planes are tiny.
fn channels_last_applies(g: &Geom) -> bool {
    let osp = g.oh * g.ow;
    g.cout == g.cin
        && g.cin >= 8
        && g.h * g.w > 0
        && osp <= CL_MAX_PLANE
        && g.n * g.cout * osp * g.kh * g.kw <= CL_MAX_MACS
}

/// The convolution with each image moved channels-last first: every output
/// position sums, tap by tap, one run of all channels' inputs times the same
/// tap of all channels' kernels, starting from the bias, over the taps inside
/// the image in the order [`direct`] sums them (so the values are its values);
/// the result is moved back to one plane per channel.
fn channels_last<C: GemmFloat>(x: &[C], w: &[C], bias: Option<&[C]>, g: &Geom, y: &mut [C]) {
    channels_last_any(x, w, bias, g, false, y)
}

/// [`channels_last`], or with `nhwc` on images already stored channels-last
/// (`x` of `[n, h, w, c]`, `y` of `[n, oh, ow, c]`), without the moves.
pub(crate) fn channels_last_any<C: GemmFloat>(
    x: &[C],
    w: &[C],
    bias: Option<&[C]>,
    g: &Geom,
    nhwc: bool,
    y: &mut [C],
) {
    if TypeId::of::<C>() == TypeId::of::<f32>() {
        // SAFETY: C is f32 (same TypeId), so these are the same slices with
        // their own element type; `y` is exclusively borrowed.
        let (x, w, bias, y) = unsafe {
            let cast = |s: &[C]| std::slice::from_raw_parts(s.as_ptr().cast::<f32>(), s.len());
            (
                cast(x),
                cast(w),
                bias.map(cast),
                std::slice::from_raw_parts_mut(y.as_mut_ptr().cast::<f32>(), y.len()),
            )
        };
        return channels_last_f32(x, w, bias, g, nhwc, y);
    }
    channels_last_body(x, w, bias, g, nhwc, y)
}

multiversion!(channels_last_f32(x: &[f32], w: &[f32], bias: Option<&[f32]>, g: &Geom, nhwc: bool, y: &mut [f32]) -> () {
    channels_last_body(x, w, bias, g, nhwc, y)
});

#[inline(always)]
fn channels_last_body<C: GemmFloat>(
    x: &[C],
    w: &[C],
    bias: Option<&[C]>,
    g: &Geom,
    nhwc: bool,
    y: &mut [C],
) {
    let (c, hw, osp, taps) = (g.cin, g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    // Tap-major kernels: one run of `c` values per tap.
    let mut wt = vec![C::zero(); taps * c];
    transpose(w, c, taps, &mut wt);
    let start: Vec<C> = match bias {
        Some(b) => b[..c].to_vec(),
        None => vec![C::zero(); c],
    };
    // The taps inside the image for each output row and column (the same for
    // every channel), found once per call instead of once per position.
    let inside = |out: usize, k: usize, s: usize, p: usize, d: usize, size: usize| {
        (0..out)
            .map(|o| {
                (0..k)
                    .filter_map(|t| src_index(o, t, s, p, d, size).map(|ix| (t, ix)))
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
    };
    let rows = inside(g.oh, g.kh, g.stride[0], g.pad[0], g.dil[0], g.h);
    let cols = inside(g.ow, g.kw, g.stride[1], g.pad[1], g.dil[1], g.w);
    let image = |xt: &[C], yt: &mut [C]| {
        let full = c - c % CL_LANES;
        for (o, out) in yt.chunks_exact_mut(c).enumerate() {
            let (ry, rx) = (&rows[o / g.ow], &cols[o % g.ow]);
            // Each block of CL_LANES channels keeps its sums in registers over
            // all taps; the sums' order per channel is the same for the blocks
            // and the remainder (bias, then the taps row by row).
            for c0 in (0..full).step_by(CL_LANES) {
                let mut acc = [C::zero(); CL_LANES];
                acc.copy_from_slice(&start[c0..c0 + CL_LANES]);
                for &(i, iy) in ry {
                    for &(j, ix) in rx {
                        let xs = &xt[(iy * g.w + ix) * c + c0..][..CL_LANES];
                        let ws = &wt[(i * g.kw + j) * c + c0..][..CL_LANES];
                        for ((a, &v), &k) in acc.iter_mut().zip(xs).zip(ws) {
                            *a = *a + v * k;
                        }
                    }
                }
                out[c0..c0 + CL_LANES].copy_from_slice(&acc);
            }
            let tail = &mut out[full..];
            tail.copy_from_slice(&start[full..]);
            for &(i, iy) in ry {
                for &(j, ix) in rx {
                    let xs = &xt[(iy * g.w + ix) * c + full..][..c - full];
                    let ws = &wt[(i * g.kw + j) * c + full..][..c - full];
                    for ((a, &v), &k) in tail.iter_mut().zip(xs).zip(ws) {
                        *a = *a + v * k;
                    }
                }
            }
        }
    };
    if nhwc {
        for (xb, yb) in x.chunks_exact(c * hw).zip(y.chunks_exact_mut(c * osp)) {
            image(xb, yb);
        }
        return;
    }
    let mut xt = vec![C::zero(); hw * c];
    let mut yt = vec![C::zero(); osp * c];
    for (xb, yb) in x.chunks_exact(c * hw).zip(y.chunks_exact_mut(c * osp)) {
        transpose(xb, c, hw, &mut xt);
        image(&xt, &mut yt);
        transpose(&yt, osp, c, yb);
    }
}

/// `dst[j * rows + i] = src[i * cols + j]`: a row-major `rows x cols` matrix
/// transposed.
#[inline(always)]
fn transpose<C: Copy>(src: &[C], rows: usize, cols: usize, dst: &mut [C]) {
    for (i, row) in src.chunks_exact(cols).take(rows).enumerate() {
        for (j, &v) in row.iter().enumerate() {
            dst[j * rows + i] = v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::too_many_arguments)] // a convolution's geometry
    fn geom(
        n: usize,
        c: usize,
        mult: usize,
        hw: [usize; 2],
        k: [usize; 2],
        s: [usize; 2],
        p: [usize; 2],
        d: [usize; 2],
    ) -> Geom {
        // An empty kernel sizes the output like a one-element one (as `conv` does).
        let out = |i: usize| (hw[i] + 2 * p[i] - d[i] * (k[i].max(1) - 1) - 1) / s[i] + 1;
        Geom {
            n,
            cin: c,
            h: hw[0],
            w: hw[1],
            cout: c * mult,
            kh: k[0],
            kw: k[1],
            stride: s,
            pad: p,
            dil: d,
            groups: c,
            oh: out(0),
            ow: out(1),
        }
    }

    /// The definition, taps outside the image skipped.
    fn direct(x: &[f64], w: &[f64], bias: &[f64], g: &Geom) -> Vec<f64> {
        let mut y = Vec::new();
        for b in 0..g.n {
            for oc in 0..g.cout {
                let ic = oc / (g.cout / g.cin);
                for oy in 0..g.oh {
                    for ox in 0..g.ow {
                        let mut s = bias[oc];
                        for i in 0..g.kh {
                            for j in 0..g.kw {
                                let iy =
                                    (oy * g.stride[0] + i * g.dil[0]) as isize - g.pad[0] as isize;
                                let ix =
                                    (ox * g.stride[1] + j * g.dil[1]) as isize - g.pad[1] as isize;
                                if iy < 0 || ix < 0 || iy >= g.h as isize || ix >= g.w as isize {
                                    continue;
                                }
                                let xi = ((b * g.cin + ic) * g.h + iy as usize) * g.w + ix as usize;
                                s += x[xi] * w[(oc * g.kh + i) * g.kw + j];
                            }
                        }
                        y.push(s);
                    }
                }
            }
        }
        y
    }

    #[test]
    fn matches_the_definition_for_strides_padding_dilation_and_widths() {
        let cases = [
            geom(2, 3, 1, [8, 8], [7, 7], [1, 1], [3, 3], [1, 1]),
            geom(1, 4, 1, [16, 16], [3, 3], [2, 2], [1, 1], [1, 1]),
            geom(2, 2, 2, [5, 35], [5, 5], [2, 3], [2, 2], [1, 1]),
            geom(1, 3, 1, [9, 20], [3, 2], [1, 2], [0, 1], [2, 3]),
            geom(1, 2, 1, [2, 2], [5, 5], [2, 2], [2, 2], [1, 1]),
            geom(1, 2, 3, [4, 3], [1, 1], [1, 1], [0, 0], [1, 1]),
            geom(2, 3, 1, [6, 6], [0, 3], [1, 1], [0, 1], [1, 1]),
            geom(2, 5, 1, [2, 2], [5, 5], [1, 1], [2, 2], [1, 1]),
            geom(1, 3, 2, [4, 4], [5, 5], [2, 2], [2, 2], [1, 1]),
            geom(2, 4, 1, [4, 3], [3, 3], [1, 1], [1, 1], [1, 1]),
            // Channels-last: eight channels or more, tiny planes.
            geom(2, 8, 1, [2, 2], [5, 5], [1, 1], [2, 2], [1, 1]),
            geom(1, 16, 1, [8, 8], [7, 7], [1, 1], [3, 3], [1, 1]),
            geom(2, 12, 1, [8, 8], [3, 3], [2, 2], [1, 1], [1, 1]),
            geom(1, 9, 1, [9, 7], [3, 2], [1, 2], [0, 1], [2, 3]),
            geom(2, 10, 1, [4, 4], [5, 5], [2, 2], [2, 2], [1, 1]),
            // Eight channels, multiplier 2: the padded rows.
            geom(1, 8, 2, [4, 4], [3, 3], [1, 1], [1, 1], [1, 1]),
        ];
        assert!(channels_last_applies(&cases[10]) && !channels_last_applies(&cases[0]));
        for g in cases {
            let x: Vec<f64> = (0..g.n * g.cin * g.h * g.w)
                .map(|i| ((i * 37) % 11) as f64 - 5.0)
                .collect();
            let w: Vec<f64> = (0..g.cout * g.kh * g.kw)
                .map(|i| ((i * 13) % 7) as f64 * 0.25 - 0.75)
                .collect();
            let bias: Vec<f64> = (0..g.cout).map(|i| i as f64 * 0.5 - 1.0).collect();
            let want = direct(&x, &w, &bias, &g);
            let mut y = vec![f64::NAN; want.len()];
            forward(&x, &w, Some(&bias), &g, &mut y);
            assert_eq!(
                y,
                want,
                "f64 {:?}",
                (g.h, g.w, g.kh, g.kw, g.stride, g.pad, g.dil)
            );
            // The f32 build: these small integers and quarters are exact in f32.
            let f = |v: &[f64]| v.iter().map(|&a| a as f32).collect::<Vec<f32>>();
            let mut y32 = vec![f32::NAN; want.len()];
            forward(&f(&x), &f(&w), Some(&f(&bias)), &g, &mut y32);
            assert_eq!(
                y32,
                f(&want),
                "f32 {:?}",
                (g.h, g.w, g.kh, g.kw, g.stride, g.pad, g.dil)
            );
        }
    }
}
