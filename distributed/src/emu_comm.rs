//! The `emu` device's communicator: `all_reduce` queued on the tensor's current
//! stream, where it runs on emu's worker between the kernels queued before and
//! after it, with no host synchronization (the other collectives on emu tensors
//! are staged). The reduction itself goes through the group's engine on a
//! communicator of its own per group (a duplicate made at the group's first emu
//! all_reduce), since the worker issues it in stream order, not program order.
//!
//! Owns: emu's communicator. Must not: touch emu memory except through
//! `opal_emu::device::update_in_stream`.

use crate::engine::{wait_until, Buf, Coll, Engine, Pending};
use crate::group::{ProcessGroup, Work};
use crate::registry::{register_communicator, Communicator};
use crate::types::{reduction, wire_dtype, ReduceOp};
use opal::autograd::NoGradGuard;
use opal::{ops, DeviceType, Result, Scalar, Stream, Tensor};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[derive(Default)]
pub struct EmuCommunicator {
    engines: Mutex<HashMap<u64, Arc<dyn Engine>>>,
}

/// Registers [`EmuCommunicator`] for `emu` (PrivateUse1). Idempotent in effect.
pub fn register() -> Result<()> {
    register_communicator(
        DeviceType::PrivateUse1,
        Arc::new(EmuCommunicator::default()),
    )?;
    Ok(())
}

/// Completes when everything queued on the stream so far has run; reports a
/// queued job's error.
struct StreamDone(Stream);

impl Pending for StreamDone {
    fn test(&mut self) -> Result<bool> {
        self.0.query()
    }
}

impl EmuCommunicator {
    fn engine(&self, group: &ProcessGroup) -> Result<Arc<dyn Engine>> {
        let mut m = self.engines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = m.get(&group.id()) {
            return Ok(e.clone());
        }
        let e = group.engine().dup()?;
        m.insert(group.id(), e.clone());
        Ok(e)
    }

    fn queue_all_reduce(
        &self,
        group: &ProcessGroup,
        t: &Tensor,
        op: ReduceOp,
        deadline: Instant,
    ) -> Result<Work> {
        let engine = self.engine(group)?;
        let (elem, mop, avg) = reduction("all_reduce", t.dtype(), op)?;
        let (dtype, sizes, size) = (t.dtype(), t.sizes().to_vec(), group.size() as i64);
        let wire = wire_dtype(dtype);
        opal_emu::device::update_in_stream(t, move |bytes| {
            let _ng = NoGradGuard::new();
            let host = Tensor::from_bytes(bytes, &sizes, dtype)?.to_dtype(wire)?;
            let p = engine.start(Coll::AllReduce {
                buf: Buf::of(&host)?,
                elem,
                op: mop,
            })?;
            wait_until(p, deadline, "all_reduce (emu stream)")?;
            if avg {
                ops::div_scalar_(&host, &Scalar::Int(size))?;
            }
            bytes.copy_from_slice(&host.to_dtype(dtype)?.to_bytes()?);
            Ok(())
        })?;
        let stream = opal::device::current_stream(t.device())?;
        Ok(Work::new(
            group,
            "all_reduce",
            Box::new(StreamDone(stream)),
            None,
            deadline,
        ))
    }
}

impl Communicator for EmuCommunicator {
    fn name(&self) -> &'static str {
        "emu stream communicator"
    }

    fn all_reduce(
        &self,
        group: &ProcessGroup,
        t: &Tensor,
        op: ReduceOp,
        deadline: Instant,
    ) -> Option<Result<Work>> {
        Some(self.queue_all_reduce(group, t, op, deadline))
    }
}
