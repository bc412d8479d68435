//! [`Generator`]: a seedable, per-device random number generator (Philox4x32-10
//! counter-based state), shared by handle.
//!
//! Owns: RNG state, seeding, state save/restore, and the per-device default
//! generators. Must not: know about tensors; kernels (rand, randn, dropout) draw
//! numbers through [`Generator::with_state`] or the `next_*` helpers.
//!
//! Philox is counter based: the stream is a pure function of `(seed, offset)`, so a
//! kernel can reserve a range of the stream ([`Generator::reserve`]) and generate it
//! in parallel, or on a device, reproducibly.

#![warn(missing_docs)]

use crate::device::{Device, DeviceType};
use crate::error::{OpalError, Result};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// The seed a fresh generator starts with.
pub const DEFAULT_SEED: u64 = 67_280_421_310_721;

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// One Philox4x32-10 block: 4 random words for `counter` under `key`.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (counter, key);
    for _ in 0..10 {
        let p0 = (M0 as u64) * (c[0] as u64);
        let p1 = (M1 as u64) * (c[2] as u64);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
        k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
    }
    c
}

/// The state of a generator: a seed and a position in its Philox stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhiloxState {
    /// The seed (the Philox key).
    pub seed: u64,
    /// The index of the next 4-word block.
    pub offset: u64,
    buffer: [u32; 4],
    /// How many words of `buffer` are used (4 = empty).
    used: u8,
}

impl PhiloxState {
    /// A state at the start of the stream of `seed`.
    pub fn new(seed: u64) -> Self {
        PhiloxState {
            seed,
            offset: 0,
            buffer: [0; 4],
            used: 4,
        }
    }

    /// The block at `offset` of this seed's stream, without changing the state.
    pub fn block(&self, offset: u64) -> [u32; 4] {
        philox4x32_10(
            [offset as u32, (offset >> 32) as u32, 0, 0],
            [self.seed as u32, (self.seed >> 32) as u32],
        )
    }

    /// The next 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        if self.used >= 4 {
            self.buffer = self.block(self.offset);
            self.offset = self.offset.wrapping_add(1);
            self.used = 0;
        }
        let v = self.buffer[self.used as usize];
        self.used += 1;
        v
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        ((self.next_u32() as u64) << 32) | self.next_u32() as u64
    }

    /// Uniform in `[0, 1)` with 24 random bits.
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u32() >> 8) as f32 * (1.0 / (1u32 << 24) as f32)
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal (Box–Muller).
    pub fn next_normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64(); // (0, 1]: ln is finite
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// A random number generator for one device; `Clone` shares the state (like a
/// PyTorch `Generator` object). `Send + Sync`: the state is behind a mutex.
#[derive(Clone)]
pub struct Generator {
    device: Device,
    state: Arc<Mutex<PhiloxState>>,
}

impl Generator {
    /// A new generator for `device`, seeded with [`DEFAULT_SEED`].
    pub fn new(device: Device) -> Self {
        Generator {
            device,
            state: Arc::new(Mutex::new(PhiloxState::new(DEFAULT_SEED))),
        }
    }

    /// A new generator for `device` (seeded with [`DEFAULT_SEED`]), after checking
    /// that the device exists: `emu:7` with two emu devices is an error.
    pub fn new_for(device: Device) -> Result<Generator> {
        crate::device_runtime::check_device(device)?;
        Ok(Generator::new(device))
    }

    /// The process-wide default generator of a device type: the one of its device 0
    /// (what ops use when the `Generator?` argument is `None`); see
    /// [`Generator::default_for_device`].
    pub fn default_for(device: DeviceType) -> Generator {
        Generator::default_for_device(Device::from(device))
    }

    /// The process-wide default generator of one device: each device type and index
    /// has its own (`emu:0` and `emu:1` differ); a device without an index is the
    /// thread's current device of its type (`emu` is `emu:0` unless
    /// `opal::device::set_device` chose another; `cpu` is `cpu:0`). The CPU fallback passes it to
    /// random ops it runs for a device, so seeding it reproduces their results (and
    /// while the fallback runs, the CPU's is the device's: see
    /// `Generator::stand_in_for_cpu`).
    pub fn default_for_device(device: Device) -> Generator {
        // Device 0 of every type is served without a lock: it is what CPU kernels
        // ask for on every random call.
        static FIRST: OnceLock<Vec<Generator>> = OnceLock::new();
        static OTHERS: Mutex<BTreeMap<(usize, i16), Generator>> = Mutex::new(BTreeMap::new());
        // `emu` is this thread's current emu device (`emu:0` unless set otherwise).
        let device = crate::device_runtime::resolve(device);
        let ty = device.device_type();
        if ty == DeviceType::Cpu && device.index().unwrap_or(0) == 0 {
            // `try_with`: during thread teardown there is no stand-in to honour.
            if let Ok(Some(g)) = CPU_STAND_IN.try_with(|c| c.borrow().clone()) {
                return g;
            }
        }
        match device.index() {
            None | Some(0) => FIRST.get_or_init(|| {
                DeviceType::ALL
                    .iter()
                    .map(|&d| Generator::new(Device::new(d, default_index(d))))
                    .collect()
            })[ty as usize]
                .clone(),
            Some(i) => {
                // Inserting cannot panic half-way, so a poisoned map is still whole.
                let mut m = OTHERS.lock().unwrap_or_else(|e| e.into_inner());
                m.entry((ty as usize, i))
                    .or_insert_with(|| Generator::new(device))
                    .clone()
            }
        }
    }

    /// Makes `self` this thread's default CPU generator until the guard drops. The
    /// CPU fallback does this while it runs a device's op on the CPU, so CPU kernels
    /// that draw from the default generator (`rand`, `native_dropout`) draw from the
    /// device's, as the device's own kernels would. Kernels that look up the default
    /// generator on other threads (inside a fork) do not see it.
    pub(crate) fn stand_in_for_cpu(&self) -> CpuStandIn {
        let prev = CPU_STAND_IN.with(|c| c.replace(Some(self.clone())));
        CpuStandIn {
            prev,
            _this_thread: PhantomData,
        }
    }

    /// The device this generator produces numbers for.
    pub fn device(&self) -> Device {
        self.device
    }

    fn lock(&self) -> MutexGuard<'_, PhiloxState> {
        // A panic while holding the lock cannot leave the state invalid (every
        // field is always consistent), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Resets the stream to the start of `seed`'s sequence.
    pub fn manual_seed(&self, seed: u64) -> &Self {
        *self.lock() = PhiloxState::new(seed);
        self
    }

    /// Seeds the generator from a non-deterministic source (time, a process-wide
    /// counter and this generator's address) and returns the seed.
    pub fn seed(&self) -> u64 {
        use std::sync::atomic::{AtomicU64, Ordering};
        static CALLS: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let n = CALLS.fetch_add(1, Ordering::Relaxed);
        let addr = Arc::as_ptr(&self.state) as usize as u64;
        // Mix the sources through one Philox block so nearby inputs give unrelated seeds.
        let b = philox4x32_10(
            [
                nanos as u32,
                (nanos >> 32) as u32,
                n as u32,
                (n >> 32) as u32,
            ],
            [addr as u32, (addr >> 32) as u32],
        );
        let seed = ((b[0] as u64) << 32) | b[1] as u64;
        self.manual_seed(seed);
        seed
    }

    /// The seed the current stream started from.
    pub fn initial_seed(&self) -> u64 {
        self.lock().seed
    }

    /// Runs `f` with exclusive access to the state (draw many numbers under one lock).
    pub fn with_state<R>(&self, f: impl FnOnce(&mut PhiloxState) -> R) -> R {
        f(&mut self.lock())
    }

    /// Reserves `blocks` Philox blocks for a kernel that generates them itself
    /// (e.g. in parallel): returns `(seed, first_offset)` and advances the state.
    pub fn reserve(&self, blocks: u64) -> (u64, u64) {
        let mut s = self.lock();
        s.used = 4;
        let start = s.offset;
        s.offset = s.offset.wrapping_add(blocks);
        (s.seed, start)
    }

    /// The next 32 random bits.
    pub fn next_u32(&self) -> u32 {
        self.lock().next_u32()
    }
    /// The next 64 random bits.
    pub fn next_u64(&self) -> u64 {
        self.lock().next_u64()
    }
    /// Uniform in `[0, 1)`.
    pub fn next_f64(&self) -> f64 {
        self.lock().next_f64()
    }
    /// Standard normal.
    pub fn next_normal(&self) -> f64 {
        self.lock().next_normal()
    }

    /// Serialized state (`get_state`): 34 bytes, restorable with [`Generator::set_state`].
    pub fn get_state(&self) -> Vec<u8> {
        let s = self.lock();
        let mut v = Vec::with_capacity(34);
        v.extend_from_slice(&s.seed.to_le_bytes());
        v.extend_from_slice(&s.offset.to_le_bytes());
        for w in s.buffer {
            v.extend_from_slice(&w.to_le_bytes());
        }
        v.push(s.used);
        v.push(1); // format version
        v
    }

    /// Restores a state from [`Generator::get_state`].
    pub fn set_state(&self, bytes: &[u8]) -> Result<()> {
        if bytes.len() != 34 || bytes[33] != 1 || bytes[32] > 4 {
            return Err(OpalError::msg(format!(
                "invalid state for the generator of '{}': expected the 34 bytes of get_state \
                 (format version 1), got {} bytes",
                self.device,
                bytes.len()
            )));
        }
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&bytes[i..i + 8]);
            u64::from_le_bytes(a)
        };
        let mut buffer = [0u32; 4];
        for (j, w) in buffer.iter_mut().enumerate() {
            let i = 16 + 4 * j;
            *w = u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        }
        *self.lock() = PhiloxState {
            seed: u64_at(0),
            offset: u64_at(8),
            buffer,
            used: bytes[32],
        };
        Ok(())
    }

    /// True when both handles share one state.
    pub fn ptr_eq(&self, other: &Generator) -> bool {
        Arc::ptr_eq(&self.state, &other.state)
    }
}

thread_local! {
    /// The generator standing in for this thread's default CPU one, if any.
    static CPU_STAND_IN: RefCell<Option<Generator>> = const { RefCell::new(None) };
}

/// Restores the previous default CPU generator of this thread on drop (see
/// `Generator::stand_in_for_cpu`).
pub(crate) struct CpuStandIn {
    prev: Option<Generator>,
    /// The guard restores this thread's state, so it must not move to another.
    _this_thread: PhantomData<*const ()>,
}

impl Drop for CpuStandIn {
    fn drop(&mut self) {
        let prev = self.prev.take();
        // During thread teardown the slot may be gone; nothing is left to restore.
        let _ = CPU_STAND_IN.try_with(|c| c.replace(prev));
    }
}

/// The index a default generator reports for device 0: none for `cpu` and `meta`
/// (indexless in practice), `0` for the others (`emu:0`).
fn default_index(ty: DeviceType) -> Option<i16> {
    (!matches!(ty, DeviceType::Cpu | DeviceType::Meta)).then_some(0)
}

impl fmt::Debug for Generator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.lock();
        write!(
            f,
            "Generator(device='{}', seed={}, offset={})",
            self.device, s.seed, s.offset
        )
    }
}
