//! Moving tensors between devices and dtypes: [`Tensor::to`], [`Tensor::to_dtype`]
//! and [`Tensor::to_device_dtype`], all through the `_to_copy` op (so each backend's
//! own copy kernel runs), with the target device validated first; and printing a
//! tensor (`Display`), which copies one in device memory to the host the same way.
//! These sit above the generated operators, which the tensor module must not use.
//!
//! Owns: the `to` family and `Display for Tensor` (the layout of the text is the
//! tensor module's `render`). Must not: copy bytes itself.

use crate::device::{check_device, Device};
use crate::dtype::DType;
use crate::error::{OpalError, Result};
use crate::ops;
use crate::tensor::Tensor;
use std::fmt;

impl Tensor {
    /// This tensor on `device`: itself when it is already there, else a copy made by
    /// `_to_copy`. An index past the device count is an error naming the device.
    pub fn to(&self, device: Device) -> Result<Tensor> {
        self.to_device_dtype(device, self.dtype())
    }

    /// This tensor converted to `dtype` on its device (itself when it has it).
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        self.to_device_dtype(self.device(), dtype)
    }

    /// This tensor on `device` as `dtype`: itself when nothing changes, else one
    /// `_to_copy`.
    pub fn to_device_dtype(&self, device: Device, dtype: DType) -> Result<Tensor> {
        if !self.is_defined() {
            return Err(OpalError::msg(format!(
                "to('{device}', {dtype}): the tensor is undefined"
            )));
        }
        check_device(device)?;
        if device == self.device() && dtype == self.dtype() {
            return Ok(self.clone());
        }
        let dt = (dtype != self.dtype()).then_some(dtype);
        ops::_to_copy::call(self, dt, None, Some(device), None, false, None)
    }
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.is_defined() {
            // Its sizes and dtype are placeholders: printing them (`tensor([])`)
            // would pass it off as an empty tensor.
            return f.write_str("tensor(undefined)");
        }
        let device = self.device();
        if !device.is_meta() && self.numel() > 0 && !self.storage().is_host_accessible() {
            // Device memory: print the values of a copy on the host, as PyTorch does.
            let copy =
                ops::_to_copy::call(self, None, None, Some(Device::cpu()), None, false, None);
            if let Ok(host) = copy {
                return host.render(device, f);
            }
        }
        self.render(device, f)
    }
}
