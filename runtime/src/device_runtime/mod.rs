//! The device runtime: what a vendor implements once per device type beyond kernels
//! ([`DeviceHooks`]), its registry, device counts and index validation, and the
//! per-thread current device ([`set_device`], [`exchange_device`], [`DeviceGuard`]).
//! Streams, the current stream and events are in [`stream`].
//! Memory statistics are in [`memory`]; the per-storage slot of backends'
//! metadata in [`backend_meta`]; the [`Allocator`] trait in `allocator`.
//!
//! Reached as `opal::device::*` (re-exported there).
//!
//! Owns: the hooks registry and the current-device state. Must not: know tensors
//! (it sits below them: pinned memory, backend metadata and `Tensor::to` are the
//! tensor API's, in `tensor` and `transfer`), allocate tensor memory itself
//! (allocators do) or dispatch ops.

#![warn(missing_docs)]

mod allocator;
pub mod backend_meta;
pub mod memory;
pub mod stream;

pub use allocator::Allocator;
use stream::{DeviceEvent, HostEvent};

use crate::device_type::{Device, DeviceType};
use crate::dtype::DType;
use crate::error::{OpalError, Result};
use crate::types::Stream;
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::RwLock;

/// Memory counters of one device, as a backend reports them through
/// [`DeviceHooks::memory_stats`]. Bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes held by live tensors (rounded to the allocator's block size).
    pub allocated: u64,
    /// Bytes the allocator holds: `allocated` plus freed blocks it keeps cached.
    pub reserved: u64,
    /// The largest `allocated` since the start or the last peak reset.
    pub peak_allocated: u64,
}

/// What a device backend implements once per device type beyond its kernels: start
/// up, how many devices there are, memory statistics, a host allocator for pinned
/// memory, and (de)serialization of its per-tensor metadata. Register it with
/// [`register_hooks`]. Every method but [`DeviceHooks::device_count`] has a default
/// that either does nothing or reports that the backend lacks the feature.
pub trait DeviceHooks: Send + Sync + 'static {
    /// Called once by [`register_hooks`] before anything else; an `Err` refuses the
    /// registration.
    fn init(&self) -> Result<()> {
        Ok(())
    }

    /// How many devices of this type exist (indices `0..count`). Asked once, at
    /// registration: the runtime validates indices against it without calling back.
    fn device_count(&self) -> usize;

    /// Whether the device type can be used now (default: it has a device).
    fn is_available(&self) -> bool {
        self.device_count() > 0
    }

    /// Told that `index` (validated) becomes this thread's current device: by
    /// [`set_device`], [`exchange_device`] and a [`DeviceGuard`] on entry and
    /// exit. An `Err` leaves the current device unchanged. The runtime keeps the
    /// current device itself; a backend whose driver has per-thread state of its
    /// own mirrors it here. Default: nothing to do.
    fn set_current_device(&self, index: i16) -> Result<()> {
        let _ = index;
        Ok(())
    }

    /// Memory counters of device `index` (already validated).
    fn memory_stats(&self, index: i16) -> Result<MemoryStats> {
        let _ = index;
        Err(OpalError::device(
            "this backend does not report memory statistics",
        ))
    }

    /// Makes the peak of device `index` its current allocation.
    fn reset_peak_memory_stats(&self, index: i16) -> Result<()> {
        let _ = index;
        Err(OpalError::device(
            "this backend does not report memory statistics",
        ))
    }

    /// Returns the cached, unused memory of device `index` to the device.
    fn empty_cache(&self, index: i16) -> Result<()> {
        let _ = index;
        Ok(())
    }

    /// The allocator of pinned (page-locked) host memory for fast copies to this
    /// device, if it has one ([`crate::Tensor::pin_memory`]).
    fn host_allocator(&self) -> Option<&'static dyn Allocator> {
        None
    }

    /// The dtypes autocast may cast to on this device (PyTorch's
    /// `get_amp_supported_dtype`); asking for another is an error naming the device
    /// and this list. Default: `float16` and `bfloat16`.
    fn autocast_dtypes(&self) -> Vec<DType> {
        vec![DType::F16, DType::BF16]
    }

    /// A new stream of device `index` (already validated); its id, not 0.
    /// Default: an error, the device has only its default stream.
    fn new_stream(&self, index: i16) -> Result<i64> {
        let _ = index;
        Err(OpalError::device(
            "this device runtime creates no streams (only the default stream, id 0)",
        ))
    }

    /// Whether `stream` (of a validated device) exists. Default: only id 0.
    fn stream_exists(&self, stream: Stream) -> bool {
        stream.id == 0
    }

    /// Whether all work queued on `stream` has run; reports (once) an error an
    /// asynchronous kernel on it hit. Default: true (a synchronous device).
    fn query_stream(&self, stream: Stream) -> Result<bool> {
        let _ = stream;
        Ok(true)
    }

    /// Waits until all work queued on `stream` has run, reporting (once) an error
    /// an asynchronous kernel on it hit. Default: nothing to wait for.
    fn synchronize_stream(&self, stream: Stream) -> Result<()> {
        let _ = stream;
        Ok(())
    }

    /// [`DeviceHooks::synchronize_stream`] for every stream of device `index`.
    fn synchronize_device(&self, index: i16) -> Result<()> {
        let _ = index;
        Ok(())
    }

    /// A new event of device `index` (`timing`: it will be asked for
    /// [`DeviceEvent::completed_at`]). Default: a [`HostEvent`], completed when
    /// recorded.
    fn create_event(&self, index: i16, timing: bool) -> Result<Box<dyn DeviceEvent>> {
        let _ = (index, timing);
        Ok(Box::new(HostEvent::default()))
    }

    /// Encodes a backend metadata value ([`crate::Tensor::set_backend_meta`]) as
    /// text for a file's metadata ([`crate::serialize`]); `None` drops it.
    /// Default: keep the text as is.
    fn serialize_backend_meta(&self, key: &str, value: &str) -> Option<String> {
        let _ = key;
        Some(value.to_string())
    }

    /// Decodes what [`DeviceHooks::serialize_backend_meta`] wrote; an `Err` fails
    /// the load. Default: the text as is.
    fn deserialize_backend_meta(&self, key: &str, text: &str) -> Result<String> {
        let _ = key;
        Ok(text.to_string())
    }
}

/// The CPU's hooks: one device, no memory statistics, no pinned memory.
struct CpuHooks;

impl DeviceHooks for CpuHooks {
    fn device_count(&self) -> usize {
        1
    }
}

static CPU_HOOKS: CpuHooks = CpuHooks;

/// Registered hooks per device type (leaked boxes: registrations live for the
/// process, and readers hold `&'static` references).
static HOOKS: RwLock<[Option<&'static dyn DeviceHooks>; DeviceType::COUNT]> =
    RwLock::new([None; DeviceType::COUNT]);

/// Device counts cached at registration for lock-free index checks; -1: no hooks
/// (the count is unknown and indices are not checked).
static COUNTS: [AtomicI32; DeviceType::COUNT] = {
    let mut a = [const { AtomicI32::new(-1) }; DeviceType::COUNT];
    a[DeviceType::Cpu as usize] = AtomicI32::new(1);
    a
};

/// Makes `hooks` the device runtime of `ty`: calls [`DeviceHooks::init`], then
/// caches [`DeviceHooks::device_count`]. Registering again replaces the hooks
/// (latest wins, like allocators).
pub fn register_hooks(ty: DeviceType, hooks: Box<dyn DeviceHooks>) -> Result<()> {
    hooks
        .init()
        .map_err(|e| OpalError::device(format!("initializing the {ty} device runtime: {e}")))?;
    let count = i32::try_from(hooks.device_count())
        .unwrap_or(i32::MAX)
        .min(i16::MAX as i32);
    let leaked: &'static dyn DeviceHooks = Box::leak(hooks);
    let mut table = HOOKS.write().unwrap_or_else(|e| e.into_inner());
    table[ty as usize] = Some(leaked);
    COUNTS[ty as usize].store(count, Ordering::Release);
    Ok(())
}

/// The hooks of `ty`: registered ones, the built-in CPU hooks, or an error naming
/// the device types that have hooks.
pub fn hooks(ty: DeviceType) -> Result<&'static dyn DeviceHooks> {
    let table = HOOKS.read().unwrap_or_else(|e| e.into_inner());
    if let Some(h) = table[ty as usize] {
        return Ok(h);
    }
    if ty == DeviceType::Cpu {
        return Ok(&CPU_HOOKS);
    }
    Err(OpalError::device(format!(
        "no device runtime registered for '{ty}' (registered: {}); register one with opal::device::register_hooks",
        registered_names(&table[..])
    )))
}

fn registered_names(table: &[Option<&'static dyn DeviceHooks>]) -> String {
    let mut names = vec!["cpu".to_string()];
    for ty in DeviceType::ALL {
        if ty != DeviceType::Cpu && table[ty as usize].is_some() {
            names.push(ty.name().to_string());
        }
    }
    names.join(", ")
}

/// The device types with a device runtime (CPU always), in [`DeviceType::ALL`] order.
pub fn registered_device_types() -> Vec<DeviceType> {
    let table = HOOKS.read().unwrap_or_else(|e| e.into_inner());
    DeviceType::ALL
        .into_iter()
        .filter(|&t| t == DeviceType::Cpu || table[t as usize].is_some())
        .collect()
}

/// How many devices of `ty` exist; an error when `ty` has no device runtime.
pub fn device_count(ty: DeviceType) -> Result<usize> {
    hooks(ty)?;
    Ok(COUNTS[ty as usize].load(Ordering::Acquire).max(0) as usize)
}

/// Whether `ty` has a device runtime that says it is usable.
pub fn is_available(ty: DeviceType) -> bool {
    hooks(ty).is_ok_and(|h| h.is_available())
}

/// The accelerator of this process: the first device type other than CPU and meta
/// whose runtime is registered and available (like PyTorch's current accelerator).
pub fn accelerator() -> Option<DeviceType> {
    registered_device_types()
        .into_iter()
        .find(|&t| t != DeviceType::Cpu && t != DeviceType::Meta && is_available(t))
}

/// Checks that `device`'s index names an existing device of its type. A device
/// without an index, or of a type without a device runtime, passes. Cheap: one
/// atomic load when there is an index.
#[inline]
pub fn check_device(device: Device) -> Result<()> {
    match device.index() {
        None => Ok(()),
        Some(i) => {
            let count = COUNTS[device.device_type() as usize].load(Ordering::Relaxed);
            if count < 0 || (i as i32) < count {
                Ok(())
            } else {
                Err(out_of_range(device, count))
            }
        }
    }
}

#[cold]
fn out_of_range(device: Device, count: i32) -> OpalError {
    let ty = device.device_type();
    let available = match count {
        0 => "none".to_string(),
        1 => format!("{ty}:0"),
        n => format!("{ty}:0 to {ty}:{}", n - 1),
    };
    OpalError::device(format!(
        "invalid device '{device}': {ty} has {count} device{} (available: {available})",
        if count == 1 { "" } else { "s" }
    ))
}

thread_local! {
    /// This thread's current device index per device type.
    static CURRENT: Cell<[i16; DeviceType::COUNT]> = const { Cell::new([0; DeviceType::COUNT]) };
}

/// This thread's current device index of `ty` (0 until [`set_device`]).
pub fn current_device(ty: DeviceType) -> i16 {
    CURRENT.try_with(|c| c.get()[ty as usize]).unwrap_or(0)
}

/// `device` with its index filled in from this thread's current device when it has
/// none (`emu` -> `emu:1` after `set_device(emu:1)`); CPU and meta stay as they are.
#[inline]
pub fn resolve(device: Device) -> Device {
    match device.device_type() {
        DeviceType::Cpu | DeviceType::Meta => device,
        ty if device.index().is_none() => Device::new(ty, Some(current_device(ty))),
        _ => device,
    }
}

/// Makes `device` this thread's current device of its type; returns the previous
/// index. The device needs an index, and a valid one.
pub fn exchange_device(device: Device) -> Result<i16> {
    let ty = device.device_type();
    let index = device.index().ok_or_else(|| {
        OpalError::device(format!(
            "set_device needs a device with an index (like '{ty}:0'), got '{device}'"
        ))
    })?;
    let h = hooks(ty)?;
    check_device(device)?;
    h.set_current_device(index)?;
    CURRENT
        .try_with(|c| {
            let mut all = c.get();
            let prev = std::mem::replace(&mut all[ty as usize], index);
            c.set(all);
            prev
        })
        .map_err(|_| OpalError::device("set_device during thread teardown"))
}

/// Makes `device` this thread's current device of its type (see [`exchange_device`]).
pub fn set_device(device: Device) -> Result<()> {
    exchange_device(device).map(drop)
}

/// Makes a device current for a scope: restores the previous current device of its
/// type when dropped, including while unwinding from a panic. Not `Send`: it
/// restores this thread's state.
#[must_use = "the previous device is restored when the guard drops"]
pub struct DeviceGuard {
    ty: DeviceType,
    prev: i16,
    _this_thread: PhantomData<*const ()>,
}

impl DeviceGuard {
    /// Sets `device` (which needs a valid index) as current until the guard drops.
    pub fn new(device: Device) -> Result<DeviceGuard> {
        let prev = exchange_device(device)?;
        Ok(DeviceGuard {
            ty: device.device_type(),
            prev,
            _this_thread: PhantomData,
        })
    }

    /// The index that was current before the guard and comes back after it.
    pub fn original_index(&self) -> i16 {
        self.prev
    }
}

impl Drop for DeviceGuard {
    fn drop(&mut self) {
        let (ty, prev) = (self.ty, self.prev);
        // The previous index was valid when the guard was made, and a drop cannot
        // report an error: a backend refusing it keeps its own state, the
        // runtime's is restored regardless.
        if let Ok(h) = hooks(ty) {
            let _ = h.set_current_device(prev);
        }
        // During thread teardown the slot may be gone; nothing is left to restore.
        let _ = CURRENT.try_with(|c| {
            let mut all = c.get();
            all[ty as usize] = prev;
            c.set(all);
        });
    }
}
