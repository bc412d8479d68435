//! `opal-emu`: an example out-of-tree accelerator for Opal. Its memory is a separate
//! pool that the host reaches only through explicit copies ([`device`]); it registers
//! under PrivateUse1 renamed to the device name `emu`, implements a real subset of
//! ops natively through the trait generated from `emu.yaml` ([`kernels`]), and runs
//! everything else on the CPU through Opal's CPU fallback. A second instance, `emu2`
//! ([`emu2`], PrivateUse2, from `emu2.yaml`), shows several PrivateUse backends in
//! one process.
//!
//! ```no_run
//! opal_emu::init().unwrap();
//! let dev = opal::Device::parse("emu").unwrap();
//! ```
//!
//! `emu` has [`device::emu_device_count`] devices (2 unless `OPAL_EMU_DEVICES`
//! says otherwise), each with its own memory pool and default generator; its
//! device runtime ([`hooks`]) reports them to `opal::device`.
//!
//! Owns: the emu devices (pools, allocators, copies, kernels, hooks) and their
//! registration. Must not: touch other backends or the runtime's internals.

pub mod device;
pub mod emu2;
pub mod hooks;
pub mod kernels;
pub mod pool;
pub mod queue;

use std::sync::OnceLock;

use opal::{DeviceType, OpalError, Result};

pub use emu2::Emu2;
pub use kernels::Emu;
pub use pool::StatsSnapshot;

/// Generated from `emu.yaml` against `opal`'s own `native_functions.yaml` by `build.rs`.
pub mod generated {
    include!(concat!(env!("OUT_DIR"), "/backend_emu.rs"));
}

/// Generated from `emu2.yaml` against `opal`'s own `native_functions.yaml` by `build.rs`.
pub mod generated2 {
    include!(concat!(env!("OUT_DIR"), "/backend_emu2.rs"));
}

fn once(cell: &'static OnceLock<Result<(), String>>, f: impl FnOnce() -> Result<()>) -> Result<()> {
    cell.get_or_init(|| f().map_err(|e| e.to_string()))
        .clone()
        .map_err(OpalError::msg)
}

/// The steps `emu` and `emu2` share: the Meta kernels their derived ops use,
/// the allocator over `pools`, the device's kernels (`kernels`), then the device
/// runtime hooks reporting `count` devices.
fn register_device(
    ty: DeviceType,
    allocator: &'static device::EmuAllocator,
    pools: &'static [pool::Pool],
    count: usize,
    kernels: impl FnOnce() -> Result<()>,
) -> Result<()> {
    opal_meta::init()?;
    opal::tensor::register_allocator(ty, allocator);
    kernels()?;
    let hooks = hooks::EmuHooks { pools, count, ty };
    opal::device::register_hooks(ty, Box::new(hooks))
}

/// Registers the `emu` device (PrivateUse1): its allocator, its name, its kernels,
/// the CPU fallback (and the Meta kernels its derived ops use) and its device
/// runtime hooks. Idempotent.
pub fn init() -> Result<()> {
    static INIT: OnceLock<Result<(), String>> = OnceLock::new();
    once(&INIT, || {
        register_device(
            DeviceType::PrivateUse1,
            &device::EMU_ALLOCATOR,
            &device::EMU_POOLS,
            device::emu_device_count(),
            || generated::register::<Emu>().map(|r| r.leak()),
        )
    })
}

/// Registers the `emu2` device (PrivateUse2): allocator, name, kernels (no
/// fallback) and device runtime hooks (one device). Idempotent.
pub fn init_emu2() -> Result<()> {
    static INIT: OnceLock<Result<(), String>> = OnceLock::new();
    once(&INIT, || {
        register_device(
            DeviceType::PrivateUse2,
            &device::EMU2_ALLOCATOR,
            &device::EMU2_POOLS,
            1,
            || generated2::register::<Emu2>().map(|r| r.leak()),
        )
    })
}

/// The memory and copy counters of an emu device (`emu` or `emu2`; without an
/// index, the thread's current one).
pub fn stats(device: opal::Device) -> Result<StatsSnapshot> {
    Ok(device::pool_of(device)?.snapshot())
}
