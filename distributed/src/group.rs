//! Process groups and their collectives on tensors, in `torch.distributed`'s
//! shape: every collective has a blocking form and an `_async` form returning a
//! [`Work`] handle.
//!
//! Each collective first exchanges a [`Header`](crate::types::Header) with every
//! rank (the collective, its sequence number, dtype, reduction, root and shapes):
//! a disagreement is the same `Err` on every rank, and a rank that does not arrive
//! within the group's timeout is named in the `Err` instead of hanging. Then the
//! data moves: in place for a contiguous CPU tensor of a dtype the engine reduces
//! natively, else through a contiguous host copy written back afterwards
//! (`stage`); a tensor of another device goes to the device's registered
//! communicator when it has one for that collective, else it is staged on the
//! device's current stream.
//!
//! After a timeout the group is aborted: every later call on it is an `Err`.
//!
//! Owns: process groups, work handles, argument checks. Must not: call MPI (the
//! engine does) or know a device's internals (its communicator does).

use crate::engine::{timed_out, wait_until, Buf, Coll, Engine, Pending, SelfEngine};
use crate::registry;
use crate::stage::{host_empty, to_host, usable_in_place, write_back};
use crate::types::{check_headers, header, reduction, wire_dtype, Header, Kind, ReduceOp};
use opal::autograd::NoGradGuard;
use opal::{ops, DType, DeviceType, OpalError, Result, Scalar, Tensor};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The timeout of a new group: how long a collective waits for every rank.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// Largest user tag of [`ProcessGroup::send`] / [`ProcessGroup::recv`] (MPI
/// guarantees tags up to 32767; one more is used for the header).
pub const MAX_TAG: i32 = 32766;

pub(crate) struct Inner {
    engine: Arc<dyn Engine>,
    /// World rank of each member, in group rank order.
    ranks: Vec<usize>,
    timeout_ms: AtomicU64,
    seq: AtomicU64,
    aborted: Mutex<Option<String>>,
    id: u64,
}

/// A group of processes that run collectives together (PyTorch's
/// `ProcessGroup`). Cheap to clone.
#[derive(Clone)]
pub struct ProcessGroup {
    inner: Arc<Inner>,
}

type Finish = Box<dyn FnOnce() -> Result<()> + Send>;

struct WorkState {
    what: &'static str,
    pending: Option<Box<dyn Pending>>,
    finish: Option<Finish>,
    deadline: Instant,
    group: Arc<Inner>,
    outcome: Option<std::result::Result<(), String>>,
}

/// A started collective (PyTorch's `Work`). Until [`Work::wait`] returns, the
/// tensors passed to the collective must not be read or written.
pub struct Work {
    state: Mutex<WorkState>,
}

impl Work {
    /// A work handle over `pending`: `finish` runs once it has completed (writing
    /// results back, say). For communicators of devices.
    pub fn new(
        group: &ProcessGroup,
        what: &'static str,
        pending: Box<dyn Pending>,
        finish: Option<Finish>,
        deadline: Instant,
    ) -> Work {
        Work {
            state: Mutex::new(WorkState {
                what,
                pending: Some(pending),
                finish,
                deadline,
                group: group.inner.clone(),
                outcome: None,
            }),
        }
    }

    fn poll(st: &mut WorkState, block: bool) -> Option<Result<()>> {
        if let Some(o) = &st.outcome {
            return Some(o.clone().map_err(OpalError::msg));
        }
        let result = match st.pending.take() {
            None => Ok(()),
            Some(mut p) => {
                if !block {
                    match p.test() {
                        Ok(false) if Instant::now() <= st.deadline => {
                            st.pending = Some(p);
                            return None;
                        }
                        Ok(false) => wait_until(p, st.deadline, st.what),
                        other => other.map(|_| ()),
                    }
                } else {
                    wait_until(p, st.deadline, st.what)
                }
            }
        };
        let result = result.and_then(|()| {
            let _ng = NoGradGuard::new();
            st.finish.take().map_or(Ok(()), |f| f())
        });
        if let Err(e) = &result {
            if e.to_string().contains("timed out") {
                abort(&st.group, e.to_string());
            }
        }
        st.outcome = Some(result.clone().map_err(|e| e.to_string()));
        Some(result)
    }

    /// True once the collective has finished (successfully or not); polls it.
    pub fn is_completed(&self) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        Work::poll(&mut st, false).is_some()
    }

    /// Waits until the collective has finished, or the group's timeout has
    /// passed (an `Err` naming the collective; the group is then aborted).
    pub fn wait(&self) -> Result<()> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        Work::poll(&mut st, true).unwrap_or(Ok(()))
    }
}

fn abort(inner: &Inner, why: String) {
    let mut a = inner.aborted.lock().unwrap_or_else(|p| p.into_inner());
    if a.is_none() {
        *a = Some(why);
    }
}

static NEXT_GROUP: AtomicU64 = AtomicU64::new(1);

/// Local checks every collective shares.
pub(crate) fn defined(t: &Tensor, what: &str, arg: &str) -> Result<()> {
    if t.is_defined() {
        Ok(())
    } else {
        Err(OpalError::msg(format!("{what}: {arg} is undefined")))
    }
}

fn same_as(t: &Tensor, model: &Tensor, what: &str, arg: &str) -> Result<()> {
    defined(t, what, arg)?;
    if t.sizes() != model.sizes() || t.dtype() != model.dtype() {
        return Err(OpalError::msg(format!(
            "{what}: {arg} is {:?} {:?}, expected {:?} {:?}",
            t.sizes(),
            t.dtype(),
            model.sizes(),
            model.dtype()
        )));
    }
    Ok(())
}

/// The tensors of a list collective: exactly `n`, all of `model`'s shape and dtype.
fn list_like(ts: &[Tensor], n: usize, model: &Tensor, what: &str, arg: &str) -> Result<()> {
    if ts.len() != n {
        return Err(OpalError::msg(format!(
            "{what}: {arg} has {} tensors, the group has {n} ranks",
            ts.len()
        )));
    }
    for (i, t) in ts.iter().enumerate() {
        same_as(t, model, what, &format!("{arg}[{i}]"))?;
    }
    Ok(())
}

/// The values of `ts` (each flattened) one after another, as a contiguous host
/// tensor of `dtype`.
pub(crate) fn host_cat(ts: &[Tensor], dtype: DType) -> Result<Tensor> {
    let flat: Vec<Tensor> = ts
        .iter()
        .map(|t| ops::reshape(&to_host(t, dtype)?, &[-1]))
        .collect::<Result<_>>()?;
    ops::cat(&flat)
}

/// Writes block `i` of the flat host tensor `src` (blocks of `outs[i].numel()`) into
/// each `outs[i]`.
pub(crate) fn write_blocks(src: &Tensor, outs: &[Tensor]) -> Result<()> {
    let mut at = 0;
    for o in outs {
        let n = o.numel();
        write_back(&ops::narrow(src, 0, at, n)?, o)?;
        at += n;
    }
    Ok(())
}

impl ProcessGroup {
    pub(crate) fn from_engine(engine: Arc<dyn Engine>, ranks: Vec<usize>) -> ProcessGroup {
        ProcessGroup {
            inner: Arc::new(Inner {
                engine,
                ranks,
                timeout_ms: AtomicU64::new(DEFAULT_TIMEOUT.as_millis() as u64),
                seq: AtomicU64::new(0),
                aborted: Mutex::new(None),
                id: NEXT_GROUP.fetch_add(1, Ordering::Relaxed),
            }),
        }
    }

    /// The group of this process alone (PyTorch's world of size 1): every
    /// collective works and is local. Needs no MPI.
    pub fn single_process() -> ProcessGroup {
        ProcessGroup::from_engine(Arc::new(SelfEngine), vec![0])
    }

    /// This process's rank in the group.
    pub fn rank(&self) -> usize {
        self.inner.engine.rank()
    }

    /// The number of processes in the group.
    pub fn size(&self) -> usize {
        self.inner.engine.size()
    }

    /// The world rank of each member, in group rank order.
    pub fn world_ranks(&self) -> &[usize] {
        &self.inner.ranks
    }

    /// The engine's name (`mpi`, `self`).
    pub fn backend(&self) -> &'static str {
        self.inner.engine.name()
    }

    /// An id unique to this group in this process (communicators key their
    /// per-group state by it).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    pub(crate) fn engine(&self) -> &Arc<dyn Engine> {
        &self.inner.engine
    }

    /// How long a collective waits for every rank before it is an `Err`.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.inner.timeout_ms.load(Ordering::Relaxed))
    }

    /// Sets the timeout of the collectives started from now on.
    pub fn set_timeout(&self, d: Duration) {
        self.inner
            .timeout_ms
            .store(d.as_millis().max(1) as u64, Ordering::Relaxed);
    }

    /// Why the group was aborted, if it was (a timeout).
    pub fn aborted(&self) -> Option<String> {
        self.inner
            .aborted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Aborts the group (a sub-step of a collective timed out).
    pub(crate) fn abort_with(&self, why: String) {
        abort(&self.inner, why)
    }

    fn alive(&self, what: &str) -> Result<()> {
        match self.aborted() {
            None => Ok(()),
            Some(why) => Err(OpalError::msg(format!(
                "{what}: the process group was aborted by an earlier error: {why}"
            ))),
        }
    }

    fn check_root(&self, root: usize, what: &str, arg: &str) -> Result<()> {
        if root >= self.size() {
            return Err(OpalError::msg(format!(
                "{what}: {arg}={root} is not a rank of this group (size {})",
                self.size()
            )));
        }
        Ok(())
    }

    /// Exchanges headers with `peers` (all ranks when `None`) and checks they
    /// agree; returns the collective's deadline. A timeout aborts the group.
    fn agree(&self, h: Header, peers: Option<&[usize]>, tag: i32, what: &str) -> Result<Instant> {
        self.alive(what)?;
        let deadline = Instant::now() + self.timeout();
        let all = self
            .inner
            .engine
            .exchange(&h, peers, tag, deadline, what)
            .inspect_err(|e| abort(&self.inner, e.to_string()))?;
        let ranks: Vec<usize> = all.iter().map(|(r, _)| self.inner.ranks[*r]).collect();
        let headers: Vec<Header> = all.iter().map(|(_, h)| *h).collect();
        check_headers(what, &ranks, &headers)?;
        Ok(deadline)
    }

    /// Agrees on a collective of this group (all ranks).
    pub(crate) fn begin(
        &self,
        kind: Kind,
        dtype: DType,
        op: i64,
        root: i64,
        shape: &[i64],
    ) -> Result<Instant> {
        let seq = self.inner.seq.fetch_add(1, Ordering::Relaxed);
        self.agree(
            header(kind, seq, dtype, op, root, shape),
            None,
            0,
            kind.name(),
        )
    }

    pub(crate) fn start(
        &self,
        what: &'static str,
        c: Coll,
        finish: Option<Finish>,
        deadline: Instant,
    ) -> Result<Work> {
        let p = self.inner.engine.start(c)?;
        Ok(Work::new(self, what, p, finish, deadline))
    }

    /// Reduces `t` across the group, in place on every rank.
    pub fn all_reduce(&self, t: &Tensor, op: ReduceOp) -> Result<()> {
        self.all_reduce_async(t, op)?.wait()
    }

    /// [`Self::all_reduce`], returning once started.
    pub fn all_reduce_async(&self, t: &Tensor, op: ReduceOp) -> Result<Work> {
        let what = "all_reduce";
        defined(t, what, "tensor")?;
        let (elem, mop, avg) = reduction(what, t.dtype(), op)?;
        let deadline = self.begin(Kind::AllReduce, t.dtype(), op.code(), -1, t.sizes())?;
        let _ng = NoGradGuard::new();
        if t.device().device_type() != DeviceType::Cpu {
            if let Some(c) = registry::communicator(t.device().device_type()) {
                if let Some(w) = c.all_reduce(self, t, op, deadline) {
                    return w;
                }
            }
        }
        let wire = wire_dtype(t.dtype());
        let buf = if usable_in_place(t, wire) {
            t.clone()
        } else {
            to_host(t, wire)?
        };
        let (size, target, b) = (self.size() as i64, t.clone(), buf.clone());
        let finish: Finish = Box::new(move || {
            if avg {
                ops::div_scalar_(&b, &Scalar::Int(size))?;
            }
            if !b.is_same(&target) {
                write_back(&b, &target)?;
            }
            Ok(())
        });
        let c = Coll::AllReduce {
            buf: Buf::of(&buf)?,
            elem,
            op: mop,
        };
        self.start(what, c, Some(finish), deadline)
    }

    /// Copies rank `src`'s `t` into every rank's `t`.
    pub fn broadcast(&self, t: &Tensor, src: usize) -> Result<()> {
        self.broadcast_async(t, src)?.wait()
    }

    /// [`Self::broadcast`], returning once started.
    pub fn broadcast_async(&self, t: &Tensor, src: usize) -> Result<Work> {
        let what = "broadcast";
        defined(t, what, "tensor")?;
        self.check_root(src, what, "src")?;
        let deadline = self.begin(Kind::Broadcast, t.dtype(), 0, src as i64, t.sizes())?;
        let _ng = NoGradGuard::new();
        let buf = if usable_in_place(t, t.dtype()) {
            t.clone()
        } else {
            to_host(t, t.dtype())?
        };
        let root = src == self.rank();
        let (target, b) = (t.clone(), buf.clone());
        let finish: Finish = Box::new(move || {
            if root || b.is_same(&target) {
                Ok(())
            } else {
                write_back(&b, &target)
            }
        });
        let c = Coll::Broadcast {
            buf: Buf::of(&buf)?,
            root: src,
        };
        self.start(what, c, Some(finish), deadline)
    }

    /// Reduces `t` across the group into rank `dst`'s `t` (the others' `t` are
    /// unchanged).
    pub fn reduce(&self, t: &Tensor, dst: usize, op: ReduceOp) -> Result<()> {
        self.reduce_async(t, dst, op)?.wait()
    }

    /// [`Self::reduce`], returning once started.
    pub fn reduce_async(&self, t: &Tensor, dst: usize, op: ReduceOp) -> Result<Work> {
        let what = "reduce";
        defined(t, what, "tensor")?;
        self.check_root(dst, what, "dst")?;
        let (elem, mop, avg) = reduction(what, t.dtype(), op)?;
        let deadline = self.begin(Kind::Reduce, t.dtype(), op.code(), dst as i64, t.sizes())?;
        let _ng = NoGradGuard::new();
        let wire = wire_dtype(t.dtype());
        let root = dst == self.rank();
        // A non-root's tensor is only read: reduce from a copy so it stays unchanged.
        let buf = if root && usable_in_place(t, wire) {
            t.clone()
        } else if root {
            to_host(t, wire)?
        } else {
            ops::clone(&to_host(t, wire)?)?
        };
        let (size, target, b) = (self.size() as i64, t.clone(), buf.clone());
        let finish: Finish = Box::new(move || {
            if !root {
                return Ok(());
            }
            if avg {
                ops::div_scalar_(&b, &Scalar::Int(size))?;
            }
            if b.is_same(&target) {
                Ok(())
            } else {
                write_back(&b, &target)
            }
        });
        let c = Coll::Reduce {
            buf: Buf::of(&buf)?,
            elem,
            op: mop,
            root: dst,
        };
        self.start(what, c, Some(finish), deadline)
    }

    /// Gathers every rank's `t` into `outs` (one tensor per rank, each of `t`'s
    /// shape and dtype), on every rank.
    pub fn all_gather(&self, outs: &[Tensor], t: &Tensor) -> Result<()> {
        self.all_gather_async(outs, t)?.wait()
    }

    /// [`Self::all_gather`], returning once started.
    pub fn all_gather_async(&self, outs: &[Tensor], t: &Tensor) -> Result<Work> {
        let what = "all_gather";
        defined(t, what, "tensor")?;
        list_like(outs, self.size(), t, what, "tensor_list")?;
        let deadline = self.begin(Kind::AllGather, t.dtype(), 0, -1, t.sizes())?;
        let _ng = NoGradGuard::new();
        let send = to_host(t, t.dtype())?;
        let recv = host_empty(&[self.size() as i64 * t.numel()], t.dtype())?;
        let (outs, r) = (outs.to_vec(), recv.clone());
        let finish: Finish = Box::new(move || write_blocks(&r, &outs));
        let c = Coll::AllGather {
            send: Buf::of(&send)?,
            recv: Buf::of(&recv)?,
        };
        self.start(what, c, Some(finish), deadline)
    }

    /// Gathers every rank's `t` into `out`, whose element count is the group size
    /// times `t`'s (rank i's values fill the i-th block in `out`'s logical order).
    pub fn all_gather_into_tensor(&self, out: &Tensor, t: &Tensor) -> Result<()> {
        self.all_gather_into_tensor_async(out, t)?.wait()
    }

    /// [`Self::all_gather_into_tensor`], returning once started.
    pub fn all_gather_into_tensor_async(&self, out: &Tensor, t: &Tensor) -> Result<Work> {
        let what = "all_gather_into_tensor";
        defined(t, what, "input_tensor")?;
        self.check_blocks(out, t, what, "output_tensor")?;
        let deadline = self.begin(Kind::AllGather, t.dtype(), 1, -1, t.sizes())?;
        let _ng = NoGradGuard::new();
        let send = to_host(t, t.dtype())?;
        let recv = if usable_in_place(out, t.dtype()) {
            out.clone()
        } else {
            host_empty(&[out.numel()], t.dtype())?
        };
        let (target, r) = (out.clone(), recv.clone());
        let finish: Finish = Box::new(move || {
            if r.is_same(&target) {
                Ok(())
            } else {
                write_back(&r, &target)
            }
        });
        let c = Coll::AllGather {
            send: Buf::of(&send)?,
            recv: Buf::of(&recv)?,
        };
        self.start(what, c, Some(finish), deadline)
    }

    /// `big` has `small`'s dtype and the group size times its elements.
    fn check_blocks(&self, big: &Tensor, small: &Tensor, what: &str, arg: &str) -> Result<()> {
        defined(big, what, arg)?;
        let want = small.numel() * self.size() as i64;
        if big.numel() != want || big.dtype() != small.dtype() {
            return Err(OpalError::msg(format!(
                "{what}: {arg} is {:?} {:?} ({} elements), expected {want} elements of {:?} (group size {} x {:?})",
                big.sizes(),
                big.dtype(),
                big.numel(),
                small.dtype(),
                self.size(),
                small.sizes()
            )));
        }
        Ok(())
    }

    /// Reduces `inputs[i]` of every rank into rank i's `out` (`inputs`: one tensor
    /// per rank, each of `out`'s shape and dtype).
    pub fn reduce_scatter(&self, out: &Tensor, inputs: &[Tensor], op: ReduceOp) -> Result<()> {
        self.reduce_scatter_async(out, inputs, op)?.wait()
    }

    /// [`Self::reduce_scatter`], returning once started.
    pub fn reduce_scatter_async(
        &self,
        out: &Tensor,
        inputs: &[Tensor],
        op: ReduceOp,
    ) -> Result<Work> {
        let what = "reduce_scatter";
        defined(out, what, "output")?;
        list_like(inputs, self.size(), out, what, "input_list")?;
        let (elem, mop, avg) = reduction(what, out.dtype(), op)?;
        let deadline = self.begin(Kind::ReduceScatter, out.dtype(), op.code(), -1, out.sizes())?;
        let _ng = NoGradGuard::new();
        let wire = wire_dtype(out.dtype());
        let send = host_cat(inputs, wire)?;
        self.reduce_scatter_from(what, send, out, wire, (elem, mop, avg), deadline)
    }

    /// Reduces block i (in logical order) of every rank's `input` into rank i's
    /// `out`; `input` has the group size times `out`'s elements.
    pub fn reduce_scatter_tensor(&self, out: &Tensor, input: &Tensor, op: ReduceOp) -> Result<()> {
        self.reduce_scatter_tensor_async(out, input, op)?.wait()
    }

    /// [`Self::reduce_scatter_tensor`], returning once started.
    pub fn reduce_scatter_tensor_async(
        &self,
        out: &Tensor,
        input: &Tensor,
        op: ReduceOp,
    ) -> Result<Work> {
        let what = "reduce_scatter_tensor";
        defined(out, what, "output")?;
        self.check_blocks(input, out, what, "input")?;
        let (elem, mop, avg) = reduction(what, out.dtype(), op)?;
        let deadline = self.begin(Kind::ReduceScatter, out.dtype(), op.code(), 1, out.sizes())?;
        let _ng = NoGradGuard::new();
        let wire = wire_dtype(out.dtype());
        let send = to_host(input, wire)?;
        self.reduce_scatter_from(what, send, out, wire, (elem, mop, avg), deadline)
    }

    fn reduce_scatter_from(
        &self,
        what: &'static str,
        send: Tensor,
        out: &Tensor,
        wire: DType,
        (elem, op, avg): (crate::types::Elem, crate::types::Op, bool),
        deadline: Instant,
    ) -> Result<Work> {
        let recv = if usable_in_place(out, wire) {
            out.clone()
        } else {
            host_empty(out.sizes(), wire)?
        };
        let (size, target, r) = (self.size() as i64, out.clone(), recv.clone());
        let finish: Finish = Box::new(move || {
            if avg {
                ops::div_scalar_(&r, &Scalar::Int(size))?;
            }
            if r.is_same(&target) {
                Ok(())
            } else {
                write_back(&r, &target)
            }
        });
        let c = Coll::ReduceScatter {
            send: Buf::of(&send)?,
            recv: Buf::of(&recv)?,
            elem,
            op,
        };
        self.start(what, c, Some(finish), deadline)
    }

    /// Returns once every rank has called it.
    pub fn barrier(&self) -> Result<()> {
        self.barrier_async()?.wait()
    }

    /// [`Self::barrier`], returning once started.
    pub fn barrier_async(&self) -> Result<Work> {
        let deadline = self.begin(Kind::Barrier, DType::Bool, 0, -1, &[])?;
        self.start("barrier", Coll::Barrier, None, deadline)
    }

    fn check_peer(&self, peer: usize, tag: i32, what: &str, arg: &str) -> Result<()> {
        self.check_root(peer, what, arg)?;
        if peer == self.rank() {
            return Err(OpalError::msg(format!("{what}: {arg}={peer} is this rank")));
        }
        if !(0..=MAX_TAG).contains(&tag) {
            return Err(OpalError::msg(format!(
                "{what}: tag={tag} is outside 0..={MAX_TAG}"
            )));
        }
        Ok(())
    }

    /// Agrees with `peer` on a point-to-point transfer: both sides' shape and dtype
    /// must match, or both get the `Err`.
    fn agree_p2p(&self, t: &Tensor, peer: usize, tag: i32, what: &str) -> Result<Instant> {
        let h = header(Kind::Send, 0, t.dtype(), tag as i64, -1, t.sizes());
        self.agree(h, Some(&[peer]), tag + 1, what)
    }

    /// Sends `t` to rank `dst` with `tag`; returns once `dst` has posted the
    /// matching [`Self::recv`] and the data has left.
    pub fn send(&self, t: &Tensor, dst: usize, tag: i32) -> Result<()> {
        self.send_async(t, dst, tag)?.wait()
    }

    /// [`Self::send`], returning once the receiver has agreed (the data may still
    /// be in flight).
    pub fn send_async(&self, t: &Tensor, dst: usize, tag: i32) -> Result<Work> {
        let what = "send";
        defined(t, what, "tensor")?;
        self.check_peer(dst, tag, what, "dst")?;
        let deadline = self.agree_p2p(t, dst, tag, what)?;
        let _ng = NoGradGuard::new();
        let buf = to_host(t, t.dtype())?;
        let c = Coll::Send {
            buf: Buf::of(&buf)?,
            peer: dst,
            tag,
        };
        self.start(what, c, None, deadline)
    }

    /// Receives into `t` what rank `src` sends with `tag` (same shape and dtype).
    pub fn recv(&self, t: &Tensor, src: usize, tag: i32) -> Result<()> {
        self.recv_async(t, src, tag)?.wait()
    }

    /// [`Self::recv`], returning once the sender has agreed.
    pub fn recv_async(&self, t: &Tensor, src: usize, tag: i32) -> Result<Work> {
        let what = "recv";
        defined(t, what, "tensor")?;
        self.check_peer(src, tag, what, "src")?;
        let deadline = self.agree_p2p(t, src, tag, what)?;
        let _ng = NoGradGuard::new();
        let buf = if usable_in_place(t, t.dtype()) {
            t.clone()
        } else {
            host_empty(t.sizes(), t.dtype())?
        };
        let (target, b) = (t.clone(), buf.clone());
        let finish: Finish = Box::new(move || {
            if b.is_same(&target) {
                Ok(())
            } else {
                write_back(&b, &target)
            }
        });
        let c = Coll::Recv {
            buf: Buf::of(&buf)?,
            peer: src,
            tag,
        };
        self.start(what, c, Some(finish), deadline)
    }

    /// A group of `ranks` (ranks of this group, distinct): `Some` on its members,
    /// `None` on the others. Every rank of this group must call it with the same
    /// list (else an `Err` on every rank).
    pub fn new_group(&self, ranks: &[usize]) -> Result<Option<ProcessGroup>> {
        let what = "new_group";
        let mut sorted = ranks.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != ranks.len() || sorted.is_empty() {
            return Err(OpalError::msg(format!(
                "{what}: ranks={ranks:?} must be distinct and not empty"
            )));
        }
        if let Some(&bad) = sorted.iter().find(|&&r| r >= self.size()) {
            return Err(OpalError::msg(format!(
                "{what}: rank {bad} is not in this group (size {})",
                self.size()
            )));
        }
        let as_i64: Vec<i64> = sorted.iter().map(|&r| r as i64).collect();
        let deadline = self.begin(Kind::NewGroup, DType::I64, 0, -1, &as_i64)?;
        let Some(engine) = self.inner.engine.split(&sorted, deadline)? else {
            return Ok(None);
        };
        let world: Vec<usize> = sorted.iter().map(|&r| self.inner.ranks[r]).collect();
        let g = ProcessGroup::from_engine(engine, world);
        g.set_timeout(self.timeout());
        Ok(Some(g))
    }
}

/// The error of a collective that could not finish in time, for communicators.
pub fn timeout_error(what: &str) -> OpalError {
    timed_out(what)
}
