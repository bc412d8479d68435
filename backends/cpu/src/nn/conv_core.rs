//! 2-d convolution numerics by im2col + GEMM: forward, gradient w.r.t. input (also
//! the forward of a transposed convolution) and gradient w.r.t. weight, with groups,
//! stride, padding and dilation. Images of a batch run in parallel
//! (`parallel::fork_chunks_mut`).
//!
//! Owns: the geometry, im2col / col2im and the per-image GEMM calls.
//! Must not: know about tensors, dtypes or op names.

use crate::linalg::gemm_core::{gemm_float, GemmFloat, MatMut, MatRef};
use crate::nn::vecmath::RowMath;

/// Shape of one (non-transposed) 2-d convolution: input `[n, cin, h, w]`, weight
/// `[cout, cin / groups, kh, kw]`, output `[n, cout, oh, ow]`.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Geom {
    pub n: usize,
    pub cin: usize,
    pub h: usize,
    pub w: usize,
    pub cout: usize,
    pub kh: usize,
    pub kw: usize,
    pub stride: [usize; 2],
    pub pad: [usize; 2],
    pub dil: [usize; 2],
    pub groups: usize,
    pub oh: usize,
    pub ow: usize,
}

impl Geom {
    fn cin_g(&self) -> usize {
        self.cin / self.groups
    }
    fn cout_g(&self) -> usize {
        self.cout / self.groups
    }
    /// Rows of the im2col matrix for one group.
    fn krows(&self) -> usize {
        self.cin_g() * self.kh * self.kw
    }
    fn ospatial(&self) -> usize {
        self.oh * self.ow
    }
    /// True when im2col would be an identity copy (1x1 kernel, no stride/pad).
    fn is_pointwise(&self) -> bool {
        self.kh == 1 && self.kw == 1 && self.stride == [1, 1] && self.pad == [0, 0]
    }
}

/// Fewest multiply-adds of a forward convolution whose images are split among
/// threads (as for single products, see `gemm_core::PARALLEL_MIN_WORK`, but
/// lower: the images are independent, so no operand is shared across cores).
const BATCH_PARALLEL_MIN_MACS: usize = 1 << 18;

/// Input row / column read by output position `o` and kernel tap `k`, or None when it
/// falls in the zero padding.
#[inline(always)]
pub(crate) fn src_index(
    o: usize,
    k: usize,
    stride: usize,
    pad: usize,
    dil: usize,
    size: usize,
) -> Option<usize> {
    let pos = (o * stride + k * dil) as isize - pad as isize;
    (pos >= 0 && (pos as usize) < size).then_some(pos as usize)
}

/// `col[(c, i, j), (y, x)] = x[c, y*s + i*d - p, x*s + j*d - p]` for one image and group.
fn im2col<C: GemmFloat>(x: &[C], g: &Geom, col: &mut [C]) {
    let (osp, ow) = (g.ospatial(), g.ow);
    for c in 0..g.cin_g() {
        let plane = &x[c * g.h * g.w..(c + 1) * g.h * g.w];
        for i in 0..g.kh {
            for j in 0..g.kw {
                let row = &mut col[((c * g.kh + i) * g.kw + j) * osp..][..osp];
                // Output columns whose input column is inside the image: a contiguous
                // range [lo, hi), so the hot loop needs no bounds test.
                let (lo, hi) = valid_range(g.ow, j, g.stride[1], g.pad[1], g.dil[1], g.w);
                let off = (j * g.dil[1]) as isize - g.pad[1] as isize;
                for oy in 0..g.oh {
                    let dst = &mut row[oy * ow..(oy + 1) * ow];
                    match src_index(oy, i, g.stride[0], g.pad[0], g.dil[0], g.h) {
                        None => dst.iter_mut().for_each(|v| *v = C::zero()),
                        Some(iy) => {
                            let src = &plane[iy * g.w..(iy + 1) * g.w];
                            dst[..lo].iter_mut().for_each(|v| *v = C::zero());
                            dst[hi..].iter_mut().for_each(|v| *v = C::zero());
                            if lo < hi {
                                let first = (lo * g.stride[1]) as isize + off;
                                if g.stride[1] == 1 {
                                    dst[lo..hi].copy_from_slice(
                                        &src[first as usize..first as usize + (hi - lo)],
                                    );
                                } else {
                                    // `valid_range` keeps the last read inside the row.
                                    let taps = src[first as usize..].iter().step_by(g.stride[1]);
                                    for (v, &s) in dst[lo..hi].iter_mut().zip(taps) {
                                        *v = s;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `[lo, hi)`: the output positions whose input position for tap `k` lies in
/// `0..size` (empty when none does).
pub(crate) fn valid_range(
    out: usize,
    k: usize,
    stride: usize,
    pad: usize,
    dil: usize,
    size: usize,
) -> (usize, usize) {
    let off = (k * dil) as isize - pad as isize;
    // smallest o with o*stride + off >= 0
    let lo = if off >= 0 {
        0
    } else {
        ((-off) as usize).div_ceil(stride)
    };
    // largest o with o*stride + off <= size - 1, plus one
    let last = size as isize - 1 - off;
    let hi = if last < 0 {
        0
    } else {
        (last as usize / stride + 1).min(out)
    };
    (lo.min(hi), hi)
}

/// Adjoint of [`im2col`]: accumulates `col` back into the image `dx`.
fn col2im_add<C: GemmFloat>(col: &[C], g: &Geom, dx: &mut [C]) {
    let osp = g.ospatial();
    for c in 0..g.cin_g() {
        let plane = &mut dx[c * g.h * g.w..(c + 1) * g.h * g.w];
        for i in 0..g.kh {
            for j in 0..g.kw {
                let row = &col[((c * g.kh + i) * g.kw + j) * osp..][..osp];
                for oy in 0..g.oh {
                    let Some(iy) = src_index(oy, i, g.stride[0], g.pad[0], g.dil[0], g.h) else {
                        continue;
                    };
                    for ox in 0..g.ow {
                        if let Some(ix) = src_index(ox, j, g.stride[1], g.pad[1], g.dil[1], g.w) {
                            plane[iy * g.w + ix] = plane[iy * g.w + ix] + row[oy * g.ow + ox];
                        }
                    }
                }
            }
        }
    }
}

fn rm<T>(ptr: *const T, cols: usize) -> MatRef<T> {
    MatRef {
        ptr,
        rs: cols as isize,
        cs: 1,
    }
}

/// Forward convolution: `y = conv(x, w) + bias`.
pub(crate) fn forward<C: GemmFloat>(x: &[C], w: &[C], bias: Option<&[C]>, g: &Geom, y: &mut [C]) {
    if super::conv_depthwise::applies(g) {
        return super::conv_depthwise::forward(x, w, bias, g, y);
    }
    let (cin_g, cout_g, kr, osp) = (g.cin_g(), g.cout_g(), g.krows(), g.ospatial());
    let in_img = g.cin * g.h * g.w;
    let out_img = g.cout * osp;
    if out_img == 0 {
        return;
    }
    // Images go to threads only when there is enough work to pay for the fork:
    // MobileNet's 1x1 convolutions of 2 images at 4x4 or 2x2 are a few thousand
    // multiply-adds each, less than handing one image to another core.
    let parallel_batch = g.n > 1 && g.n * out_img * kr >= BATCH_PARALLEL_MIN_MACS;
    let run = |(b, yb): (usize, &mut [C]), col: &mut Vec<C>| {
        if !g.is_pointwise() && col.is_empty() {
            *col = vec![C::zero(); kr * osp];
        }
        for gr in 0..g.groups {
            let xs = &x[b * in_img + gr * cin_g * g.h * g.w..][..cin_g * g.h * g.w];
            let colp = if g.is_pointwise() {
                xs.as_ptr()
            } else {
                im2col(xs, g, col);
                col.as_ptr()
            };
            let yg = &mut yb[gr * cout_g * osp..(gr + 1) * cout_g * osp];
            let beta = match bias {
                Some(bv) => {
                    for (oc, row) in yg.chunks_mut(osp).enumerate() {
                        row.iter_mut().for_each(|v| *v = bv[gr * cout_g + oc]);
                    }
                    Some(C::one())
                }
                None => None,
            };
            // SAFETY: yg is cout_g x osp, the weight group is cout_g x kr and the
            // column matrix kr x osp, all row-major and in bounds of their slices.
            unsafe {
                gemm_float(
                    cout_g,
                    osp,
                    kr,
                    MatMut {
                        ptr: yg.as_mut_ptr(),
                        rs: osp as isize,
                        cs: 1,
                    },
                    rm(w[gr * cout_g * kr..].as_ptr(), kr),
                    rm(colp, osp),
                    C::one(),
                    beta,
                    !parallel_batch,
                )
            };
        }
    };
    // Two runs of images per thread (for balance), each with one column buffer.
    let per = if parallel_batch {
        g.n.div_ceil(2 * rayon::current_num_threads().max(1))
    } else {
        g.n
    }
    .max(1);
    crate::parallel::fork_chunks_mut(y, per * out_img, |t, ys| {
        let mut col = Vec::new();
        for (k, yb) in ys.chunks_mut(out_img).enumerate() {
            run((t * per + k, yb), &mut col);
        }
    });
}

/// Gradient w.r.t. the input: `dx = col2im(w^T @ dy)`. Also the forward of a
/// transposed convolution whose output geometry is `g`'s input.
pub(crate) fn backward_input<C: GemmFloat>(dy: &[C], w: &[C], g: &Geom, dx: &mut [C]) {
    let (cin_g, cout_g, kr, osp) = (g.cin_g(), g.cout_g(), g.krows(), g.ospatial());
    let in_img = g.cin * g.h * g.w;
    let out_img = g.cout * osp;
    dx.iter_mut().for_each(|v| *v = C::zero());
    if in_img == 0 {
        return;
    }
    let parallel_batch = g.n > 1;
    let run = |(b, dxb): (usize, &mut [C])| {
        let mut col = vec![C::zero(); kr * osp];
        for gr in 0..g.groups {
            let dyg = &dy[b * out_img + gr * cout_g * osp..][..cout_g * osp];
            // SAFETY: col is kr x osp; the weight group read transposed is kr x cout_g
            // (row stride 1, column stride kr); dyg is cout_g x osp. All in bounds.
            unsafe {
                gemm_float(
                    kr,
                    osp,
                    cout_g,
                    MatMut {
                        ptr: col.as_mut_ptr(),
                        rs: osp as isize,
                        cs: 1,
                    },
                    MatRef {
                        ptr: w[gr * cout_g * kr..].as_ptr(),
                        rs: 1,
                        cs: kr as isize,
                    },
                    rm(dyg.as_ptr(), osp),
                    C::one(),
                    None,
                    !parallel_batch,
                )
            };
            col2im_add(
                &col,
                g,
                &mut dxb[gr * cin_g * g.h * g.w..(gr + 1) * cin_g * g.h * g.w],
            );
        }
    };
    if parallel_batch {
        crate::parallel::fork_chunks_mut(dx, in_img, |b, dxb| run((b, dxb)));
    } else {
        dx.chunks_mut(in_img).enumerate().for_each(run);
    }
}

/// Gradient w.r.t. the weight: `dw[g] = sum_b dy[b, g] @ im2col(x[b, g])^T`. The
/// batch is split into one run of images per thread, each summing into its own
/// partial gradient (with its own column buffer); the partials are then added in
/// order.
pub(crate) fn backward_weight<C: GemmFloat>(dy: &[C], x: &[C], g: &Geom, dw: &mut [C]) {
    let (cin_g, cout_g, kr, osp) = (g.cin_g(), g.cout_g(), g.krows(), g.ospatial());
    let in_img = g.cin * g.h * g.w;
    let out_img = g.cout * osp;
    dw.iter_mut().for_each(|v| *v = C::zero());
    if g.n == 0 || dw.is_empty() {
        return;
    }
    let parts = rayon::current_num_threads().clamp(1, g.n);
    let per = g.n.div_ceil(parts);
    let mut partials: Vec<(usize, Vec<C>)> =
        (0..parts).map(|p| (p, vec![C::zero(); dw.len()])).collect();
    crate::parallel::fork_each_mut(&mut partials, |(p, acc)| {
        let mut col = vec![C::zero(); kr * osp];
        for b in *p * per..((*p + 1) * per).min(g.n) {
            for gr in 0..g.groups {
                im2col(
                    &x[b * in_img + gr * cin_g * g.h * g.w..][..cin_g * g.h * g.w],
                    g,
                    &mut col,
                );
                let dyg = &dy[b * out_img + gr * cout_g * osp..][..cout_g * osp];
                let dwg = &mut acc[gr * cout_g * kr..(gr + 1) * cout_g * kr];
                // SAFETY: dwg is cout_g x kr; dyg is cout_g x osp; col read transposed
                // is osp x kr (row stride 1, column stride osp). All in bounds.
                unsafe {
                    gemm_float(
                        cout_g,
                        kr,
                        osp,
                        MatMut {
                            ptr: dwg.as_mut_ptr(),
                            rs: kr as isize,
                            cs: 1,
                        },
                        rm(dyg.as_ptr(), osp),
                        MatRef {
                            ptr: col.as_ptr(),
                            rs: 1,
                            cs: osp as isize,
                        },
                        C::one(),
                        Some(C::one()),
                        false,
                    )
                };
            }
        }
    });
    for (_, part) in &partials {
        for (d, &v) in dw.iter_mut().zip(part) {
            *d = *d + v;
        }
    }
}

/// Gradient w.r.t. the bias: sum of `dy` over batch and space (each plane summed
/// with the vectorized row sum).
pub(crate) fn backward_bias<C: GemmFloat + RowMath>(dy: &[C], g: &Geom) -> Vec<C> {
    let osp = g.ospatial();
    let mut db = vec![C::zero(); g.cout];
    if osp == 0 {
        return db;
    }
    for (i, plane) in dy.chunks_exact(osp).take(g.n * g.cout).enumerate() {
        let c = i % g.cout;
        db[c] = db[c] + C::row_sum(plane);
    }
    db
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geom(groups: usize, stride: [usize; 2], pad: [usize; 2], dil: [usize; 2]) -> Geom {
        let (h, w, kh, kw) = (5, 6, 3, 2);
        let oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) / stride[0] + 1;
        let ow = (w + 2 * pad[1] - dil[1] * (kw - 1) - 1) / stride[1] + 1;
        Geom {
            n: 2,
            cin: 4,
            h,
            w,
            cout: 6,
            kh,
            kw,
            stride,
            pad,
            dil,
            groups,
            oh,
            ow,
        }
    }

    fn direct(x: &[f64], w: &[f64], g: &Geom) -> Vec<f64> {
        let mut y = vec![0.0; g.n * g.cout * g.oh * g.ow];
        let (cin_g, cout_g) = (g.cin / g.groups, g.cout / g.groups);
        for b in 0..g.n {
            for oc in 0..g.cout {
                let gr = oc / cout_g;
                for oy in 0..g.oh {
                    for ox in 0..g.ow {
                        let mut s = 0.0;
                        for c in 0..cin_g {
                            for i in 0..g.kh {
                                for j in 0..g.kw {
                                    let iy = (oy * g.stride[0] + i * g.dil[0]) as isize
                                        - g.pad[0] as isize;
                                    let ix = (ox * g.stride[1] + j * g.dil[1]) as isize
                                        - g.pad[1] as isize;
                                    if iy < 0 || ix < 0 || iy >= g.h as isize || ix >= g.w as isize
                                    {
                                        continue;
                                    }
                                    let xi = ((b * g.cin + gr * cin_g + c) * g.h + iy as usize)
                                        * g.w
                                        + ix as usize;
                                    let wi = ((oc * cin_g + c) * g.kh + i) * g.kw + j;
                                    s += x[xi] * w[wi];
                                }
                            }
                        }
                        y[((b * g.cout + oc) * g.oh + oy) * g.ow + ox] = s;
                    }
                }
            }
        }
        y
    }

    #[test]
    fn forward_and_gradients_match_direct_convolution() {
        for g in [
            geom(1, [1, 1], [0, 0], [1, 1]),
            geom(2, [2, 1], [1, 0], [1, 1]),
            geom(1, [1, 2], [1, 2], [2, 1]),
        ] {
            let x: Vec<f64> = (0..g.n * g.cin * g.h * g.w)
                .map(|i| ((i * 37) % 11) as f64 - 5.0)
                .collect();
            let w: Vec<f64> = (0..g.cout * g.cin / g.groups * g.kh * g.kw)
                .map(|i| ((i * 13) % 7) as f64 * 0.25 - 0.75)
                .collect();
            let mut y = vec![0.0; g.n * g.cout * g.oh * g.ow];
            forward(&x, &w, None, &g, &mut y);
            assert_eq!(y, direct(&x, &w, &g));
            // <dy, conv(x, w)> is bilinear: check both gradients against it.
            let dy: Vec<f64> = (0..y.len()).map(|i| ((i * 7) % 5) as f64 - 2.0).collect();
            let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(p, q)| p * q).sum::<f64>();
            let mut dx = vec![0.0; x.len()];
            backward_input(&dy, &w, &g, &mut dx);
            assert!((dot(&dx, &x) - dot(&dy, &y)).abs() < 1e-9);
            let mut dw = vec![0.0; w.len()];
            backward_weight(&dy, &x, &g, &mut dw);
            assert!((dot(&dw, &w) - dot(&dy, &y)).abs() < 1e-9);
        }
    }
}
