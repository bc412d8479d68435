//! Helpers shared by the device runtime tests on the linked emu: backend setup,
//! what only the device can say (its pool's and pinned bytes, a slow kernel),
//! and the device-independent helpers of `helpers.rs` (`emu:i`, the lock that
//! serializes tests touching process-wide counters and generators, small
//! constructors), which the emu plugin's suite shares.

#![allow(dead_code)] // each test binary uses its own subset

use opal::Device;

mod helpers;
pub use helpers::*;

/// Registers the cpu, emu and emu2 backends (idempotent).
pub fn setup() {
    opal_cpu::init().expect("cpu backend");
    opal_emu::init().expect("emu backend");
    opal_emu::init_emu2().expect("emu2 backend");
}

/// How many emu devices the suite expects (2 unless `OPAL_EMU_DEVICES` says
/// otherwise).
pub fn expected_device_count() -> usize {
    opal_emu::device::emu_device_count()
}

/// Bytes held by live tensors in `d`'s pool, as the device counts them.
pub fn pool_bytes_in_use(d: Device) -> u64 {
    opal_emu::stats(d).expect("emu pool").bytes_in_use
}

/// Bytes of pinned host memory held by live tensors.
pub fn pinned_bytes_in_use() -> u64 {
    opal_emu::hooks::PINNED_ALLOCATOR.bytes_in_use()
}

/// Queues `d` of work on stream `s` (a slow kernel).
pub fn hold(s: opal::Stream, d: std::time::Duration) {
    opal_emu::queue::hold(s, d).expect("hold");
}

/// Whether kernels are queued (the linked emu's worker threads) rather than
/// computed when called.
pub const KERNELS_QUEUE: bool = true;
