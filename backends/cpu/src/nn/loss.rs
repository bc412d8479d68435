//! Losses: `mse_loss` (+ backward), `nll_loss_forward` / `nll_loss_backward`,
//! `binary_cross_entropy`, and `mse_loss`'s element-wise out= forms (the others'
//! are derived through `out_copy:`).
//!
//! Owns: each loss's formula and reduction handling. Must not: check shapes,
//! targets or weights (`opal::rules::loss`, named as the rule in `backend.yaml`),
//! or touch other ops' numerics.

use super::io::{
    compute_dtype, err, make_output, numel, shape_err, with_slice, write_out, Compute,
};
use crate::copy::to_vec_as;
use opal::rules::loss::{
    BinaryCrossEntropy, MseLoss, MseLossBackward, NllLoss, NllLossBackward, Reduction, WithOut,
};
use opal::{DType, Result, Tensor};

/// Both operands broadcast to `shape` and read as `C`.
fn broadcast_pair<C: Compute>(a: &Tensor, b: &Tensor, shape: &[i64]) -> Result<(Vec<C>, Vec<C>)> {
    let ea = crate::shape::expand(a, shape, false)?;
    let eb = crate::shape::expand(b, shape, false)?;
    Ok((to_vec_as::<C>(&ea)?, to_vec_as::<C>(&eb)?))
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

/// Mean-squared error `(self - target)^2`, reduced.
pub fn mse_loss(m: MseLoss) -> Result<Tensor> {
    const OP: &str = "mse_loss";
    fn run<C: Compute>(m: &MseLoss) -> Result<Tensor> {
        let (xv, tv) = broadcast_pair::<C>(m.input, m.target, &m.shape)?;
        let v: Vec<C> = xv
            .iter()
            .zip(&tv)
            .map(|(&a, &b)| (a - b) * (a - b))
            .collect();
        reduce(v, &m.shape, m.reduction, m.dtype)
    }
    match compute_dtype(m.dtype, OP)? {
        DType::F64 => run::<f64>(&m),
        _ => run::<f32>(&m),
    }
}

/// `mse_loss` into `out` (any dtype the result casts to).
pub fn mse_loss_out(w: WithOut<MseLoss>) -> Result<Tensor> {
    write_out(&mse_loss(w.args)?, w.out, "mse_loss.out")
}

/// Gradient of `mse_loss` w.r.t. `self`: `2 (self - target) * grad` (`/ numel` for
/// mean), in `self`'s dtype.
pub fn mse_loss_backward(b: MseLossBackward) -> Result<Tensor> {
    const OP: &str = "mse_loss_backward";
    fn run<C: Compute>(b: &MseLossBackward) -> Result<Tensor> {
        let m = &b.loss;
        let (xv, tv) = broadcast_pair::<C>(m.input, m.target, &m.shape)?;
        let ge =
            crate::shape::expand(b.grad_output, &m.shape, false).map_err(|e| shape_err(OP, e))?;
        let gv = to_vec_as::<C>(&ge)?;
        let n = C::from(numel(&m.shape)).unwrap_or_else(C::one);
        let two = C::one() + C::one();
        let mean = m.reduction == Reduction::Mean;
        make_output::<C>(&m.shape, m.input.dtype(), |o| {
            for i in 0..o.len() {
                let d = two * (xv[i] - tv[i]) * gv[i];
                o[i] = if mean { d / n } else { d };
            }
            Ok(())
        })
    }
    match compute_dtype(b.loss.dtype, OP)? {
        DType::F64 => run::<f64>(&b),
        _ => run::<f32>(&b),
    }
}

/// `mse_loss_backward` into `grad_input` (any dtype the result casts to).
pub fn mse_loss_backward_grad_input(w: WithOut<MseLossBackward>) -> Result<Tensor> {
    write_out(
        &mse_loss_backward(w.args)?,
        w.out,
        "mse_loss_backward.grad_input",
    )
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
pub fn nll_loss_forward(l: NllLoss) -> Result<(Tensor, Tensor)> {
    const OP: &str = "nll_loss_forward";
    fn run<C: Compute>(l: &NllLoss) -> Result<(Tensor, Tensor)> {
        let (n, c) = (l.batch, l.classes);
        let tv = to_vec_as::<i64>(l.target)?;
        let wv = l.weight.map(to_vec_as::<C>).transpose()?;
        let mut per = vec![num_traits::zero::<C>(); n];
        let mut total = num_traits::zero::<C>();
        // Only n of the n x c inputs are read: borrow them in place when possible.
        with_slice::<C, _>(l.input, |xv| {
            for i in 0..n {
                let Some((cls, wt)) = target_class(tv[i], l.ignore_index, c, wv.as_deref(), OP)?
                else {
                    continue;
                };
                per[i] = -(xv[i * c + cls] * wt);
                total = total + wt;
            }
            Ok(())
        })?;
        let dt = l.input.dtype();
        let scalar = |v: C| {
            make_output::<C>(&[], dt, |o| {
                o[0] = v;
                Ok(())
            })
        };
        let sum = || {
            per.iter()
                .copied()
                .fold(num_traits::zero::<C>(), |a, b| a + b)
        };
        match l.reduction {
            Reduction::None if l.batched => {
                let out = make_output::<C>(&l.sizes, dt, |o| {
                    o.copy_from_slice(&per);
                    Ok(())
                })?;
                Ok((out, scalar(num_traits::zero())?))
            }
            Reduction::None => Ok((scalar(per[0])?, scalar(num_traits::zero())?)),
            Reduction::Sum => Ok((scalar(sum())?, scalar(total)?)),
            Reduction::Mean => Ok((scalar(sum() / total)?, scalar(total)?)),
        }
    }
    match compute_dtype(l.input.dtype(), OP)? {
        DType::F64 => run::<f64>(&l),
        _ => run::<f32>(&l),
    }
}

/// Gradient of nll w.r.t. `self`: `-weight[t] * grad` at each sample's target class
/// (divided by `total_weight` for mean), zero elsewhere and for ignored samples.
pub fn nll_loss_backward(b: NllLossBackward) -> Result<Tensor> {
    const OP: &str = "nll_loss_backward";
    fn run<C: Compute>(b: &NllLossBackward) -> Result<Tensor> {
        let l = &b.nll;
        let (n, c, red) = (l.batch, l.classes, l.reduction);
        let (gv, tv) = (to_vec_as::<C>(b.grad_output)?, to_vec_as::<i64>(l.target)?);
        let wv = l.weight.map(to_vec_as::<C>).transpose()?;
        let total = to_vec_as::<C>(b.total_weight)?
            .first()
            .copied()
            .unwrap_or_else(C::one);
        make_output::<C>(l.input.sizes(), l.input.dtype(), |o| {
            o.iter_mut().for_each(|v| *v = num_traits::zero());
            for i in 0..n {
                let Some((cls, wt)) = target_class(tv[i], l.ignore_index, c, wv.as_deref(), OP)?
                else {
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
    match compute_dtype(b.nll.input.dtype(), OP)? {
        DType::F64 => run::<f64>(&b),
        _ => run::<f32>(&b),
    }
}

/// Binary cross entropy `-w (t log(x) + (1 - t) log(1 - x))`, logs clamped at -100.
pub fn binary_cross_entropy(b: BinaryCrossEntropy) -> Result<Tensor> {
    const OP: &str = "binary_cross_entropy";
    fn run<C: Compute>(b: &BinaryCrossEntropy) -> Result<Tensor> {
        let x = b.input;
        let (xv, tv) = (to_vec_as::<C>(x)?, to_vec_as::<C>(b.target)?);
        let wv = match b.weight {
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
        reduce(v, x.sizes(), b.reduction, x.dtype())
    }
    match compute_dtype(b.input.dtype(), OP)? {
        DType::F64 => run::<f64>(&b),
        _ => run::<f32>(&b),
    }
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
            opal::rules::loss::mse_loss(&x, &t, 1)
                .and_then(mse_loss)
                .unwrap()
                .to_vec::<f64>()
                .unwrap(),
            vec![2.5]
        );
        assert_eq!(
            opal::rules::loss::mse_loss(&x, &t, 0)
                .and_then(mse_loss)
                .unwrap()
                .to_vec::<f64>()
                .unwrap(),
            vec![1.0, 4.0]
        );
        let g = opal::rules::loss::mse_loss_backward(&f(&[1.0], &[]), &x, &t, 1)
            .and_then(mse_loss_backward)
            .unwrap();
        assert_eq!(g.to_vec::<f64>().unwrap(), vec![1.0, -2.0]);
        assert!(opal::rules::loss::mse_loss(&x, &t, 3)
            .and_then(mse_loss)
            .is_err());
    }

    #[test]
    fn nll_forward_backward() {
        let x = f(&[-1.0, -2.0, -3.0, -4.0], &[2, 2]);
        let t = Tensor::from_slice(&[1i64, 0], &[2]).unwrap();
        let w = f(&[1.0, 3.0], &[2]);
        let (o, tw) = opal::rules::loss::nll_loss_forward(&x, &t, Some(&w), 1, -100)
            .and_then(nll_loss_forward)
            .unwrap();
        assert_eq!(tw.to_vec::<f64>().unwrap(), vec![4.0]);
        assert_eq!(o.to_vec::<f64>().unwrap(), vec![(6.0 + 3.0) / 4.0]);
        let (o, _) = opal::rules::loss::nll_loss_forward(&x, &t, None, 0, 0)
            .and_then(nll_loss_forward)
            .unwrap();
        assert_eq!(o.to_vec::<f64>().unwrap(), vec![2.0, 0.0]);
        let g =
            opal::rules::loss::nll_loss_backward(&f(&[1.0], &[]), &x, &t, Some(&w), 1, -100, &tw)
                .and_then(nll_loss_backward)
                .unwrap();
        assert_eq!(g.to_vec::<f64>().unwrap(), vec![0.0, -0.75, -0.25, 0.0]);
        let bad = Tensor::from_slice(&[5i64, 0], &[2]).unwrap();
        assert!(opal::rules::loss::nll_loss_forward(&x, &bad, None, 1, -100)
            .and_then(nll_loss_forward)
            .unwrap_err()
            .to_string()
            .contains("out of bounds"));
    }

    #[test]
    fn bce_values_and_range_check() {
        let x = f(&[0.5, 1.0], &[2]);
        let t = f(&[1.0, 1.0], &[2]);
        let l = opal::rules::loss::binary_cross_entropy(&x, &t, None, 2)
            .and_then(binary_cross_entropy)
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        assert!((l[0] - std::f64::consts::LN_2).abs() < 1e-12);
        assert!(opal::rules::loss::binary_cross_entropy(
            &f(&[1.5], &[1]),
            &f(&[1.0], &[1]),
            None,
            1
        )
        .and_then(binary_cross_entropy)
        .is_err());
    }
}
