//! 3-d max pooling: `max_pool3d_with_indices` over `[N, C, D, H, W]` or unbatched
//! `[C, D, H, W]` inputs; (batch x channel) volumes run in parallel, a few per task.
//! Its backward is a composite (`scatter_add` of the gradients at the indices).
//!
//! Owns: the 3-d window loop and its NaN / first-maximum rule. Must not: restate
//! the input or window checks (`opal::rules::pool`, named as the rule in
//! `backend.yaml`).

use super::pool::{by_max_elem, max_pool_planes, MaxElem};
use opal::rules::pool::{PoolWindow, Pooling};
use opal::{Result, Tensor};

/// Max pooling of one `d x h x w` volume into `yv` (values) and `iv` (flat
/// positions `(z * h + y) * w + x`). Taps are visited in row-major order; a tap
/// wins when it is the first inside the input, greater than the best, or NaN.
fn max_volume<C: MaxElem>(
    xv: &[C],
    g: &PoolWindow<3>,
    dims: [i64; 3],
    yv: &mut [C],
    iv: &mut [i64],
) {
    let [d, h, w] = dims;
    let [od, oh, ow] = g.out;
    let mut k = 0;
    for oz in 0..od {
        for oy in 0..oh {
            for ox in 0..ow {
                let start = [
                    oz * g.stride[0] - g.padding[0],
                    oy * g.stride[1] - g.padding[1],
                    ox * g.stride[2] - g.padding[2],
                ];
                // A placeholder: the first tap inside the input always wins.
                let (mut best, mut bi) = (C::default(), -1i64);
                for a in 0..g.kernel[0] {
                    let iz = start[0] + a * g.dilation[0];
                    if iz < 0 || iz >= d {
                        continue;
                    }
                    for b in 0..g.kernel[1] {
                        let iy = start[1] + b * g.dilation[1];
                        if iy < 0 || iy >= h {
                            continue;
                        }
                        for c in 0..g.kernel[2] {
                            let ix = start[2] + c * g.dilation[2];
                            if ix < 0 || ix >= w {
                                continue;
                            }
                            let pos = (iz * h + iy) * w + ix;
                            let v = xv[pos as usize];
                            if bi < 0 || v > best || v.is_nan_value() {
                                best = v;
                                bi = pos;
                            }
                        }
                    }
                }
                yv[k] = best;
                iv[k] = bi;
                k += 1;
            }
        }
    }
}

/// Max pooling returning values and, per output, the flat position of the maximum
/// inside its input volume. NaN counts as a maximum.
pub fn max_pool3d_with_indices(p: Pooling<3>) -> Result<(Tensor, Tensor)> {
    const OP: &str = "max_pool3d_with_indices";
    fn run<C: MaxElem>(
        x: &Tensor,
        g: &PoolWindow<3>,
        dims: [i64; 3],
        oshape: &[i64],
    ) -> Result<(Tensor, Tensor)> {
        let isz = dims.iter().product::<i64>() as usize;
        let osz = g.out.iter().product::<i64>() as usize;
        max_pool_planes(OP, x, oshape, osz, |v, xs: &[C], yv, iv| {
            max_volume(&xs[v * isz..(v + 1) * isz], g, dims, yv, iv)
        })
    }
    by_max_elem!(
        p.input.dtype(),
        OP,
        run(p.input, &p.window, p.spatial, &p.sizes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_indices_and_errors() {
        let x =
            Tensor::from_vec((0..64).map(|v| v as f32).collect::<Vec<_>>(), &[1, 4, 4, 4]).unwrap();
        let pool = |x: &Tensor| {
            opal::rules::pool::max_pool3d_with_indices(x, &[2], &[], &[0], &[1], false)
                .and_then(max_pool3d_with_indices)
        };
        let (v, i) = pool(&x).unwrap();
        assert_eq!(v.sizes(), &[1, 2, 2, 2]);
        assert_eq!(
            i.to_vec::<i64>().unwrap(),
            vec![21, 23, 29, 31, 53, 55, 61, 63]
        );
        assert_eq!(v.to_vec::<f32>().unwrap()[0], 21.0);
        let flat = Tensor::from_vec(vec![1.0f32; 4], &[2, 2]).unwrap();
        assert!(pool(&flat).is_err());
        // Integers pool as PyTorch's CPU pools them; bool is refused.
        let ints = Tensor::from_vec((0..64i64).rev().collect::<Vec<_>>(), &[1, 4, 4, 4]).unwrap();
        let (v, i) = pool(&ints).unwrap();
        assert_eq!(v.to_vec::<i64>().unwrap()[0], 63);
        assert_eq!(i.to_vec::<i64>().unwrap()[0], 0);
        let flags = Tensor::from_vec(vec![true; 64], &[1, 4, 4, 4]).unwrap();
        assert!(pool(&flags).is_err());
    }
}
