//! The synchronization primitives of the fork-join protocol, from `std` in every
//! build and from `loom` under `--cfg loom`, so the protocol the loom models check
//! (`loom_models.rs`) is the code that runs. Also the two places where the real
//! pool waits on time or spins: under loom a spin is a yield (loom must see every
//! busy wait to switch threads) and the warm window closes after one look.
//!
//! Owns: those names. Must not: hold any logic of the protocol.

#[cfg(not(all(test, loom)))]
pub(super) use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
#[cfg(not(all(test, loom)))]
pub(super) use std::sync::{Arc, Mutex};
#[cfg(not(all(test, loom)))]
pub(super) use std::thread::{park, yield_now, Thread};

#[cfg(all(test, loom))]
pub(super) use loom::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
#[cfg(all(test, loom))]
pub(super) use loom::sync::{Arc, Mutex};
#[cfg(all(test, loom))]
pub(super) use loom::thread::{park, yield_now, Thread};

/// One round of a busy wait.
#[inline(always)]
pub(super) fn spin() {
    #[cfg(not(all(test, loom)))]
    std::hint::spin_loop();
    #[cfg(all(test, loom))]
    loom::thread::yield_now();
}

/// Spins between two looks at the clock while a helper watches for a job.
#[cfg(not(all(test, loom)))]
pub(super) const WATCH_SPINS: u32 = 64;
#[cfg(all(test, loom))]
pub(super) const WATCH_SPINS: u32 = 1;

/// The end of a helper's warm window.
#[cfg(not(all(test, loom)))]
pub(super) struct Deadline(std::time::Instant);

#[cfg(not(all(test, loom)))]
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
#[cfg(all(test, loom))]
pub(super) struct Deadline(bool);

#[cfg(all(test, loom))]
impl Deadline {
    pub(super) fn after(_: std::time::Duration) -> Deadline {
        Deadline(false)
    }

    pub(super) fn passed(&mut self) -> bool {
        std::mem::replace(&mut self.0, true)
    }
}
