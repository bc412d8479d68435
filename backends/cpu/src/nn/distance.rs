//! Pairwise p-norm distances: `_cdist_forward` (between the rows of two batched
//! matrices), `_pdist_forward` (between the rows of one matrix, pairs `i < j`) and
//! their backward ops. Output rows run in parallel, a few per task.
//!
//! Owns: the per-norm distance and gradient arithmetic and PyTorch's choice of the
//! matrix-product form of the Euclidean distance. Must not: restate the argument
//! checks or result shapes (`opal::rules::distance`).

use super::io::{by_f32_f64, make_output, with_slice, Compute};
use crate::dtype_dispatch::Elem;
use crate::parallel::fork_chunks_mut;
use opal::rules::distance::{Distance, DistanceBackward};
use opal::{OpalError, Result, Tensor};

/// The norm of the differences, by `p`: each has its own arithmetic.
#[derive(Clone, Copy)]
enum Norm {
    /// Count of differing coordinates.
    Zero,
    One,
    Two,
    Inf,
    /// Any other `p`.
    P(f64),
}

/// -1, 0 or 1 (0 for zero, unlike `signum`).
#[inline]
fn sign<C: Compute>(d: C) -> C {
    let zero = C::default();
    if d > zero {
        C::one()
    } else if d < zero {
        -C::one()
    } else {
        zero
    }
}

impl Norm {
    fn of(p: f64) -> Norm {
        match p {
            0.0 => Norm::Zero,
            1.0 => Norm::One,
            2.0 => Norm::Two,
            p if p == f64::INFINITY => Norm::Inf,
            p => Norm::P(p),
        }
    }

    /// The distance between rows `a` and `b`.
    #[inline]
    fn dist<C: Compute>(self, a: &[C], b: &[C]) -> C {
        let diffs = a.iter().zip(b).map(|(&x, &y)| (x - y).abs());
        match self {
            Norm::Zero => diffs
                .map(|d| if d != C::default() { C::one() } else { d })
                .sum(),
            Norm::One => diffs.sum(),
            Norm::Two => diffs.map(|d| d * d).sum::<C>().sqrt(),
            Norm::Inf => diffs.fold(C::default(), |m, d| if d > m || d.is_nan() { d } else { m }),
            Norm::P(p) => {
                let p = <C as Elem>::from_f64(p);
                diffs.map(|d| d.powf(p)).sum::<C>().powf(C::one() / p)
            }
        }
    }

    /// The contribution of one pair to the gradient of its first row's coordinate,
    /// for the coordinate difference `diff`, the incoming gradient `g` and the
    /// pair's distance `dist`.
    #[inline]
    fn grad<C: Compute>(self, diff: C, g: C, dist: C) -> C {
        let zero = C::default();
        match self {
            Norm::Zero => zero,
            Norm::One => sign(diff) * g,
            Norm::Two if dist == zero => zero,
            Norm::Two => g * diff / dist,
            Norm::Inf if diff.abs() == dist => sign(diff) * g,
            Norm::Inf => zero,
            Norm::P(p) if dist == zero || (p < 1.0 && diff == zero) => zero,
            Norm::P(p) if p < 2.0 => {
                let q = <C as Elem>::from_f64(p - 1.0);
                sign(diff) * diff.abs().powf(q) * g / dist.powf(q)
            }
            Norm::P(p) => {
                let p = <C as Elem>::from_f64(p);
                let two = C::one() + C::one();
                diff * diff.abs().powf(p - two) * g / dist.powf(p - C::one())
            }
        }
    }
}

/// For each index of the broadcast batch `out`, the flat index of the batch entry
/// of `input` (a batch shape broadcastable to `out`) it reads.
fn batch_map(out: &[i64], input: &[i64]) -> Vec<usize> {
    let total: i64 = out.iter().product();
    let off = out.len() - input.len();
    (0..total)
        .map(|mut b| {
            let (mut src, mut stride) = (0i64, 1i64);
            for d in (0..out.len()).rev() {
                let i = b % out[d];
                b /= out[d];
                if d >= off {
                    let s = input[d - off];
                    if s != 1 {
                        src += i * stride;
                    }
                    stride *= s;
                }
            }
            src as usize
        })
        .collect()
}

/// Output rows of `width` elements (`rows` in all), a few per task: `row(r, dst)`.
fn by_rows<C: Compute>(ys: &mut [C], width: usize, row: impl Fn(usize, &mut [C]) + Sync) {
    if width == 0 {
        return;
    }
    let per = (1024 / width).max(1);
    fork_chunks_mut(ys, per * width, |t, chunk| {
        for (k, dst) in chunk.chunks_mut(width).enumerate() {
            row(t * per + k, dst);
        }
    });
}

/// The geometry of a cdist problem: the broadcast batch and where each of its
/// entries reads `x1` and `x2`.
struct Pairs {
    r1: usize,
    r2: usize,
    c: usize,
    map1: Vec<usize>,
    map2: Vec<usize>,
}

impl Pairs {
    fn of(x1: &Tensor, x2: &Tensor, batch: &[i64]) -> Pairs {
        let (s1, s2) = (x1.sizes(), x2.sizes());
        let (n1, n2) = (s1.len(), s2.len());
        Pairs {
            r1: s1[n1 - 2] as usize,
            r2: s2[n2 - 2] as usize,
            c: s1[n1 - 1] as usize,
            map1: batch_map(batch, &s1[..n1 - 2]),
            map2: batch_map(batch, &s2[..n2 - 2]),
        }
    }
    fn row1<'a, C>(&self, x1: &'a [C], b: usize, i: usize) -> &'a [C] {
        let at = (self.map1[b] * self.r1 + i) * self.c;
        &x1[at..at + self.c]
    }
    fn rows2<'a, C>(&self, x2: &'a [C], b: usize) -> &'a [C] {
        let at = self.map2[b] * self.r2 * self.c;
        &x2[at..at + self.r2 * self.c]
    }
}

/// PyTorch computes the Euclidean distance as `sqrt(|a|^2 + |b|^2 - 2 a.b)` (one
/// matrix product) in mode 1, and in mode 0 when either side has more than 25
/// rows; the results differ from the direct form in the last bits.
fn euclid_by_product(p: f64, mode: Option<i64>, r1: usize, r2: usize) -> bool {
    p == 2.0 && (mode == Some(1) || (mode.unwrap_or(0) == 0 && (r1 > 25 || r2 > 25)))
}

/// Distances between the rows of `x1` and `x2`, batched with broadcasting
/// (arguments checked by [`opal::rules::distance::_cdist_forward`]).
pub fn _cdist_forward(d: Distance) -> Result<Tensor> {
    let (x1, x2, p, compute_mode, shape) = (d.x1, d.x2, d.p, d.compute_mode, d.shape);
    let g = Pairs::of(x1, x2, &shape[..shape.len() - 2]);
    let by_product = euclid_by_product(p, compute_mode, g.r1, g.r2);
    fn run<C: Compute>(
        x1: &Tensor,
        x2: &Tensor,
        shape: &[i64],
        g: &Pairs,
        norm: Norm,
        by_product: bool,
    ) -> Result<Tensor> {
        with_slice::<C, _>(x1, |a| {
            with_slice::<C, _>(x2, |b| {
                make_output::<C>(shape, x1.dtype(), |ys| {
                    by_rows(ys, g.r2, |r, dst| {
                        let (bi, i) = (r / g.r1, r % g.r1);
                        let xi = g.row1(a, bi, i);
                        let others = g.rows2(b, bi);
                        for (j, d) in dst.iter_mut().enumerate() {
                            let xj = &others[j * g.c..(j + 1) * g.c];
                            *d = if by_product {
                                let sq = |v: &[C]| v.iter().map(|&x| x * x).sum::<C>();
                                let two = C::one() + C::one();
                                let dot: C = xi.iter().zip(xj).map(|(&u, &v)| -two * u * v).sum();
                                let floor = <C as Elem>::from_f64(1e-30);
                                (dot + sq(xi) + sq(xj)).max(floor).sqrt()
                            } else {
                                norm.dist(xi, xj)
                            };
                        }
                    });
                    Ok(())
                })
            })
        })
    }
    by_f32_f64!(x1.dtype(), run(x1, x2, &shape, &g, Norm::of(p), by_product))
}

/// One row of a distance gradient: `dst[k] = sum_j grad_j * d dist_j / d xi[k]`
/// over the rows `j` of `others` (`gd(j)`: the incoming gradient and distance of
/// the pair, `None` to skip it).
#[inline]
fn grad_row<C: Compute>(
    norm: Norm,
    xi: &[C],
    others: &[C],
    gd: impl Fn(usize) -> Option<(C, C)>,
    dst: &mut [C],
) {
    dst.fill(C::default());
    let c = xi.len();
    if c == 0 {
        return;
    }
    for (j, xj) in others.chunks_exact(c).enumerate() {
        let Some((g, d)) = gd(j) else { continue };
        for ((o, &u), &v) in dst.iter_mut().zip(xi).zip(xj) {
            *o = *o + norm.grad(u - v, g, d);
        }
    }
}

/// Gradient of `_cdist_forward` with respect to `x1`, expanded to the distances'
/// batch (autograd sums it back to `x1`'s shape; arguments checked by
/// [`opal::rules::distance::_cdist_backward`]).
pub fn _cdist_backward(d: DistanceBackward) -> Result<Tensor> {
    const OP: &str = "_cdist_backward";
    let (grad, cdist) = (d.grad, d.result);
    let Distance {
        x1, x2, p, shape, ..
    } = d.forward;
    for (name, t) in [("grad", grad), ("cdist", cdist)] {
        if t.dtype() != x1.dtype() {
            return Err(OpalError::msg(format!(
                "{OP}: expected {name} of dtype {:?}, got {:?}",
                x1.dtype(),
                t.dtype()
            )));
        }
    }
    let g = Pairs::of(x1, x2, &shape[..shape.len() - 2]);
    fn run<C: Compute>(t: [&Tensor; 4], shape: &[i64], g: &Pairs, norm: Norm) -> Result<Tensor> {
        let [grad, x1, x2, cdist] = t;
        with_slice::<C, _>(x1, |a| {
            with_slice::<C, _>(x2, |b| {
                with_slice::<C, _>(grad, |gs| {
                    with_slice::<C, _>(cdist, |ds| {
                        make_output::<C>(shape, x1.dtype(), |ys| {
                            by_rows(ys, g.c, |r, dst| {
                                let (bi, i) = (r / g.r1, r % g.r1);
                                let base = r * g.r2;
                                let gd = |j: usize| Some((gs[base + j], ds[base + j]));
                                grad_row(norm, g.row1(a, bi, i), g.rows2(b, bi), gd, dst);
                            });
                            Ok(())
                        })
                    })
                })
            })
        })
    }
    by_f32_f64!(
        x1.dtype(),
        run([grad, x1, x2, cdist], &shape, &g, Norm::of(p))
    )
}

/// Index of the pair `(a, b)`, `a < b`, among the `n (n - 1) / 2` pairs of `n` rows.
#[inline]
fn pair_index(n: usize, a: usize, b: usize) -> usize {
    a * n - a * (a + 1) / 2 + (b - a - 1)
}

fn contiguous(op: &str, t: &Tensor) -> Result<()> {
    if t.is_contiguous() {
        Ok(())
    } else {
        Err(OpalError::msg(format!("{op} requires contiguous input")))
    }
}

/// Distances between every pair of rows `i < j` of a matrix (arguments checked by
/// [`opal::rules::distance::_pdist_forward`]).
pub fn _pdist_forward(d: Distance) -> Result<Tensor> {
    const OP: &str = "_pdist_forward";
    let (self_, p, shape) = (d.x1, d.p, d.shape);
    contiguous(OP, self_)?;
    fn run<C: Compute>(x: &Tensor, shape: &[i64], norm: Norm) -> Result<Tensor> {
        let (n, m) = (x.sizes()[0] as usize, x.sizes()[1] as usize);
        with_slice::<C, _>(x, |xs| {
            make_output::<C>(shape, x.dtype(), |ys| {
                // Row i owns the n - 1 - i pairs (i, j > i), stored one after another.
                let mut rows = Vec::with_capacity(n);
                let mut rest = ys;
                for i in 0..n {
                    let (seg, tail) = rest.split_at_mut(n - 1 - i);
                    rows.push((i, seg));
                    rest = tail;
                }
                crate::parallel::fork_each_mut(&mut rows, |(i, seg)| {
                    let xi = &xs[*i * m..(*i + 1) * m];
                    for (k, d) in seg.iter_mut().enumerate() {
                        let j = *i + 1 + k;
                        *d = norm.dist(xi, &xs[j * m..(j + 1) * m]);
                    }
                });
                Ok(())
            })
        })
    }
    by_f32_f64!(self_.dtype(), run(self_, &shape, Norm::of(p)))
}

/// Gradient of `_pdist_forward` with respect to its input (arguments checked by
/// [`opal::rules::distance::_pdist_backward`]).
pub fn _pdist_backward(d: DistanceBackward) -> Result<Tensor> {
    const OP: &str = "_pdist_backward";
    let (grad, pdist) = (d.grad, d.result);
    let (self_, p, shape) = (d.forward.x1, d.forward.p, d.forward.shape);
    contiguous(OP, self_)?;
    fn run<C: Compute>(t: [&Tensor; 3], shape: &[i64], norm: Norm) -> Result<Tensor> {
        let [grad, x, pdist] = t;
        let (n, m) = (shape[0] as usize, shape[1] as usize);
        with_slice::<C, _>(x, |xs| {
            with_slice::<C, _>(grad, |gs| {
                with_slice::<C, _>(pdist, |ds| {
                    make_output::<C>(shape, x.dtype(), |ys| {
                        by_rows(ys, m, |i, dst| {
                            let gd = |j: usize| {
                                let k = match j.cmp(&i) {
                                    std::cmp::Ordering::Equal => return None,
                                    std::cmp::Ordering::Less => pair_index(n, j, i),
                                    std::cmp::Ordering::Greater => pair_index(n, i, j),
                                };
                                Some((gs[k], ds[k]))
                            };
                            grad_row(norm, &xs[i * m..(i + 1) * m], xs, gd, dst);
                        });
                        Ok(())
                    })
                })
            })
        })
    }
    by_f32_f64!(
        self_.dtype(),
        run([grad, self_, pdist], &shape, Norm::of(p))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use opal::rules::distance as rule;

    #[test]
    fn norms_and_pairs() {
        let x = Tensor::from_vec(vec![0.0f64, 0.0, 3.0, 4.0, 6.0, 8.0], &[3, 2]).unwrap();
        let pd = _pdist_forward(rule::_pdist_forward(&x, 2.0).unwrap()).unwrap();
        assert_eq!(pd.to_vec::<f64>().unwrap(), vec![5.0, 10.0, 5.0]);
        let cdist = |p: f64| rule::_cdist_forward(&x, &x, p, None).and_then(_cdist_forward);
        let c = cdist(1.0).unwrap().to_vec::<f64>().unwrap();
        assert_eq!(&c[..3], &[0.0, 7.0, 14.0]);
        let inf = cdist(f64::INFINITY).unwrap().to_vec::<f64>().unwrap();
        assert_eq!(inf[1], 4.0);
        assert!(cdist(-1.0).is_err());
        assert_eq!(pair_index(4, 1, 3), 4);
    }
}
