//! Neural-network composites: `one_hot` (zeros with a 1 scattered at each index;
//! `num_classes = -1` means max + 1).
//!
//! Owns: this kernel. Must not: write tensor data itself (`zeros` and `scatter_`
//! do).

use crate::dispatch::DispatchKeySet;
use crate::error::{OpalError, Result};
use crate::ops;
use crate::{DType, Device, Tensor};

/// The single value of a 0-d result, read on the CPU (copied there first from any
/// other device, so this works for out-of-tree devices too).
fn read_i64(t: &Tensor) -> Result<i64> {
    let host = if t.device().is_cpu() {
        t.clone()
    } else {
        ops::_to_copy::call(t, None, None, Some(Device::cpu()), None, false, None)?
    };
    Ok(host.item()?.to_i64())
}

/// `one_hot`: for int64 class indices of shape S, an int64 tensor of shape
/// S + [num_classes] holding 1 at each index and 0 elsewhere. `num_classes = -1`
/// infers max + 1 (an error for an empty input). Indices must lie in
/// `[0, num_classes)`. On meta tensors (no values) `num_classes` must be given.
pub(super) fn one_hot(_ks: DispatchKeySet, self_: &Tensor, num_classes: i64) -> Result<Tensor> {
    if self_.dtype() != DType::I64 {
        return Err(OpalError::msg(format!(
            "one_hot: only applicable to index tensors of dtype int64, got {:?}",
            self_.dtype()
        )));
    }
    if num_classes < -1 {
        return Err(OpalError::msg(format!(
            "one_hot: num_classes must be -1 (infer) or non-negative, got {num_classes}"
        )));
    }
    let device = self_.device();
    let classes = if self_.numel() == 0 || device.is_meta() {
        if num_classes == -1 {
            return Err(OpalError::msg(if device.is_meta() {
                "one_hot: cannot infer the number of classes of a meta tensor (it has no values); pass num_classes"
            } else {
                "one_hot: cannot infer the number of classes from an empty tensor; pass num_classes"
            }));
        }
        num_classes
    } else {
        let min = read_i64(&ops::amin(self_)?)?;
        let max = read_i64(&ops::amax(self_)?)?;
        if min < 0 {
            return Err(OpalError::msg(format!(
                "one_hot: class values must be non-negative, got {min}"
            )));
        }
        match num_classes {
            -1 => max.checked_add(1).ok_or_else(|| {
                OpalError::msg(format!(
                    "one_hot: class value {max} leaves no room for max + 1 classes"
                ))
            })?,
            n if max >= n => {
                return Err(OpalError::msg(format!(
                    "one_hot: class values must be smaller than num_classes ({n}), got {max}"
                )))
            }
            n => n,
        }
    };
    let mut shape = self_.sizes().to_vec();
    shape.push(classes);
    let out = ops::zeros::call(&shape, Some(DType::I64), None, Some(device), None)?;
    if self_.numel() == 0 || device.is_meta() {
        return Ok(out);
    }
    let index = ops::unsqueeze(self_, -1)?;
    ops::scatter_src_(&out, -1, &index, &ops::ones_like(&index)?)
}

/// `_native_batch_norm_legit_no_training`: batch norm with the running statistics
/// (evaluation mode), which `torch.export` leaves for `BatchNorm` in eval; the
/// statistics are read, never updated. `_native_batch_norm_legit` with
/// `training=False` (so `native_batch_norm`, whose kernels every backend has).
#[allow(
    clippy::too_many_arguments,
    reason = "the operator's schema has seven arguments, plus the key set"
)]
pub(super) fn batch_norm_legit_no_training(
    _ks: DispatchKeySet,
    input: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    running_mean: &Tensor,
    running_var: &Tensor,
    momentum: f64,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    super::norm::native_batch_norm_legit(
        _ks,
        input,
        weight,
        bias,
        running_mean,
        running_var,
        false,
        momentum,
        eps,
    )
}
