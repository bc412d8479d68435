//! Emu's asynchronous execution: one worker thread per device runs the work of
//! that device's streams, so a kernel returns before it has run and ordering bugs
//! between streams show up. Each device has [`STREAMS`] streams (0 is the
//! default; [`new_stream`] hands out the others round robin, like a stream pool).
//! Work on one stream runs in order; the worker takes the next ready item of the
//! streams in turn, so streams overtake each other unless an event orders them.
//! Events record completion times. An error of an asynchronous job is kept on its
//! stream and reported once by the next query, synchronize or synchronous call
//! on that stream.
//!
//! The protocol itself (tickets, events, the worker loop) is `protocol.rs`, over
//! the primitives of `sync.rs`: std's in every build, loom's under `--cfg loom`,
//! where `loom_models.rs` checks its interleavings
//! (`RUSTFLAGS="--cfg loom" cargo test -p opal-emu --lib loom`).
//!
//! Memory safety does not depend on ordering: [`crate::device`] touches emu pool
//! memory only inside jobs, so each device's memory is only ever accessed by that
//! device's worker, and every job checks its addresses against the pool's arena
//! (which is never freed) when it runs.
//!
//! Owns: the queues, workers and events. Must not: touch device memory itself
//! (jobs do) or know tensors.

mod protocol;
mod sync;

#[cfg(all(test, loom))]
mod loom_models;

use std::time::{Duration, Instant};

use opal::{Device, Result, Stream};

use protocol::{Item, Key, Queues};

/// Streams per emu device, the default stream (0) included.
pub const STREAMS: usize = 32;

/// Work to run on a device's worker.
pub type Job = Box<dyn FnOnce() -> Result<()> + Send>;

#[cfg(not(all(test, loom)))]
static QUEUES: Queues = Queues::new(spawn_worker);

#[cfg(not(all(test, loom)))]
fn queues() -> &'static Queues {
    &QUEUES
}

/// Under loom the models build their own [`Queues`]; this one exists only so
/// the crate compiles and is never used by them.
#[cfg(all(test, loom))]
fn queues() -> &'static Queues {
    static QUEUES: std::sync::OnceLock<Queues> = std::sync::OnceLock::new();
    QUEUES.get_or_init(|| Queues::new(spawn_worker))
}

fn spawn_worker(key: Key) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(format!("{} queue", Device::new(key.0, Some(key.1))))
        .spawn(move || queues().serve(key))
        .map(drop)
}

/// Whether `s` names one of the [`STREAMS`] streams of its device.
pub fn stream_exists(s: Stream) -> bool {
    (0..STREAMS as i64).contains(&s.id)
}

/// The next stream of the device's pool (1 to [`STREAMS`] - 1, round robin).
pub fn new_stream(device: Device) -> i64 {
    queues().new_stream(device)
}

/// Queues `job` on `stream`, starting the device's worker if needed.
pub fn enqueue(stream: Stream, job: Job) -> Result<()> {
    queues().push(stream, Item::Run(job)).map(|_| ())
}

/// Holds `stream` for `d`: work queued on it after this call starts no earlier
/// (an emulated slow kernel, for tests of ordering and timing). The worker keeps
/// running other streams meanwhile.
pub fn hold(stream: Stream, d: Duration) -> Result<()> {
    queues()
        .push(stream, Item::Hold(Instant::now() + d))
        .map(|_| ())
}

/// Runs `f` on `stream` after the work queued before it and returns its result:
/// the host waits. An earlier asynchronous error of the stream is reported first.
pub fn run_sync<T: Send + 'static>(
    stream: Stream,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    queues().run_sync(stream, f)
}

/// Whether everything queued on `stream` has run.
pub fn query(stream: Stream) -> Result<bool> {
    queues().query(stream)
}

/// Waits until everything queued on `stream` has run.
pub fn synchronize(stream: Stream) -> Result<()> {
    queues().synchronize(stream)
}

/// [`synchronize`] for every stream of `device`; reports the first error.
pub fn synchronize_device(device: Device) -> Result<()> {
    let mut first = Ok(());
    for id in 0..STREAMS as i64 {
        let r = synchronize(Stream { device, id });
        if first.is_ok() {
            first = r;
        }
    }
    first
}

/// A new event id.
pub fn create_event() -> u64 {
    queues().create_event()
}

/// Forgets an event (waits queued on it no longer wait).
pub fn destroy_event(event: u64) {
    queues().destroy_event(event)
}

/// Records `event` at the end of `stream`.
pub fn record(event: u64, stream: Stream) -> Result<()> {
    queues().record(event, stream)
}

/// Makes `stream` wait for `event`'s latest recording.
pub fn block(event: u64, stream: Stream) -> Result<()> {
    queues().block(event, stream)
}

/// Whether `event`'s latest recording completed.
pub fn event_query(event: u64) -> bool {
    queues().event_query(event)
}

/// Waits for `event`'s latest recording.
pub fn event_synchronize(event: u64) {
    queues().event_synchronize(event)
}

/// When `event`'s latest recording completed.
pub fn event_time(event: u64) -> Result<Instant> {
    queues().event_time(event)
}
