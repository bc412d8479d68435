//! Sliding blocks: `col2im` (sums the columns of every block back into images,
//! PyTorch's `fold`) and `im2col` (its adjoint, `unfold`, the gradient of
//! `col2im`). (batch x channel) planes run in parallel, a few per task.
//!
//! Owns: the two block loops. Must not: restate the block geometry or its errors
//! (`opal::rules::fold`).

use super::io::{compute_dtype, make_output, with_slice, Compute};
use crate::parallel::fork_chunks_mut;
use opal::rules::fold::{Blocks, Fold};
use opal::{DType, Result, Tensor};

/// Calls `tap(ki, kj, y, x, l)` for every tap of every block: `l` is the block's
/// index, `(y, x)` the image position its tap `(ki, kj)` falls on (possibly in the
/// padding, i.e. outside `0..H`, `0..W`).
#[inline]
fn for_each_tap(g: &Blocks, mut tap: impl FnMut(usize, i64, i64, usize)) {
    let [kh, kw] = g.kernel;
    let [bh, bw] = g.blocks;
    for ki in 0..kh {
        for kj in 0..kw {
            let row = (ki * kw + kj) as usize;
            for by in 0..bh {
                let y = by * g.stride[0] - g.padding[0] + ki * g.dilation[0];
                for bx in 0..bw {
                    let x = bx * g.stride[1] - g.padding[1] + kj * g.dilation[1];
                    tap(row, y, x, (by * bw + bx) as usize);
                }
            }
        }
    }
}

/// Folds (`col2im`: columns summed into images) or unfolds (`im2col`: images
/// copied into columns) every (batch x channel) plane of `x` into a new tensor of
/// `shape`, a few planes per task.
fn by_planes<C: Compute>(x: &Tensor, shape: &[i64], g: &Blocks, fold: bool) -> Result<Tensor> {
    let [h, w] = g.image;
    let l = g.count() as usize;
    let (img_len, col_len) = ((h * w) as usize, g.taps() as usize * l);
    let (src_len, dst_len) = if fold {
        (col_len, img_len)
    } else {
        (img_len, col_len)
    };
    let inside = move |y: i64, x: i64| (0..h).contains(&y) && (0..w).contains(&x);
    with_slice::<C, _>(x, |xs| {
        make_output::<C>(shape, x.dtype(), |ys| {
            let per = (4096 / dst_len.max(1)).max(1);
            fork_chunks_mut(ys, per * dst_len.max(1), |t, chunk| {
                for (k, dst) in chunk.chunks_mut(dst_len).enumerate() {
                    let p = t * per + k;
                    let src = &xs[p * src_len..(p + 1) * src_len];
                    if fold {
                        dst.fill(C::default());
                        for_each_tap(g, |row, y, x, b| {
                            if inside(y, x) {
                                let i = (y * w + x) as usize;
                                dst[i] = dst[i] + src[row * l + b];
                            }
                        });
                    } else {
                        for_each_tap(g, |row, y, x, b| {
                            dst[row * l + b] = if inside(y, x) {
                                src[(y * w + x) as usize]
                            } else {
                                C::default()
                            };
                        });
                    }
                }
            });
            Ok(())
        })
    })
}

/// `col2im` (the columns `[N, C * kh * kw, L]` of every block summed into images;
/// overlapping taps add up) or `im2col` (images unfolded into the columns of every
/// block; taps in the padding read zero), from the arguments
/// [`opal::rules::fold::col2im`] / [`opal::rules::fold::im2col`] checked.
pub fn fold(p: Fold) -> Result<Tensor> {
    match compute_dtype(p.input.dtype(), p.op)? {
        DType::F64 => by_planes::<f64>(p.input, &p.shape, &p.blocks, p.fold),
        _ => by_planes::<f32>(p.input, &p.shape, &p.blocks, p.fold),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opal::rules::fold::{col2im, im2col};

    #[test]
    fn col2im_inverts_im2col_counts() {
        let x = Tensor::from_vec(vec![1.0f32; 16], &[1, 1, 4, 4]).unwrap();
        let (one, zero) = ([1, 1], [0, 0]);
        let cols = fold(im2col(&x, &[2, 2], &one, &zero, &one).unwrap()).unwrap();
        assert_eq!(cols.sizes(), &[1, 4, 9]);
        let back = fold(col2im(&cols, &[4, 4], &[2, 2], &one, &zero, &one).unwrap()).unwrap();
        // Each pixel is covered by as many blocks as contain it.
        let v = back.to_vec::<f32>().unwrap();
        assert_eq!(&v[..4], &[1.0, 2.0, 2.0, 1.0]);
        assert_eq!(v[5], 4.0);
        assert!(col2im(&cols, &[4, 5], &[2, 2], &one, &zero, &one).is_err());
        assert!(col2im(&cols, &[4, 4], &[0, 2], &one, &zero, &one).is_err());
    }
}
