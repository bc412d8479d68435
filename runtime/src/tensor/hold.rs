//! Two-level storage borrowing: **op holds** and **guards**.
//!
//! Every operator call holds the storages of its tensor arguments for its whole
//! run ([`with_op_holds`], called by the generated entry points and by boxed
//! calls): shared for inputs, exclusive for `(a!)` arguments. While an op holds a
//! storage no other thread can write it, resize it or change the geometry of a
//! tensor over it (those need the exclusive borrow), so a kernel sees one consistent
//! geometry and consistent data for its whole run, whichever accessor it uses.
//!
//! Guards ([`crate::tensor::TensorRead`], [`crate::tensor::TensorWrite`],
//! [`crate::tensor::KernelAccess`], and geometry changes) borrow inside that. A
//! storage that an op of *this thread* holds exclusively is not free in the atomic
//! borrow state, so a guard on it is granted *virtually*: against a per-thread entry
//! that counts the guards (`n` shared or one exclusive, as the atomic state does
//! across threads). A storage an op holds shared needs nothing: shared guards take
//! the atomic borrow as usual, and no exclusive guard can be had (the op promised
//! not to write it).
//!
//! Owns: the per-thread list of exclusive op holds, op-hold acquisition and
//! release, and the guard protocol on top of the atomic borrow state. Must not:
//! know kernels, dtypes or dispatch keys.
//!
//! # Why a guard can never outlive what protects it
//!
//! An op hold is scoped to a closure, so it is released in LIFO order with panics
//! included. A virtual guard can still outlive its op (a `'static` tensor's guard
//! kept in a thread-local, say). Releasing such an op hold leaves its entry
//! *orphaned*: the atomic exclusive borrow stays taken until the last guard that
//! counts on it is released, so no other thread can reach the storage meanwhile.

use super::checks::{
    check_devices, check_no_overlap_masked, check_write_overlap, DeviceRule, OpChecks,
};
use super::storage::{borrow_error, release, try_acquire, StorageBuf};
use super::Tensor;
use crate::error::Result;
use std::cell::{Cell, RefCell};

/// One storage that an op of this thread holds exclusively.
struct Entry {
    /// The `StorageBuf`'s address (alive while the entry exists: see `release_op`).
    addr: usize,
    /// Op holds on it (nested ops of this thread holding it exclusively again).
    ops: u32,
    /// Guards granted against it: `n > 0` shared, `-1` exclusive, 0 none.
    guards: i32,
}

thread_local! {
    /// Exclusive op holds of this thread. Short (an op's written arguments, times the
    /// nesting depth), so a linear scan is the fastest lookup.
    static EXCLUSIVE: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
}

#[inline]
fn addr_of(s: &StorageBuf) -> usize {
    s as *const StorageBuf as usize
}

/// Runs `f` on this thread's entry for `s`, if an op of this thread holds `s`
/// exclusively, and drops the entry (releasing the atomic borrow) once neither an op
/// nor a guard counts on it any more. `None` when there is no entry or `f` refuses.
fn with_entry<R>(s: &StorageBuf, f: impl FnOnce(&mut Entry) -> Option<R>) -> Option<R> {
    let addr = addr_of(s);
    EXCLUSIVE
        .try_with(|held| {
            let mut held = held.borrow_mut();
            let i = held.iter().rposition(|e| e.addr == addr)?;
            let r = f(&mut held[i]);
            if held[i].ops == 0 && held[i].guards == 0 {
                // Its last op returned and no guard outlives it (or, for an orphan,
                // its last guard is gone).
                held.swap_remove(i);
                release(s, true);
            }
            r
        })
        .ok()
        .flatten()
}

/// Storages the op calls of this thread hold shared through [`with_op_holds`], as a
/// stack (nested calls push and pop in LIFO order). [`KernelAccess`] reads of them
/// need no borrow of their own: no thread can write them until the op returns.
/// Bounded; holds past the last slot are simply not listed.
///
/// [`KernelAccess`]: crate::tensor::KernelAccess
struct OpReads {
    addrs: [Cell<usize>; OP_READ_SLOTS],
    len: Cell<usize>,
}

const OP_READ_SLOTS: usize = 16;

thread_local! {
    static OP_READS: OpReads = const {
        OpReads {
            addrs: [const { Cell::new(0) }; OP_READ_SLOTS],
            len: Cell::new(0),
        }
    };
}

/// Lists the reads held atomically as held shared by the running op, in
/// one thread-local access; returns the list's previous length, to restore on
/// release. A call whose reads do not all fit lists none (its kernels borrow as usual).
#[inline]
fn push_op_reads<const R: usize>(reads: &[Option<(&StorageBuf, Grant)>; R]) -> Option<usize> {
    OP_READS
        .try_with(|r| {
            let start = r.len.get();
            if start + R > OP_READ_SLOTS {
                // Too deeply nested to list: this call's kernels borrow as usual.
                return start;
            }
            let mut n = start;
            for read in reads {
                if let Some((s, Grant::Atomic)) = *read {
                    r.addrs[n].set(addr_of(s));
                    n += 1;
                }
            }
            r.len.set(n);
            start
        })
        .ok()
}

/// Drops the entries of [`OP_READS`] past `len` (the caller's, and those of nested
/// calls, which have all returned).
#[inline]
fn truncate_op_reads(len: usize) {
    let _ = OP_READS.try_with(|r| r.len.set(len));
}

/// Whether an op call of this thread, still running, holds `s` shared.
#[inline]
pub(crate) fn op_holds_shared(s: &StorageBuf) -> bool {
    let addr = addr_of(s);
    OP_READS
        .try_with(|r| r.addrs[..r.len.get()].iter().any(|a| a.get() == addr))
        .unwrap_or(false)
}

/// How a guard or op hold got its borrow, so that it releases the same way.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Grant {
    /// Took the storage's atomic borrow.
    Atomic,
    /// Counted against this thread's exclusive op hold of the storage.
    Virtual,
}

/// Acquires a guard's borrow of `s` (never blocks): the atomic borrow when free,
/// else a virtual one when an op of this thread holds `s` exclusively and no guard
/// conflicts. `None` on a conflict.
#[inline]
pub(crate) fn acquire_guard(s: &StorageBuf, exclusive: bool) -> Option<Grant> {
    if try_acquire(s, exclusive) {
        return Some(Grant::Atomic);
    }
    acquire_virtual(s, exclusive)
}

#[cold]
#[inline(never)]
fn acquire_virtual(s: &StorageBuf, exclusive: bool) -> Option<Grant> {
    with_entry(s, |e| {
        if exclusive {
            if e.guards != 0 {
                return None;
            }
            e.guards = -1;
        } else {
            if e.guards < 0 || e.guards == i32::MAX {
                return None;
            }
            e.guards += 1;
        }
        Some(Grant::Virtual)
    })
}

/// Releases a guard's borrow taken by [`acquire_guard`].
#[inline]
pub(crate) fn release_guard(s: &StorageBuf, exclusive: bool, grant: Grant) {
    match grant {
        Grant::Atomic => release(s, exclusive),
        Grant::Virtual => release_virtual(s, exclusive),
    }
}

#[cold]
#[inline(never)]
fn release_virtual(s: &StorageBuf, exclusive: bool) {
    with_entry(s, |e| {
        e.guards = if exclusive { 0 } else { e.guards - 1 };
        Some(())
    });
}

/// Takes an op hold of `s`. `None` on a conflict with another thread (or with a
/// guard of this thread). The shared case without contention (every input of
/// every call) stays inline.
#[inline]
fn acquire_op(s: &StorageBuf, exclusive: bool) -> Option<Grant> {
    if !exclusive && try_acquire(s, false) {
        return Some(Grant::Atomic);
    }
    acquire_op_slow(s, exclusive)
}

/// An exclusive op hold counts as a write of the storage from the moment it is
/// granted (see `StorageBuf::version`): autograd, saving a tensor while the op
/// that writes it is still running (an in-place op's own kernels), then sees the
/// version the op leaves behind.
#[inline(never)]
fn acquire_op_slow(s: &StorageBuf, exclusive: bool) -> Option<Grant> {
    let grant = acquire_op_slow_inner(s, exclusive);
    if exclusive && grant.is_some() {
        s.bump_version();
    }
    grant
}

fn acquire_op_slow_inner(s: &StorageBuf, exclusive: bool) -> Option<Grant> {
    if exclusive && try_acquire(s, true) {
        let pushed = EXCLUSIVE
            .try_with(|held| {
                held.borrow_mut().push(Entry {
                    addr: addr_of(s),
                    ops: 1,
                    guards: 0,
                })
            })
            .is_ok();
        if !pushed {
            // Thread-local storage is being torn down: no op can run.
            release(s, true);
            return None;
        }
        return Some(Grant::Atomic);
    }
    // Held exclusively by an op of this thread (a nested op, or an input that shares
    // storage with an output of the same op)? Guards of this thread that write it
    // conflict, as they would across threads.
    with_entry(s, |e| {
        if e.guards < 0 || (exclusive && e.guards > 0) {
            return None;
        }
        e.ops += 1;
        Some(Grant::Virtual)
    })
}

#[inline]
fn release_op(s: &StorageBuf, exclusive: bool, grant: Grant) {
    if grant == Grant::Atomic && !exclusive {
        return release(s, false);
    }
    release_op_slow(s);
}

#[inline(never)]
fn release_op_slow(s: &StorageBuf) {
    // When guards outlive the op, the entry stays (orphaned) and the last guard
    // releases the atomic borrow.
    with_entry(s, |e| {
        e.ops -= 1;
        Some(())
    });
}

/// The op holds of one call, released on drop (also when a kernel panics).
struct OpHolds<'a> {
    taken: smallvec_like::Taken<'a>,
}

mod smallvec_like {
    //! A short list of taken holds kept on the stack for the common case.
    use super::{Grant, StorageBuf};

    const INLINE: usize = 4;

    pub(super) struct Taken<'a> {
        inline: [Option<(&'a StorageBuf, bool, Grant)>; INLINE],
        len: usize,
        spill: Vec<(&'a StorageBuf, bool, Grant)>,
    }

    impl<'a> Taken<'a> {
        #[inline]
        pub(super) fn new() -> Self {
            Taken {
                inline: [None; INLINE],
                len: 0,
                spill: Vec::new(),
            }
        }

        #[inline]
        pub(super) fn push(&mut self, v: (&'a StorageBuf, bool, Grant)) {
            if self.len < INLINE {
                self.inline[self.len] = Some(v);
                self.len += 1;
            } else {
                self.spill.push(v);
            }
        }

        /// Removes and returns the newest entry.
        #[inline]
        pub(super) fn pop(&mut self) -> Option<(&'a StorageBuf, bool, Grant)> {
            if let Some(v) = self.spill.pop() {
                return Some(v);
            }
            if self.len == 0 {
                return None;
            }
            self.len -= 1;
            self.inline[self.len].take()
        }
    }
}

impl<'a> OpHolds<'a> {
    #[inline]
    fn new() -> Self {
        OpHolds {
            taken: smallvec_like::Taken::new(),
        }
    }

    #[inline]
    fn take(&mut self, t: &'a Tensor, exclusive: bool) -> Result<()> {
        // The undefined tensor's sentinel is shared by every undefined handle and has
        // no data: holding it would only make unrelated calls conflict.
        if !t.is_defined() {
            return Ok(());
        }
        let s = t.storage();
        match acquire_op(s, exclusive) {
            Some(g) => {
                self.taken.push((s, exclusive, g));
                Ok(())
            }
            None => Err(borrow_error(exclusive)),
        }
    }
}

impl Drop for OpHolds<'_> {
    #[inline]
    fn drop(&mut self) {
        while let Some((s, exclusive, g)) = self.taken.pop() {
            release_op(s, exclusive, g);
        }
    }
}

/// A tensor argument of an operator call, as [`with_op_holds`] takes it.
#[derive(Copy, Clone)]
pub enum OpArg<'a> {
    /// `Tensor`.
    One(&'a Tensor),
    /// `Tensor?`.
    Opt(Option<&'a Tensor>),
    /// `Tensor[]`.
    List(&'a [Tensor]),
    /// `Tensor?[]`.
    OptList(&'a [Option<Tensor>]),
}

impl<'a> OpArg<'a> {
    /// The tensors of the argument (`None` entries skipped).
    pub fn iter(self) -> impl Iterator<Item = &'a Tensor> + Clone {
        let (one, list, opt_list): (Option<&'a Tensor>, &'a [Tensor], &'a [Option<Tensor>]) =
            match self {
                OpArg::One(t) => (Some(t), &[], &[]),
                OpArg::Opt(t) => (t, &[], &[]),
                OpArg::List(ts) => (None, ts, &[]),
                OpArg::OptList(ts) => (None, &[], ts),
            };
        one.into_iter().chain(list).chain(opt_list.iter().flatten())
    }

    /// Calls `f` on every defined tensor of the argument.
    #[inline]
    pub fn for_each(self, mut f: impl FnMut(&'a Tensor) -> Result<()>) -> Result<()> {
        match self {
            OpArg::One(t) => f(t),
            OpArg::Opt(t) => t.map_or(Ok(()), f),
            OpArg::List(ts) => ts.iter().try_for_each(f),
            OpArg::OptList(ts) => ts.iter().flatten().try_for_each(f),
        }
    }
}

/// Runs `body` while holding the storages of `writes` exclusively and of `reads`
/// shared (see the module docs), after the `checks` of op `op` pass; a conflict with
/// another thread is a borrow-conflict `Err` before `body` runs. Holds already taken
/// by an enclosing op of this thread are reused. What every generated entry point
/// of an op with plain `Tensor` arguments calls: fixed-size, so the small-op path
/// stays a few instructions per operand.
#[inline]
pub fn with_op_holds<const R: usize, const W: usize, T>(
    op: &str,
    checks: OpChecks,
    reads: [&Tensor; R],
    writes: [&Tensor; W],
    body: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let mut holds = FixedHolds::<R, W> {
        reads: [None; R],
        writes: [None; W],
        listed_from: None,
    };
    // Writes first: an input sharing storage with an output is then held once,
    // exclusively, and its shared hold is a nested one.
    for (t, held) in writes.iter().zip(&mut holds.writes) {
        if t.is_defined() {
            let s = t.storage();
            *held = Some((s, acquire_op(s, true).ok_or_else(|| borrow_error(true))?));
        }
    }
    for (t, held) in reads.iter().zip(&mut holds.reads) {
        if t.is_defined() {
            let s = t.storage();
            *held = Some((s, acquire_op(s, false).ok_or_else(|| borrow_error(false))?));
        }
    }
    if R > 0 {
        holds.listed_from = push_op_reads(&holds.reads);
    }
    check_devices_fixed(op, checks, &reads, &writes)?;
    if W > 0 && checks.write_overlap {
        check_write_overlap(op, reads.iter().copied(), writes.iter().copied())?;
    }
    if W > 0 && checks.no_overlap != 0 {
        check_no_overlap_masked(
            op,
            checks.no_overlap,
            reads.iter().copied().enumerate(),
            writes.iter().copied(),
        )?;
    }
    body()
}

/// The op holds of a call with plain tensor arguments (each storage with how it was
/// granted; `None` for an undefined tensor), released on drop (also when a kernel
/// panics).
struct FixedHolds<'a, const R: usize, const W: usize> {
    reads: [Option<(&'a StorageBuf, Grant)>; R],
    writes: [Option<(&'a StorageBuf, Grant)>; W],
    /// The length of [`OP_READS`] before this call listed its reads (restored on
    /// drop); `None` when it listed none.
    listed_from: Option<usize>,
}

impl<const R: usize, const W: usize> Drop for FixedHolds<'_, R, W> {
    #[inline]
    fn drop(&mut self) {
        if let Some(len) = self.listed_from {
            truncate_op_reads(len);
        }
        for &(s, g) in self.reads.iter().rev().flatten() {
            release_op(s, false, g);
        }
        for &(s, g) in self.writes.iter().rev().flatten() {
            // The write was counted when granted (`acquire_op_slow`).
            release_op(s, true, g);
        }
    }
}

/// The device rule for plain tensor arguments: all on the first one's device is
/// the common case and costs a compare per operand; anything else gets the full
/// rule with its exemptions.
#[inline]
fn check_devices_fixed(
    op: &str,
    checks: OpChecks,
    reads: &[&Tensor],
    writes: &[&Tensor],
) -> Result<()> {
    if checks.devices == DeviceRule::Any {
        return Ok(());
    }
    let mut all = writes.iter().chain(reads);
    let Some(first) = all.next() else {
        return Ok(());
    };
    let d = first.device();
    if all.all(|t| t.device() == d) {
        return Ok(());
    }
    check_devices(
        op,
        checks.devices,
        reads.iter().copied(),
        writes.iter().copied(),
    )
}

/// [`with_op_holds`] for ops with optional or list tensor arguments.
pub fn with_op_holds_dyn<T>(
    op: &str,
    checks: OpChecks,
    reads: &[OpArg<'_>],
    writes: &[OpArg<'_>],
    body: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let mut holds = OpHolds::new();
    for a in writes {
        a.for_each(|t| holds.take(t, true))?;
    }
    for a in reads {
        a.for_each(|t| holds.take(t, false))?;
    }
    run_checks(
        op,
        checks,
        reads.iter().flat_map(|a| a.iter()),
        writes.iter().flat_map(|a| a.iter()),
    )?;
    if checks.no_overlap != 0 {
        check_no_overlap_masked(
            op,
            checks.no_overlap,
            reads
                .iter()
                .enumerate()
                .flat_map(|(i, a)| a.iter().map(move |t| (i, t))),
            writes.iter().flat_map(|a| a.iter()),
        )?;
    }
    body()
}

#[inline]
fn run_checks<'t>(
    op: &str,
    checks: OpChecks,
    reads: impl Iterator<Item = &'t Tensor> + Clone,
    writes: impl Iterator<Item = &'t Tensor> + Clone,
) -> Result<()> {
    check_devices(op, checks.devices, reads.clone(), writes.clone())?;
    if checks.write_overlap {
        check_write_overlap(op, reads, writes)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::{KernelAccess, OpChecks};

    fn pair() -> Tensor {
        Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap()
    }

    fn on_other_thread<R: Send>(f: impl FnOnce() -> R + Send) -> R {
        std::thread::scope(|s| s.spawn(f).join().unwrap())
    }

    #[test]
    fn an_exclusive_hold_grants_this_threads_guards_and_refuses_others() {
        let t = pair();
        with_op_holds("outer", OpChecks::NONE, [], [&t], || {
            t.write::<f32>()?.as_mut_slice().unwrap()[0] = 5.0;
            let w = t.write::<f32>()?;
            assert!(t.write::<f32>().is_err(), "two writers on one thread");
            assert!(t.read::<f32>().is_err(), "a reader beside a writer");
            drop(w);
            // A nested op reading it reuses the hold.
            with_op_holds("inner", OpChecks::NONE, [&t], [], || {
                assert_eq!(t.read::<f32>()?.to_vec(), vec![5.0, 2.0]);
                Ok(())
            })?;
            assert!(on_other_thread(|| t.read::<f32>().is_err()));
            assert!(on_other_thread(|| t.resize_(&[1]).is_err()));
            Ok(())
        })
        .unwrap();
        assert!(on_other_thread(|| t.write::<f32>().is_ok()));
    }

    #[test]
    fn a_shared_hold_refuses_every_writer_and_geometry_change() {
        let t = pair();
        with_op_holds("reader", OpChecks::NONE, [&t], [], || {
            assert!(t.write::<f32>().is_err());
            assert!(t.set_geometry_(&[1], &[1]).is_err());
            assert!(on_other_thread(|| t.write::<f32>().is_err()));
            // Kernel reads of a held input take no borrow of their own.
            let (acc, [p], []) = KernelAccess::with_ptrs([&t], [])?;
            // SAFETY: `t` has 2 f32 elements and the op hold excludes writers.
            let second = unsafe { *p.cast::<f32>().add(1) };
            assert_eq!(second, 2.0);
            drop(acc);
            assert!(on_other_thread(|| t.read::<f32>().is_ok()));
            Ok(())
        })
        .unwrap();
        t.set_geometry_(&[1], &[1]).unwrap();
        assert_eq!(t.sizes(), &[1]);
    }

    #[test]
    fn a_conflict_at_entry_runs_nothing_and_leaves_nothing_held() {
        let (a, b) = (pair(), pair());
        let guard = b.write::<f32>().unwrap();
        let ran = on_other_thread(|| {
            let mut ran = false;
            let r = with_op_holds("op", OpChecks::NONE, [&a, &b], [], || {
                ran = true;
                Ok(())
            });
            assert!(r.is_err());
            ran
        });
        assert!(!ran);
        drop(guard);
        // `a` was released when the entry failed.
        assert!(a.write::<f32>().is_ok());
    }

    #[test]
    fn calls_nested_past_the_listed_reads_still_hold_and_read_their_inputs() {
        // Each level reads two tensors; past OP_READ_SLOTS / 2 levels a call's reads
        // are not listed and its kernels borrow them as usual.
        fn level(ts: &[Tensor]) -> Result<f32> {
            let Some((pair, rest)) = ts.split_first_chunk::<2>() else {
                return Ok(0.0);
            };
            with_op_holds("nested", OpChecks::NONE, [&pair[0], &pair[1]], [], || {
                let here = KernelAccess::scoped([&pair[0], &pair[1]], [], |[p, q], []| {
                    // SAFETY: one f32 each; the op holds exclude writers.
                    Ok(unsafe { *p.cast::<f32>() + *q.cast::<f32>() })
                })?;
                assert!(on_other_thread(|| pair[1].write::<f32>().is_err()));
                Ok(here + level(rest)?)
            })
        }
        let ts: Vec<Tensor> = (0..2 * (OP_READ_SLOTS + 2))
            .map(|i| Tensor::from_slice(&[i as f32], &[1]).unwrap())
            .collect();
        let n = ts.len() as f32;
        assert_eq!(level(&ts).unwrap(), n * (n - 1.0) / 2.0);
        assert!(ts.iter().all(|t| t.write::<f32>().is_ok()), "all released");
    }
}
