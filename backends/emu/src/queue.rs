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
//! Memory safety does not depend on ordering: [`crate::device`] touches emu pool
//! memory only inside jobs, so each device's memory is only ever accessed by that
//! device's worker, and every job checks its addresses against the pool's arena
//! (which is never freed) when it runs.
//!
//! Owns: the queues, workers and events. Must not: touch device memory itself
//! (jobs do) or know tensors.

use std::collections::{BTreeMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use opal::{Device, DeviceType, OpalError, Result, Stream};

/// Streams per emu device, the default stream (0) included.
pub const STREAMS: usize = 32;

/// Work to run on a device's worker.
pub type Job = Box<dyn FnOnce() -> Result<()> + Send>;

enum Item {
    Run(Job),
    /// Nothing after this runs before `Instant` (a test's slow kernel).
    Hold(Instant),
    /// Marks `event`'s recording `gen` as complete.
    Record {
        event: u64,
        gen: u64,
    },
    /// Nothing after this runs before `event`'s recording `gen` completes.
    Wait {
        event: u64,
        gen: u64,
    },
}

#[derive(Default)]
struct StreamQ {
    items: VecDeque<Item>,
    busy: bool,
    error: Option<String>,
    /// Jobs queued and jobs retired (run and bookkept) so far: a synchronous call
    /// returns only once its own job is retired, so the stream is idle to a query
    /// right after it unless more work was queued.
    jobs_queued: u64,
    jobs_retired: u64,
}

struct DevQ {
    key: (DeviceType, i16),
    streams: Vec<StreamQ>,
    worker: bool,
    next_rr: usize,
    next_new: usize,
}

struct Ev {
    recorded: u64,
    done: u64,
    done_at: Option<Instant>,
}

#[derive(Default)]
struct State {
    devs: Vec<DevQ>,
    events: BTreeMap<u64, Ev>,
    next_event: u64,
}

static STATE: Mutex<State> = Mutex::new(State {
    devs: Vec::new(),
    events: BTreeMap::new(),
    next_event: 0,
});
static CV: Condvar = Condvar::new();

fn lock() -> MutexGuard<'static, State> {
    // Jobs run outside the lock and nothing panics while it is held, so a poisoned
    // lock still guards consistent data.
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

fn key_of(device: Device) -> (DeviceType, i16) {
    (device.device_type(), device.index().unwrap_or(0))
}

impl State {
    fn dev(&mut self, key: (DeviceType, i16)) -> &mut DevQ {
        let i = match self.devs.iter().position(|d| d.key == key) {
            Some(i) => i,
            None => {
                self.devs.push(DevQ {
                    key,
                    streams: (0..STREAMS).map(|_| StreamQ::default()).collect(),
                    worker: false,
                    next_rr: 0,
                    next_new: 0,
                });
                self.devs.len() - 1
            }
        };
        &mut self.devs[i]
    }

    fn stream(&mut self, s: Stream) -> Result<&mut StreamQ> {
        let id = usize::try_from(s.id).ok().filter(|&i| i < STREAMS);
        let Some(id) = id else {
            return Err(unknown_stream(s));
        };
        Ok(&mut self.dev(key_of(s.device)).streams[id])
    }

    fn event_done(&self, event: u64, gen: u64) -> bool {
        self.events.get(&event).is_none_or(|e| e.done >= gen)
    }
}

fn unknown_stream(s: Stream) -> OpalError {
    OpalError::device(format!(
        "emu device '{}' has no stream {} (streams 0 to {})",
        s.device,
        s.id,
        STREAMS - 1
    ))
}

/// Whether `s` names one of the [`STREAMS`] streams of its device.
pub fn stream_exists(s: Stream) -> bool {
    (0..STREAMS as i64).contains(&s.id)
}

/// The next stream of the device's pool (1 to [`STREAMS`] - 1, round robin).
pub fn new_stream(device: Device) -> i64 {
    let mut st = lock();
    let d = st.dev(key_of(device));
    let id = 1 + d.next_new % (STREAMS - 1);
    d.next_new += 1;
    id as i64
}

/// Queues `job` on `stream`, starting the device's worker if needed.
pub fn enqueue(stream: Stream, job: Job) -> Result<()> {
    push(stream, Item::Run(job)).map(|_| ())
}

/// Queues `item`; returns the stream's count of queued jobs after it (the ticket
/// of a job, which is retired when `jobs_retired` reaches it).
fn push(stream: Stream, item: Item) -> Result<u64> {
    let mut st = lock();
    let q = st.stream(stream)?;
    if matches!(item, Item::Run(_)) {
        q.jobs_queued += 1;
    }
    let ticket = q.jobs_queued;
    q.items.push_back(item);
    let key = key_of(stream.device);
    let dev = st.dev(key);
    if !dev.worker {
        std::thread::Builder::new()
            .name(format!("{} queue", stream.device))
            .spawn(move || worker(key))
            .map_err(|e| {
                OpalError::device(format!(
                    "cannot start the worker of '{}': {e}",
                    stream.device
                ))
            })?;
        dev.worker = true;
    }
    drop(st);
    CV.notify_all();
    Ok(ticket)
}

/// Holds `stream` for `d`: work queued on it after this call starts no earlier
/// (an emulated slow kernel, for tests of ordering and timing). The worker keeps
/// running other streams meanwhile.
pub fn hold(stream: Stream, d: Duration) -> Result<()> {
    push(stream, Item::Hold(Instant::now() + d)).map(|_| ())
}

/// Runs `f` on `stream` after the work queued before it and returns its result:
/// the host waits. An earlier asynchronous error of the stream is reported first.
pub fn run_sync<T: Send + 'static>(
    stream: Stream,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let ticket = push(
        stream,
        Item::Run(Box::new(move || {
            // The receiver waits below; if it is gone there is nobody to tell.
            let _ = tx.send(f());
            Ok(())
        })),
    )?;
    let r = rx.recv().map_err(|_| {
        OpalError::device(format!(
            "the worker of '{}' dropped a synchronous job",
            stream.device
        ))
    })?;
    // The value arrives while the worker still counts the job as running.
    let mut st = lock();
    while st.stream(stream)?.jobs_retired < ticket {
        st = CV.wait(st).unwrap_or_else(|e| e.into_inner());
    }
    drop(st);
    take_error(stream)?;
    r
}

fn take_error(stream: Stream) -> Result<()> {
    let mut st = lock();
    match st.stream(stream)?.error.take() {
        Some(e) => Err(OpalError::device(format!(
            "an asynchronous kernel on stream {} of '{}' failed: {e}",
            stream.id, stream.device
        ))),
        None => Ok(()),
    }
}

/// Whether everything queued on `stream` has run.
pub fn query(stream: Stream) -> Result<bool> {
    let idle = {
        let mut st = lock();
        let q = st.stream(stream)?;
        q.items.is_empty() && !q.busy
    };
    take_error(stream)?;
    Ok(idle)
}

/// Waits until everything queued on `stream` has run.
pub fn synchronize(stream: Stream) -> Result<()> {
    let mut st = lock();
    loop {
        let q = st.stream(stream)?;
        if q.items.is_empty() && !q.busy {
            break;
        }
        st = CV.wait(st).unwrap_or_else(|e| e.into_inner());
    }
    drop(st);
    take_error(stream)
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
    let mut st = lock();
    st.next_event += 1;
    let id = st.next_event;
    st.events.insert(
        id,
        Ev {
            recorded: 0,
            done: 0,
            done_at: None,
        },
    );
    id
}

/// Forgets an event (waits queued on it no longer wait).
pub fn destroy_event(event: u64) {
    lock().events.remove(&event);
    CV.notify_all();
}

/// Records `event` at the end of `stream`.
pub fn record(event: u64, stream: Stream) -> Result<()> {
    let gen = {
        let mut st = lock();
        st.stream(stream)?;
        let e = st
            .events
            .get_mut(&event)
            .ok_or_else(|| OpalError::device("the emu event was destroyed"))?;
        e.recorded += 1;
        e.recorded
    };
    push(stream, Item::Record { event, gen }).map(|_| ())
}

/// Makes `stream` wait for `event`'s latest recording.
pub fn block(event: u64, stream: Stream) -> Result<()> {
    let gen = {
        let st = lock();
        match st.events.get(&event) {
            Some(e) if e.recorded > e.done => e.recorded,
            _ => return Ok(()),
        }
    };
    push(stream, Item::Wait { event, gen }).map(|_| ())
}

/// Whether `event`'s latest recording completed.
pub fn event_query(event: u64) -> bool {
    lock()
        .events
        .get(&event)
        .is_none_or(|e| e.done >= e.recorded)
}

/// Waits for `event`'s latest recording.
pub fn event_synchronize(event: u64) {
    let mut st = lock();
    loop {
        let gen = match st.events.get(&event) {
            Some(e) => e.recorded,
            None => return,
        };
        if st.event_done(event, gen) {
            return;
        }
        st = CV.wait(st).unwrap_or_else(|e| e.into_inner());
    }
}

/// When `event`'s latest recording completed.
pub fn event_time(event: u64) -> Result<Instant> {
    let st = lock();
    match st.events.get(&event) {
        Some(e) if e.recorded == 0 => Err(OpalError::device("the event was never recorded")),
        Some(e) if e.done < e.recorded => Err(OpalError::device("the event has not completed")),
        Some(e) => e
            .done_at
            .ok_or_else(|| OpalError::device("the event has no completion time")),
        None => Err(OpalError::device("the emu event was destroyed")),
    }
}

fn sq(st: &mut State, key: (DeviceType, i16), i: usize) -> &mut StreamQ {
    &mut st.dev(key).streams[i]
}

/// A stream's first item, as data.
enum Head {
    Run,
    Hold(Instant),
    Record(u64, u64),
    Wait(u64, u64),
}

/// What the worker does next.
enum Next {
    Run(usize, Job),
    Sleep(Option<Instant>),
}

/// Takes the next runnable job of `key`'s streams (round robin), completing
/// records and passing satisfied waits on the way.
fn next(st: &mut State, key: (DeviceType, i16)) -> Next {
    // A completed record can unblock a stream this pass already looked at: pass
    // again until a pass changes nothing.
    loop {
        let now = Instant::now();
        let mut wake: Option<Instant> = None;
        let mut progress = false;
        let start = st.dev(key).next_rr;
        for k in 0..STREAMS {
            let i = (start + k) % STREAMS;
            loop {
                let head = {
                    let q = &mut st.dev(key).streams[i];
                    match q.items.front() {
                        _ if q.busy => None,
                        None => None,
                        Some(Item::Run(_)) => Some(Head::Run),
                        Some(Item::Hold(t)) => Some(Head::Hold(*t)),
                        Some(&Item::Record { event, gen }) => Some(Head::Record(event, gen)),
                        Some(&Item::Wait { event, gen }) => Some(Head::Wait(event, gen)),
                    }
                };
                match head {
                    None => break,
                    Some(Head::Run) => {
                        let Some(Item::Run(job)) = sq(st, key, i).items.pop_front() else {
                            break;
                        };
                        sq(st, key, i).busy = true;
                        st.dev(key).next_rr = (i + 1) % STREAMS;
                        return Next::Run(i, job);
                    }
                    Some(Head::Hold(t)) if t <= now => {
                        sq(st, key, i).items.pop_front();
                        progress = true;
                    }
                    Some(Head::Hold(t)) => {
                        wake = Some(wake.map_or(t, |w| w.min(t)));
                        break;
                    }
                    Some(Head::Record(event, gen)) => {
                        sq(st, key, i).items.pop_front();
                        if let Some(e) = st.events.get_mut(&event) {
                            if gen >= e.done {
                                e.done = gen;
                                e.done_at = Some(Instant::now());
                            }
                        }
                        progress = true;
                        CV.notify_all();
                    }
                    Some(Head::Wait(event, gen)) => {
                        if !st.event_done(event, gen) {
                            break;
                        }
                        sq(st, key, i).items.pop_front();
                        progress = true;
                    }
                }
            }
        }
        if !progress {
            return Next::Sleep(wake);
        }
        // Streams may have become idle (or events complete): tell waiters.
        CV.notify_all();
    }
}

fn worker(key: (DeviceType, i16)) {
    let mut st = lock();
    loop {
        match next(&mut st, key) {
            Next::Run(i, job) => {
                drop(st);
                let r = catch_unwind(AssertUnwindSafe(job)).unwrap_or_else(|_| {
                    Err(OpalError::device("an emu kernel panicked on the worker"))
                });
                st = lock();
                let q = &mut st.dev(key).streams[i];
                q.busy = false;
                q.jobs_retired += 1;
                if let Err(e) = r {
                    q.error.get_or_insert(e.to_string());
                }
                CV.notify_all();
            }
            Next::Sleep(wake) => {
                st = match wake {
                    Some(t) => {
                        let d = t.saturating_duration_since(Instant::now());
                        CV.wait_timeout(st, d)
                            .map(|(g, _)| g)
                            .unwrap_or_else(|e| e.into_inner().0)
                    }
                    None => CV.wait(st).unwrap_or_else(|e| e.into_inner()),
                };
            }
        }
    }
}
