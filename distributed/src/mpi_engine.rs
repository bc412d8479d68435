//! The MPI engine (cargo feature `mpi`): process groups over MPI communicators,
//! through the `mpi` crate's raw bindings. Every operation is MPI's non-blocking
//! form (`MPI_Iallreduce`, `MPI_Ibcast`, ...), so a work handle can poll it and a
//! timeout can give up on it instead of hanging.
//!
//! Each group holds two communicators: `data` for the collectives and
//! point-to-point data, `ctl` for the headers ranks exchange before each
//! operation, so a header never matches a data message.
//!
//! MPI is initialized once per process with `MPI_THREAD_MULTIPLE` (a device queue
//! may run collectives on its own thread) and finalized at exit, unless a timeout
//! left operations pending (finalizing would then wait for the missing ranks).
//!
//! Owns: every MPI call of the crate. Must not: know tensors or dtypes beyond
//! [`Elem`].

use crate::engine::{abandoned, mark_abandoned, Buf, Coll, Engine, Pending};
use crate::ring::{self, RingAllReduce, RING_MIN_BYTES};
use crate::types::{Elem, Header, Op, HEADER_WORDS};
use mpi::ffi;
use opal::{OpalError, Result};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// An MPI handle (a communicator or request).
#[derive(Clone, Copy)]
struct Comm(ffi::MPI_Comm);

// SAFETY: MPI handles are process-wide identifiers; MPI is initialized with
// MPI_THREAD_MULTIPLE (checked in `init`), so any thread may use them.
unsafe impl Send for Comm {}
// SAFETY: as for `Send`.
unsafe impl Sync for Comm {}

fn check(rc: c_int, what: &str) -> Result<()> {
    if rc == 0 {
        return Ok(());
    }
    let mut buf = vec![0u8; 512];
    let mut len: c_int = 0;
    // SAFETY: `buf` has room for MPI_MAX_ERROR_STRING (256 in Open MPI and MPICH).
    unsafe { ffi::MPI_Error_string(rc, buf.as_mut_ptr().cast(), &mut len) };
    buf.truncate(len.clamp(0, 512) as usize);
    Err(OpalError::msg(format!(
        "{what}: MPI error {rc}: {}",
        String::from_utf8_lossy(&buf)
    )))
}

extern "C" {
    fn atexit(cb: extern "C" fn()) -> c_int;
}

extern "C" fn finalize_at_exit() {
    if abandoned() {
        return;
    }
    let mut done: c_int = 0;
    // SAFETY: plain queries and MPI_Finalize on the exiting thread; MPI was
    // initialized by `init` (this handler is registered only then).
    unsafe {
        ffi::MPI_Finalized(&mut done);
        if done == 0 {
            ffi::MPI_Finalize();
        }
    }
}

/// `MPI_IN_PLACE` of the MPI library loaded (the bindings do not export it: it is
/// a cast macro), or null when the library is not one whose value is known, in
/// which case the engine copies instead.
static IN_PLACE: OnceLock<usize> = OnceLock::new();

fn in_place() -> *mut c_void {
    *IN_PLACE.get().unwrap_or(&0) as *mut c_void
}

fn library_version() -> String {
    let mut buf = vec![0u8; 8192];
    let mut len: c_int = 0;
    // SAFETY: `buf` is larger than MPI_MAX_LIBRARY_VERSION_STRING (8192 in MPICH,
    // 256 in Open MPI), which bounds what MPI writes.
    unsafe { ffi::MPI_Get_library_version(buf.as_mut_ptr().cast(), &mut len) };
    buf.truncate(len.clamp(0, 8192) as usize);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Initializes MPI (once) and returns the world's engine.
pub fn init() -> Result<Arc<dyn Engine>> {
    static INIT: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    INIT.get_or_init(|| {
        let mut flag: c_int = 0;
        let mut provided: c_int = 0;
        // SAFETY: MPI_Initialized may be called before MPI_Init; MPI_Init_thread with
        // null argc/argv is allowed by the standard.
        unsafe {
            ffi::MPI_Initialized(&mut flag);
            if flag == 0 {
                check(
                    ffi::MPI_Init_thread(
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        ffi::RSMPI_THREAD_MULTIPLE,
                        &mut provided,
                    ),
                    "init_process_group",
                )
                .map_err(|e| e.to_string())?;
                atexit(finalize_at_exit);
            } else {
                ffi::MPI_Query_thread(&mut provided);
            }
            if provided < ffi::RSMPI_THREAD_MULTIPLE {
                return Err(format!(
                    "init_process_group: the MPI library gives thread level {provided}, below MPI_THREAD_MULTIPLE (a device queue issues collectives from its own thread)"
                ));
            }
        }
        let v = library_version();
        // The two implementations' MPI_IN_PLACE: Open MPI `(void *) 1`, MPICH
        // `(void *) -1`.
        let ip = if v.contains("Open MPI") {
            1
        } else if v.contains("MPICH") {
            usize::MAX
        } else {
            0
        };
        let _ = IN_PLACE.set(ip);
        Ok(())
    })
    .clone()
    .map_err(OpalError::msg)?;
    // SAFETY: MPI is initialized; RSMPI_COMM_WORLD is a constant handle.
    let world = Comm(unsafe { ffi::RSMPI_COMM_WORLD });
    Ok(Arc::new(MpiEngine::from_parent(
        world,
        "init_process_group",
    )?))
}

/// The library's version string, for messages and benchmarks.
pub fn version() -> String {
    library_version()
}

pub struct MpiEngine {
    rank: usize,
    size: usize,
    data: Comm,
    ctl: Comm,
    /// The chunked ring's messages (apart from `data`'s user tags).
    ring: Comm,
    /// Rings started so far: numbers each ring's tags.
    rings: AtomicU32,
}

fn dup(c: Comm, what: &str) -> Result<Comm> {
    let mut out = std::mem::MaybeUninit::<ffi::MPI_Comm>::uninit();
    // SAFETY: `c` is a valid communicator; MPI writes the new handle.
    unsafe {
        check(ffi::MPI_Comm_dup(c.0, out.as_mut_ptr()), what)?;
        let out = out.assume_init();
        check(
            ffi::MPI_Comm_set_errhandler(out, ffi::RSMPI_ERRORS_RETURN),
            what,
        )?;
        Ok(Comm(out))
    }
}

impl MpiEngine {
    fn from_parent(parent: Comm, what: &str) -> Result<MpiEngine> {
        let (data, ctl, ring) = (dup(parent, what)?, dup(parent, what)?, dup(parent, what)?);
        let (mut r, mut n): (c_int, c_int) = (0, 0);
        // SAFETY: `data` is a valid communicator.
        unsafe {
            check(ffi::MPI_Comm_rank(data.0, &mut r), what)?;
            check(ffi::MPI_Comm_size(data.0, &mut n), what)?;
        }
        Ok(MpiEngine {
            rank: r as usize,
            size: n as usize,
            data,
            ctl,
            ring,
            rings: AtomicU32::new(0),
        })
    }
}

fn datatype(e: Elem) -> ffi::MPI_Datatype {
    // SAFETY: reading MPI's predefined datatype handles (constants after init).
    unsafe {
        match e {
            Elem::U8 => ffi::RSMPI_UINT8_T,
            Elem::I8 => ffi::RSMPI_INT8_T,
            Elem::I16 => ffi::RSMPI_INT16_T,
            Elem::I32 => ffi::RSMPI_INT32_T,
            Elem::I64 => ffi::RSMPI_INT64_T,
            Elem::F32 => ffi::RSMPI_FLOAT,
            Elem::F64 => ffi::RSMPI_DOUBLE,
            Elem::C64 => ffi::RSMPI_FLOAT_COMPLEX,
            Elem::C128 => ffi::RSMPI_DOUBLE_COMPLEX,
        }
    }
}

fn mpi_op(o: Op) -> ffi::MPI_Op {
    // SAFETY: reading MPI's predefined operation handles.
    unsafe {
        match o {
            Op::Sum => ffi::RSMPI_SUM,
            Op::Prod => ffi::RSMPI_PROD,
            Op::Min => ffi::RSMPI_MIN,
            Op::Max => ffi::RSMPI_MAX,
        }
    }
}

fn count(n: usize, what: &str) -> Result<c_int> {
    c_int::try_from(n).map_err(|_| {
        OpalError::msg(format!(
            "{what}: {n} elements is more than one MPI call moves (at most {})",
            c_int::MAX
        ))
    })
}

/// A started MPI request and what must live until it completes.
struct MpiPending {
    req: ffi::MPI_Request,
    _keep: Vec<Buf>,
    _copy: Vec<u8>,
    _ints: Vec<c_int>,
    what: &'static str,
}

// SAFETY: the request handle is a process-wide identifier (MPI_THREAD_MULTIPLE);
// the buffers are kept only to stay alive.
unsafe impl Send for MpiPending {}

impl Pending for MpiPending {
    fn test(&mut self) -> Result<bool> {
        let mut flag: c_int = 0;
        // SAFETY: `req` came from a non-blocking call of this engine and has not
        // completed yet (MPI_Test sets it to MPI_REQUEST_NULL once it has, and
        // testing a null request reports completion).
        let rc = unsafe { ffi::MPI_Test(&mut self.req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
        check(rc, self.what)?;
        Ok(flag != 0)
    }
}

impl MpiEngine {
    fn pending(
        &self,
        what: &'static str,
        keep: Vec<Buf>,
        copy: Vec<u8>,
        f: impl FnOnce(*mut ffi::MPI_Request) -> c_int,
    ) -> Result<Box<dyn Pending>> {
        self.start_request(what, keep, copy, Vec::new(), f)
    }

    /// [`Self::pending`] for a call that also reads count arrays.
    fn pending_with(
        &self,
        what: &'static str,
        keep: Vec<Buf>,
        ints: Vec<c_int>,
        f: impl FnOnce(*mut ffi::MPI_Request) -> c_int,
    ) -> Result<Box<dyn Pending>> {
        self.start_request(what, keep, Vec::new(), ints, f)
    }

    fn start_request(
        &self,
        what: &'static str,
        keep: Vec<Buf>,
        copy: Vec<u8>,
        ints: Vec<c_int>,
        f: impl FnOnce(*mut ffi::MPI_Request) -> c_int,
    ) -> Result<Box<dyn Pending>> {
        // SAFETY: MPI_REQUEST_NULL is a constant handle, overwritten by `f`.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        check(f(&mut req), what)?;
        Ok(Box::new(MpiPending {
            req,
            _keep: keep,
            _copy: copy,
            _ints: ints,
            what,
        }))
    }
}

/// The send side of an in-place operation: `MPI_IN_PLACE` when known, else a
/// copy of `buf` (returned so it lives as long as the request).
fn send_side(buf: &Buf) -> (*const c_void, Vec<u8>) {
    let ip = in_place();
    if !ip.is_null() {
        return (ip.cast_const(), Vec::new());
    }
    // SAFETY: the buffer is owned by the operation being started; nothing writes it.
    let copy = unsafe { buf.bytes() }.to_vec();
    (copy.as_ptr().cast(), copy)
}

impl Engine for MpiEngine {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn name(&self) -> &'static str {
        "mpi"
    }

    fn exchange(
        &self,
        mine: &Header,
        peers: Option<&[usize]>,
        tag: i32,
        deadline: Instant,
        what: &str,
    ) -> Result<Vec<(usize, Header)>> {
        let peers: Vec<usize> = match peers {
            Some(p) => p.to_vec(),
            None => (0..self.size).filter(|&r| r != self.rank).collect(),
        };
        // Boxed: on a timeout they are leaked, since MPI may still write them.
        let mut got: Box<[Header]> = vec![[0i64; HEADER_WORDS]; peers.len()].into_boxed_slice();
        let sent: Box<Header> = Box::new(*mine);
        // SAFETY: MPI_REQUEST_NULL is a constant handle.
        let null = unsafe { ffi::RSMPI_REQUEST_NULL };
        let mut reqs = vec![null; 2 * peers.len()];
        for (i, &p) in peers.iter().enumerate() {
            // SAFETY: `got[i]` and `sent` are HEADER_WORDS i64 each and live until
            // the requests complete (or forever, after a timeout).
            unsafe {
                check(
                    ffi::MPI_Irecv(
                        got[i].as_mut_ptr().cast(),
                        HEADER_WORDS as c_int,
                        ffi::RSMPI_INT64_T,
                        p as c_int,
                        tag,
                        self.ctl.0,
                        &mut reqs[2 * i],
                    ),
                    what,
                )?;
                check(
                    ffi::MPI_Isend(
                        sent.as_ptr().cast(),
                        HEADER_WORDS as c_int,
                        ffi::RSMPI_INT64_T,
                        p as c_int,
                        tag,
                        self.ctl.0,
                        &mut reqs[2 * i + 1],
                    ),
                    what,
                )?;
            }
        }
        let mut done = vec![false; reqs.len()];
        let mut spins = 0u32;
        while !done.iter().all(|d| *d) {
            for (i, r) in reqs.iter_mut().enumerate() {
                if !done[i] {
                    let mut flag: c_int = 0;
                    // SAFETY: `r` is a live request of this exchange.
                    check(
                        unsafe { ffi::MPI_Test(r, &mut flag, ffi::RSMPI_STATUS_IGNORE) },
                        what,
                    )?;
                    done[i] = flag != 0;
                }
            }
            if done.iter().all(|d| *d) {
                break;
            }
            if Instant::now() > deadline {
                let missing: Vec<String> = peers
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !done[2 * i])
                    .map(|(_, p)| p.to_string())
                    .collect();
                mark_abandoned();
                Box::leak(got);
                Box::leak(sent);
                return Err(OpalError::msg(format!(
                    "{what}: timed out: rank(s) {} did not arrive",
                    if missing.is_empty() {
                        "(none: a peer did not take this rank's header)".to_string()
                    } else {
                        missing.join(", ")
                    }
                )));
            }
            spins += 1;
            if spins.is_multiple_of(64) {
                std::thread::yield_now();
            }
        }
        let mut all: Vec<(usize, Header)> =
            peers.iter().copied().zip(got.iter().copied()).collect();
        all.push((self.rank, *mine));
        all.sort_by_key(|(r, _)| *r);
        Ok(all)
    }

    fn start(&self, c: Coll) -> Result<Box<dyn Pending>> {
        let comm = self.data.0;
        let byte = |b: &Buf, what| count(b.len(), what);
        // SAFETY (every arm): the buffers are contiguous host memory of the stated
        // byte counts, kept alive by the returned pending operation; the counts
        // fit a c_int (checked by `count`); `comm` is this engine's communicator.
        match c {
            Coll::AllReduce { buf, elem, op }
                if self.size > 1 && buf.len() >= RING_MIN_BYTES && ring::supports(elem, op) =>
            {
                let seq = self.rings.fetch_add(1, Ordering::Relaxed);
                let (ring, rank, size) = (self.ring.0, self.rank, self.size);
                Ok(Box::new(RingAllReduce::new(
                    buf, elem, op, ring, rank, size, seq,
                )))
            }
            Coll::AllReduce { buf, elem, op } => {
                let n = count(buf.len() / ring::elem_bytes(elem), "all_reduce")?;
                let (send, copy) = send_side(&buf);
                let p = buf.ptr().cast();
                // SAFETY: the buffers handed to MPI are the kept ones (alive until the
                // request completes), of the counts computed above; see `start`.
                self.pending("all_reduce", vec![buf], copy, |r| unsafe {
                    ffi::MPI_Iallreduce(send, p, n, datatype(elem), mpi_op(op), comm, r)
                })
            }
            Coll::Broadcast { buf, root } => {
                let n = byte(&buf, "broadcast")?;
                let p = buf.ptr().cast();
                // SAFETY: the buffers handed to MPI are the kept ones (alive until the
                // request completes), of the counts computed above; see `start`.
                self.pending("broadcast", vec![buf], Vec::new(), |r| unsafe {
                    ffi::MPI_Ibcast(p, n, ffi::RSMPI_UINT8_T, root as c_int, comm, r)
                })
            }
            Coll::Reduce {
                buf,
                elem,
                op,
                root,
            } => {
                let n = count(buf.len() / ring::elem_bytes(elem), "reduce")?;
                let p: *mut c_void = buf.ptr().cast();
                let (send, recv, copy) = if root == self.rank {
                    let (s, c) = send_side(&buf);
                    (s, p, c)
                } else {
                    (p.cast_const(), std::ptr::null_mut(), Vec::new())
                };
                // SAFETY: the buffers handed to MPI are the kept ones (alive until the
                // request completes), of the counts computed above; see `start`.
                self.pending("reduce", vec![buf], copy, |r| unsafe {
                    ffi::MPI_Ireduce(
                        send,
                        recv,
                        n,
                        datatype(elem),
                        mpi_op(op),
                        root as c_int,
                        comm,
                        r,
                    )
                })
            }
            Coll::AllGather { send, recv } => {
                let n = byte(&send, "all_gather")?;
                let (s, d) = (send.ptr().cast_const().cast(), recv.ptr().cast());
                // SAFETY: the buffers handed to MPI are the kept ones (alive until the
                // request completes), of the counts computed above; see `start`.
                self.pending("all_gather", vec![send, recv], Vec::new(), |r| unsafe {
                    ffi::MPI_Iallgather(s, n, ffi::RSMPI_UINT8_T, d, n, ffi::RSMPI_UINT8_T, comm, r)
                })
            }
            Coll::ReduceScatter {
                send,
                recv,
                elem,
                op,
            } => {
                let n = count(recv.len() / ring::elem_bytes(elem), "reduce_scatter")?;
                let (s, d) = (send.ptr().cast_const().cast(), recv.ptr().cast());
                // SAFETY: the buffers handed to MPI are the kept ones (alive until the
                // request completes), of the counts computed above; see `start`.
                self.pending("reduce_scatter", vec![send, recv], Vec::new(), |r| unsafe {
                    ffi::MPI_Ireduce_scatter_block(s, d, n, datatype(elem), mpi_op(op), comm, r)
                })
            }
            Coll::AllToAll {
                send,
                recv,
                send_counts,
                recv_counts,
            } => {
                // Counts then displacements, sends then receives, in one vector
                // that lives as long as the request (MPI may read them until then).
                let mut ints = Vec::with_capacity(4 * self.size);
                for counts in [&send_counts, &recv_counts] {
                    let mut at = 0usize;
                    let displs: Vec<usize> = counts
                        .iter()
                        .map(|c| {
                            let d = at;
                            at += c;
                            d
                        })
                        .collect();
                    for v in counts.iter().chain(&displs) {
                        ints.push(count(*v, "all_to_all")?);
                    }
                }
                let (s, d) = (send.ptr().cast_const().cast(), recv.ptr().cast());
                let n = self.size;
                let iv: *const c_int = ints.as_ptr();
                // SAFETY: the buffers handed to MPI are the kept ones (alive until the
                // request completes); `ints` (kept too, its heap block never moves)
                // holds 4 arrays of `size` counts and displacements in bytes, each
                // block inside its buffer (the counts sum to the buffers' lengths).
                self.pending_with("all_to_all", vec![send, recv], ints, |r| unsafe {
                    ffi::MPI_Ialltoallv(
                        s,
                        iv,
                        iv.add(n),
                        ffi::RSMPI_UINT8_T,
                        d,
                        iv.add(2 * n),
                        iv.add(3 * n),
                        ffi::RSMPI_UINT8_T,
                        comm,
                        r,
                    )
                })
            }
            // SAFETY: the buffers handed to MPI are the kept ones (alive until the
            // request completes), of the counts computed above; see `start`.
            Coll::Barrier => self.pending("barrier", Vec::new(), Vec::new(), |r| unsafe {
                ffi::MPI_Ibarrier(comm, r)
            }),
            Coll::Send { buf, peer, tag } => {
                let n = byte(&buf, "send")?;
                let p = buf.ptr().cast_const().cast();
                // SAFETY: the buffers handed to MPI are the kept ones (alive until the
                // request completes), of the counts computed above; see `start`.
                self.pending("send", vec![buf], Vec::new(), |r| unsafe {
                    ffi::MPI_Isend(p, n, ffi::RSMPI_UINT8_T, peer as c_int, tag, comm, r)
                })
            }
            Coll::Recv { buf, peer, tag } => {
                let n = byte(&buf, "recv")?;
                let p = buf.ptr().cast();
                // SAFETY: the buffers handed to MPI are the kept ones (alive until the
                // request completes), of the counts computed above; see `start`.
                self.pending("recv", vec![buf], Vec::new(), |r| unsafe {
                    ffi::MPI_Irecv(p, n, ffi::RSMPI_UINT8_T, peer as c_int, tag, comm, r)
                })
            }
        }
    }

    fn split(&self, ranks: &[usize], _deadline: Instant) -> Result<Option<Arc<dyn Engine>>> {
        let member = ranks.contains(&self.rank);
        // SAFETY: MPI_UNDEFINED is a constant.
        let color = if member {
            0
        } else {
            unsafe { ffi::RSMPI_UNDEFINED }
        };
        let mut out = std::mem::MaybeUninit::<ffi::MPI_Comm>::uninit();
        // SAFETY: collective over `data`, every rank calls it (new_group's contract);
        // MPI writes the new handle (MPI_COMM_NULL for non-members).
        let c = unsafe {
            check(
                ffi::MPI_Comm_split(self.data.0, color, self.rank as c_int, out.as_mut_ptr()),
                "new_group",
            )?;
            out.assume_init()
        };
        if !member {
            return Ok(None);
        }
        let e = MpiEngine::from_parent(Comm(c), "new_group")?;
        Ok(Some(Arc::new(e)))
    }

    fn dup(&self) -> Result<Arc<dyn Engine>> {
        Ok(Arc::new(MpiEngine::from_parent(self.data, "dup")?))
    }
}
