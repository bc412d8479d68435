//! The emu plugin's streams and events. Kernels compute when they are called, so
//! a stream is a timeline: the instant until which it is busy. Work a test makes
//! slow ([`hold`], standing for a long kernel as the linked emu's `queue::hold`
//! does) pushes that instant out; a query says whether it has passed; a
//! synchronize sleeps until it; an event recorded on a stream completes when the
//! stream reaches it, and a stream waiting for an event is busy until then. A
//! copy to the host waits for the whole device, as the linked emu's does.
//!
//! What differs from the linked emu's worker threads: a kernel's result is there
//! at once, so one stream never overtakes another's data (only its timeline).
//!
//! Owns: the timelines and events. Must not: touch device memory.

use crate::runtime::{DEVICES, STREAMS};
use opal_plugin_sdk::{Error, Event, Result};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Per device and stream: busy until this instant (`None`: idle).
static BUSY: Mutex<[[Option<Instant>; STREAMS as usize]; DEVICES]> =
    Mutex::new([[None; STREAMS as usize]; DEVICES]);

fn busy() -> std::sync::MutexGuard<'static, [[Option<Instant>; STREAMS as usize]; DEVICES]> {
    BUSY.lock().unwrap_or_else(|e| e.into_inner())
}

/// The slot of stream `id` of device `index`.
fn slot(index: i32, id: i64) -> Result<(usize, usize)> {
    let d = usize::try_from(index).ok().filter(|&d| d < DEVICES);
    let s = usize::try_from(id).ok().filter(|&s| s < STREAMS as usize);
    d.zip(s)
        .ok_or_else(|| Error::msg(format!("emu has no stream {id} on device {index}")))
}

/// When the stream's work is done (now when idle).
fn done_at(index: i32, id: i64) -> Result<Instant> {
    let (d, s) = slot(index, id)?;
    let now = Instant::now();
    Ok(busy()[d][s].map_or(now, |t| t.max(now)))
}

/// Makes the stream busy until `t` at least.
fn busy_until(index: i32, id: i64, t: Instant) -> Result<()> {
    let (d, s) = slot(index, id)?;
    let mut b = busy();
    b[d][s] = Some(b[d][s].map_or(t, |u| u.max(t)));
    Ok(())
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

/// Work of `ms` milliseconds queued on the stream (a test's slow kernel).
pub fn hold(index: i32, id: i64, ms: u64) -> Result<()> {
    let t = done_at(index, id)? + Duration::from_millis(ms);
    busy_until(index, id, t)
}

/// Whether the stream's work is done. An idle stream answers without reading
/// the clock (a query is the call polled in loops); a stream found past its
/// instant becomes idle, which `done_at` treats alike.
pub fn query(index: i32, id: i64) -> Result<bool> {
    let (d, s) = slot(index, id)?;
    let mut b = busy();
    Ok(match b[d][s] {
        None => true,
        Some(t) if t <= Instant::now() => {
            b[d][s] = None;
            true
        }
        Some(_) => false,
    })
}

/// Waits for the stream's work.
pub fn synchronize(index: i32, id: i64) -> Result<()> {
    sleep_until(done_at(index, id)?);
    Ok(())
}

/// Waits for every stream of device `index`.
pub fn synchronize_device(index: i32) -> Result<()> {
    let d = usize::try_from(index)
        .ok()
        .filter(|&d| d < DEVICES)
        .ok_or_else(|| Error::msg(format!("emu has no device {index}")))?;
    let last = busy()[d].iter().flatten().max().copied();
    if let Some(t) = last {
        sleep_until(t);
    }
    Ok(())
}

/// An event: the instant its latest recording completes.
#[derive(Default)]
pub struct EmuEvent {
    at: Mutex<Option<Instant>>,
}

impl EmuEvent {
    fn at(&self) -> Option<Instant> {
        *self.at.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Event for EmuEvent {
    fn record(&self, index: i32, stream: i64) -> Result<()> {
        let t = done_at(index, stream)?;
        *self.at.lock().unwrap_or_else(|e| e.into_inner()) = Some(t);
        Ok(())
    }

    fn block(&self, index: i32, stream: i64) -> Result<()> {
        match self.at() {
            Some(t) => busy_until(index, stream, t),
            None => Ok(()),
        }
    }

    fn query(&self) -> Result<bool> {
        Ok(self.at().is_none_or(|t| t <= Instant::now()))
    }

    fn synchronize(&self) -> Result<()> {
        if let Some(t) = self.at() {
            sleep_until(t);
        }
        Ok(())
    }

    fn completed_at(&self) -> Result<Instant> {
        match self.at() {
            None => Err(Error::msg("the event was never recorded")),
            Some(t) if t > Instant::now() => Err(Error::msg("the event has not completed yet")),
            Some(t) => Ok(t),
        }
    }
}
