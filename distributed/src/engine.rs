//! The engine under a process group: what moves bytes between processes. MPI is
//! the engine of real runs (`mpi_engine`, cargo feature `mpi`); [`SelfEngine`] is
//! the group of one process, which every build has (PyTorch's world of size 1).
//!
//! Every operation works on contiguous host buffers ([`Buf`]) and is
//! non-blocking: it returns a [`Pending`] that the group polls until it completes
//! or the group's timeout passes.
//!
//! Owns: the engine interface and the one-process engine. Must not: know tensors'
//! dtypes or shapes beyond the element type of a reduction.

use crate::types::{Elem, Header, Op};
use opal::{DeviceType, OpalError, Result, Tensor};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Set when an operation was abandoned at its timeout: the engine may still touch
/// its (leaked) buffers, and finalizing MPI would wait for the missing ranks.
static ABANDONED: AtomicBool = AtomicBool::new(false);

pub(crate) fn mark_abandoned() {
    ABANDONED.store(true, Ordering::SeqCst);
}

/// True once some operation of this process was abandoned at its timeout.
pub fn abandoned() -> bool {
    ABANDONED.load(Ordering::SeqCst)
}

/// Polls `p` until it completes, or until `deadline`: then it is leaked (the
/// engine may still write its buffers) and the `Err` names `what`.
pub fn wait_until(mut p: Box<dyn Pending>, deadline: Instant, what: &str) -> Result<()> {
    let mut spins = 0u32;
    loop {
        if p.test()? {
            return Ok(());
        }
        if Instant::now() > deadline {
            mark_abandoned();
            Box::leak(p);
            return Err(timed_out(what));
        }
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(64) {
            std::thread::yield_now();
        }
    }
}

/// The error of a collective every rank entered that did not complete in time.
pub(crate) fn timed_out(what: &str) -> OpalError {
    OpalError::msg(format!(
        "{what}: timed out: every rank arrived, but the operation did not complete (a rank failed or stopped mid-collective?); the process group is aborted"
    ))
}

/// A contiguous CPU tensor used as a host buffer; the clone keeps its storage
/// alive while an engine reads or writes it.
#[derive(Clone)]
pub struct Buf {
    _keep: Tensor,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: `ptr` points into the storage `t` keeps alive; a `Buf` is only read or
// written by the engine operation it was handed to, whose completion the owner
// waits for before touching the tensor again (the work-handle contract).
unsafe impl Send for Buf {}
// SAFETY: as for `Send`; shared references only read the pointer value.
unsafe impl Sync for Buf {}

impl Buf {
    /// `t` as a buffer; it must be a contiguous CPU tensor.
    pub fn of(t: &Tensor) -> Result<Buf> {
        if t.device().device_type() != DeviceType::Cpu || !t.is_contiguous() {
            return Err(OpalError::msg(
                "distributed: an engine buffer must be a contiguous CPU tensor",
            ));
        }
        let len = t.numel() as usize * t.element_size();
        // An empty buffer still needs an address MPI accepts: a dangling pointer
        // is 0x1 for bytes, which is Open MPI's MPI_IN_PLACE and is refused as a
        // receive buffer. No operation reads or writes an empty buffer's bytes.
        static EMPTY: [u64; 2] = [0; 2];
        let ptr = if len == 0 {
            EMPTY.as_ptr().cast::<u8>().cast_mut()
        } else {
            t.raw_data_ptr()?
        };
        Ok(Buf {
            _keep: t.clone(),
            ptr,
            len,
        })
    }

    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The buffer's bytes.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    ///
    /// # Safety
    /// No engine operation may be writing the buffer.
    pub unsafe fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr`..`ptr+len` is the tensor's data, alive through `_keep`; the
        // caller guarantees no concurrent writer.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

// Without the MPI engine, only the one-process engine reads (some of) the fields.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
/// An operation an engine runs. Counts are in elements of `elem` for
/// reductions and in bytes otherwise; every buffer is the whole (contiguous)
/// operand.
pub enum Coll {
    /// `buf` becomes the reduction of every rank's `buf`.
    AllReduce {
        buf: Buf,
        elem: Elem,
        op: Op,
    },
    /// `buf` becomes rank `root`'s `buf`.
    Broadcast {
        buf: Buf,
        root: usize,
    },
    /// Rank `root`'s `buf` becomes the reduction; others' `buf` are unchanged.
    Reduce {
        buf: Buf,
        elem: Elem,
        op: Op,
        root: usize,
    },
    /// `recv` (size × `send`'s length) becomes every rank's `send`, in rank order.
    AllGather {
        send: Buf,
        recv: Buf,
    },
    /// `send` holds size blocks of `recv`'s length; `recv` becomes the reduction
    /// of every rank's block number `rank`.
    ReduceScatter {
        send: Buf,
        recv: Buf,
        elem: Elem,
        op: Op,
    },
    /// `send` holds one block per rank, of `send_counts[j]` bytes for rank j, one
    /// after another; `recv` likewise, block i (`recv_counts[i]` bytes) coming
    /// from rank i. Every rank's counts agree with its peers' (checked before).
    AllToAll {
        send: Buf,
        recv: Buf,
        send_counts: Vec<usize>,
        recv_counts: Vec<usize>,
    },
    Barrier,
    /// `buf` to rank `peer` with `tag`.
    Send {
        buf: Buf,
        peer: usize,
        tag: i32,
    },
    /// `buf` from rank `peer` with `tag`.
    Recv {
        buf: Buf,
        peer: usize,
        tag: i32,
    },
}

/// A started operation.
pub trait Pending: Send {
    /// True once the operation has completed (its buffers may then be used).
    fn test(&mut self) -> Result<bool>;
}

/// A group's transport.
pub trait Engine: Send + Sync {
    /// This process's rank in the group.
    fn rank(&self) -> usize;
    /// The group's size.
    fn size(&self) -> usize;
    /// Sends `mine` to every other rank and receives theirs (with `tag`, on a
    /// channel apart from the data), waiting until `deadline`: `(rank, header)`
    /// for this rank and each peer in rank order, or an `Err` naming `what` and
    /// the ranks whose header did not arrive. `peers` limits the exchange to those
    /// ranks (point-to-point), `None` meaning all.
    fn exchange(
        &self,
        mine: &Header,
        peers: Option<&[usize]>,
        tag: i32,
        deadline: Instant,
        what: &str,
    ) -> Result<Vec<(usize, Header)>>;
    /// Starts `c`.
    fn start(&self, c: Coll) -> Result<Box<dyn Pending>>;
    /// A group of the given ranks (of this group, sorted, distinct): `Some` on
    /// its members, `None` on the others. Collective over this group.
    fn split(&self, ranks: &[usize], deadline: Instant) -> Result<Option<Arc<dyn Engine>>>;
    /// An engine over the same ranks whose operations never match this one's (for
    /// a device queue that issues collectives in its own order).
    fn dup(&self) -> Result<Arc<dyn Engine>>;
    /// The engine's name, for messages.
    fn name(&self) -> &'static str;
}

/// The group of one process: every collective is a local copy.
pub struct SelfEngine;

struct Done;

impl Pending for Done {
    fn test(&mut self) -> Result<bool> {
        Ok(true)
    }
}

fn copy(src: &Buf, dst: &Buf) {
    if src.ptr() != dst.ptr() && !src.is_empty() {
        let n = src.len().min(dst.len());
        // SAFETY: both buffers are live tensors' data of at least `n` bytes, owned by
        // this (synchronous) operation; distinct tensors made by the group never
        // overlap.
        unsafe { std::ptr::copy(src.ptr(), dst.ptr(), n) };
    }
}

impl Engine for SelfEngine {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn exchange(
        &self,
        mine: &Header,
        _peers: Option<&[usize]>,
        _tag: i32,
        _deadline: Instant,
        _what: &str,
    ) -> Result<Vec<(usize, Header)>> {
        Ok(vec![(0, *mine)])
    }
    fn start(&self, c: Coll) -> Result<Box<dyn Pending>> {
        match c {
            Coll::AllReduce { .. } | Coll::Broadcast { .. } | Coll::Reduce { .. } => {}
            Coll::Barrier => {}
            Coll::AllGather { send, recv }
            | Coll::ReduceScatter { send, recv, .. }
            | Coll::AllToAll { send, recv, .. } => copy(&send, &recv),
            Coll::Send { peer, .. } | Coll::Recv { peer, .. } => {
                return Err(OpalError::msg(format!(
                    "send/recv: rank {peer} is this process (a group of one has no peer)"
                )))
            }
        }
        Ok(Box::new(Done))
    }
    fn split(&self, ranks: &[usize], _deadline: Instant) -> Result<Option<Arc<dyn Engine>>> {
        Ok((ranks == [0]).then(|| Arc::new(SelfEngine) as Arc<dyn Engine>))
    }
    fn dup(&self) -> Result<Arc<dyn Engine>> {
        Ok(Arc::new(SelfEngine))
    }
    fn name(&self) -> &'static str {
        "self"
    }
}
