//! The losses' argument rules, shared by the CPU and Meta kernels: `reduction`
//! (PyTorch's enum: 0 none, 1 mean, 2 sum), `nll_loss_forward`'s input, target
//! and weight shapes (and its backward's gradient and total weight),
//! `mse_loss`'s broadcast (and its backward's), `binary_cross_entropy`'s target
//! and weight. Each op's rule (and the rules of `mse_loss`'s element-wise `out=`
//! forms) takes the schema's arguments and returns them checked with the result's
//! sizes; both backends' YAML entries read `rule | kernel`, so the ops' signatures
//! are written here only.
//!
//! Owns: these checks and their errors (PyTorch's wording). Must not: allocate
//! tensors, read their data (a target class out of range is the kernel's error),
//! or refuse what only one backend cannot compute.

use crate::{DType, OpalError, Result, Tensor};

/// A loss's `reduction`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// 0: one loss per element (or sample).
    None,
    /// 1: their mean.
    Mean,
    /// 2: their sum.
    Sum,
}

/// `reduction` as a [`Reduction`]; any other value is an error naming `op`.
pub fn reduction(op: &str, r: i64) -> Result<Reduction> {
    match r {
        0 => Ok(Reduction::None),
        1 => Ok(Reduction::Mean),
        2 => Ok(Reduction::Sum),
        other => Err(OpalError::msg(format!(
            "{op}: {other} is not a valid value for reduction"
        ))),
    }
}

/// The sizes of a reduced loss over `sizes`: `sizes` without reduction, else a
/// scalar.
fn reduced(sizes: &[i64], r: Reduction) -> Vec<i64> {
    if r == Reduction::None {
        sizes.to_vec()
    } else {
        Vec::new()
    }
}

/// `nll_loss_forward`'s arguments, checked.
#[derive(Clone, Debug)]
#[allow(missing_docs, reason = "the schema's arguments, by their names")]
pub struct NllLoss<'a> {
    pub input: &'a Tensor,
    pub target: &'a Tensor,
    pub weight: Option<&'a Tensor>,
    pub reduction: Reduction,
    pub ignore_index: i64,
    /// Samples (1 for an unbatched input).
    pub batch: usize,
    /// Classes.
    pub classes: usize,
    /// Whether the input is `[N, C]` (else `[C]`).
    pub batched: bool,
    /// The sizes of `output`: `[N]` for a batched input without reduction, else
    /// a scalar (`total_weight` is always a scalar).
    pub sizes: Vec<i64>,
}

/// The rule of `nll_loss_forward` (and of its `output` form): a `[N, C]` input
/// with `[N]` int64 (or uint8) targets, or `[C]` with a scalar one, and a weight
/// of `C` elements.
pub fn nll_loss_forward<'a>(
    self_: &'a Tensor,
    target: &'a Tensor,
    weight: Option<&'a Tensor>,
    reduction: i64,
    ignore_index: i64,
) -> Result<NllLoss<'a>> {
    nll(
        "nll_loss_forward",
        self_,
        target,
        weight,
        reduction,
        ignore_index,
    )
}

fn nll<'a>(
    op: &str,
    input: &'a Tensor,
    target: &'a Tensor,
    weight: Option<&'a Tensor>,
    r: i64,
    ignore_index: i64,
) -> Result<NllLoss<'a>> {
    super::check_defined(op, &[input, target])?;
    let reduction = reduction(op, r)?;
    let (s, t) = (input.sizes(), target.sizes());
    let (batch, classes, batched) = match *s {
        [c] => (1, c, false),
        [n, c] => (n, c, true),
        _ => {
            return Err(OpalError::shape(format!(
                "{op}: input tensor should be 1D or 2D, got {}D",
                s.len()
            )))
        }
    };
    let matches = if batched { t == [batch] } else { t.is_empty() };
    if !matches {
        return Err(OpalError::shape(format!(
            "{op}: Expected input batch_size ({batch}) to match target batch_size ({t:?})."
        )));
    }
    if let Some(w) = weight {
        if w.numel() != classes {
            return Err(OpalError::shape(format!("{op}: weight tensor should be defined either for all {classes} classes or no classes but got weight tensor of shape: {:?}", w.sizes())));
        }
    }
    if !matches!(target.dtype(), DType::I64 | DType::U8) {
        return Err(OpalError::msg(format!(
            "{op}: expected scalar type Long but found {}",
            target.dtype()
        )));
    }
    let sizes = if batched && reduction == Reduction::None {
        vec![batch]
    } else {
        Vec::new()
    };
    Ok(NllLoss {
        input,
        target,
        weight,
        reduction,
        ignore_index,
        batch: batch as usize,
        classes: classes as usize,
        batched,
        sizes,
    })
}

/// `nll_loss_backward`'s arguments, checked.
#[derive(Clone, Debug)]
pub struct NllLossBackward<'a> {
    /// One gradient per sample (batched, no reduction), else a single one.
    pub grad_output: &'a Tensor,
    /// The forward's `total_weight`, a single element.
    pub total_weight: &'a Tensor,
    /// The forward's arguments.
    pub nll: NllLoss<'a>,
}

/// The rule of `nll_loss_backward` (and of its `grad_input` form): the forward's,
/// a `grad_output` of the forward result's element count and a single-element
/// `total_weight`.
#[allow(
    clippy::too_many_arguments,
    reason = "the schema fixes the argument list"
)]
pub fn nll_loss_backward<'a>(
    grad_output: &'a Tensor,
    self_: &'a Tensor,
    target: &'a Tensor,
    weight: Option<&'a Tensor>,
    reduction: i64,
    ignore_index: i64,
    total_weight: &'a Tensor,
) -> Result<NllLossBackward<'a>> {
    const OP: &str = "nll_loss_backward";
    super::check_defined(OP, &[grad_output, total_weight])?;
    let nll = nll(OP, self_, target, weight, reduction, ignore_index)?;
    let per_sample = nll.reduction == Reduction::None && nll.batched;
    if per_sample && grad_output.numel() as usize != nll.batch {
        return Err(OpalError::shape(format!("{OP}: Expected a tensor of dimension 1 and tensor.size[0] == {} but got: dimension {} and tensor.size[0] == {:?}", nll.batch, grad_output.dim(), grad_output.sizes())));
    }
    if !per_sample && grad_output.numel() != 1 {
        return Err(OpalError::shape(format!(
            "{OP}: Expected a single element grad_output tensor, but got: {:?}",
            grad_output.sizes()
        )));
    }
    if total_weight.numel() != 1 {
        return Err(OpalError::shape(format!(
            "{OP}: expected total_weight to be a single element tensor, got: {:?}",
            total_weight.sizes()
        )));
    }
    Ok(NllLossBackward {
        grad_output,
        total_weight,
        nll,
    })
}

/// `mse_loss`'s (or its backward's) arguments, checked.
#[derive(Clone, Debug)]
#[allow(missing_docs, reason = "the schema's arguments, by their names")]
pub struct MseLoss<'a> {
    pub input: &'a Tensor,
    pub target: &'a Tensor,
    pub reduction: Reduction,
    /// The dtype the loss is computed in: the operands' promoted dtype.
    pub dtype: DType,
    /// The operands' broadcast sizes.
    pub shape: Vec<i64>,
    /// The loss's sizes: `shape` without reduction, else a scalar.
    pub sizes: Vec<i64>,
}

/// The rule of `mse_loss` (and of its `out=` form): operands that broadcast and
/// a valid reduction.
pub fn mse_loss<'a>(self_: &'a Tensor, target: &'a Tensor, reduction: i64) -> Result<MseLoss<'a>> {
    mse("mse_loss", self_, target, reduction)
}

fn mse<'a>(op: &str, input: &'a Tensor, target: &'a Tensor, r: i64) -> Result<MseLoss<'a>> {
    super::check_defined(op, &[input, target])?;
    let reduction = reduction(op, r)?;
    let shape = super::broadcast_shapes(op, &[input.sizes(), target.sizes()])?;
    Ok(MseLoss {
        input,
        target,
        reduction,
        dtype: crate::promote_types(input.dtype(), target.dtype()),
        sizes: reduced(&shape, reduction),
        shape,
    })
}

/// `mse_loss_backward`'s arguments, checked.
#[derive(Clone, Debug)]
pub struct MseLossBackward<'a> {
    /// The gradient of the loss; it broadcasts to the operands' shape.
    pub grad_output: &'a Tensor,
    /// The forward's arguments; the gradient has their broadcast `shape` and the
    /// dtype of `self` (as PyTorch's, which starts from `self`'s layout).
    pub loss: MseLoss<'a>,
}

/// The rule of `mse_loss_backward` (and of its `grad_input` form): the forward's,
/// and a `grad_output` that broadcasts to the operands' shape.
pub fn mse_loss_backward<'a>(
    grad_output: &'a Tensor,
    self_: &'a Tensor,
    target: &'a Tensor,
    reduction: i64,
) -> Result<MseLossBackward<'a>> {
    const OP: &str = "mse_loss_backward";
    super::check_defined(OP, &[grad_output])?;
    let loss = mse(OP, self_, target, reduction)?;
    let all = super::broadcast_shapes(OP, &[&loss.shape, grad_output.sizes()])?;
    if all != loss.shape {
        return Err(OpalError::shape(format!(
            "{OP}: grad_output of size {:?} does not broadcast to the input size {:?}",
            grad_output.sizes(),
            loss.shape
        )));
    }
    Ok(MseLossBackward { grad_output, loss })
}

/// An element-wise `out=` form's arguments: the functional op's, checked, and the
/// `out` tensor (which, as PyTorch's element-wise `out=` forms allow, may have any
/// dtype the result casts to).
#[derive(Clone, Debug)]
pub struct WithOut<'a, R> {
    /// The functional op's arguments.
    pub args: R,
    /// The tensor the result is written to.
    pub out: &'a Tensor,
}

/// The rule of `mse_loss.out`: [`mse_loss`]'s.
pub fn mse_loss_out<'a>(
    self_: &'a Tensor,
    target: &'a Tensor,
    reduction: i64,
    out: &'a Tensor,
) -> Result<WithOut<'a, MseLoss<'a>>> {
    super::check_defined("mse_loss.out", &[out])?;
    let args = mse("mse_loss.out", self_, target, reduction)?;
    Ok(WithOut { args, out })
}

/// The rule of `mse_loss_backward.grad_input`: [`mse_loss_backward`]'s.
pub fn mse_loss_backward_grad_input<'a>(
    grad_output: &'a Tensor,
    self_: &'a Tensor,
    target: &'a Tensor,
    reduction: i64,
    grad_input: &'a Tensor,
) -> Result<WithOut<'a, MseLossBackward<'a>>> {
    super::check_defined("mse_loss_backward.grad_input", &[grad_input])?;
    let args = mse_loss_backward(grad_output, self_, target, reduction)?;
    Ok(WithOut {
        args,
        out: grad_input,
    })
}

/// `binary_cross_entropy`'s arguments, checked.
#[derive(Clone, Debug)]
#[allow(missing_docs, reason = "the schema's arguments, by their names")]
pub struct BinaryCrossEntropy<'a> {
    pub input: &'a Tensor,
    pub target: &'a Tensor,
    pub weight: Option<&'a Tensor>,
    pub reduction: Reduction,
    /// The loss's sizes: the input's without reduction, else a scalar.
    pub sizes: Vec<i64>,
}

/// The rule of `binary_cross_entropy` (and of its `out=` form): a target of the
/// input's sizes, a weight that broadcasts to them and a valid reduction.
pub fn binary_cross_entropy<'a>(
    self_: &'a Tensor,
    target: &'a Tensor,
    weight: Option<&'a Tensor>,
    reduction: i64,
) -> Result<BinaryCrossEntropy<'a>> {
    const OP: &str = "binary_cross_entropy";
    let mut ts = vec![self_, target];
    ts.extend(weight);
    super::check_defined(OP, &ts)?;
    let reduction = self::reduction(OP, reduction)?;
    if target.sizes() != self_.sizes() {
        return Err(OpalError::shape(format!("{OP}: Using a target size ({:?}) that is different to the input size ({:?}) is deprecated. Please ensure they have the same size.", target.sizes(), self_.sizes())));
    }
    if let Some(w) = weight {
        let all = super::broadcast_shapes(OP, &[self_.sizes(), w.sizes()])?;
        if all != self_.sizes() {
            return Err(OpalError::shape(format!(
                "{OP}: weight of size {:?} does not broadcast to the input size {:?}",
                w.sizes(),
                self_.sizes()
            )));
        }
    }
    Ok(BinaryCrossEntropy {
        input: self_,
        target,
        weight,
        reduction,
        sizes: reduced(self_.sizes(), reduction),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(sizes: &[i64], dtype: DType) -> Tensor {
        Tensor::empty(sizes, dtype, crate::Device::cpu()).unwrap()
    }

    #[test]
    fn nll_shapes() {
        let (x, y) = (t(&[6, 5], DType::F32), t(&[6], DType::I64));
        assert_eq!(nll_loss_forward(&x, &y, None, 0, -100).unwrap().sizes, [6]);
        let w = t(&[5], DType::F32);
        assert!(nll_loss_forward(&x, &y, Some(&w), 1, -100)
            .unwrap()
            .sizes
            .is_empty());
        assert!(nll_loss_forward(&x, &t(&[5], DType::I64), None, 1, -100).is_err());
        assert!(nll_loss_forward(&x, &t(&[6], DType::F32), None, 1, -100).is_err());
        assert!(nll_loss_forward(&x, &y, None, 3, -100).is_err());
        let (g, tw) = (t(&[], DType::F32), t(&[], DType::F32));
        assert!(nll_loss_backward(&g, &x, &y, None, 1, -100, &tw).is_ok());
        assert!(nll_loss_backward(&g, &x, &y, None, 0, -100, &tw).is_err());
        assert!(nll_loss_backward(&g, &x, &y, None, 1, -100, &t(&[2], DType::F32)).is_err());
    }

    #[test]
    fn pointwise_losses() {
        let (a, b) = (t(&[3, 1], DType::F32), t(&[4], DType::F64));
        let m = mse_loss(&a, &b, 0).unwrap();
        assert_eq!((m.sizes, m.dtype), (vec![3, 4], DType::F64));
        assert!(mse_loss(&a, &b, 1).unwrap().sizes.is_empty());
        assert!(mse_loss(&a, &t(&[2, 4], DType::F32), 0).is_err());
        assert!(mse_loss_backward(&t(&[], DType::F32), &a, &b, 1).is_ok());
        assert!(mse_loss_backward(&t(&[5], DType::F32), &a, &b, 1).is_err());
        let x = t(&[2, 3], DType::F32);
        assert!(binary_cross_entropy(&x, &x, Some(&t(&[3], DType::F32)), 0).is_ok());
        assert!(binary_cross_entropy(&x, &x, Some(&t(&[2], DType::F32)), 0).is_err());
        assert!(binary_cross_entropy(&x, &t(&[3], DType::F32), None, 0).is_err());
    }
}
