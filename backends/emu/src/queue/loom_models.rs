//! loom models of the stream queue: every interleaving (up to loom's preemption
//! bound) of host threads queueing work, calling synchronously and waiting on
//! streams and events, with a device worker on its own loom thread, all running
//! the real [`Queues`] over loom's lock and condition variable. Jobs write loom
//! `UnsafeCell`s, so a host read that the protocol does not order after the
//! job's write (a wait that returns early) is a reported race; a wait that is
//! never woken (a dropped notify) is a reported deadlock.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p opal-emu --lib loom`
//! (`.ci/loom-emu-mutants.sh` shows each model failing on a seeded bug).
//!
//! Owns: the models. Must not: be compiled outside `--cfg loom` tests.

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

use opal::{Device, DeviceType, Stream};

use super::protocol::{key_of, Queues};
use super::sync::Arc;

const DEV: Device = Device::new(DeviceType::PrivateUse1, Some(0));

fn stream(id: i64) -> Stream {
    Stream { device: DEV, id }
}

/// Cells the jobs write, one per job.
struct Cells(Vec<UnsafeCell<usize>>);

// SAFETY: job `c` is the only writer of cell `c`, and hosts read a cell only
// after a wait the protocol says orders it after the job; loom reports any access
// pair without a happens-before edge, which is what the models check.
unsafe impl Sync for Cells {}
// SAFETY: as above; the cells move only inside the `Arc` the threads share.
unsafe impl Send for Cells {}

impl Cells {
    fn new(n: usize) -> Arc<Cells> {
        Arc::new(Cells((0..n).map(|_| UnsafeCell::new(0)).collect()))
    }

    fn write(&self, c: usize, v: usize) {
        // SAFETY: see `Cells`.
        self.0[c].with_mut(|p| unsafe { *p = v });
    }

    fn read(&self, c: usize) -> usize {
        // SAFETY: see `Cells`.
        self.0[c].with(|p| unsafe { *p })
    }
}

/// A queue with its device's worker running on a loom thread, and the cells
/// its jobs write with the count of job runs.
struct Served {
    q: Arc<Queues>,
    worker: thread::JoinHandle<()>,
    cells: Arc<Cells>,
    runs: Arc<AtomicUsize>,
}

/// A job that writes `v` into cell `c` and counts its run.
fn write_job(cells: &Arc<Cells>, runs: &Arc<AtomicUsize>, c: usize, v: usize) -> super::Job {
    let (cells, runs) = (Arc::clone(cells), Arc::clone(runs));
    Box::new(move || {
        runs.fetch_add(1, Ordering::Relaxed);
        cells.write(c, v);
        Ok(())
    })
}

impl Served {
    fn start(cells: usize) -> Served {
        let q = Arc::new(Queues::new(|_| {
            Err(std::io::Error::other("the models start their own workers"))
        }));
        q.adopt_worker(key_of(DEV));
        let w = Arc::clone(&q);
        let worker = thread::spawn(move || w.serve(key_of(DEV)));
        Served {
            q,
            worker,
            cells: Cells::new(cells),
            runs: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Queues on `s` a job that writes `v` into cell `c`.
    fn write(&self, s: Stream, c: usize, v: usize) {
        let job = write_job(&self.cells, &self.runs, c, v);
        self.q.push(s, super::Item::Run(job)).unwrap();
    }

    /// Checks that every job queued on `streams` retired once, then stops the
    /// worker and checks that the `writes` write jobs ran once each.
    fn finish(self, streams: &[i64], writes: usize) {
        for &s in streams {
            self.q.synchronize(stream(s)).unwrap();
            let (queued, retired) = self.q.tickets(stream(s));
            assert_eq!(
                queued, retired,
                "stream {s}: every queued ticket retires once"
            );
        }
        self.q.close(key_of(DEV));
        self.worker.join().unwrap();
        assert_eq!(
            self.runs.load(Ordering::Relaxed),
            writes,
            "each job ran once"
        );
    }
}

fn bounded(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(f);
}

/// A host queues a job and synchronizes its stream while a second host queues
/// on another stream and calls synchronously there: each wait returns only after
/// the jobs queued before it ran (their writes are visible), each job runs once.
#[test]
fn loom_synchronize_and_sync_calls_wait_for_earlier_jobs() {
    bounded(|| {
        let served = Served::start(2);
        let other = {
            let q = Arc::clone(&served.q);
            let cells = Arc::clone(&served.cells);
            let job = write_job(&served.cells, &served.runs, 1, 7);
            thread::spawn(move || {
                q.push(stream(1), super::Item::Run(job)).unwrap();
                // The synchronous call runs after the job queued before it.
                let seen = q.run_sync(stream(1), move || Ok(cells.read(1))).unwrap();
                assert_eq!(seen, 7);
            })
        };
        served.write(stream(0), 0, 5);
        served.q.synchronize(stream(0)).unwrap();
        assert_eq!(
            served.cells.read(0),
            5,
            "synchronize returned before the job ran"
        );
        other.join().unwrap();
        assert_eq!(served.runs.load(Ordering::Relaxed), 2);
        served.finish(&[0, 1], 2);
    });
}

/// A query that reports the stream idle orders the job's write before the
/// host's read, and the job's ticket is retired by then.
#[test]
fn loom_an_idle_query_means_the_jobs_ran() {
    bounded(|| {
        let served = Served::start(1);
        served.write(stream(0), 0, 3);
        if served.q.query(stream(0)).unwrap() {
            assert_eq!(served.cells.read(0), 3, "an idle query before the job ran");
            let (queued, retired) = served.q.tickets(stream(0));
            assert_eq!(queued, retired);
        }
        served.finish(&[0], 1);
    });
}

/// Stream 2 writes and records an event, stream 0 waits on it and then reads;
/// a host thread queries and waits on the event. The reader always sees the
/// write, a completed query or wait orders the write before the host's read.
#[test]
fn loom_events_order_streams_and_hosts() {
    bounded(|| {
        let served = Served::start(1);
        let seen = Arc::new(AtomicUsize::new(0));
        let q = &served.q;
        let e = q.create_event();
        // The writer is on a later stream than the reader, so a wait that let
        // the reader through early would run it first (round robin from 0).
        served.write(stream(2), 0, 9);
        q.record(e, stream(2)).unwrap();
        q.block(e, stream(0)).unwrap();
        let read = {
            let (cells, seen) = (Arc::clone(&served.cells), Arc::clone(&seen));
            Box::new(move || {
                seen.store(cells.read(0), Ordering::Relaxed);
                Ok(())
            })
        };
        q.push(stream(0), super::Item::Run(read)).unwrap();

        let host = {
            let (q, cells) = (Arc::clone(q), Arc::clone(&served.cells));
            thread::spawn(move || {
                if q.event_query(e) {
                    assert_eq!(cells.read(0), 9, "a completed event before its work ran");
                }
                q.event_synchronize(e);
                assert_eq!(cells.read(0), 9, "event_synchronize returned early");
            })
        };
        q.synchronize(stream(0)).unwrap();
        assert_eq!(
            seen.load(Ordering::Relaxed),
            9,
            "the wait let the reader run first"
        );
        host.join().unwrap();
        served.finish(&[0, 2], 1);
    });
}
