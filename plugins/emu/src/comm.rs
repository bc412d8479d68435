//! emu's collective communicator (ABI 1.4, appended): `all_reduce` of a
//! contiguous emu tensor runs in the plugin, in the order of the stream it is
//! called on: it waits for the work queued on that stream before (the timeline),
//! copies the elements out of emu memory into a host buffer, reduces the buffer
//! across the ranks through the host's group, and copies the result back, as a
//! real device would stage through pinned memory. A non-contiguous tensor is
//! declined (the host stages it). The other collectives are left to the host.
//!
//! Owns: emu's communicator and its call counter. Must not: reach other ranks
//! except through the host's group.

use crate::timeline;
use opal_plugin_sdk::{Communicator, Error, Group, ReduceOp, Result, Tensor};
use std::sync::atomic::{AtomicU64, Ordering};

/// `all_reduce` calls the plugin ran itself (a test's proof that nothing was
/// staged; `opal_emu_plugin_probe(6, ..)`).
pub static CALLS: AtomicU64 = AtomicU64::new(0);

/// emu's communicator.
pub struct EmuCommunicator;

/// The registered instance.
pub static COMMUNICATOR: EmuCommunicator = EmuCommunicator;

impl Communicator for EmuCommunicator {
    fn all_reduce(&self, t: &Tensor, op: ReduceOp, group: &Group, stream: i64) -> Result<()> {
        if !t.is_contiguous() {
            return Err(Error::declined());
        }
        let index = t.device()?.index.unwrap_or(0);
        timeline::synchronize(index, stream)?;
        let n = usize::try_from(t.numel())
            .ok()
            .and_then(|n| n.checked_mul(t.element_size()))
            .ok_or_else(|| Error::msg(format!("all_reduce: {} elements", t.numel())))?;
        let mut host = vec![0u8; n];
        if n > 0 {
            // SAFETY: a contiguous tensor of this plugin's device with `n` bytes
            // at `data_ptr` (emu memory is this process's memory, which the
            // plugin's own code addresses), held for writing by the host during
            // the call; `host` has `n` bytes and does not overlap it.
            unsafe { std::ptr::copy_nonoverlapping(t.data_ptr(), host.as_mut_ptr(), n) };
        }
        group.all_reduce_host(&mut host, t.dtype()?, op)?;
        if n > 0 {
            // SAFETY: as above, in the other direction.
            unsafe { std::ptr::copy_nonoverlapping(host.as_ptr(), t.data_ptr(), n) };
        }
        CALLS.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
