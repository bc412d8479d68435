//! Tensor-making composites of the core opset that exported programs contain:
//! `clone` (a copy through `_to_copy`), `scalar_tensor` (a 0-dim tensor of a
//! number on any device) and `_assert_tensor_metadata` (the check `torch.export`
//! leaves where a program relies on an input's dtype, device, layout or geometry).
//!
//! Owns: these kernels. Must not: read or write tensor data directly (copies go
//! through `_to_copy`).

use crate::device::Device;
use crate::dispatch::DispatchKeySet;
use crate::dtype::DType;
use crate::error::{OpalError, Result};
use crate::ops;
use crate::types::{Layout, MemoryFormat};
use crate::{Scalar, Tensor};

/// `clone`: a new tensor with `self`'s values, dtype and device; its layout follows
/// `memory_format` (`None` or `Preserve`: `self`'s strides when it is dense, else
/// contiguous).
pub(super) fn clone(
    _ks: DispatchKeySet,
    self_: &Tensor,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    ops::_to_copy::call(self_, None, None, None, None, false, memory_format)
}

/// `scalar_tensor`: a 0-dim tensor holding `s`, of `dtype` (the default float dtype
/// when none is given, whatever the number's kind, as in PyTorch) on `device` (CPU
/// when none). A device without host-visible memory gets the value by a copy.
pub(super) fn scalar_tensor(
    _ks: DispatchKeySet,
    s: &Scalar,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    _pin_memory: Option<bool>,
) -> Result<Tensor> {
    if let Some(l) = layout.filter(|l| *l != Layout::Strided) {
        return Err(OpalError::msg(format!(
            "scalar_tensor: only the strided layout is supported, got {l:?}"
        )));
    }
    let dtype = dtype.unwrap_or_else(crate::dtype::default_dtype);
    let device = device.unwrap_or_default();
    if device.is_cpu() || device.is_meta() {
        return Tensor::scalar_tensor(s, dtype, device);
    }
    let host = Tensor::scalar_tensor(s, dtype, Device::cpu())?;
    ops::_to_copy::call(&host, None, None, Some(device), None, false, None)
}

/// `_assert_tensor_metadata`: checks each property that is given against `a`'s and
/// names the first that differs.
pub(super) fn assert_tensor_metadata(
    _ks: DispatchKeySet,
    a: &Tensor,
    size: Option<&[i64]>,
    stride: Option<&[i64]>,
    dtype: Option<DType>,
    device: Option<Device>,
    layout: Option<Layout>,
) -> Result<()> {
    let fail = |what: &str, expected: String, got: String| {
        Err(OpalError::msg(format!(
            "_assert_tensor_metadata: tensor {what} mismatch: expected {expected}, got {got}"
        )))
    };
    if let Some(s) = size.filter(|s| *s != a.sizes()) {
        return fail("size", format!("{s:?}"), format!("{:?}", a.sizes()));
    }
    if let Some(s) = stride.filter(|s| *s != a.strides()) {
        return fail("stride", format!("{s:?}"), format!("{:?}", a.strides()));
    }
    if let Some(d) = dtype.filter(|d| *d != a.dtype()) {
        return fail("dtype", d.to_string(), a.dtype().to_string());
    }
    if let Some(d) = device.filter(|d| !same_device(*d, a.device())) {
        return fail("device", d.to_string(), a.device().to_string());
    }
    if let Some(l) = layout.filter(|l| *l != a.layout()) {
        return fail("layout", format!("{l:?}"), format!("{:?}", a.layout()));
    }
    Ok(())
}

/// An exported program records the device it was traced on (`cpu`); a program run on
/// another device checks against that device's tensors, so the device type must
/// match and an index-less device matches any index of its type.
fn same_device(expected: Device, got: Device) -> bool {
    expected.device_type() == got.device_type()
        && expected.index().is_none_or(|i| Some(i) == got.index())
}
