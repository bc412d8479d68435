//! 3-d max pooling: `max_pool3d_with_indices` over `[N, C, D, H, W]` or unbatched
//! `[C, D, H, W]` inputs; (batch x channel) volumes run in parallel, a few per task.
//! Its backward is a composite (`scatter_add` of the gradients at the indices).
//!
//! Owns: the 3-d window loop and its NaN / first-maximum rule. Must not: restate
//! the window geometry (`opal::rules::pool`).

use super::io::{compute_dtype, shape_err, Compute};
use super::pool::max_pool_planes;
use opal::rules::pool::{pool_window, PoolWindow};
use opal::{DType, Result, Tensor};

/// `(volumes, [d, h, w])` of a 4-d or 5-d input with non-empty non-batch dims.
fn volumes(x: &Tensor, op: &str) -> Result<(usize, [i64; 3])> {
    let s = x.sizes();
    let n = s.len();
    if !(n == 4 || n == 5) || s[n - 4..].contains(&0) {
        return Err(shape_err(
            op,
            format!("non-empty 4D or 5D (batch mode) tensor expected for input, but got input of size {s:?}"),
        ));
    }
    Ok((
        s[..n - 3].iter().product::<i64>() as usize,
        [s[n - 3], s[n - 2], s[n - 1]],
    ))
}

/// Max pooling of one `d x h x w` volume into `yv` (values) and `iv` (flat
/// positions `(z * h + y) * w + x`). Taps are visited in row-major order; a tap
/// wins when it is the first inside the input, greater than the best, or NaN.
fn max_volume<C: Compute>(
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
                let (mut best, mut bi) = (C::neg_infinity(), -1i64);
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
                            if bi < 0 || v > best || v.is_nan() {
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
pub fn max_pool3d_with_indices(
    self_: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Result<(Tensor, Tensor)> {
    const OP: &str = "max_pool3d_with_indices";
    let cd = compute_dtype(self_.dtype(), OP)?;
    let (_, dims) = volumes(self_, OP)?;
    let g = pool_window::<3>(OP, dims, kernel_size, stride, padding, dilation, ceil_mode)?;
    let s = self_.sizes();
    let mut oshape = s[..s.len() - 3].to_vec();
    oshape.extend(g.out);
    fn run<C: Compute>(
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
    match cd {
        DType::F64 => run::<f64>(self_, &g, dims, &oshape),
        _ => run::<f32>(self_, &g, dims, &oshape),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_indices_and_errors() {
        let x =
            Tensor::from_vec((0..64).map(|v| v as f32).collect::<Vec<_>>(), &[1, 4, 4, 4]).unwrap();
        let (v, i) = max_pool3d_with_indices(&x, &[2], &[], &[0], &[1], false).unwrap();
        assert_eq!(v.sizes(), &[1, 2, 2, 2]);
        assert_eq!(
            i.to_vec::<i64>().unwrap(),
            vec![21, 23, 29, 31, 53, 55, 61, 63]
        );
        assert_eq!(v.to_vec::<f32>().unwrap()[0], 21.0);
        assert!(max_pool3d_with_indices(&x, &[2], &[], &[2], &[1], false).is_err());
        let flat = Tensor::from_vec(vec![1.0f32; 4], &[2, 2]).unwrap();
        assert!(max_pool3d_with_indices(&flat, &[1], &[], &[0], &[1], false).is_err());
    }
}
