//! `emu2`: a second emulated device under PrivateUse2, coexisting with `emu` in one
//! process. It has its own memory pool, a smaller native set (`emu2.yaml`) and no
//! CPU fallback, so an op it lacks fails with an error naming op and device.
//!
//! Like `kernels.rs`, it names its surroundings only through `super::` (`device`,
//! `generated2`, `kernels`), so the evolution tests compile it unchanged against an
//! evolved native YAML.
//!
//! Owns: emu2's kernels. Must not: register anything itself (see `crate::init_emu2`).

use opal::dispatch::DispatchKeySet;
use opal::{DType, Device, Layout, MemoryFormat, OpalError, Result, Scalar, Tensor};

use super::device::{self, Binary};
use super::generated2::Emu2Kernels;

/// The `emu2` backend's kernels.
pub struct Emu2;

impl Emu2Kernels for Emu2 {
    fn add_out(
        _ks: DispatchKeySet,
        self_: &Tensor,
        other: &Tensor,
        alpha: &Scalar,
        out: &Tensor,
    ) -> Result<Tensor> {
        if device::binary(Binary::Add, self_, other, alpha, out)? {
            return Ok(out.clone());
        }
        Err(OpalError::msg(format!(
            "emu2 add.out: only tensors of one dtype (f32, f64, i32, i64) on one emu2 device, got {:?} and {:?}",
            self_.dtype(),
            other.dtype()
        )))
    }

    fn _to_copy(
        _ks: DispatchKeySet,
        self_: &Tensor,
        dtype: Option<DType>,
        _layout: Option<Layout>,
        device: Option<Device>,
        _pin_memory: Option<bool>,
        _non_blocking: bool,
        _memory_format: Option<MemoryFormat>,
    ) -> Result<Tensor> {
        super::kernels::to_copy(self_, dtype, device)
    }

    fn full(
        _ks: DispatchKeySet,
        size: &[i64],
        fill_value: &Scalar,
        dtype: Option<DType>,
        _layout: Option<Layout>,
        device: Option<Device>,
        _pin_memory: Option<bool>,
    ) -> Result<Tensor> {
        super::kernels::full(size, fill_value, dtype, device)
    }
}
