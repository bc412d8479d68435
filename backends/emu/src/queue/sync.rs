//! The synchronization primitives of emu's stream queue, from `std` in every
//! build and from `loom` under `--cfg loom`, so the protocol that the loom models
//! (`loom_models.rs`) check is the code that runs.
//!
//! Owns: those names. Must not: hold any logic of the queue.

#[cfg(not(all(test, loom)))]
pub(super) use std::sync::{Arc, Condvar, Mutex, MutexGuard};

#[cfg(all(test, loom))]
pub(super) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
