//! The `emu` device's communicator: `all_reduce` queued on the tensor's current
//! stream, where it runs on emu's worker between the kernels queued before and
//! after it, with no host synchronization (the other collectives on emu tensors
//! are staged). The reduction itself goes through the group's engine on a
//! communicator of its own per group (a duplicate made at the group's first emu
//! all_reduce), since the worker issues it in stream order, not program order.
//!
//! Owns: emu's communicator. Must not: touch emu memory except through
//! `opal_emu::device::update_in_stream`.

use crate::group::{ProcessGroup, Work};
use crate::plugin_comm::{all_reduce_bytes, GroupEngines, StreamDone};
use crate::registry::{register_communicator, Communicator};
use crate::types::{reduction, ReduceOp};
use opal::{DeviceType, Result, Tensor};
use std::sync::Arc;
use std::time::Instant;

#[derive(Default)]
pub struct EmuCommunicator {
    engines: GroupEngines,
}

/// Registers [`EmuCommunicator`] for `emu` (PrivateUse1). Idempotent in effect.
pub fn register() -> Result<()> {
    register_communicator(
        DeviceType::PrivateUse1,
        Arc::new(EmuCommunicator::default()),
    )?;
    Ok(())
}

impl EmuCommunicator {
    fn queue_all_reduce(
        &self,
        group: &ProcessGroup,
        t: &Tensor,
        op: ReduceOp,
        deadline: Instant,
    ) -> Result<Work> {
        let engine = self.engines.of(group)?;
        // Refused here, on the caller's thread, rather than in the queued job.
        reduction("all_reduce", t.dtype(), op)?;
        let (dtype, size) = (t.dtype(), group.size());
        opal_emu::device::update_in_stream(t, move |bytes| {
            all_reduce_bytes(
                &engine,
                bytes,
                dtype,
                op,
                size,
                deadline,
                "all_reduce (emu stream)",
            )
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
