//! 2-d pooling and resampling: `max_pool2d_with_indices` (+ backward),
//! `avg_pool2d`, `_adaptive_avg_pool2d`, `upsample_nearest2d` (+ out= forms).
//! Inputs are `[N, C, H, W]` or unbatched `[C, H, W]`; planes run in parallel.
//!
//! Owns: output-size rules (ceil_mode, padding limits), window loops, divisor rules.
//! Must not: touch other ops' numerics.

use super::io::{compute_dtype, err, make_output, with_slice, Compute};
use crate::dtype_dispatch::Elem;
use opal::rules::pool::{AvgPool2d, MaxPoolBackward, PoolWindow, Pooling, Resize2d};
use opal::{DType, Result, Tensor};

/// A 2-d window in the form the plane loops read.
struct Pool {
    k: [i64; 2],
    s: [i64; 2],
    p: [i64; 2],
    d: [i64; 2],
    oh: usize,
    ow: usize,
}

impl From<&PoolWindow<2>> for Pool {
    fn from(g: &PoolWindow<2>) -> Self {
        Pool {
            k: g.kernel,
            s: g.stride,
            p: g.padding,
            d: g.dilation,
            oh: g.out[0] as usize,
            ow: g.out[1] as usize,
        }
    }
}

/// An element max pooling compares: floats, where NaN wins, and integers (which
/// PyTorch's CPU pools too; bool it refuses).
pub(super) trait MaxElem: Elem + opal::Element + Send + Sync {
    fn is_nan_value(self) -> bool;
}

macro_rules! max_elem {
    (float: $($t:ty),*; int: $($i:ty),*) => {
        $(impl MaxElem for $t {
            #[inline(always)]
            fn is_nan_value(self) -> bool {
                self.is_nan()
            }
        })*
        $(impl MaxElem for $i {
            #[inline(always)]
            fn is_nan_value(self) -> bool {
                false
            }
        })*
    };
}
max_elem!(float: f32, f64; int: i64, i32, i16, i8, u8);

/// `$f::<E>(args)` for the element type max pooling computes `$dt` in (f16 and
/// bf16 in f32), or an error naming `$op` for bool.
macro_rules! by_max_elem {
    ($dt:expr, $op:expr, $f:ident ( $($a:expr),* )) => {
        match $dt {
            ::opal::DType::F64 => $f::<f64>($($a),*),
            ::opal::DType::F32 | ::opal::DType::F16 | ::opal::DType::BF16 => $f::<f32>($($a),*),
            ::opal::DType::I64 => $f::<i64>($($a),*),
            ::opal::DType::I32 => $f::<i32>($($a),*),
            ::opal::DType::I16 => $f::<i16>($($a),*),
            ::opal::DType::I8 => $f::<i8>($($a),*),
            ::opal::DType::U8 => $f::<u8>($($a),*),
            other => Err($crate::nn::io::err($op, format!("not implemented for input dtype {other}"))),
        }
    };
}
pub(super) use by_max_elem;

/// Max pooling of one `h x w` plane `xp` into `yp` (values) and `ip` (flat
/// positions), both `oh x ow`. Each output visits its window's taps in row-major
/// order and takes a tap when it is the first inside the input, larger than the
/// best so far, or NaN (so the first maximum wins, and a NaN sticks unless a later
/// NaN follows, as PyTorch's loop does). The picks are branch-free
/// (`select_unpredictable`): on real data they are coin flips, and mispredicted
/// branches cost more than the comparisons.
fn max_plane<C: MaxElem>(xp: &[C], g: &Pool, h: usize, w: usize, yp: &mut [C], ip: &mut [i64]) {
    // The window rule may add a last, partial window (ceil_mode): those planes keep
    // the general path's bounds tests.
    let whole_windows = 2 * g.oh <= h && 2 * g.ow <= w;
    if g.k == [2, 2] && g.s == [2, 2] && g.p == [0, 0] && g.d == [1, 1] && whole_windows {
        max_plane_2x2(xp, g, w, yp, ip)
    } else {
        max_plane_general(xp, g, h, w, yp, ip)
    }
}

fn max_plane_general<C: MaxElem>(
    xp: &[C],
    g: &Pool,
    h: usize,
    w: usize,
    yp: &mut [C],
    ip: &mut [i64],
) {
    use std::hint::select_unpredictable as pick;
    let (h, w) = (h as i64, w as i64);
    for (oy, (yr, ir)) in yp.chunks_mut(g.ow).zip(ip.chunks_mut(g.ow)).enumerate() {
        let iy0 = oy as i64 * g.s[0] - g.p[0];
        for (ox, (y, idx)) in yr.iter_mut().zip(ir.iter_mut()).enumerate() {
            let ix0 = ox as i64 * g.s[1] - g.p[1];
            // A placeholder: the first tap inside the input always wins.
            let (mut best, mut bi) = (C::default(), -1i64);
            for i in 0..g.k[0] {
                let iy = iy0 + i * g.d[0];
                if iy < 0 || iy >= h {
                    continue;
                }
                for j in 0..g.k[1] {
                    let ix = ix0 + j * g.d[1];
                    if ix < 0 || ix >= w {
                        continue;
                    }
                    let pos = iy * w + ix;
                    let v = xp[pos as usize];
                    let take = (bi < 0) | (v > best) | v.is_nan_value();
                    best = pick(take, v, best);
                    bi = pick(take, pos, bi);
                }
            }
            *y = best;
            *idx = bi;
        }
    }
}

/// [`max_plane`] for 2x2 windows at stride 2 without padding or dilation (most
/// CNNs' pooling): each window is two pairs of neighbours in two rows, read without
/// the bounds tests and loops of the general case, which cost about 16
/// instructions per element. Same order and NaN rule: the window is scanned row by
/// row, a later element wins when greater or NaN.
fn max_plane_2x2<C: MaxElem>(xp: &[C], g: &Pool, w: usize, yp: &mut [C], ip: &mut [i64]) {
    use std::hint::select_unpredictable as pick;
    let rows = yp.chunks_mut(g.ow).zip(ip.chunks_mut(g.ow));
    for (oy, (yr, ir)) in rows.enumerate().take(g.oh) {
        let top = 2 * oy * w;
        let (r0, r1) = (&xp[top..top + w], &xp[top + w..top + 2 * w]);
        let pairs = r0.chunks_exact(2).zip(r1.chunks_exact(2));
        for (ox, ((y, idx), (a, b))) in yr.iter_mut().zip(ir.iter_mut()).zip(pairs).enumerate() {
            let p0 = (top + 2 * ox) as i64;
            let (mut best, mut bi) = (a[0], p0);
            for (v, pos) in [
                (a[1], p0 + 1),
                (b[0], p0 + w as i64),
                (b[1], p0 + w as i64 + 1),
            ] {
                let take = (v > best) | v.is_nan_value();
                best = pick(take, v, best);
                bi = pick(take, pos, bi);
            }
            *y = best;
            *idx = bi;
        }
    }
}

/// The driver of max pooling with indices: allocates values (`x`'s dtype) and
/// int64 indices of `oshape`, and runs `plane(p, xs, values, indices)` for each
/// input plane / volume `p` (with `osz` outputs each), a few per task in
/// parallel (one small plane is too little work to hand to another thread).
pub(super) fn max_pool_planes<C: MaxElem>(
    op: &str,
    x: &Tensor,
    oshape: &[i64],
    osz: usize,
    plane: impl Fn(usize, &[C], &mut [C], &mut [i64]) + Sync,
) -> Result<(Tensor, Tensor)> {
    let osz = osz.max(1);
    let mut vals = None;
    let idx = make_output::<i64>(oshape, DType::I64, |is| {
        vals = Some(with_slice::<C, _>(x, |xs| {
            make_output::<C>(oshape, x.dtype(), |ys| {
                let mut planes: Vec<_> = ys.chunks_mut(osz).zip(is.chunks_mut(osz)).collect();
                let per = (4096 / osz).max(1);
                let mut tasks: Vec<_> = planes.chunks_mut(per).enumerate().collect();
                crate::parallel::fork_each_mut(&mut tasks, |(t, group)| {
                    for (k, (yp, ip)) in group.iter_mut().enumerate() {
                        plane(*t * per + k, xs, yp, ip);
                    }
                });
                Ok(())
            })
        })?);
        Ok(())
    })?;
    let vals = vals.ok_or_else(|| err(op, "no values computed"))?;
    Ok((vals, idx))
}

/// Max pooling returning values and, per output, the flat `h * W + w` position of
/// the maximum inside its input plane. NaN counts as a maximum.
pub fn max_pool2d_with_indices(p: Pooling<2>) -> Result<(Tensor, Tensor)> {
    const OP: &str = "max_pool2d_with_indices";
    let g = Pool::from(&p.window);
    let [h, w] = p.spatial.map(|v| v as usize);
    fn run<C: MaxElem>(
        x: &Tensor,
        g: &Pool,
        h: usize,
        w: usize,
        oshape: &[i64],
    ) -> Result<(Tensor, Tensor)> {
        let isz = h * w;
        max_pool_planes(OP, x, oshape, g.oh * g.ow, |pl, xs: &[C], yp, ip| {
            max_plane(&xs[pl * isz..(pl + 1) * isz], g, h, w, yp, ip)
        })
    }
    by_max_elem!(p.input.dtype(), OP, run(p.input, &g, h, w, &p.sizes))
}

/// Gradient of max pooling: each output gradient goes to its recorded argmax.
pub fn max_pool2d_with_indices_backward(b: MaxPoolBackward<2>) -> Result<Tensor> {
    const OP: &str = "max_pool2d_with_indices_backward";
    let p = &b.pool;
    let cd = compute_dtype(p.input.dtype(), OP)?;
    let [h, w] = p.spatial.map(|v| v as usize);
    fn run<C: Compute>(
        go: &Tensor,
        x: &Tensor,
        indices: &Tensor,
        hw: usize,
        osz: usize,
    ) -> Result<Tensor> {
        with_slice::<i64, _>(indices, |iv| {
            if let Some(&pos) = iv.iter().find(|&&p| p < 0 || p as usize >= hw) {
                return Err(err(
                    OP,
                    format!("index {pos} out of range for a plane of {hw} elements"),
                ));
            }
            with_slice::<C, _>(go, |gs| {
                make_output::<C>(x.sizes(), go.dtype(), |o| {
                    if hw == 0 {
                        return Ok(());
                    }
                    // Planes are independent: a few per task, each zeroed and then
                    // given its outputs' gradients at their argmax positions.
                    let per = (16384 / hw).max(1);
                    crate::parallel::fork_chunks_mut(o, per * hw, |t, chunk| {
                        chunk.iter_mut().for_each(|v| *v = num_traits::zero());
                        for (k, plane) in chunk.chunks_mut(hw).enumerate() {
                            let pl = t * per + k;
                            let (g, i) =
                                (&gs[pl * osz..(pl + 1) * osz], &iv[pl * osz..(pl + 1) * osz]);
                            for (&gv, &pos) in g.iter().zip(i) {
                                // In range: every index was checked above.
                                let t = &mut plane[pos as usize];
                                *t = *t + gv;
                            }
                        }
                    });
                    Ok(())
                })
            })
        })
    }
    let osz = (p.window.out[0] * p.window.out[1]) as usize;
    match cd {
        DType::F64 => run::<f64>(b.grad_output, p.input, b.indices, h * w, osz),
        _ => run::<f32>(b.grad_output, p.input, b.indices, h * w, osz),
    }
}

/// Average pooling. The divisor is `divisor_override` when given, else the window
/// size clipped to the padded input (`count_include_pad`) or to the input.
pub fn avg_pool2d(a: AvgPool2d) -> Result<Tensor> {
    const OP: &str = "avg_pool2d";
    let p = &a.pool;
    let g = Pool::from(&p.window);
    let [h, w] = p.spatial.map(|v| v as usize);
    // int64 averages divide with truncation, as PyTorch's CPU kernel does.
    fn run<C: Elem + opal::Element + num_traits::Num + num_traits::NumCast + Send + Sync>(
        x: &Tensor,
        g: &Pool,
        h: usize,
        w: usize,
        cip: bool,
        div: Option<i64>,
        oshape: &[i64],
    ) -> Result<Tensor> {
        let osz = g.oh * g.ow;
        let (h, w) = (h as i64, w as i64);
        with_slice::<C, _>(x, |xs| {
            make_output::<C>(oshape, x.dtype(), |ys| {
                crate::parallel::fork_chunks_mut(ys, osz.max(1), |pl, yp| {
                    let xp = &xs[pl * (h * w) as usize..(pl + 1) * (h * w) as usize];
                    for oy in 0..g.oh as i64 {
                        for ox in 0..g.ow as i64 {
                            let (mut y0, mut x0) = (oy * g.s[0] - g.p[0], ox * g.s[1] - g.p[1]);
                            let (mut y1, mut x1) =
                                ((y0 + g.k[0]).min(h + g.p[0]), (x0 + g.k[1]).min(w + g.p[1]));
                            let padded = (y1 - y0) * (x1 - x0);
                            y0 = y0.max(0);
                            x0 = x0.max(0);
                            y1 = y1.min(h);
                            x1 = x1.min(w);
                            let mut s = num_traits::zero::<C>();
                            for iy in y0..y1 {
                                for ix in x0..x1 {
                                    s = s + xp[(iy * w + ix) as usize];
                                }
                            }
                            let cnt =
                                div.unwrap_or(if cip { padded } else { (y1 - y0) * (x1 - x0) });
                            yp[(oy * g.ow as i64 + ox) as usize] = if y0 >= y1 || x0 >= x1 {
                                num_traits::zero()
                            } else {
                                s / C::from(cnt).unwrap_or_else(C::one)
                            };
                        }
                    }
                });
                Ok(())
            })
        })
    }
    let (cip, div) = (a.count_include_pad, a.divisor_override);
    match p.input.dtype() {
        DType::I64 => run::<i64>(p.input, &g, h, w, cip, div, &p.sizes),
        dt => match compute_dtype(dt, OP)? {
            DType::F64 => run::<f64>(p.input, &g, h, w, cip, div, &p.sizes),
            _ => run::<f32>(p.input, &g, h, w, cip, div, &p.sizes),
        },
    }
}

/// Adaptive average pooling to `output_size`: output cell `o` averages input rows
/// `floor(o*H/OH) .. ceil((o+1)*H/OH)` (and likewise for columns).
pub fn _adaptive_avg_pool2d(r: Resize2d) -> Result<Tensor> {
    const OP: &str = "_adaptive_avg_pool2d";
    let cd = compute_dtype(r.input.dtype(), OP)?;
    let [h, w] = r.spatial.map(|v| v as usize);
    let [oh, ow] = r.out.map(|v| v as usize);
    fn run<C: Compute>(
        x: &Tensor,
        h: usize,
        w: usize,
        oh: usize,
        ow: usize,
        oshape: &[i64],
    ) -> Result<Tensor> {
        let window = |o: usize, n: usize, out: usize| {
            let (s, e) = opal::rules::pool::adaptive_window(o as i64, n as i64, out as i64);
            (s as usize, e as usize)
        };
        with_slice::<C, _>(x, |xs| {
            make_output::<C>(oshape, x.dtype(), |ys| {
                crate::parallel::fork_chunks_mut(ys, (oh * ow).max(1), |pl, yp| {
                    let xp = &xs[pl * h * w..(pl + 1) * h * w];
                    for oy in 0..oh {
                        let (y0, y1) = window(oy, h, oh);
                        for ox in 0..ow {
                            let (x0, x1) = window(ox, w, ow);
                            let mut s = num_traits::zero::<C>();
                            for iy in y0..y1 {
                                for ix in x0..x1 {
                                    s = s + xp[iy * w + ix];
                                }
                            }
                            yp[oy * ow + ox] =
                                s / C::from((y1 - y0) * (x1 - x0)).unwrap_or_else(C::one);
                        }
                    }
                });
                Ok(())
            })
        })
    }
    match cd {
        DType::F64 => run::<f64>(r.input, h, w, oh, ow, &r.sizes),
        _ => run::<f32>(r.input, h, w, oh, ow, &r.sizes),
    }
}

/// Source index of output `o` for nearest upsampling, computed in f32 as PyTorch
/// does: `min(floor(o * scale), in - 1)` with `scale = 1/scale_factor` when given,
/// else `in / out`.
fn nearest_src(o: usize, in_size: usize, out_size: usize, scale: Option<f64>) -> usize {
    let s = match scale {
        Some(f) if f > 0.0 => (1.0 / f) as f32,
        _ => in_size as f32 / out_size as f32,
    };
    ((o as f32 * s).floor() as usize).min(in_size - 1)
}

/// Nearest-neighbour upsampling of the last two dims to `output_size`. Works for
/// every dtype (values are copied, not computed).
pub fn upsample_nearest2d(r: Resize2d) -> Result<Tensor> {
    const OP: &str = "upsample_nearest2d";
    let [h, w] = r.spatial.map(|v| v as usize);
    let [oh, ow] = r.out.map(|v| v as usize);
    let [scales_h, scales_w] = r.scales;
    let ys: Vec<usize> = (0..oh).map(|o| nearest_src(o, h, oh, scales_h)).collect();
    let xs: Vec<usize> = (0..ow).map(|o| nearest_src(o, w, ow, scales_w)).collect();
    let channels = r.input.sizes()[1] as usize;
    crate::shape::remap::remap(OP, r.input, &r.sizes, None, |idx| {
        let pl = idx[0] * channels + idx[1];
        Ok(Some(pl * h * w + ys[idx[2]] * w + xs[idx[3]]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_2x2_path_matches_the_general_one() {
        // Ties, NaNs (a later NaN wins), infinities; odd sizes leave a last row and
        // column outside every window.
        let (h, w) = (5usize, 7usize);
        let specials = [
            f32::NAN,
            1.0,
            1.0,
            f32::NEG_INFINITY,
            f32::INFINITY,
            -0.0,
            0.0,
        ];
        let xp: Vec<f32> = (0..h * w)
            .map(|i| {
                if i % 5 == 0 {
                    specials[(i / 5) % specials.len()]
                } else {
                    ((i * 7919) % 13) as f32 - 6.0
                }
            })
            .collect();
        let g = Pool {
            k: [2, 2],
            s: [2, 2],
            p: [0, 0],
            d: [1, 1],
            oh: 2,
            ow: 3,
        };
        let (mut y1, mut i1) = (vec![0.0f32; 6], vec![0i64; 6]);
        let (mut y2, mut i2) = (vec![0.0f32; 6], vec![0i64; 6]);
        max_plane_2x2(&xp, &g, w, &mut y1, &mut i1);
        max_plane_general(&xp, &g, h, w, &mut y2, &mut i2);
        assert_eq!(i1, i2);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&y1), bits(&y2));
        assert!(
            y1.iter().any(|v| v.is_nan()),
            "the data reaches the NaN rule"
        );
    }

    fn plane() -> Tensor {
        Tensor::from_vec((0..16).map(|v| v as f32).collect::<Vec<_>>(), &[1, 1, 4, 4]).unwrap()
    }

    #[test]
    fn max_pool_values_indices_and_backward() {
        use opal::rules::pool as rule;
        let x = plane();
        let (v, i) = max_pool2d_with_indices(
            rule::max_pool2d_with_indices(&x, &[2, 2], &[], &[0, 0], &[1, 1], false).unwrap(),
        )
        .unwrap();
        assert_eq!(v.to_vec::<f32>().unwrap(), vec![5., 7., 13., 15.]);
        assert_eq!(i.to_vec::<i64>().unwrap(), vec![5, 7, 13, 15]);
        let go = Tensor::from_slice(&[1.0f32; 4], &[1, 1, 2, 2]).unwrap();
        let b = rule::max_pool2d_with_indices_backward(
            &go,
            &x,
            &[2, 2],
            &[2, 2],
            &[0, 0],
            &[1, 1],
            false,
            &i,
        )
        .unwrap();
        let gi = max_pool2d_with_indices_backward(b).unwrap();
        assert_eq!(gi.to_vec::<f32>().unwrap().iter().sum::<f32>(), 4.0);
        let ints = Tensor::from_vec((0..16).collect::<Vec<i64>>(), &[1, 1, 4, 4]).unwrap();
        let p = rule::max_pool2d_with_indices(&ints, &[2], &[], &[0], &[1], false).unwrap();
        let (v, i) = max_pool2d_with_indices(p).unwrap();
        assert_eq!(v.to_vec::<i64>().unwrap(), vec![5, 7, 13, 15]);
        assert_eq!(i.to_vec::<i64>().unwrap(), vec![5, 7, 13, 15]);
        let flags = Tensor::from_vec(vec![true; 16], &[1, 1, 4, 4]).unwrap();
        let p = rule::max_pool2d_with_indices(&flags, &[2], &[], &[0], &[1], false).unwrap();
        assert!(max_pool2d_with_indices(p).is_err());
    }

    #[test]
    fn avg_adaptive_upsample() {
        use opal::rules::pool as rule;
        let x = plane();
        let avg = |k: &[i64], s: &[i64], p: &[i64], cip: bool| {
            let a = rule::avg_pool2d(&x, k, s, p, false, cip, None).unwrap();
            avg_pool2d(a).unwrap().to_vec::<f32>().unwrap()
        };
        assert_eq!(avg(&[2, 2], &[], &[], true), vec![2.5, 4.5, 10.5, 12.5]);
        assert_eq!(
            avg(&[3, 3], &[2, 2], &[1, 1], false)[0],
            (0. + 1. + 4. + 5.) / 4.
        );
        assert_eq!(
            avg(&[3, 3], &[2, 2], &[1, 1], true)[0],
            (0. + 1. + 4. + 5.) / 9.
        );
        let adaptive = |o: &[i64]| {
            _adaptive_avg_pool2d(rule::_adaptive_avg_pool2d(&x, o).unwrap())
                .unwrap()
                .to_vec::<f32>()
                .unwrap()
        };
        assert_eq!(adaptive(&[1, 1]), vec![7.5]);
        assert_eq!(adaptive(&[3, 3])[0], 2.5);
        assert!(adaptive(&[0, 2]).is_empty());
        let u =
            upsample_nearest2d(rule::upsample_nearest2d(&x, &[8, 8], None, None).unwrap()).unwrap();
        assert_eq!(u.to_vec::<f32>().unwrap()[..4], [0., 0., 1., 1.]);
    }
}
