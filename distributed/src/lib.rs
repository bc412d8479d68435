//! `opal-distributed`: collectives across processes for Opal tensors, in the shape
//! of `torch.distributed`.
//!
//! - [`ProcessGroup`]: rank, size, sub-groups ([`ProcessGroup::new_group`]) and
//!   the collectives (`all_reduce`, `broadcast`, `reduce`, `all_gather`,
//!   `all_gather_into_tensor`, `reduce_scatter`, `reduce_scatter_tensor`,
//!   `all_to_all`, `barrier`, `send`/`recv`), each blocking or `_async` with a
//!   [`Work`] handle; every dtype, any strides; ranks that disagree get the same
//!   `Err`, and a rank that does not arrive within the timeout is named.
//! - [`init_process_group`]: the world of an `mpirun -n N` launch (cargo feature
//!   `mpi`); [`ProcessGroup::single_process`] needs no MPI.
//! - [`registry`]: communicators by device type; [`emu_comm`] is `emu`'s,
//!   [`plugin_comm`] wraps the one a plugin device registers through the C ABI.
//! - [`ddp`]: data-parallel training with bucketed gradient averaging during
//!   backward.
//!
//! Owns: everything distributed. Must not: change the runtime beyond its public
//! API (the gradient hooks it needs are `opal::autograd`'s).

mod all_to_all;
pub mod ddp;
pub mod emu_comm;
mod engine;
mod group;
#[cfg(feature = "mpi")]
mod mpi_engine;
pub mod plugin_comm;
pub mod registry;
#[cfg(feature = "mpi")]
mod ring;
mod stage;
mod types;

pub use ddp::{DdpOptions, DistributedDataParallel};
pub use engine::{abandoned, Pending};
pub use group::{timeout_error, ProcessGroup, Work, DEFAULT_TIMEOUT, MAX_TAG};
pub use types::ReduceOp;

use opal::Result;
use std::sync::OnceLock;

static WORLD: OnceLock<ProcessGroup> = OnceLock::new();

/// True when this build has the MPI engine (cargo feature `mpi`).
pub fn is_mpi_available() -> bool {
    cfg!(feature = "mpi")
}

/// The world group of this launch (`mpirun -n N prog`: N ranks; a process
/// started without mpirun is a world of one), made once per process; later calls
/// return the same group. Needs the `mpi` feature.
pub fn init_process_group() -> Result<ProcessGroup> {
    if let Some(w) = WORLD.get() {
        return Ok(w.clone());
    }
    let g = world_group()?;
    Ok(WORLD.get_or_init(|| g).clone())
}

#[cfg(feature = "mpi")]
fn world_group() -> Result<ProcessGroup> {
    let engine = mpi_engine::init()?;
    let ranks = (0..engine.size()).collect();
    Ok(ProcessGroup::from_engine(engine, ranks))
}

#[cfg(not(feature = "mpi"))]
fn world_group() -> Result<ProcessGroup> {
    Err(opal::OpalError::msg(
        "init_process_group: opal-distributed was built without its `mpi` feature (build with `--features mpi`; ProcessGroup::single_process needs no MPI)",
    ))
}

/// The group [`init_process_group`] made, if it has run.
pub fn world() -> Option<ProcessGroup> {
    WORLD.get().cloned()
}

/// The MPI library's version string (empty without the `mpi` feature).
pub fn mpi_library_version() -> String {
    #[cfg(feature = "mpi")]
    {
        mpi_engine::version()
    }
    #[cfg(not(feature = "mpi"))]
    {
        String::new()
    }
}
