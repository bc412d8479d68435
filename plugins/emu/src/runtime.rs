//! The emu plugin's device runtime (ABI 1.4): two devices, each with a memory pool
//! that keeps freed blocks for reuse and counts its bytes (allocated, reserved,
//! peak) as the linked emu's pools do (64-byte blocks, a cached block serves the
//! next request of its size, `empty_cache` returns them), a pinned host
//! allocator, streams, emu's backend-metadata encoding and its autocast dtype
//! (float16 only).
//!
//! The device count is 2, or what the config word `devices=N` (1 or 2) says (a
//! second copy of the plugin stands for the linked `emu2` with `devices=1`).
//! Streams and events are timelines ([`crate::timeline`]).
//!
//! Owns: the pools and the runtime. Must not: know kernels.

use crate::timeline;
use opal_plugin_sdk::{Allocator, DType, DeviceRuntime, Error, Event, MemoryStats, Result};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// The most devices of the plugin's device type (the default count).
pub const DEVICES: usize = 2;
/// Streams per device, the default stream (0) included (as the linked emu).
pub const STREAMS: i64 = 32;
/// The pools' block size: requests are rounded up to a multiple of it.
const BLOCK: usize = 64;

/// One device's pool: blocks in use are counted, freed ones cached by size.
#[derive(Default)]
struct PoolState {
    in_use: u64,
    cached: u64,
    peak: u64,
    free: BTreeMap<usize, Vec<usize>>,
}

/// The pools of the emu devices.
pub struct Pools {
    pools: [Mutex<PoolState>; DEVICES],
}

/// The plugin's device memory.
pub static POOLS: Pools = Pools {
    pools: [const {
        Mutex::new(PoolState {
            in_use: 0,
            cached: 0,
            peak: 0,
            free: BTreeMap::new(),
        })
    }; DEVICES],
};

fn layout(bytes: usize) -> Option<std::alloc::Layout> {
    std::alloc::Layout::from_size_align(bytes, BLOCK).ok()
}

impl Pools {
    fn pool(&self, index: i32) -> Result<std::sync::MutexGuard<'_, PoolState>> {
        let p = usize::try_from(index)
            .ok()
            .and_then(|i| self.pools.get(i))
            .ok_or_else(|| Error::msg(format!("emu has no device {index} (it has {DEVICES})")))?;
        Ok(p.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Bytes held by live tensors on device `index` (0 for an unknown one).
    pub fn bytes_in_use(&self, index: i32) -> u64 {
        self.pool(index).map_or(0, |p| p.in_use)
    }

    fn stats(&self, index: i32) -> Result<MemoryStats> {
        let p = self.pool(index)?;
        Ok(MemoryStats {
            allocated: p.in_use,
            reserved: p.in_use + p.cached,
            peak_allocated: p.peak,
        })
    }
}

impl Allocator for Pools {
    fn alloc(&self, nbytes: usize, index: i32) -> *mut u8 {
        if index < 0 || index as usize >= RUNTIME.count() {
            return std::ptr::null_mut();
        }
        let Ok(mut p) = self.pool(index) else {
            return std::ptr::null_mut();
        };
        let size = nbytes.max(1).div_ceil(BLOCK) * BLOCK;
        let cached = p.free.get_mut(&size).and_then(Vec::pop);
        let ptr = match cached {
            Some(addr) => {
                p.cached -= size as u64;
                addr as *mut u8
            }
            None => match layout(size) {
                // SAFETY: a non-zero size and a valid alignment.
                Some(l) => unsafe { std::alloc::alloc_zeroed(l) },
                None => return std::ptr::null_mut(),
            },
        };
        if !ptr.is_null() {
            p.in_use += size as u64;
            p.peak = p.peak.max(p.in_use);
        }
        ptr
    }

    unsafe fn free(&self, ptr: *mut u8, nbytes: usize, index: i32) {
        let Ok(mut p) = self.pool(index) else {
            return;
        };
        let size = nbytes.max(1).div_ceil(BLOCK) * BLOCK;
        p.in_use = p.in_use.saturating_sub(size as u64);
        p.cached += size as u64;
        p.free.entry(size).or_default().push(ptr as usize);
    }

    fn host_accessible(&self) -> bool {
        false
    }
}

/// Returns `index`'s cached blocks to the system.
fn empty(index: i32) -> Result<()> {
    let mut p = POOLS.pool(index)?;
    for (size, blocks) in std::mem::take(&mut p.free) {
        let l = layout(size).ok_or_else(|| Error::msg("emu pool: bad block size"))?;
        for b in blocks {
            // SAFETY: every cached block came from `alloc_zeroed` with this
            // layout and is in no tensor (it was freed into the cache).
            unsafe { std::alloc::dealloc(b as *mut u8, l) };
        }
    }
    p.cached = 0;
    Ok(())
}

/// Pinned host memory for copies to and from emu: counted host blocks.
pub struct Pinned {
    bytes: AtomicU64,
}

/// The pinned host allocator.
pub static PINNED: Pinned = Pinned {
    bytes: AtomicU64::new(0),
};

impl Pinned {
    /// Bytes of pinned host memory held by live tensors.
    pub fn bytes_in_use(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

impl Allocator for Pinned {
    fn alloc(&self, nbytes: usize, index: i32) -> *mut u8 {
        let p = opal_plugin_sdk::HostMemory {
            host_accessible: true,
        }
        .alloc(nbytes, index);
        if !p.is_null() {
            self.bytes.fetch_add(nbytes as u64, Ordering::Relaxed);
        }
        p
    }

    unsafe fn free(&self, ptr: *mut u8, nbytes: usize, index: i32) {
        // SAFETY: `ptr` came from `HostMemory::alloc(nbytes, index)` (caller's
        // contract, forwarded).
        unsafe {
            opal_plugin_sdk::HostMemory {
                host_accessible: true,
            }
            .free(ptr, nbytes, index)
        };
        self.bytes.fetch_sub(nbytes as u64, Ordering::Relaxed);
    }

    fn host_accessible(&self) -> bool {
        true
    }
}

/// The tag of emu's backend metadata encoding in files (the linked emu's).
const META_VERSION: &str = "emu-v1;";

/// The emu device runtime.
pub struct EmuRuntime {
    /// The number of devices (set by the config before registration).
    count: AtomicUsize,
    /// The next stream id handed out per device (round robin over `1..STREAMS`).
    next_stream: [AtomicI64; DEVICES],
}

/// The plugin's runtime.
pub static RUNTIME: EmuRuntime = EmuRuntime {
    count: AtomicUsize::new(DEVICES),
    next_stream: [const { AtomicI64::new(0) }; DEVICES],
};

impl EmuRuntime {
    /// The number of devices.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Takes the device count from the config word `devices=N` (1 to
    /// [`DEVICES`]), if any.
    pub fn configure(&self, config: &str) -> Result<()> {
        for w in config.split(',').map(str::trim) {
            if let Some(n) = w.strip_prefix("devices=") {
                let n: usize = n
                    .parse()
                    .ok()
                    .filter(|n| (1..=DEVICES).contains(n))
                    .ok_or_else(|| {
                        Error::msg(format!(
                            "emu plugin config: devices={n}, expected 1 to {DEVICES}"
                        ))
                    })?;
                self.count.store(n, Ordering::Relaxed);
            }
        }
        Ok(())
    }
}

impl DeviceRuntime for EmuRuntime {
    fn device_count(&self) -> usize {
        self.count()
    }

    fn new_stream(&self, index: i32) -> Result<i64> {
        let n = self
            .next_stream
            .get(index as usize)
            .ok_or_else(|| Error::msg(format!("emu has no device {index}")))?
            .fetch_add(1, Ordering::Relaxed);
        Ok(n.rem_euclid(STREAMS - 1) + 1)
    }

    fn stream_exists(&self, _index: i32, id: i64) -> bool {
        (0..STREAMS).contains(&id)
    }

    fn query_stream(&self, index: i32, id: i64) -> Result<bool> {
        timeline::query(index, id)
    }

    fn synchronize_stream(&self, index: i32, id: i64) -> Result<()> {
        timeline::synchronize(index, id)
    }

    fn synchronize_device(&self, index: i32) -> Result<()> {
        timeline::synchronize_device(index)
    }

    fn create_event(&self, _index: i32, _timing: bool) -> Result<Box<dyn Event>> {
        Ok(Box::new(timeline::EmuEvent::default()))
    }

    fn memory_stats(&self, index: i32) -> Result<MemoryStats> {
        POOLS.stats(index)
    }

    fn reset_peak_memory_stats(&self, index: i32) -> Result<()> {
        let mut p = POOLS.pool(index)?;
        p.peak = p.in_use;
        Ok(())
    }

    fn empty_cache(&self, index: i32) -> Result<()> {
        empty(index)
    }

    fn host_allocator(&self) -> Option<&'static dyn Allocator> {
        Some(&PINNED)
    }

    /// Keys starting with `transient.` stay in memory only.
    fn serialize_backend_meta(&self, key: &str, value: &str) -> Result<Option<String>> {
        Ok((!key.starts_with("transient.")).then(|| format!("{META_VERSION}{value}")))
    }

    fn deserialize_backend_meta(&self, key: &str, text: &str) -> Result<String> {
        text.strip_prefix(META_VERSION)
            .map(str::to_string)
            .ok_or_else(|| {
                Error::msg(format!(
                    "emu cannot read backend metadata '{key}' = '{text}': expected the '{META_VERSION}' encoding"
                ))
            })
    }

    /// Emu stands for an accelerator without bfloat16 units.
    fn autocast_dtypes(&self) -> Vec<DType> {
        vec![DType::F16]
    }
}
