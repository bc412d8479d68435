//! Communicators by device type (PyTorch's `Backend.register_backend`): the CPU
//! uses the group's engine (MPI); a device registers a [`Communicator`] for the
//! collectives it runs itself (a plugin device through the C ABI, picked up
//! here when no compiled-in one is registered); every collective a device's
//! communicator does not take is staged through host memory on the device's
//! current stream.
//!
//! Owns: the registry. Must not: run collectives itself.

use crate::group::{ProcessGroup, Work};
use crate::types::ReduceOp;
use opal::{DeviceType, Result, Tensor};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

/// A device's own collectives. Each method returns `None` for a collective the
/// device leaves to host staging. The group has already checked the arguments
/// and agreed with every rank (so the data phase is what remains), and the
/// collective must finish by `deadline` or fail naming it.
pub trait Communicator: Send + Sync {
    /// A name for messages and [`describe`].
    fn name(&self) -> &'static str;
    /// `all_reduce` of `t` (a tensor of this device), in place.
    fn all_reduce(
        &self,
        group: &ProcessGroup,
        t: &Tensor,
        op: ReduceOp,
        deadline: Instant,
    ) -> Option<Result<Work>>;
}

type Table = HashMap<DeviceType, Arc<dyn Communicator>>;

fn table() -> &'static RwLock<Table> {
    static T: OnceLock<RwLock<Table>> = OnceLock::new();
    T.get_or_init(Default::default)
}

/// Makes `c` the communicator of `device` (replacing and returning the previous
/// one). The CPU's is the group's engine and cannot be replaced.
pub fn register_communicator(
    device: DeviceType,
    c: Arc<dyn Communicator>,
) -> Result<Option<Arc<dyn Communicator>>> {
    if device == DeviceType::Cpu {
        return Err(opal::OpalError::msg(
            "register_communicator: the CPU's collectives are the process group's engine (MPI)",
        ));
    }
    Ok(table()
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .insert(device, c))
}

/// The communicator registered for `device`, if any; else the one a plugin
/// device registered through the C ABI ([`crate::plugin_comm`]).
pub fn communicator(device: DeviceType) -> Option<Arc<dyn Communicator>> {
    let registered = table()
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .get(&device)
        .cloned();
    registered
        .or_else(|| crate::plugin_comm::for_device(device).map(|c| c as Arc<dyn Communicator>))
}

/// How collectives on `device` run, in words.
pub fn describe(group: &ProcessGroup, device: DeviceType) -> String {
    if device == DeviceType::Cpu {
        return group.backend().to_string();
    }
    match communicator(device) {
        Some(c) => format!(
            "{} (all_reduce), host staging through {} for the rest",
            c.name(),
            group.backend()
        ),
        None => format!("host staging through {}", group.backend()),
    }
}
