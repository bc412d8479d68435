//! Meta kernels of the losses (`nll_loss_forward`, `mse_loss`,
//! `binary_cross_entropy`, their backward ops and `mse_loss`'s element-wise out=
//! forms), from the arguments `opal::rules::loss` checked (`rule | kernel` in
//! `backend.yaml`, as in the CPU backend's).
//!
//! Owns: their result dtypes and layouts (an unreduced `mse_loss` is laid out
//! like an element-wise result). Must not: check an argument or compute a size
//! (the rules do).

use super::{check_inputs, check_out_tensor, new_contiguous};
use opal::rules::loss::{
    BinaryCrossEntropy, MseLoss, MseLossBackward, NllLoss, NllLossBackward, Reduction, WithOut,
};
use opal::{Result, Tensor};

/// `nll_loss_forward`: `(output, total_weight)` in the input's dtype.
pub fn nll_loss_forward(l: NllLoss) -> Result<(Tensor, Tensor)> {
    let mut ts = vec![l.input, l.target];
    ts.extend(l.weight);
    check_inputs("nll_loss_forward", &ts)?;
    let d = l.input.dtype();
    Ok((new_contiguous(&l.sizes, d)?, new_contiguous(&[], d)?))
}

/// `nll_loss_backward`: a gradient shaped like `self`.
pub fn nll_loss_backward(b: NllLossBackward) -> Result<Tensor> {
    let l = &b.nll;
    let mut ts = vec![b.grad_output, l.input, l.target, b.total_weight];
    ts.extend(l.weight);
    check_inputs("nll_loss_backward", &ts)?;
    new_contiguous(l.input.sizes(), l.input.dtype())
}

/// `mse_loss`: the broadcast shape without reduction, else a scalar.
pub fn mse_loss(m: MseLoss) -> Result<Tensor> {
    let op = "mse_loss";
    let ts = [m.input, m.target];
    check_inputs(op, &ts)?;
    if m.reduction == Reduction::None {
        return super::pointwise::elementwise(op, &ts, m.dtype);
    }
    new_contiguous(&m.sizes, m.dtype)
}

/// `mse_loss_backward`: a gradient of the operands' broadcast shape in `self`'s
/// dtype.
pub fn mse_loss_backward(b: MseLossBackward) -> Result<Tensor> {
    let m = &b.loss;
    check_inputs("mse_loss_backward", &[b.grad_output, m.input, m.target])?;
    new_contiguous(&m.shape, m.input.dtype())
}

/// `binary_cross_entropy`: the input's shape without reduction, else a scalar.
pub fn binary_cross_entropy(b: BinaryCrossEntropy) -> Result<Tensor> {
    let mut ts = vec![b.input, b.target];
    ts.extend(b.weight);
    check_inputs("binary_cross_entropy", &ts)?;
    new_contiguous(&b.sizes, b.input.dtype())
}

/// `mse_loss.out`: element-wise when unreduced, so castable dtypes are accepted.
pub fn mse_loss_out(w: WithOut<MseLoss>) -> Result<Tensor> {
    let r = mse_loss(w.args)?;
    check_out_tensor("mse_loss.out", r.sizes(), r.dtype(), w.out)?;
    Ok(w.out.clone())
}

/// `mse_loss_backward.grad_input`: castable dtypes are accepted, as for `mse_loss.out`.
pub fn mse_loss_backward_grad_input(w: WithOut<MseLossBackward>) -> Result<Tensor> {
    let r = mse_loss_backward(w.args)?;
    check_out_tensor("mse_loss_backward.grad_input", r.sizes(), r.dtype(), w.out)?;
    Ok(w.out.clone())
}
