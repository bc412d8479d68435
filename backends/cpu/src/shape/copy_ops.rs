//! Copying ops: `_to_copy`, `copy_`, `clone` (the strided copy itself is part 1's
//! `crate::copy`).
//!
//! Owns: argument policy (dtype / device / layout / memory format) for these ops.
//! Must not: implement its own element loop.

use crate::copy::copy_into;
use crate::nn::io::err;
use crate::out::empty_uninit;
use opal::{DType, Device, DeviceType, Layout, MemoryFormat, Result, Tensor};

fn check_cpu_strided(
    layout: Option<Layout>,
    device: Option<Device>,
    mf: Option<MemoryFormat>,
    op: &str,
) -> Result<()> {
    if let Some(l) = layout {
        if l != Layout::Strided {
            return Err(err(
                op,
                format!("layout {l:?} is not supported by the CPU backend"),
            ));
        }
    }
    if let Some(d) = device {
        if d.device_type() != DeviceType::Cpu {
            return Err(err(
                op,
                format!("the CPU kernel cannot copy to device '{d}'"),
            ));
        }
    }
    match mf {
        None | Some(MemoryFormat::Contiguous) | Some(MemoryFormat::Preserve) => Ok(()),
        Some(other) => Err(err(
            op,
            format!("memory format {other:?} is not supported on CPU"),
        )),
    }
}

/// A new contiguous copy of `self_`, converted to `dtype` when given, on `device`
/// when given (other devices through their registered `opal::fallback` transfer).
#[allow(clippy::too_many_arguments)]
pub fn _to_copy(
    self_: &Tensor,
    dtype: Option<DType>,
    layout: Option<Layout>,
    device: Option<Device>,
    pin_memory: Option<bool>,
    non_blocking: bool,
    memory_format: Option<MemoryFormat>,
) -> Result<Tensor> {
    const OP: &str = "_to_copy";
    let _ = (pin_memory, non_blocking); // no pinned memory or async copies on CPU
                                        // A CPU tensor bound for another device: convert on the host, then hand the bytes
                                        // to that device's registered transfer (the only way into a device's memory).
    let target = device.filter(|d| d.device_type() != DeviceType::Cpu);
    let host_device = if target.is_some() { None } else { device };
    check_cpu_strided(layout, host_device, memory_format, OP)?;
    let dt = dtype.unwrap_or(self_.dtype());
    // PyTorch's preserve format: a permuted dense tensor (`x.t()`, an NHWC view)
    // is copied with its own strides, which makes the copy one flat run instead of
    // a transpose. Meta's `_to_copy` gives the same strides.
    let keep_strides = matches!(memory_format, None | Some(MemoryFormat::Preserve))
        && !self_.is_contiguous()
        && opal::tensor::is_non_overlapping_and_dense(self_);
    // `copy_into` writes every element: a recycled block needs no zeroing. A dense
    // layout spans exactly `numel` elements from offset 0.
    let out = if keep_strides {
        empty_uninit(&[self_.numel()], dt)?.as_strided(self_.sizes(), self_.strides(), 0)?
    } else {
        empty_uninit(self_.sizes(), dt)?
    };
    copy_into(&out, self_, OP)?;
    match target {
        Some(d) => opal::fallback::copy_to_device(&out, d),
        None => Ok(out),
    }
}

/// Copies `src` (broadcast to `self_`'s shape, cast to its dtype) into `self_`.
pub fn copy_(self_: &Tensor, src: &Tensor, non_blocking: bool) -> Result<Tensor> {
    let _ = non_blocking;
    if self_.is_same(src) {
        return Ok(self_.clone());
    }
    if self_.shares_storage(src) {
        // Overlapping source: go through a temporary so reads see the old values.
        let tmp = _to_copy(src, None, None, None, None, false, None)?;
        copy_into(self_, &tmp, "copy_")?;
    } else {
        copy_into(self_, src, "copy_")?;
    }
    Ok(self_.clone())
}

/// A new contiguous tensor with `self_`'s values.
pub fn clone(self_: &Tensor, memory_format: Option<MemoryFormat>) -> Result<Tensor> {
    _to_copy(self_, None, None, None, None, false, memory_format)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_copy_casts_and_copies() {
        let a = Tensor::from_slice(&[1.5f32, -2.7], &[2]).unwrap();
        let b = _to_copy(&a, Some(DType::I64), None, None, None, false, None).unwrap();
        assert_eq!(b.to_vec::<i64>().unwrap(), vec![1, -2]);
        let c = clone(&a, None).unwrap();
        assert!(!c.shares_storage(&a));
        assert!(_to_copy(&a, None, None, Some(Device::meta()), None, false, None).is_err());
        let z = Tensor::from_slice(&[0.0f32, 0.0], &[2]).unwrap();
        copy_(&z, &Tensor::from_slice(&[7i64], &[1]).unwrap(), false).unwrap();
        assert_eq!(z.to_vec::<f32>().unwrap(), vec![7.0, 7.0]);
    }

    #[test]
    fn clone_preserves_a_dense_permuted_layout_as_pytorch() {
        let m = Tensor::from_slice(&[1.0f32, 2., 3., 4., 5., 6.], &[2, 3]).unwrap();
        let t = m.as_strided(&[3, 2], &[1, 3], 0).unwrap();
        let c = clone(&t, None).unwrap();
        assert_eq!(c.strides(), &[1, 3]);
        assert!(!c.shares_storage(&t));
        assert_eq!(c.to_vec::<f32>().unwrap(), vec![1., 4., 2., 5., 3., 6.]);
        let c = clone(&t, Some(MemoryFormat::Contiguous)).unwrap();
        assert_eq!(c.strides(), &[2, 1]);
        assert_eq!(c.to_vec::<f32>().unwrap(), vec![1., 4., 2., 5., 3., 6.]);
        // Not dense (every other column): contiguous, as PyTorch's fallback.
        let g = m.as_strided(&[2, 2], &[3, 2], 0).unwrap();
        assert_eq!(clone(&g, None).unwrap().strides(), &[2, 1]);
    }
}
