//! The communicator of a plugin device: the table a plugin registered through
//! the C ABI (`opal::plugin::communicator`) as a [`Communicator`], which
//! [`crate::registry`] falls back to for a device type without a compiled-in
//! one. The plugin runs `all_reduce` on its own stream; it reaches the other
//! ranks through a host transport on a communicator of its own per group (a
//! duplicate of the group's engine, as emu's: the plugin may issue it in stream
//! order, not program order).
//!
//! Owns: the bridge to plugin communicators and the host reduction of a byte
//! buffer that device communicators share. Must not: call into a plugin except
//! through `opal::plugin`.

use crate::engine::{wait_until, Buf, Coll, Engine, Pending};
use crate::group::{ProcessGroup, Work};
use crate::registry::Communicator;
use crate::types::{reduction, wire_dtype, ReduceOp};
use opal::autograd::NoGradGuard;
use opal::plugin::{CommReduce, HostTransport, PluginCommunicator};
use opal::{ops, DType, DeviceType, Result, Scalar, Stream, Tensor};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// Completes when everything queued on the stream so far has run; reports a
/// queued job's error.
pub(crate) struct StreamDone(pub(crate) Stream);

impl Pending for StreamDone {
    fn test(&mut self) -> Result<bool> {
        self.0.query()
    }
}

/// A device communicator's duplicates of its groups' engines, by group id.
#[derive(Default)]
pub(crate) struct GroupEngines(Mutex<HashMap<u64, Arc<dyn Engine>>>);

impl GroupEngines {
    /// The duplicate of `group`'s engine, made at the first call.
    pub(crate) fn of(&self, group: &ProcessGroup) -> Result<Arc<dyn Engine>> {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = m.get(&group.id()) {
            return Ok(e.clone());
        }
        let e = group.engine().dup()?;
        m.insert(group.id(), e.clone());
        Ok(e)
    }
}

/// Reduces `bytes` (the elements of `dtype`) across the ranks of `engine`
/// (`size` ranks) with `op`, in place, blocking until `deadline`: the host side
/// of every device communicator's all_reduce.
pub(crate) fn all_reduce_bytes(
    engine: &Arc<dyn Engine>,
    bytes: &mut [u8],
    dtype: DType,
    op: ReduceOp,
    size: usize,
    deadline: Instant,
    what: &str,
) -> Result<()> {
    let _ng = NoGradGuard::new();
    let (elem, mop, avg) = reduction(what, dtype, op)?;
    if bytes.is_empty() {
        // The ranks agreed on the shape already; MPI refuses an empty buffer's
        // null pointer.
        return Ok(());
    }
    let n = (bytes.len() / dtype.size()) as i64;
    let host = Tensor::from_bytes(bytes, &[n], dtype)?.to_dtype(wire_dtype(dtype))?;
    let p = engine.start(Coll::AllReduce {
        buf: Buf::of(&host)?,
        elem,
        op: mop,
    })?;
    wait_until(p, deadline, what)?;
    if avg {
        ops::div_scalar_(&host, &Scalar::Int(size as i64))?;
    }
    bytes.copy_from_slice(&host.to_dtype(dtype)?.to_bytes()?);
    Ok(())
}

/// A plugin's communicator as this crate's.
pub struct PluginComm {
    inner: Arc<PluginCommunicator>,
    name: &'static str,
    engines: GroupEngines,
}

/// What a call lends the plugin: the group's duplicate engine until `deadline`.
struct Transport {
    engine: Arc<dyn Engine>,
    rank: usize,
    size: usize,
    deadline: Instant,
}

fn reduce_op(op: CommReduce) -> ReduceOp {
    match op {
        CommReduce::Sum => ReduceOp::Sum,
        CommReduce::Avg => ReduceOp::Avg,
        CommReduce::Product => ReduceOp::Product,
        CommReduce::Min => ReduceOp::Min,
        CommReduce::Max => ReduceOp::Max,
    }
}

fn comm_reduce(op: ReduceOp) -> CommReduce {
    match op {
        ReduceOp::Sum => CommReduce::Sum,
        ReduceOp::Avg => CommReduce::Avg,
        ReduceOp::Product => CommReduce::Product,
        ReduceOp::Min => CommReduce::Min,
        ReduceOp::Max => CommReduce::Max,
    }
}

impl HostTransport for Transport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn all_reduce(&self, bytes: &mut [u8], dtype: DType, op: CommReduce) -> Result<()> {
        all_reduce_bytes(
            &self.engine,
            bytes,
            dtype,
            reduce_op(op),
            self.size,
            self.deadline,
            "all_reduce (plugin communicator)",
        )
    }
}

/// The communicator a plugin registered for `device`, wrapped once per device
/// type (so its engines persist across calls).
pub fn for_device(device: DeviceType) -> Option<Arc<PluginComm>> {
    static WRAPPED: OnceLock<Mutex<HashMap<DeviceType, Arc<PluginComm>>>> = OnceLock::new();
    let inner = opal::plugin::communicator(device)?;
    let mut m = WRAPPED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let c = m.entry(device).or_insert_with(|| {
        let name: &'static str =
            Box::leak(format!("plugin '{}' communicator", inner.plugin()).into_boxed_str());
        Arc::new(PluginComm {
            inner: inner.clone(),
            name,
            engines: GroupEngines::default(),
        })
    });
    Some(c.clone())
}

impl PluginComm {
    /// How many all_reduce calls the plugin has run itself.
    pub fn all_reduce_calls(&self) -> u64 {
        self.inner.all_reduce_calls()
    }
}

impl Communicator for PluginComm {
    fn name(&self) -> &'static str {
        self.name
    }

    fn all_reduce(
        &self,
        group: &ProcessGroup,
        t: &Tensor,
        op: ReduceOp,
        deadline: Instant,
    ) -> Option<Result<Work>> {
        if !self.inner.has_all_reduce() {
            return None;
        }
        let run = || -> Result<Option<Work>> {
            let stream = opal::device::current_stream(t.device())?;
            let transport = Arc::new(Transport {
                engine: self.engines.of(group)?,
                rank: group.rank(),
                size: group.size(),
                deadline,
            });
            if !self
                .inner
                .all_reduce(t, comm_reduce(op), transport, stream.id)?
            {
                return Ok(None);
            }
            Ok(Some(Work::new(
                group,
                "all_reduce",
                Box::new(StreamDone(stream)),
                None,
                deadline,
            )))
        };
        run().transpose()
    }
}
