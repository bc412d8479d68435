//! Runs PyTorch's exported programs on Opal: `.pt2` archives written by
//! `torch.export.save` / `torch.export.pt2_archive` (PyTorch 2.15, schema major
//! 8), decomposed to the core ATen opset, on any Opal device (`cpu`, `meta`,
//! `emu`, a plugin device).
//!
//! Loading reads and checks everything before a node runs: the archive, the
//! program JSON, every weight against the size its sizes/strides/offset need, the
//! graph signature, and (with [`ExportedProgram::load`]) that every node names an
//! ATen operator Opal defines. Each node is resolved once to its dispatcher
//! handle with the constant part of its argument stack built, so a run costs one
//! boxed dispatch per node; each intermediate is freed after its last use.
//!
//! ```no_run
//! use opal_export::{device, io, ExportedProgram};
//!
//! # fn main() -> opal_export::Result<()> {
//! let program = ExportedProgram::load("model.pt2")?;
//! let runner = program.to_device(device("cpu")?)?; // weights move once
//! let inputs = io::read_indexed("inputs.safetensors", "input")?;
//! let outputs = runner.run(&inputs)?; // run as often as needed
//! io::write_indexed("outputs.safetensors", "output", &outputs)?;
//! println!("{}", program.inspect(device("emu")?)); // native / fallback / missing
//! # Ok(()) }
//! ```
//!
//! A self-contained example (a malformed archive is an error naming the problem,
//! never a panic):
//!
//! ```
//! let dir = std::env::temp_dir().join("opal_export_doc");
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("broken.pt2");
//! std::fs::write(&path, b"PK\x03\x04 not really a zip").unwrap();
//! let err = opal_export::ExportedProgram::load(&path).err().unwrap();
//! assert!(err.to_string().contains("broken.pt2"));
//! ```
//!
//! Owns: the `.pt2` reader, the interpreter and the `opal-pt2` command. Must not:
//! define operators or kernels (the dispatcher and the backends do), or change
//! other crates' state beyond registering backends and loading plugins.

#![warn(missing_docs)]

mod archive;
mod channel_scale;
mod conv1x1;
mod depthwise_nhwc;
mod error;
mod fuse;
mod graph;
mod inspect;
pub mod io;
mod layer_norm;
mod limits;
mod patchify;
mod plan;
mod plane_mean;
mod pointwise;
mod profile;
mod program;
mod rms_norm;
mod runner;
mod safe_softmax;
mod scale_residual;
mod schema;
mod shared_rhs_bmm;
#[cfg(test)]
mod test_values;
mod views;
mod weights;

pub use error::{Error, Result};
pub use inspect::{Inspection, OpUse, Support};
pub use limits::{LoadLimits, RunLimits};
pub use profile::{Profile, StepTime};
pub use program::{ExportedProgram, InputSpec};
pub use runner::Runner;
pub use schema::SCHEMA_MAJOR;

/// The device named `name` (`cpu`, `meta`, `emu`, `emu:1`, or a plugin's device),
/// with its backend registered: CPU and Meta always; other names go through
/// `opal::Device::parse`, which autoloads plugins (`OPAL_PLUGIN_PATH`) for a name
/// it does not know; `emu` that no plugin provides is the linked `emu` backend.
pub fn device(name: &str) -> Result<opal::Device> {
    program::init_backends()?;
    match opal::Device::parse(name) {
        Ok(d) => Ok(d),
        Err(_) if name.split(':').next() == Some("emu") => {
            opal_emu::init()?;
            opal::Device::parse(name).map_err(|e| Error::new(format!("device '{name}': {e}")))
        }
        Err(e) => Err(Error::new(format!("device '{name}': {e}"))),
    }
}
