//! Device-independent helpers of the device runtime tests: `emu:i`, the lock that
//! serializes tests touching process-wide counters and generators, and small
//! constructors. They call the including `common` module's `setup`, so the linked
//! emu's tests and the emu plugin's share them.

use std::sync::{Mutex, MutexGuard};

use opal::{Device, DeviceType, Tensor};

use super::setup;

/// `emu:i`.
pub fn emu(i: i16) -> Device {
    setup();
    Device::new(DeviceType::PrivateUse1, Some(i))
}

/// Held by every test that allocates emu memory or draws from default generators
/// (process-wide state the harness's threads share).
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    setup();
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The message of an expected error.
pub fn msg<T: std::fmt::Debug>(r: opal::Result<T>) -> String {
    r.expect_err("expected an error").to_string()
}

/// A cpu f32 tensor.
pub fn floats(v: &[f32], shape: &[i64]) -> Tensor {
    Tensor::from_slice(v, shape).expect("cpu tensor")
}

/// `memory_allocated(d)`.
pub fn allocated(d: Device) -> u64 {
    opal::device::memory_allocated(d).expect("memory_allocated")
}
