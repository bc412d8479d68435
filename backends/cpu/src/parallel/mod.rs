//! Fork-join in which the calling thread does its share of the work.
//!
//! Owns: running `f(0..chunks)` on the calling thread plus helpers, with chunks
//! claimed one at a time from a shared counter, and the small team of helper
//! threads that stay warm between forks. Must not: know about tensors, dtypes or
//! ops, or choose chunk sizes (callers know their work).
//!
//! Why not `rayon::scope` from the caller: a thread outside the pool that opens a
//! scope hands the whole scope to a sleeping worker and then sleeps itself, so
//! every parallel kernel pays two thread wake-ups on its critical path, and a third
//! when the first worker has to wake a second one to share the work. On a VM a
//! wake-up of an idle CPU costs tens of microseconds, about a tenth of a
//! 512x512 GEMM or of a 1M-element add. Here the caller starts on chunk 0 at
//! once; the helpers claim whatever chunks are left when they arrive. A late helper
//! costs nothing but its own wake-up, and helpers that are busy elsewhere leave the
//! caller to do every chunk itself, so no call can wait on work that nobody runs.
//!
//! Helpers come first from [`team`]: one thread per extra CPU that, after a job,
//! watches for the next one for [`WARM_WINDOW`] before it parks. Kernels called
//! back to back (a benchmark loop, the layers of a model) then find a helper that
//! starts within a microsecond instead of being woken, as OpenMP's spinning
//! workers do for libtorch. A helper that is parked is woken with `unpark`; when
//! no team helper is free (forks from several threads at once, nested forks), the
//! rest come from `rayon::spawn`. The total never exceeds the current rayon pool's
//! thread count, so `RAYON_NUM_THREADS` and custom pools still bound parallelism.
//!
//! The protocol's atomics, locks and parking come from [`sync`]: `std`'s, or
//! loom's under `--cfg loom`, where `loom_models.rs` checks every interleaving of
//! a fork with a helper (`RUSTFLAGS="--cfg loom" cargo test --release -p opal-cpu
//! --lib loom`).

#[cfg(all(test, loom))]
mod loom_models;
mod sync;

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::OnceLock;
use std::time::Duration;
use sync::{Arc, AtomicBool, AtomicU8, AtomicUsize, Deadline, Mutex, Ordering, Thread};

/// Busy-wait rounds before the caller starts yielding its CPU while it waits for
/// helpers to finish their last chunks.
const SPIN_ROUNDS: u32 = 1 << 10;

/// How long a team helper keeps watching for a new job after finishing one, before
/// it parks. Long enough to bridge the gaps between kernels called back to back;
/// short enough that an idle program stops spinning at once. While it watches, the
/// helper yields its CPU to any other runnable thread.
const WARM_WINDOW: Duration = Duration::from_micros(500);

/// One fork-join: the chunk counter, the completion count and the work.
struct Job {
    /// Next unclaimed chunk; values at or past `chunks` claim nothing.
    next: AtomicUsize,
    /// Chunks finished (normally or by panicking).
    done: AtomicUsize,
    chunks: usize,
    /// The caller's closure, with its lifetime erased: see the SAFETY note in
    /// [`fork_chunks`] for why it is only called while the caller waits.
    work: *const (dyn Fn(usize) + Sync),
    /// The first panic raised by a chunk, re-raised on the calling thread.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

// SAFETY: `work` points to a `Sync` closure, which may be called from any thread;
// it is dereferenced only for a claimed chunk, and every chunk is claimed and
// finished before `fork_chunks` returns (see there). The other fields are atomics
// and a mutex.
unsafe impl Send for Job {}
// SAFETY: as for Send.
unsafe impl Sync for Job {}

impl Job {
    /// A job of `chunks` chunks running `work` (see [`Job::work`] for the
    /// lifetime the caller must keep).
    fn new(chunks: usize, work: *const (dyn Fn(usize) + Sync)) -> Job {
        Job {
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            chunks,
            work,
            panic: Mutex::new(None),
        }
    }

    /// Claims and runs chunks until none is left. `drained` runs once, as soon as
    /// this thread sees that no chunk is left to claim: before it reports its last
    /// chunk done when it can tell then, else when its next claim fails.
    fn run_claimed(&self, drained: impl FnOnce()) {
        let mut drained = Some(drained);
        loop {
            let chunk = self.next.fetch_add(1, Ordering::Relaxed);
            if chunk >= self.chunks {
                break;
            }
            // SAFETY: `chunk < chunks` was claimed by this thread, so the caller of
            // `fork_chunks` is still waiting for it and the closure is alive.
            let work = unsafe { &*self.work };
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| work(chunk))) {
                if let Ok(mut slot) = self.panic.lock() {
                    slot.get_or_insert(payload);
                }
            }
            if self.next.load(Ordering::Relaxed) >= self.chunks {
                if let Some(f) = drained.take() {
                    f();
                }
            }
            // Release: the chunk's writes happen before the caller sees it done.
            self.done.fetch_add(1, Ordering::Release);
        }
        if let Some(f) = drained {
            f();
        }
    }
}

/// Team helper states.
const WATCHING: u8 = 0;
const PARKED: u8 = 1;
const HIRED: u8 = 2;

/// One warm helper thread and its mailbox.
struct Helper {
    /// [`WATCHING`] or [`PARKED`] when free; [`HIRED`] from the moment a fork takes
    /// it until it has finished that fork's chunks.
    state: AtomicU8,
    /// Set (after `job`) by the fork that hired the helper.
    ready: AtomicBool,
    job: Mutex<Option<Arc<Job>>>,
    thread: OnceLock<Thread>,
}

impl Helper {
    /// A helper not yet free for hire (its thread starts it: [`Helper::open`]).
    fn new() -> Helper {
        Helper {
            state: AtomicU8::new(HIRED),
            ready: AtomicBool::new(false),
            job: Mutex::new(None),
            thread: OnceLock::new(),
        }
    }

    /// Free for hire, once `thread` (to unpark it) is in place.
    fn open(&self, thread: Thread) {
        let _ = self.thread.set(thread);
        self.state.store(WATCHING, Ordering::Release);
    }

    /// Hands `job` to this helper if it is free.
    fn try_hire(&self, job: &Arc<Job>) -> bool {
        let was =
            match self
                .state
                .compare_exchange(WATCHING, HIRED, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => WATCHING,
                Err(PARKED) => match self.state.compare_exchange(
                    PARKED,
                    HIRED,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => PARKED,
                    Err(_) => return self.take_over_stale(job),
                },
                Err(_) => return self.take_over_stale(job),
            };
        match self.job.lock() {
            Ok(mut slot) => *slot = Some(Arc::clone(job)),
            Err(_) => {
                // Unreachable in practice (nothing panics while holding the lock);
                // give the helper back rather than hand it nothing.
                self.state.store(was, Ordering::Release);
                return false;
            }
        }
        self.ready.store(true, Ordering::Release);
        if was == PARKED {
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
        }
        true
    }

    /// Hands `job` to this hired helper in place of a job it has not picked up yet
    /// and that has no chunk left to claim (its caller ran them all while this
    /// helper was on its way): the helper would find nothing to do there, and a
    /// caller that forks again at once should not have to wake a rayon worker.
    fn take_over_stale(&self, job: &Arc<Job>) -> bool {
        let Ok(mut slot) = self.job.lock() else {
            return false;
        };
        match slot.as_ref() {
            Some(old) if old.next.load(Ordering::Relaxed) >= old.chunks => {
                *slot = Some(Arc::clone(job));
                true
            }
            _ => false,
        }
    }

    /// The helper thread's loop: wait for a job, run its chunks, repeat.
    #[cfg(not(all(test, loom)))]
    fn serve(&self) {
        loop {
            self.serve_one();
        }
    }

    /// One round of the helper's loop: waits for a job and runs its chunks.
    fn serve_one(&self) {
        self.wait_for_job();
        self.ready.store(false, Ordering::Relaxed);
        let job = self.job.lock().ok().and_then(|mut slot| slot.take());
        // Free for hire again before the caller can see the job finished:
        // otherwise a caller that forks again at once finds this helper still
        // hired and wakes a rayon worker instead (two threads then compete for
        // the CPUs that this one would have used while watching).
        let release = || self.state.store(WATCHING, Ordering::Release);
        match job {
            Some(job) => job.run_claimed(release),
            None => release(),
        }
    }

    /// Watches `ready` for [`WARM_WINDOW`], then parks until it is set.
    fn wait_for_job(&self) {
        let mut deadline = Deadline::after(WARM_WINDOW);
        let mut rounds = 0u32;
        while !self.ready.load(Ordering::Acquire) {
            rounds = rounds.wrapping_add(1);
            if !rounds.is_multiple_of(sync::WATCH_SPINS) {
                sync::spin();
                continue;
            }
            if deadline.passed()
                && self
                    .state
                    .compare_exchange(WATCHING, PARKED, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                // A hire from now on unparks us; a token from an earlier unpark
                // only makes one park return early, hence the loop.
                while !self.ready.load(Ordering::Acquire) {
                    sync::park();
                }
                return;
            }
            sync::yield_now();
        }
    }
}

/// The warm helpers: one per CPU beyond the first, started on first use. A helper
/// that cannot be started is simply not there.
#[cfg(not(all(test, loom)))]
fn team() -> &'static [Arc<Helper>] {
    static TEAM: OnceLock<Vec<Arc<Helper>>> = OnceLock::new();
    TEAM.get_or_init(|| {
        let extra = std::thread::available_parallelism().map_or(0, |n| n.get() - 1);
        (0..extra)
            .filter_map(|i| {
                let helper = Arc::new(Helper::new());
                let served = Arc::clone(&helper);
                let handle = std::thread::Builder::new()
                    .name(format!("opal-cpu-helper-{i}"))
                    .spawn(move || served.serve())
                    .ok()?;
                helper.open(handle.thread().clone());
                Some(helper)
            })
            .collect()
    })
}

/// Under loom the models make their own helpers (loom threads).
#[cfg(all(test, loom))]
fn team() -> &'static [Arc<Helper>] {
    &[]
}

/// Runs `f(c)` for every `c` in `0..chunks`, each exactly once, spread over the
/// calling thread and up to `rayon::current_num_threads() - 1` helpers (team
/// helpers first, then rayon tasks). Returns
/// once every chunk has finished; a panic in any chunk is re-raised here after all
/// of them have stopped.
pub(crate) fn fork_chunks(chunks: usize, f: impl Fn(usize) + Sync) {
    let helpers = rayon::current_num_threads().min(chunks).saturating_sub(1);
    if helpers == 0 {
        (0..chunks).for_each(f);
        return;
    }
    let work: &(dyn Fn(usize) + Sync) = &f;
    // SAFETY (lifetime erasure): the pointer outlives `f` inside helpers that
    // start late, but it is dereferenced only by a thread that has claimed a chunk
    // below `chunks`. The caller's own `run_claimed` returns only after the counter
    // has passed `chunks`, so every chunk has been claimed by then, and the wait
    // below returns only after every claimed chunk has finished. After that no
    // thread can claim a chunk, so `f` is never called again once this returns.
    let work = unsafe {
        std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), *const (dyn Fn(usize) + Sync)>(
            work,
        )
    };
    let job = Arc::new(Job::new(chunks, work));
    let payload = run_job(&job, team(), helpers, |job| {
        rayon::spawn(move || job.run_claimed(|| ()))
    });
    if let Some(payload) = payload {
        resume_unwind(payload);
    }
}

/// Runs `job` on the calling thread and up to `helpers` others: members of `team`
/// first, then threads `spawn` starts for the rest. Returns once every chunk has
/// finished, with the first chunk's panic, if any.
#[inline(always)]
fn run_job(
    job: &Arc<Job>,
    team: &[Arc<Helper>],
    helpers: usize,
    mut spawn: impl FnMut(Arc<Job>),
) -> Option<Box<dyn Any + Send>> {
    let mut hired = 0;
    for helper in team {
        if hired == helpers {
            break;
        }
        if helper.try_hire(job) {
            hired += 1;
        }
    }
    for _ in hired..helpers {
        spawn(Arc::clone(job));
    }
    job.run_claimed(|| ());
    let mut rounds = 0u32;
    // Acquire: pairs with the Release in `run_claimed`, so every chunk's writes
    // are visible here.
    while job.done.load(Ordering::Acquire) < job.chunks {
        if rounds < SPIN_ROUNDS {
            rounds += 1;
            sync::spin();
        } else {
            sync::yield_now();
        }
    }
    job.panic.lock().ok().and_then(|mut slot| slot.take())
}

/// `data.chunks_mut(len)`, each chunk handed to `f(index, chunk)` through
/// [`fork_chunks`]: the safe form for kernels that write disjoint pieces of one
/// output.
pub(crate) fn fork_chunks_mut<T: Send>(
    data: &mut [T],
    len: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    assert!(
        len > 0,
        "fork_chunks_mut: chunks must hold at least one element"
    );
    if data.is_empty() {
        return;
    }
    let total = data.len();
    let base = SharedPtr(data.as_mut_ptr());
    fork_chunks(total.div_ceil(len), |c| {
        let start = c * len;
        let end = (start + len).min(total);
        // SAFETY: `fork_chunks` runs each index once, so the ranges
        // `start..end` handed out are disjoint pieces of `data`, which the
        // caller's `&mut` keeps borrowed (and alive) until every chunk is done.
        let chunk = unsafe { std::slice::from_raw_parts_mut(base.at(start), end - start) };
        f(c, chunk)
    });
}

/// `f(item)` for every item, each through [`fork_chunks`]: for kernels whose
/// tasks own pieces of several outputs, split safely beforehand (`chunks_mut` and
/// `zip`) into one item per task.
pub(crate) fn fork_each_mut<T: Send>(items: &mut [T], f: impl Fn(&mut T) + Sync) {
    fork_chunks_mut(items, 1, |_, item| item.iter_mut().for_each(&f));
}

/// A pointer into memory that the threads of one fork read, or write in disjoint
/// places: the one wrapper that lets a raw pointer into a fork's closure.
pub(crate) struct SharedPtr<T>(pub *mut T);

// By hand: derived impls would require `T: Copy`.
impl<T> Clone for SharedPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SharedPtr<T> {}
// SAFETY: a fork's caller keeps the pointee alive until every chunk has finished,
// and its chunks write disjoint elements (each user states why), so sharing the
// pointer value across threads is sound for element types that may move between
// threads.
unsafe impl<T: Send> Sync for SharedPtr<T> {}
// SAFETY: as for Sync.
unsafe impl<T: Send> Send for SharedPtr<T> {}

impl<T> SharedPtr<T> {
    /// The address of element `i` (a method, so closures capture the whole
    /// wrapper rather than its raw pointer field).
    ///
    /// # Safety
    /// `i` must be within the allocation.
    #[inline(always)]
    pub(crate) unsafe fn at(self, i: usize) -> *mut T {
        // SAFETY: forwarded.
        unsafe { self.0.add(i) }
    }

    /// [`Self::at`] for a signed element offset.
    ///
    /// # Safety
    /// `i` must be within the allocation.
    #[inline(always)]
    pub(crate) unsafe fn offset(self, i: isize) -> *mut T {
        // SAFETY: forwarded.
        unsafe { self.0.offset(i) }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{
        fork_chunks, fork_chunks_mut, fork_each_mut, team, Helper, Job, HIRED, PARKED, WARM_WINDOW,
    };
    use std::sync::atomic::{AtomicBool, AtomicU8};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex, OnceLock};
    use std::time::Duration;

    /// Chunks slow enough (about 1 ms each) that a helper can take some of them.
    fn slow_chunk(c: usize) -> usize {
        let t0 = std::time::Instant::now();
        let mut v = c;
        while t0.elapsed() < Duration::from_millis(1) {
            v = v.wrapping_mul(31).wrapping_add(7);
        }
        v
    }

    #[test]
    fn team_has_one_helper_per_extra_cpu_and_they_take_chunks_warm_or_parked() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(team().len(), cpus - 1);
        if cpus == 1 {
            return; // No helpers to watch on a one-CPU machine.
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for parked_first in [false, true] {
            if parked_first {
                // Idle past the warm window, a helper parks (other tests in this
                // process may keep hiring it for a while, hence the polling).
                let parked = (0..400).any(|_| {
                    std::thread::sleep(WARM_WINDOW * 10);
                    team()
                        .iter()
                        .any(|h| h.state.load(Ordering::Acquire) == PARKED)
                });
                assert!(parked, "no helper parked");
            }
            // Many attempts: other tests may hold the helpers, or the machine may be
            // too busy to run them, for a while.
            let helped = (0..100).any(|_| {
                let by_helper = AtomicUsize::new(0);
                pool.install(|| {
                    fork_chunks(8, |c| {
                        std::hint::black_box(slow_chunk(c));
                        let name = std::thread::current().name().map(str::to_owned);
                        if name.is_some_and(|n| n.starts_with("opal-cpu-helper-")) {
                            by_helper.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                });
                by_helper.load(Ordering::Relaxed) > 0
            });
            assert!(
                helped,
                "no team helper ran a chunk (parked first: {parked_first})"
            );
        }
    }

    /// Forks `chunks` chunks that count their runs; true when each ran once.
    fn each_chunk_runs_once(chunks: usize) -> bool {
        let hits: Vec<AtomicUsize> = (0..chunks).map(|_| AtomicUsize::new(0)).collect();
        fork_chunks(chunks, |c| {
            hits[c].fetch_add(1, Ordering::Relaxed);
        });
        hits.iter().all(|h| h.load(Ordering::Relaxed) == 1)
    }

    /// A job of `chunks` chunks whose closure does nothing, `claimed` of them taken.
    fn idle_job(chunks: usize, claimed: usize) -> Arc<Job> {
        static NOTHING: fn(usize) = |_| {};
        let work: &(dyn Fn(usize) + Sync) = &NOTHING;
        Arc::new(Job {
            next: AtomicUsize::new(claimed),
            done: AtomicUsize::new(claimed),
            chunks,
            work,
            panic: Mutex::new(None),
        })
    }

    #[test]
    fn a_hired_helper_is_handed_a_new_job_only_in_place_of_a_drained_one() {
        let helper = Helper {
            state: AtomicU8::new(HIRED),
            ready: AtomicBool::new(true),
            job: Mutex::new(Some(idle_job(4, 2))),
            thread: OnceLock::new(),
        };
        let next = idle_job(3, 0);
        assert!(
            !helper.try_hire(&next),
            "the old job still has chunks to run"
        );
        *helper.job.lock().unwrap() = Some(idle_job(4, 5));
        assert!(helper.try_hire(&next), "the old job had nothing left");
        let held = helper.job.lock().unwrap().take().expect("a job");
        assert!(Arc::ptr_eq(&held, &next));
        // Picked up already (empty mailbox): the helper is busy, not stale.
        assert!(!helper.try_hire(&idle_job(2, 0)));
        assert_eq!(helper.state.load(Ordering::Acquire), HIRED);
    }

    #[test]
    fn a_helper_is_released_before_its_last_chunk_is_reported_done() {
        let job = idle_job(3, 0);
        let done_at_release = AtomicUsize::new(usize::MAX);
        job.run_claimed(|| {
            done_at_release.store(job.done.load(Ordering::Acquire), Ordering::Relaxed)
        });
        assert_eq!(done_at_release.load(Ordering::Relaxed), 2);
        assert_eq!(job.done.load(Ordering::Acquire), 3);
    }

    #[test]
    fn forks_from_many_threads_at_once_each_run_all_their_chunks() {
        std::thread::scope(|s| {
            for t in 0..6 {
                s.spawn(move || {
                    for round in 0..30 {
                        assert!(each_chunk_runs_once(12), "thread {t} round {round}");
                    }
                });
            }
        });
    }

    #[test]
    fn every_chunk_runs_exactly_once() {
        for chunks in [0, 1, 2, 3, 8, 64] {
            assert!(each_chunk_runs_once(chunks), "{chunks} chunks");
        }
    }

    #[test]
    fn writes_of_every_chunk_are_visible_on_return() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        pool.install(|| {
            for _ in 0..50 {
                let cells: Vec<AtomicUsize> = (0..16).map(|_| AtomicUsize::new(0)).collect();
                fork_chunks(16, |c| {
                    // Enough work that helpers take part.
                    let v = (0..2000).fold(c, |a, i| a.wrapping_mul(31).wrapping_add(i));
                    cells[c].store(v | 1, Ordering::Relaxed);
                });
                assert!(cells.iter().all(|c| c.load(Ordering::Relaxed) & 1 == 1));
            }
        });
    }

    #[test]
    fn a_panicking_chunk_is_raised_after_the_others_finish() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let finished = AtomicUsize::new(0);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.install(|| {
                fork_chunks(8, |c| {
                    if c == 3 {
                        panic!("chunk three");
                    }
                    finished.fetch_add(1, Ordering::Relaxed);
                })
            })
        }));
        let payload = result.expect_err("the chunk's panic reaches the caller");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"chunk three"));
        assert_eq!(finished.load(Ordering::Relaxed), 7);
    }

    #[test]
    fn chunks_mut_cover_the_slice_once_in_order() {
        for (total, len) in [(0, 4), (10, 3), (12, 4), (5, 100), (7, 1), (100_000, 4096)] {
            let mut data = vec![0usize; total];
            fork_chunks_mut(&mut data, len, |c, chunk| {
                assert!(chunk.len() == len || (c + 1) * len >= total);
                for (i, x) in chunk.iter_mut().enumerate() {
                    *x += c * len + i + 1;
                }
            });
            assert!(
                data.iter().enumerate().all(|(i, &x)| x == i + 1),
                "{total}/{len}"
            );
        }
    }

    #[test]
    fn each_mut_visits_every_item_once() {
        let mut a = [0u32; 37];
        let mut b = [0u64; 37 * 3];
        let mut tasks: Vec<_> = a.chunks_mut(5).zip(b.chunks_mut(15)).collect();
        fork_each_mut(&mut tasks, |(x, y)| {
            x.iter_mut().for_each(|v| *v += 1);
            y.iter_mut().for_each(|v| *v += 2);
        });
        assert!(a.iter().all(|&v| v == 1) && b.iter().all(|&v| v == 2));
    }

    #[test]
    fn nested_forks_complete() {
        let total = AtomicUsize::new(0);
        fork_chunks(4, |_| {
            fork_chunks(4, |_| {
                total.fetch_add(1, Ordering::Relaxed);
            })
        });
        assert_eq!(total.load(Ordering::Relaxed), 16);
    }
}
