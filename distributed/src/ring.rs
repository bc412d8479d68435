//! The all_reduce of large buffers over MPI point-to-point messages: a ring
//! (reduce-scatter, then all-gather) cut into chunks, so a chunk travels while
//! the previous one is being reduced and a reduced chunk is passed on at once.
//! Each rank sends and receives `2 (n - 1) / n` of the buffer once, whatever n.
//!
//! Open MPI's non-blocking all_reduce picks, for two ranks, an algorithm that
//! moves the whole buffer each way and does not overlap the reduction with the
//! transfer; a 64 MB sum through it was slower than Gloo's ring. Small buffers
//! still go through `MPI_Iallreduce`, whose latency a chunked ring cannot beat.
//!
//! The ring advances only when polled (`Pending::test`), like every other
//! operation of the engine, so the group's timeout applies unchanged.
//!
//! Owns: the chunk schedule and the element-wise reduction of wire types. Must
//! not: know tensors or process groups.

use crate::engine::{Buf, Pending};
use crate::types::{Elem, Op};
use mpi::ffi;
use opal::{OpalError, Result};
use std::ffi::{c_int, c_void};

/// Buffers below this many bytes use MPI's own all_reduce.
pub(crate) const RING_MIN_BYTES: usize = 4 << 20;

/// Bytes per message: large enough that a message's fixed cost is small, small
/// enough that reducing one chunk overlaps the next one's transfer.
const CHUNK_BYTES: usize = 1 << 20;

/// Reduce-scatter chunks in flight at once (each lands in its own scratch slot).
const SLOTS: usize = 4;

/// Whether the ring can reduce `elem` with `op` (complex products and
/// comparisons are left to MPI).
pub(crate) fn supports(elem: Elem, op: Op) -> bool {
    !matches!(elem, Elem::C64 | Elem::C128) || op == Op::Sum
}

pub(crate) fn elem_bytes(e: Elem) -> usize {
    match e {
        Elem::U8 | Elem::I8 => 1,
        Elem::I16 => 2,
        Elem::I32 | Elem::F32 => 4,
        Elem::I64 | Elem::F64 | Elem::C64 => 8,
        Elem::C128 => 16,
    }
}

/// `dst[i] = op(dst[i], src[i])` over the wire type `elem`.
///
/// # Safety
/// `dst` and `src` point to `n` elements of `elem`, aligned for it, and do not
/// overlap; nothing else accesses them during the call.
unsafe fn reduce(elem: Elem, op: Op, dst: *mut u8, src: *const u8, n: usize) {
    macro_rules! apply {
        ($t:ty, $sum:expr, $prod:expr) => {{
            // SAFETY: the caller's contract: `n` aligned, disjoint elements each.
            let (d, s) = unsafe {
                (
                    std::slice::from_raw_parts_mut(dst.cast::<$t>(), n),
                    std::slice::from_raw_parts(src.cast::<$t>(), n),
                )
            };
            let (sum, prod): (fn($t, $t) -> $t, fn($t, $t) -> $t) = ($sum, $prod);
            match op {
                Op::Sum => d.iter_mut().zip(s).for_each(|(a, b)| *a = sum(*a, *b)),
                Op::Prod => d.iter_mut().zip(s).for_each(|(a, b)| *a = prod(*a, *b)),
                Op::Min => d
                    .iter_mut()
                    .zip(s)
                    .for_each(|(a, b)| *a = if *b < *a { *b } else { *a }),
                Op::Max => d
                    .iter_mut()
                    .zip(s)
                    .for_each(|(a, b)| *a = if *b > *a { *b } else { *a }),
            }
        }};
    }
    match elem {
        Elem::U8 => apply!(u8, u8::wrapping_add, u8::wrapping_mul),
        Elem::I8 => apply!(i8, i8::wrapping_add, i8::wrapping_mul),
        Elem::I16 => apply!(i16, i16::wrapping_add, i16::wrapping_mul),
        Elem::I32 => apply!(i32, i32::wrapping_add, i32::wrapping_mul),
        Elem::I64 => apply!(i64, i64::wrapping_add, i64::wrapping_mul),
        Elem::F32 => apply!(f32, |a, b| a + b, |a, b| a * b),
        Elem::F64 => apply!(f64, |a, b| a + b, |a, b| a * b),
        // Complex sums are sums of their parts (`supports` admits nothing else).
        // SAFETY: the caller's contract, with two parts per element.
        Elem::C64 => unsafe { reduce(Elem::F32, Op::Sum, dst, src, 2 * n) },
        // SAFETY: as above.
        Elem::C128 => unsafe { reduce(Elem::F64, Op::Sum, dst, src, 2 * n) },
    }
}

/// One message of the schedule: posted (with its request) and completed.
#[derive(Clone, Copy)]
struct Msg {
    req: ffi::MPI_Request,
    posted: bool,
    done: bool,
}

/// A ring all_reduce in progress.
pub(crate) struct RingAllReduce {
    buf: Buf,
    /// `SLOTS` chunks that reduce-scatter steps receive before reducing them
    /// into `buf` (chunk k in slot k % SLOTS); `f64` elements so every slot is
    /// aligned for every wire type.
    scratch: Vec<f64>,
    /// Whether a receive into the slot is in flight.
    slot_busy: [bool; SLOTS],
    elem: Elem,
    op: Op,
    comm: ffi::MPI_Comm,
    rank: usize,
    size: usize,
    tag_base: c_int,
    /// Elements per chunk.
    chunk: usize,
    /// Chunks per segment.
    chunks: usize,
    /// Per step (2 (size - 1)), per chunk.
    sends: Vec<Vec<Msg>>,
    recvs: Vec<Vec<Msg>>,
    /// Per step: how many chunks' sends / receives are posted (in chunk order,
    /// as MPI matches messages of one source and tag in posting order).
    sent: Vec<usize>,
    received: Vec<usize>,
}

// SAFETY: MPI handles are process-wide identifiers (MPI_THREAD_MULTIPLE); the
// buffers are owned by the operation, which one thread polls at a time (`&mut`).
unsafe impl Send for RingAllReduce {}

impl RingAllReduce {
    /// A ring over `comm` (this engine's ring communicator, of `size` ranks).
    /// `seq` numbers the engine's rings, in the same order on every rank (they
    /// start collectives in one order), so concurrent rings never match each
    /// other's messages.
    pub(crate) fn new(
        buf: Buf,
        elem: Elem,
        op: Op,
        comm: ffi::MPI_Comm,
        rank: usize,
        size: usize,
        seq: u32,
    ) -> RingAllReduce {
        let esize = elem_bytes(elem);
        let n = buf.len() / esize;
        let steps = 2 * (size - 1);
        let chunk = (CHUNK_BYTES / esize).max(1);
        let longest = n.div_ceil(size);
        let chunks = longest.div_ceil(chunk).max(1);
        let per_op = c_int::try_from(steps).unwrap_or(c_int::MAX).max(1);
        let tag_base = (seq as c_int % (32_000 / per_op).max(1)) * per_op;
        // SAFETY: MPI_REQUEST_NULL is a constant handle.
        let null = unsafe { ffi::RSMPI_REQUEST_NULL };
        let msg = Msg {
            req: null,
            posted: false,
            done: false,
        };
        RingAllReduce {
            buf,
            scratch: vec![0.0; SLOTS * (chunk * esize).div_ceil(8)],
            slot_busy: [false; SLOTS],
            elem,
            op,
            comm,
            rank,
            size,
            tag_base,
            chunk,
            chunks,
            sends: vec![vec![msg; chunks]; steps],
            recvs: vec![vec![msg; chunks]; steps],
            sent: vec![0; steps],
            received: vec![0; steps],
        }
    }

    fn steps(&self) -> usize {
        2 * (self.size - 1)
    }

    /// Element range of segment `s` (segments differ by at most one element).
    fn segment(&self, s: usize) -> (usize, usize) {
        let n = self.buf.len() / elem_bytes(self.elem);
        (s * n / self.size, (s + 1) * n / self.size)
    }

    /// Element range of chunk `k` of segment `s` (possibly empty).
    fn chunk_of(&self, s: usize, k: usize) -> (usize, usize) {
        let (a, b) = self.segment(s);
        let lo = (a + k * self.chunk).min(b);
        (lo, (lo + self.chunk).min(b))
    }

    /// The segment step `t` sends and the one it receives. Reduce-scatter step
    /// t sends segment rank - t and receives rank - t - 1; all-gather step s
    /// sends rank + 1 - s and receives rank - s. A step sends what the one
    /// before received.
    fn segments(&self, t: usize) -> (usize, usize) {
        let n = self.size;
        let r = self.rank + 2 * n;
        if t < n - 1 {
            ((r - t) % n, (r - t - 1) % n)
        } else {
            let s = t - (n - 1);
            ((r + 1 - s) % n, (r - s) % n)
        }
    }

    /// The scratch slot of chunk `k`.
    fn slot(&mut self, k: usize) -> *mut u8 {
        let per_slot = self.scratch.len() / SLOTS;
        // SAFETY: `k % SLOTS` slots of `per_slot` f64 each lie inside the scratch.
        unsafe { self.scratch.as_mut_ptr().add((k % SLOTS) * per_slot).cast() }
    }

    fn tag(&self, t: usize) -> c_int {
        self.tag_base + t as c_int
    }

    /// Whether chunk `k` of step `t` may be sent / received: the step before has
    /// received (and reduced) it; an all-gather receive also waits until the
    /// reduce-scatter send of the same bytes has left.
    fn ready(&self, t: usize, k: usize, receive: bool) -> bool {
        if t > 0 && !self.recvs[t - 1][k].done {
            return false;
        }
        let rs_steps = self.size - 1;
        !(receive && t >= rs_steps && !self.sends[t - rs_steps][k].done)
    }

    fn post(&mut self, t: usize, k: usize, receive: bool) -> Result<()> {
        let esize = elem_bytes(self.elem);
        let (send_seg, recv_seg) = self.segments(t);
        let (lo, hi) = self.chunk_of(if receive { recv_seg } else { send_seg }, k);
        let bytes = (hi - lo) * esize;
        let count = c_int::try_from(bytes).map_err(|_| OpalError::msg("all_reduce: chunk"))?;
        let peer = if receive {
            (self.rank + self.size - 1) % self.size
        } else {
            (self.rank + 1) % self.size
        } as c_int;
        let tag = self.tag(t);
        let reduce_scatter = t < self.size - 1;
        // SAFETY: `lo..hi` lies inside the buffer (segments partition it); the
        // scratch holds a whole chunk. Both live as long as this operation, which
        // is leaked rather than dropped if it is abandoned while MPI holds them.
        let at = unsafe { self.buf.ptr().add(lo * esize) };
        let rc = if receive {
            let dst: *mut c_void = if reduce_scatter {
                self.slot_busy[k % SLOTS] = true;
                self.slot(k).cast()
            } else {
                at.cast()
            };
            let m = &mut self.recvs[t][k];
            m.posted = true;
            // SAFETY: `dst` has room for `count` bytes (see above); the request
            // slot outlives the call.
            unsafe {
                ffi::MPI_Irecv(
                    dst,
                    count,
                    ffi::RSMPI_UINT8_T,
                    peer,
                    tag,
                    self.comm,
                    &mut m.req,
                )
            }
        } else {
            let m = &mut self.sends[t][k];
            m.posted = true;
            // SAFETY: `at` holds `count` bytes (see above), not written until the
            // send completes (`ready` orders the receives over it).
            unsafe {
                ffi::MPI_Isend(
                    at.cast_const().cast(),
                    count,
                    ffi::RSMPI_UINT8_T,
                    peer,
                    tag,
                    self.comm,
                    &mut m.req,
                )
            }
        };
        mpi_ok(rc)
    }

    /// Completes chunk `k` of step `t`'s receive: a reduce-scatter step adds the
    /// scratch into the buffer.
    fn arrived(&mut self, t: usize, k: usize) {
        if t < self.size - 1 {
            let (_, recv_seg) = self.segments(t);
            let (lo, hi) = self.chunk_of(recv_seg, k);
            let esize = elem_bytes(self.elem);
            // SAFETY: `lo..hi` lies in the buffer, aligned for the element type (a
            // tensor's data); the scratch holds its `hi - lo` received elements,
            // aligned for every wire type; the receive is complete and no send of
            // this chunk is posted yet, so nothing else touches either.
            unsafe {
                reduce(
                    self.elem,
                    self.op,
                    self.buf.ptr().add(lo * esize),
                    self.slot(k).cast_const(),
                    hi - lo,
                )
            };
            self.slot_busy[k % SLOTS] = false;
        }
        self.recvs[t][k].done = true;
    }
}

fn mpi_ok(rc: c_int) -> Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(OpalError::msg(format!("all_reduce: MPI error {rc}")))
    }
}

fn test_msg(m: &mut Msg) -> Result<bool> {
    if m.done || !m.posted {
        return Ok(m.done);
    }
    let mut flag: c_int = 0;
    // SAFETY: a live request of this ring (MPI nulls it once complete).
    mpi_ok(unsafe { ffi::MPI_Test(&mut m.req, &mut flag, ffi::RSMPI_STATUS_IGNORE) })?;
    m.done = flag != 0;
    Ok(m.done)
}

impl Pending for RingAllReduce {
    fn test(&mut self) -> Result<bool> {
        for t in 0..self.steps() {
            while self.sent[t] < self.chunks && self.ready(t, self.sent[t], false) {
                self.post(t, self.sent[t], false)?;
                self.sent[t] += 1;
            }
            // A reduce-scatter receive waits for its scratch slot.
            let scratch = t < self.size - 1;
            while self.received[t] < self.chunks
                && self.ready(t, self.received[t], true)
                && !(scratch && self.slot_busy[self.received[t] % SLOTS])
            {
                self.post(t, self.received[t], true)?;
                self.received[t] += 1;
            }
            for k in 0..self.chunks {
                let m = &mut self.recvs[t][k];
                if m.posted && !m.done && test_msg(m)? {
                    self.arrived(t, k);
                }
                test_msg(&mut self.sends[t][k])?;
            }
        }
        Ok(self
            .recvs
            .iter()
            .chain(&self.sends)
            .flatten()
            .all(|m| m.done))
    }
}
