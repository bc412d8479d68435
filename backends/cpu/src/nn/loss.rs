//! Losses: `mse_loss` (+ backward), `nll_loss_forward` / `nll_loss_backward`,
//! `binary_cross_entropy`, with out= forms. `reduction` is PyTorch's enum:
//! 0 = none, 1 = mean, 2 = sum.
//!
//! Owns: each loss's formula, target / weight checks and reduction handling.
//! Must not: touch other ops' numerics.

use super::io::{
    compute_dtype, err, make_output, numel, shape_err, with_slice, write_out, Compute,
};
use crate::copy::to_vec_as;
use opal::{DType, Result, Tensor};

#[derive(Copy, Clone, PartialEq)]
enum Reduction {
    None,
    Mean,
    Sum,
}

fn reduction(r: i64, op: &str) -> Result<Reduction> {
    match r {
        0 => Ok(Reduction::None),
        1 => Ok(Reduction::Mean),
        2 => Ok(Reduction::Sum),
        other => Err(err(
            op,
            format!("{other} is not a valid value for reduction"),
        )),
    }
}

/// Both operands broadcast to a common shape and read as `C`.
fn broadcast_pair<C: Compute>(
    a: &Tensor,
    b: &Tensor,
    op: &str,
) -> Result<(Vec<i64>, Vec<C>, Vec<C>)> {
    let shape = opal::rules::broadcast_shapes(op, &[a.sizes(), b.sizes()])?;
    let ea = crate::shape::expand(a, &shape, false)?;
    let eb = crate::shape::expand(b, &shape, false)?;
    Ok((shape, to_vec_as::<C>(&ea)?, to_vec_as::<C>(&eb)?))
}

fn reduce<C: Compute>(v: Vec<C>, shape: &[i64], red: Reduction, dt: DType) -> Result<Tensor> {
    match red {
        Reduction::None => make_output::<C>(shape, dt, |o| {
            o.copy_from_slice(&v);
            Ok(())
        }),
        Reduction::Sum | Reduction::Mean => {
            let mut s: C = v.iter().copied().fold(num_traits::zero(), |a, b| a + b);
            if red == Reduction::Mean {
                // Mean of nothing is NaN, as in PyTorch.
                s = s / C::from(v.len()).unwrap_or_else(C::one);
            }
            make_output::<C>(&[], dt, |o| {
                o[0] = s;
                Ok(())
            })
        }
    }
}

fn float_pair(a: &Tensor, b: &Tensor, op: &str) -> Result<DType> {
    let dt = opal::promote_types(a.dtype(), b.dtype());
    compute_dtype(dt, op)?;
    Ok(dt)
}

/// Mean-squared error `(self - target)^2`, reduced.
pub fn mse_loss(self_: &Tensor, target: &Tensor, reduction_: i64) -> Result<Tensor> {
    const OP: &str = "mse_loss";
    let red = reduction(reduction_, OP)?;
    let dt = float_pair(self_, target, OP)?;
    fn run<C: Compute>(x: &Tensor, t: &Tensor, red: Reduction, dt: DType) -> Result<Tensor> {
        let (shape, xv, tv) = broadcast_pair::<C>(x, t, OP)?;
        let v: Vec<C> = xv
            .iter()
            .zip(&tv)
            .map(|(&a, &b)| (a - b) * (a - b))
            .collect();
        reduce(v, &shape, red, dt)
    }
    match compute_dtype(dt, OP)? {
        DType::F64 => run::<f64>(self_, target, red, dt),
        _ => run::<f32>(self_, target, red, dt),
    }
}

/// `mse_loss` into `out`.
pub fn mse_loss_out(
    self_: &Tensor,
    target: &Tensor,
    reduction_: i64,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(&mse_loss(self_, target, reduction_)?, out, "mse_loss.out")
}

/// Gradient of `mse_loss` w.r.t. `self`: `2 (self - target) * grad` (`/ numel` for mean).
pub fn mse_loss_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    reduction_: i64,
) -> Result<Tensor> {
    const OP: &str = "mse_loss_backward";
    let red = reduction(reduction_, OP)?;
    let dt = float_pair(self_, target, OP)?;
    fn run<C: Compute>(
        g: &Tensor,
        x: &Tensor,
        t: &Tensor,
        red: Reduction,
        dt: DType,
    ) -> Result<Tensor> {
        let (shape, xv, tv) = broadcast_pair::<C>(x, t, OP)?;
        let ge = crate::shape::expand(g, &shape, false).map_err(|e| shape_err(OP, e))?;
        let gv = to_vec_as::<C>(&ge)?;
        let n = C::from(numel(&shape)).unwrap_or_else(C::one);
        let two = C::one() + C::one();
        make_output::<C>(&shape, dt, |o| {
            for i in 0..o.len() {
                let d = two * (xv[i] - tv[i]) * gv[i];
                o[i] = if red == Reduction::Mean { d / n } else { d };
            }
            Ok(())
        })
    }
    match compute_dtype(dt, OP)? {
        DType::F64 => run::<f64>(grad_output, self_, target, red, dt),
        _ => run::<f32>(grad_output, self_, target, red, dt),
    }
}

/// `mse_loss_backward` into `grad_input`.
pub fn mse_loss_backward_grad_input(
    grad_output: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    reduction_: i64,
    grad_input: &Tensor,
) -> Result<Tensor> {
    write_out(
        &mse_loss_backward(grad_output, self_, target, reduction_)?,
        grad_input,
        "mse_loss_backward.grad_input",
    )
}

/// Validated shapes for nll: `(batch, classes, batched)`.
fn nll_dims(
    x: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    op: &str,
) -> Result<(usize, usize, bool)> {
    let (n, c, batched) = match x.dim() {
        1 => (1, x.sizes()[0] as usize, false),
        2 => (x.sizes()[0] as usize, x.sizes()[1] as usize, true),
        d => {
            return Err(shape_err(
                op,
                format!("input tensor should be 1D or 2D, got {d}D"),
            ))
        }
    };
    let ok = if batched {
        target.dim() == 1 && target.sizes()[0] as usize == n
    } else {
        target.dim() == 0
    };
    if !ok {
        return Err(shape_err(
            op,
            format!(
                "Expected input batch_size ({n}) to match target batch_size ({:?}).",
                target.sizes()
            ),
        ));
    }
    if let Some(w) = weight {
        if w.numel() as usize != c {
            return Err(shape_err(op, format!("weight tensor should be defined either for all {c} classes or no classes but got weight tensor of shape: {:?}", w.sizes())));
        }
    }
    if !matches!(target.dtype(), DType::I64 | DType::U8) {
        return Err(err(
            op,
            format!("expected scalar type Long but found {}", target.dtype()),
        ));
    }
    Ok((n, c, batched))
}

/// A sample's target class and its weight, or `None` for `ignore_index`; an error
/// when the class is outside `0..classes`.
fn target_class<C: Compute>(
    cls: i64,
    ignore_index: i64,
    classes: usize,
    weights: Option<&[C]>,
    op: &str,
) -> Result<Option<(usize, C)>> {
    if cls == ignore_index {
        return Ok(None);
    }
    if cls < 0 || cls as usize >= classes {
        return Err(err(op, format!("Target {cls} is out of bounds.")));
    }
    let c = cls as usize;
    Ok(Some((c, weights.map_or(C::one(), |w| w[c]))))
}

/// Negative log-likelihood: `-weight[t] * self[n, t]` per sample, ignoring
/// `ignore_index`; returns `(output, total_weight)` where `total_weight` sums the
/// weights of the counted samples (0 for `reduction = none`).
pub fn nll_loss_forward(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction_: i64,
    ignore_index: i64,
) -> Result<(Tensor, Tensor)> {
    const OP: &str = "nll_loss_forward";
    let red = reduction(reduction_, OP)?;
    let dt = self_.dtype();
    let cd = compute_dtype(dt, OP)?;
    let (n, c, batched) = nll_dims(self_, target, weight, OP)?;
    fn run<C: Compute>(
        x: &Tensor,
        t: &Tensor,
        w: Option<&Tensor>,
        red: Reduction,
        ii: i64,
        dims: (usize, usize, bool),
    ) -> Result<(Tensor, Tensor)> {
        let (n, c, batched) = dims;
        let tv = to_vec_as::<i64>(t)?;
        let wv = w.map(to_vec_as::<C>).transpose()?;
        let mut per = vec![num_traits::zero::<C>(); n];
        let mut total = num_traits::zero::<C>();
        // Only n of the n x c inputs are read: borrow them in place when possible.
        with_slice::<C, _>(x, |xv| {
            for i in 0..n {
                let Some((cls, wt)) = target_class(tv[i], ii, c, wv.as_deref(), OP)? else {
                    continue;
                };
                per[i] = -(xv[i * c + cls] * wt);
                total = total + wt;
            }
            Ok(())
        })?;
        let dt = x.dtype();
        let scalar = |v: C| {
            make_output::<C>(&[], dt, |o| {
                o[0] = v;
                Ok(())
            })
        };
        match red {
            Reduction::None if batched => {
                let out = make_output::<C>(&[n as i64], dt, |o| {
                    o.copy_from_slice(&per);
                    Ok(())
                })?;
                Ok((out, scalar(num_traits::zero())?))
            }
            Reduction::None => Ok((scalar(per[0])?, scalar(num_traits::zero())?)),
            Reduction::Sum => Ok((
                scalar(per.iter().copied().fold(num_traits::zero(), |a, b| a + b))?,
                scalar(total)?,
            )),
            Reduction::Mean => {
                let s = per
                    .iter()
                    .copied()
                    .fold(num_traits::zero::<C>(), |a, b| a + b);
                Ok((scalar(s / total)?, scalar(total)?))
            }
        }
    }
    let dims = (n, c, batched);
    match cd {
        DType::F64 => run::<f64>(self_, target, weight, red, ignore_index, dims),
        _ => run::<f32>(self_, target, weight, red, ignore_index, dims),
    }
}

/// `nll_loss_forward` into `output` and `total_weight`.
pub fn nll_loss_forward_output(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction_: i64,
    ignore_index: i64,
    output: &Tensor,
    total_weight: &Tensor,
) -> Result<(Tensor, Tensor)> {
    const OP: &str = "nll_loss_forward.output";
    let (o, t) = nll_loss_forward(self_, target, weight, reduction_, ignore_index)?;
    Ok((write_out(&o, output, OP)?, write_out(&t, total_weight, OP)?))
}

/// Gradient of nll w.r.t. `self`: `-weight[t] * grad` at each sample's target class
/// (divided by `total_weight` for mean), zero elsewhere and for ignored samples.
#[allow(clippy::too_many_arguments)]
pub fn nll_loss_backward(
    grad_output: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction_: i64,
    ignore_index: i64,
    total_weight: &Tensor,
) -> Result<Tensor> {
    const OP: &str = "nll_loss_backward";
    let red = reduction(reduction_, OP)?;
    let cd = compute_dtype(self_.dtype(), OP)?;
    let (n, c, batched) = nll_dims(self_, target, weight, OP)?;
    let per_sample = red == Reduction::None && batched;
    if per_sample && grad_output.numel() as usize != n {
        return Err(shape_err(OP, format!("Expected a tensor of dimension 1 and tensor.size[0] == {n} but got: dimension {} and tensor.size[0] == {:?}", grad_output.dim(), grad_output.sizes())));
    }
    if !per_sample && grad_output.numel() != 1 {
        return Err(shape_err(
            OP,
            format!(
                "Expected a single element grad_output tensor, but got: {:?}",
                grad_output.sizes()
            ),
        ));
    }
    #[allow(clippy::too_many_arguments)]
    fn run<C: Compute>(
        g: &Tensor,
        x: &Tensor,
        t: &Tensor,
        w: Option<&Tensor>,
        red: Reduction,
        ii: i64,
        tw: &Tensor,
        dims: (usize, usize, bool),
    ) -> Result<Tensor> {
        let (n, c, _) = dims;
        let (gv, tv) = (to_vec_as::<C>(g)?, to_vec_as::<i64>(t)?);
        let wv = w.map(to_vec_as::<C>).transpose()?;
        let total = to_vec_as::<C>(tw)?.first().copied().unwrap_or_else(C::one);
        make_output::<C>(x.sizes(), x.dtype(), |o| {
            o.iter_mut().for_each(|v| *v = num_traits::zero());
            for i in 0..n {
                let Some((cls, wt)) = target_class(tv[i], ii, c, wv.as_deref(), OP)? else {
                    continue;
                };
                let gi = if red == Reduction::None {
                    gv[i.min(gv.len() - 1)]
                } else {
                    gv[0]
                };
                let mut v = -(wt * gi);
                if red == Reduction::Mean {
                    v = v / total;
                }
                o[i * c + cls] = v;
            }
            Ok(())
        })
    }
    let dims = (n, c, batched);
    match cd {
        DType::F64 => run::<f64>(
            grad_output,
            self_,
            target,
            weight,
            red,
            ignore_index,
            total_weight,
            dims,
        ),
        _ => run::<f32>(
            grad_output,
            self_,
            target,
            weight,
            red,
            ignore_index,
            total_weight,
            dims,
        ),
    }
}

/// `nll_loss_backward` into `grad_input`.
#[allow(clippy::too_many_arguments)]
pub fn nll_loss_backward_grad_input(
    grad_output: &Tensor,
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction_: i64,
    ignore_index: i64,
    total_weight: &Tensor,
    grad_input: &Tensor,
) -> Result<Tensor> {
    let r = nll_loss_backward(
        grad_output,
        self_,
        target,
        weight,
        reduction_,
        ignore_index,
        total_weight,
    )?;
    write_out(&r, grad_input, "nll_loss_backward.grad_input")
}

/// Binary cross entropy `-w (t log(x) + (1 - t) log(1 - x))`, logs clamped at -100.
pub fn binary_cross_entropy(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction_: i64,
) -> Result<Tensor> {
    const OP: &str = "binary_cross_entropy";
    let red = reduction(reduction_, OP)?;
    let dt = self_.dtype();
    let cd = compute_dtype(dt, OP)?;
    if target.sizes() != self_.sizes() {
        return Err(shape_err(OP, format!("Using a target size ({:?}) that is different to the input size ({:?}) is deprecated. Please ensure they have the same size.", target.sizes(), self_.sizes())));
    }
    fn run<C: Compute>(
        x: &Tensor,
        t: &Tensor,
        w: Option<&Tensor>,
        red: Reduction,
        dt: DType,
    ) -> Result<Tensor> {
        let (xv, tv) = (to_vec_as::<C>(x)?, to_vec_as::<C>(t)?);
        let wv = match w {
            Some(w) => Some(to_vec_as::<C>(
                &crate::shape::expand(w, x.sizes(), false).map_err(|e| shape_err(OP, e))?,
            )?),
            None => None,
        };
        let floor = C::from(-100.0).unwrap_or_else(C::neg_infinity);
        let mut v = Vec::with_capacity(xv.len());
        for i in 0..xv.len() {
            let (p, y) = (xv[i], tv[i]);
            if !(p >= num_traits::zero() && p <= C::one()) {
                return Err(err(OP, "all elements of input should be between 0 and 1"));
            }
            let l = -(y * p.ln().max(floor) + (C::one() - y) * (C::one() - p).ln().max(floor));
            v.push(wv.as_ref().map_or(l, |w| l * w[i]));
        }
        reduce(v, x.sizes(), red, dt)
    }
    match cd {
        DType::F64 => run::<f64>(self_, target, weight, red, dt),
        _ => run::<f32>(self_, target, weight, red, dt),
    }
}

/// `binary_cross_entropy` into `out`.
pub fn binary_cross_entropy_out(
    self_: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction_: i64,
    out: &Tensor,
) -> Result<Tensor> {
    write_out(
        &binary_cross_entropy(self_, target, weight, reduction_)?,
        out,
        "binary_cross_entropy.out",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(v: &[f64], s: &[i64]) -> Tensor {
        Tensor::from_slice(v, s).unwrap()
    }

    #[test]
    fn mse_and_its_gradient() {
        let (x, t) = (f(&[1.0, 2.0], &[2]), f(&[0.0, 4.0], &[2]));
        assert_eq!(
            mse_loss(&x, &t, 1).unwrap().to_vec::<f64>().unwrap(),
            vec![2.5]
        );
        assert_eq!(
            mse_loss(&x, &t, 0).unwrap().to_vec::<f64>().unwrap(),
            vec![1.0, 4.0]
        );
        let g = mse_loss_backward(&f(&[1.0], &[]), &x, &t, 1).unwrap();
        assert_eq!(g.to_vec::<f64>().unwrap(), vec![1.0, -2.0]);
        assert!(mse_loss(&x, &t, 3).is_err());
    }

    #[test]
    fn nll_forward_backward() {
        let x = f(&[-1.0, -2.0, -3.0, -4.0], &[2, 2]);
        let t = Tensor::from_slice(&[1i64, 0], &[2]).unwrap();
        let w = f(&[1.0, 3.0], &[2]);
        let (o, tw) = nll_loss_forward(&x, &t, Some(&w), 1, -100).unwrap();
        assert_eq!(tw.to_vec::<f64>().unwrap(), vec![4.0]);
        assert_eq!(o.to_vec::<f64>().unwrap(), vec![(6.0 + 3.0) / 4.0]);
        let (o, _) = nll_loss_forward(&x, &t, None, 0, 0).unwrap();
        assert_eq!(o.to_vec::<f64>().unwrap(), vec![2.0, 0.0]);
        let g = nll_loss_backward(&f(&[1.0], &[]), &x, &t, Some(&w), 1, -100, &tw).unwrap();
        assert_eq!(g.to_vec::<f64>().unwrap(), vec![0.0, -0.75, -0.25, 0.0]);
        let bad = Tensor::from_slice(&[5i64, 0], &[2]).unwrap();
        assert!(nll_loss_forward(&x, &bad, None, 1, -100)
            .unwrap_err()
            .to_string()
            .contains("out of bounds"));
    }

    #[test]
    fn bce_values_and_range_check() {
        let x = f(&[0.5, 1.0], &[2]);
        let t = f(&[1.0, 1.0], &[2]);
        let l = binary_cross_entropy(&x, &t, None, 2)
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        assert!((l[0] - std::f64::consts::LN_2).abs() < 1e-12);
        assert!(binary_cross_entropy(&f(&[1.5], &[1]), &f(&[1.0], &[1]), None, 1).is_err());
    }
}
