//! The queue protocol: per-device streams of items, the tickets of their jobs,
//! events, and the worker loop that runs them, all under one lock and one
//! condition variable of a [`Queues`]. Production uses one static [`Queues`]
//! (`super`); the loom models build their own over loom's primitives.
//!
//! Owns: the state and its transitions. Must not: start threads itself (the
//! owner's `spawn` does) or touch device memory (jobs do).

use std::collections::{BTreeMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use opal::{DeviceType, OpalError, Result, Stream};

use super::sync::{Arc, Condvar, Mutex, MutexGuard};
use super::{Job, STREAMS};

/// A device of the queue: its type and index.
pub(super) type Key = (DeviceType, i16);

pub(super) fn key_of(device: opal::Device) -> Key {
    (device.device_type(), device.index().unwrap_or(0))
}

pub(super) enum Item {
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

impl StreamQ {
    fn idle(&self) -> bool {
        self.items.is_empty() && !self.busy
    }
}

struct DevQ {
    key: Key,
    streams: Vec<StreamQ>,
    worker: bool,
    /// Set only by the loom models, whose workers must end.
    closed: bool,
    next_rr: usize,
    next_new: usize,
}

struct Ev {
    recorded: u64,
    done: u64,
    done_at: Option<Instant>,
}

struct State {
    devs: Vec<DevQ>,
    events: BTreeMap<u64, Ev>,
    next_event: u64,
}

/// Every device's streams and every event, and how to start a device's worker.
pub(super) struct Queues {
    state: Mutex<State>,
    cv: Condvar,
    /// Starts a thread running [`Queues::serve`] for the device.
    spawn: fn(Key) -> std::io::Result<()>,
}

impl State {
    const EMPTY: State = State {
        devs: Vec::new(),
        events: BTreeMap::new(),
        next_event: 0,
    };

    fn dev(&mut self, key: Key) -> &mut DevQ {
        let i = match self.devs.iter().position(|d| d.key == key) {
            Some(i) => i,
            None => {
                self.devs.push(DevQ {
                    key,
                    streams: (0..STREAMS).map(|_| StreamQ::default()).collect(),
                    worker: false,
                    closed: false,
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

    fn sq(&mut self, key: Key, i: usize) -> &mut StreamQ {
        &mut self.dev(key).streams[i]
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

impl Queues {
    /// Constant in std builds, for the static of `super`.
    #[cfg(not(all(test, loom)))]
    pub(super) const fn new(spawn: fn(Key) -> std::io::Result<()>) -> Queues {
        let state = Mutex::new(State::EMPTY);
        Queues {
            state,
            cv: Condvar::new(),
            spawn,
        }
    }

    /// loom's primitives have no constant constructors.
    #[cfg(all(test, loom))]
    pub(super) fn new(spawn: fn(Key) -> std::io::Result<()>) -> Queues {
        let state = Mutex::new(State::EMPTY);
        Queues {
            state,
            cv: Condvar::new(),
            spawn,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Jobs run outside the lock and nothing panics while it is held, so a
        // poisoned lock still guards consistent data.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.cv.wait(st).unwrap_or_else(|e| e.into_inner())
    }

    /// The next stream of the device's pool (1 to [`STREAMS`] - 1, round robin).
    pub(super) fn new_stream(&self, device: opal::Device) -> i64 {
        let mut st = self.lock();
        let d = st.dev(key_of(device));
        let id = 1 + d.next_new % (STREAMS - 1);
        d.next_new += 1;
        id as i64
    }

    /// Queues `item`; returns the stream's count of queued jobs after it (the
    /// ticket of a job, which is retired when `jobs_retired` reaches it).
    pub(super) fn push(&self, stream: Stream, item: Item) -> Result<u64> {
        let mut st = self.lock();
        let q = st.stream(stream)?;
        if matches!(item, Item::Run(_)) {
            q.jobs_queued += 1;
        }
        let ticket = q.jobs_queued;
        q.items.push_back(item);
        let key = key_of(stream.device);
        let dev = st.dev(key);
        if !dev.worker {
            (self.spawn)(key).map_err(|e| {
                OpalError::device(format!(
                    "cannot start the worker of '{}': {e}",
                    stream.device
                ))
            })?;
            dev.worker = true;
        }
        drop(st);
        self.cv.notify_all();
        Ok(ticket)
    }

    /// Runs `f` on `stream` after the work queued before it and returns its
    /// result: the host waits. An earlier asynchronous error of the stream is
    /// reported first.
    pub(super) fn run_sync<T: Send + 'static>(
        &self,
        stream: Stream,
        f: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let slot = Arc::new(Mutex::new(None));
        let put = Arc::clone(&slot);
        let ticket = self.push(
            stream,
            Item::Run(Box::new(move || {
                *put.lock().unwrap_or_else(|e| e.into_inner()) = Some(f());
                Ok(())
            })),
        )?;
        // The job's value is in the slot once the worker retired it, and the
        // lock orders the slot's write before this read.
        let mut st = self.lock();
        while st.stream(stream)?.jobs_retired < ticket {
            st = self.wait(st);
        }
        drop(st);
        self.take_error(stream)?;
        let r = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        r.unwrap_or_else(|| {
            Err(OpalError::device(format!(
                "the worker of '{}' dropped a synchronous job",
                stream.device
            )))
        })
    }

    fn take_error(&self, stream: Stream) -> Result<()> {
        let mut st = self.lock();
        match st.stream(stream)?.error.take() {
            Some(e) => Err(OpalError::device(format!(
                "an asynchronous kernel on stream {} of '{}' failed: {e}",
                stream.id, stream.device
            ))),
            None => Ok(()),
        }
    }

    /// Whether everything queued on `stream` has run.
    pub(super) fn query(&self, stream: Stream) -> Result<bool> {
        let idle = self.lock().stream(stream)?.idle();
        self.take_error(stream)?;
        Ok(idle)
    }

    /// Waits until everything queued on `stream` has run.
    pub(super) fn synchronize(&self, stream: Stream) -> Result<()> {
        let mut st = self.lock();
        while !st.stream(stream)?.idle() {
            st = self.wait(st);
        }
        drop(st);
        self.take_error(stream)
    }

    /// A new event id.
    pub(super) fn create_event(&self) -> u64 {
        let mut st = self.lock();
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
    pub(super) fn destroy_event(&self, event: u64) {
        self.lock().events.remove(&event);
        self.cv.notify_all();
    }

    /// Records `event` at the end of `stream`.
    pub(super) fn record(&self, event: u64, stream: Stream) -> Result<()> {
        let gen = {
            let mut st = self.lock();
            st.stream(stream)?;
            let e = st
                .events
                .get_mut(&event)
                .ok_or_else(|| OpalError::device("the emu event was destroyed"))?;
            e.recorded += 1;
            e.recorded
        };
        self.push(stream, Item::Record { event, gen }).map(|_| ())
    }

    /// Makes `stream` wait for `event`'s latest recording.
    pub(super) fn block(&self, event: u64, stream: Stream) -> Result<()> {
        let gen = {
            let st = self.lock();
            match st.events.get(&event) {
                Some(e) if e.recorded > e.done => e.recorded,
                _ => return Ok(()),
            }
        };
        self.push(stream, Item::Wait { event, gen }).map(|_| ())
    }

    /// Whether `event`'s latest recording completed.
    pub(super) fn event_query(&self, event: u64) -> bool {
        self.lock()
            .events
            .get(&event)
            .is_none_or(|e| e.done >= e.recorded)
    }

    /// Waits for `event`'s latest recording.
    pub(super) fn event_synchronize(&self, event: u64) {
        let mut st = self.lock();
        loop {
            let gen = match st.events.get(&event) {
                Some(e) => e.recorded,
                None => return,
            };
            if st.event_done(event, gen) {
                return;
            }
            st = self.wait(st);
        }
    }

    /// When `event`'s latest recording completed.
    pub(super) fn event_time(&self, event: u64) -> Result<Instant> {
        let st = self.lock();
        match st.events.get(&event) {
            Some(e) if e.recorded == 0 => Err(OpalError::device("the event was never recorded")),
            Some(e) if e.done < e.recorded => Err(OpalError::device("the event has not completed")),
            Some(e) => e
                .done_at
                .ok_or_else(|| OpalError::device("the event has no completion time")),
            None => Err(OpalError::device("the emu event was destroyed")),
        }
    }

    /// Takes the next runnable job of `key`'s streams (round robin), completing
    /// records and passing satisfied waits on the way.
    fn next(&self, st: &mut State, key: Key) -> Next {
        // A completed record can unblock a stream this pass already looked at:
        // pass again until a pass changes nothing.
        loop {
            let now = Instant::now();
            let mut wake: Option<Instant> = None;
            let mut progress = false;
            let start = st.dev(key).next_rr;
            for k in 0..STREAMS {
                let i = (start + k) % STREAMS;
                loop {
                    let head = {
                        let q = st.sq(key, i);
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
                            let Some(Item::Run(job)) = st.sq(key, i).items.pop_front() else {
                                break;
                            };
                            st.sq(key, i).busy = true;
                            st.dev(key).next_rr = (i + 1) % STREAMS;
                            return Next::Run(i, job);
                        }
                        Some(Head::Hold(t)) if t <= now => {
                            st.sq(key, i).items.pop_front();
                            progress = true;
                        }
                        Some(Head::Hold(t)) => {
                            wake = Some(wake.map_or(t, |w| w.min(t)));
                            break;
                        }
                        Some(Head::Record(event, gen)) => {
                            st.sq(key, i).items.pop_front();
                            if let Some(e) = st.events.get_mut(&event) {
                                if gen >= e.done {
                                    e.done = gen;
                                    e.done_at = Some(Instant::now());
                                }
                            }
                            progress = true;
                            self.cv.notify_all();
                        }
                        Some(Head::Wait(event, gen)) => {
                            if !st.event_done(event, gen) {
                                break;
                            }
                            st.sq(key, i).items.pop_front();
                            progress = true;
                        }
                    }
                }
            }
            if !progress {
                return Next::Sleep(wake);
            }
            // Streams may have become idle (or events complete): tell waiters.
            self.cv.notify_all();
        }
    }

    /// The worker loop of device `key`: runs its streams' jobs outside the lock
    /// and retires them. Returns only once the device is closed (loom models).
    pub(super) fn serve(&self, key: Key) {
        let mut st = self.lock();
        loop {
            match self.next(&mut st, key) {
                Next::Run(i, job) => {
                    drop(st);
                    let r = catch_unwind(AssertUnwindSafe(job)).unwrap_or_else(|_| {
                        Err(OpalError::device("an emu kernel panicked on the worker"))
                    });
                    st = self.lock();
                    let q = st.sq(key, i);
                    q.busy = false;
                    q.jobs_retired += 1;
                    if let Err(e) = r {
                        q.error.get_or_insert(e.to_string());
                    }
                    self.cv.notify_all();
                }
                Next::Sleep(_) if st.dev(key).closed => return,
                Next::Sleep(wake) => {
                    st = match wake {
                        Some(t) => {
                            let d = t.saturating_duration_since(Instant::now());
                            self.cv
                                .wait_timeout(st, d)
                                .map(|(g, _)| g)
                                .unwrap_or_else(|e| e.into_inner().0)
                        }
                        None => self.wait(st),
                    };
                }
            }
        }
    }

    /// Marks `key`'s worker as started by the caller (the loom models start
    /// their workers as loom threads before queueing work).
    #[cfg(all(test, loom))]
    pub(super) fn adopt_worker(&self, key: Key) {
        self.lock().dev(key).worker = true;
    }

    /// Lets `key`'s worker return once nothing on its streams can run.
    #[cfg(all(test, loom))]
    pub(super) fn close(&self, key: Key) {
        self.lock().dev(key).closed = true;
        self.cv.notify_all();
    }

    /// A stream's queued and retired job counts.
    #[cfg(all(test, loom))]
    pub(super) fn tickets(&self, stream: Stream) -> (u64, u64) {
        let mut st = self.lock();
        let q = st.stream(stream).expect("the models use valid streams");
        (q.jobs_queued, q.jobs_retired)
    }
}
