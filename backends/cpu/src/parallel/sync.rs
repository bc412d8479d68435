//! The synchronization primitives of the fork-join protocol, from `std` in every
//! build and from `loom` under `--cfg loom`, so the protocol the loom models check
//! (`loom_models.rs`) is the code that runs. Also the two places where the real
//! pool waits on time or spins: under loom a spin is a yield (loom must see every
//! busy wait to switch threads) and the warm window closes after one look.
//!
//! Owns: those names. Must not: hold any logic of the protocol.

#[cfg(not(loom))]
pub(super) use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(super) use std::sync::{Arc, Mutex};
#[cfg(not(loom))]
pub(super) use std::thread::{park, yield_now, Thread};

#[cfg(loom)]
pub(super) use loom::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
#[cfg(loom)]
pub(super) use loom::sync::{Arc, Mutex};
#[cfg(loom)]
pub(super) use loom::thread::{park, yield_now, Thread};

/// One round of a busy wait.
#[inline(always)]
pub(super) fn spin() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// Spins between two looks at the clock while a helper watches for a job.
#[cfg(not(loom))]
pub(super) const WATCH_SPINS: u32 = 64;
#[cfg(loom)]
pub(super) const WATCH_SPINS: u32 = 1;

/// The end of a helper's warm window.
#[cfg(not(loom))]
pub(super) struct Deadline(std::time::Instant);

#[cfg(not(loom))]
impl Deadline {
    #[inline]
    pub(super) fn after(d: std::time::Duration) -> Deadline {
        Deadline(std::time::Instant::now() + d)
    }

    #[inline]
    pub(super) fn passed(&mut self) -> bool {
        std::time::Instant::now() >= self.0
    }
}

/// Under loom: the window closes at the second look, so a model sees a helper
/// that watches once, then parks.
#[cfg(loom)]
pub(super) struct Deadline(bool);

#[cfg(loom)]
impl Deadline {
    pub(super) fn after(_: std::time::Duration) -> Deadline {
        Deadline(false)
    }

    pub(super) fn passed(&mut self) -> bool {
        std::mem::replace(&mut self.0, true)
    }
}
