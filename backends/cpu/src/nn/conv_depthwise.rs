//! Direct forward convolution for one input channel per group (depthwise, with
//! any channel multiplier): each output plane is the sum over kernel taps of a
//! scaled, shifted input plane, accumulated row by row over the output columns
//! whose input lies inside the image. im2col would copy the input `kh * kw` times
//! and then run one product per channel too small for a GEMM to pay off.
//!
//! Owns: that loop and its split over threads. Must not: know about tensors,
//! dtypes or op names (`conv` dispatches here from `conv_core::forward`).

use super::conv_core::{valid_range, Geom};
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
    let plane = |p: usize, out: &mut [C]| {
        let (b, oc) = (p / g.cout, p % g.cout);
        let ic = oc / (g.cout / g.cin);
        let src = &x[(b * g.cin + ic) * g.h * g.w..][..g.h * g.w];
        let wk = &w[oc * taps..(oc + 1) * taps];
        out.fill(bias.map_or(C::zero(), |bv| bv[oc]));
        if TypeId::of::<C>() == TypeId::of::<f32>() {
            // SAFETY: C is f32 (same TypeId), so these are the same slices
            // with their own element type.
            let cast =
                |s: &[C]| unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<f32>(), s.len()) };
            let (src, wk) = (cast(src), cast(wk));
            // SAFETY: as above, for the output plane (exclusively borrowed).
            let out = unsafe {
                std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<f32>(), out.len())
            };
            one_plane_f32(src, wk, g, out);
        } else {
            one_plane(src, wk, g, out);
        }
    };
    let macs = planes * osp * taps;
    if macs < PARALLEL_MACS || rayon::current_num_threads() < 2 {
        for (p, out) in y.chunks_mut(osp).enumerate() {
            plane(p, out);
        }
        return;
    }
    // Two runs of planes per thread, for balance.
    let per = planes.div_ceil(2 * rayon::current_num_threads()).max(1);
    crate::parallel::fork_chunks_mut(y, per * osp, |t, ys| {
        for (k, out) in ys.chunks_mut(osp).enumerate() {
            plane(t * per + k, out);
        }
    });
}

multiversion!(one_plane_f32(src: &[f32], wk: &[f32], g: &Geom, out: &mut [f32]) -> () {
    one_plane(src, wk, g, out)
});

/// Accumulates every tap of `wk` over the input plane `src` into `out`.
#[inline(always)]
fn one_plane<C: GemmFloat>(src: &[C], wk: &[C], g: &Geom, out: &mut [C]) {
    let [sy, sx] = g.stride;
    for i in 0..g.kh {
        // Output rows whose input row for tap row `i` is inside the image.
        let (ylo, yhi) = valid_range(g.oh, i, sy, g.pad[0], g.dil[0], g.h);
        for j in 0..g.kw {
            let wv = wk[i * g.kw + j];
            let (lo, hi) = valid_range(g.ow, j, sx, g.pad[1], g.dil[1], g.w);
            if lo >= hi {
                continue;
            }
            let xoff = (j * g.dil[1]) as isize - g.pad[1] as isize;
            let first = (lo * sx) as isize + xoff;
            for oy in ylo..yhi {
                let iy = oy * sy + i * g.dil[0] - g.pad[0];
                let row = &src[iy * g.w..(iy + 1) * g.w];
                let dst = &mut out[oy * g.ow + lo..oy * g.ow + hi];
                if sx == 1 {
                    let s = &row[first as usize..first as usize + (hi - lo)];
                    for (d, &v) in dst.iter_mut().zip(s) {
                        *d = *d + v * wv;
                    }
                } else {
                    for (k, d) in dst.iter_mut().enumerate() {
                        *d = *d + row[first as usize + k * sx] * wv;
                    }
                }
            }
        }
    }
}
