//! [`ExportedProgram`]: a `.pt2` archive read and checked, its stored tensors on
//! the CPU; [`ExportedProgram::to_device`] makes the [`Runner`] for one device.
//!
//! Owns: the load sequence (archive, program JSON, weights, signature checks) and
//! the user-facing description of inputs. Must not: run nodes (see `runner`) or
//! parse JSON itself (see `schema`).

use crate::archive::Archive;
use crate::error::{bail, Error, Result};
use crate::limits::LoadLimits;
use crate::plan;
use crate::runner::Runner;
use crate::schema::{self, Dim, InputKind, Program};
use crate::weights;
use opal::{DType, Device, Tensor};
use std::collections::HashMap;
use std::path::Path;

/// A loaded `.pt2` archive: the graph and its parameters, buffers and constants
/// (on the CPU). Load once, then [`ExportedProgram::to_device`] once per device and
/// [`Runner::run`] many times.
pub struct ExportedProgram {
    pub(crate) name: String,
    pub(crate) program: Program,
    pub(crate) stored: HashMap<String, Tensor>,
    pub(crate) weight_bytes: u64,
}

/// One user input as the export recorded it.
#[derive(Clone, Debug, PartialEq)]
pub struct InputSpec {
    /// The graph's name for it (`input_ids`).
    pub name: String,
    /// Its dtype.
    pub dtype: DType,
    /// Its sizes; `None` for a dynamic dimension.
    pub sizes: Vec<Option<i64>>,
    /// The sizes it was traced with.
    pub traced: Vec<i64>,
}

/// Registers the CPU and Meta backends (idempotent).
pub(crate) fn init_backends() -> Result<()> {
    opal_cpu::init()?;
    opal_meta::init()?;
    Ok(())
}

impl ExportedProgram {
    /// Loads `path` with the default [`LoadLimits`]; every node must be runnable
    /// (an ATen operator Opal defines, or a supported builtin).
    pub fn load(path: impl AsRef<Path>) -> Result<ExportedProgram> {
        ExportedProgram::load_with(path, &LoadLimits::default())
    }

    /// [`ExportedProgram::load`] with explicit limits.
    pub fn load_with(path: impl AsRef<Path>, limits: &LoadLimits) -> Result<ExportedProgram> {
        ExportedProgram::open_path(path.as_ref(), limits, true)
    }

    /// Reads and checks `path` like [`ExportedProgram::load`], except that nodes
    /// naming operators Opal lacks are accepted: for [`ExportedProgram::inspect`].
    /// [`ExportedProgram::to_device`] refuses such a program.
    pub fn open(path: impl AsRef<Path>, limits: &LoadLimits) -> Result<ExportedProgram> {
        ExportedProgram::open_path(path.as_ref(), limits, false)
    }

    fn open_path(path: &Path, limits: &LoadLimits, strict: bool) -> Result<ExportedProgram> {
        let name = path.display().to_string();
        let read = || -> Result<ExportedProgram> {
            let f =
                std::fs::File::open(path).map_err(|e| Error::new(format!("cannot open: {e}")))?;
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let src = Box::new(std::io::BufReader::new(f));
            ExportedProgram::read(src, len, &name, limits, strict)
        };
        read().map_err(|e| e.context(&name))
    }

    /// [`ExportedProgram::open`] from the bytes of an archive; `name` stands for
    /// the archive in messages.
    pub fn open_bytes(bytes: Vec<u8>, name: &str, limits: &LoadLimits) -> Result<ExportedProgram> {
        let len = bytes.len() as u64;
        ExportedProgram::read(
            Box::new(std::io::Cursor::new(bytes)),
            len,
            name,
            limits,
            false,
        )
        .map_err(|e| e.context(name))
    }

    fn read(
        src: Box<dyn crate::archive::Source>,
        len: u64,
        name: &str,
        limits: &LoadLimits,
        strict: bool,
    ) -> Result<ExportedProgram> {
        init_backends()?;
        let mut a = Archive::open(src, len, limits)?;
        let rel = format!("models/{}.json", a.model);
        let text = a.read(&rel, limits.max_json_bytes).map_err(|e| {
            if e.message().contains("over the limit") {
                e.context("LoadLimits::max_json_bytes")
            } else {
                e
            }
        })?;
        let program = schema::parse(&text, limits.max_nodes)?;
        drop(text);
        // Strict: every node runnable, checked before any weight is read.
        if strict {
            plan::compile(&program, Device::cpu())?;
        }
        let stored = weights::load(&mut a, limits)?;
        let p = ExportedProgram {
            name: name.to_string(),
            program,
            stored: stored.tensors,
            weight_bytes: stored.bytes,
        };
        p.check_signature()?;
        Ok(p)
    }

    /// Every parameter, buffer and constant the signature names is stored, with
    /// the dtype and sizes the graph expects.
    fn check_signature(&self) -> Result<()> {
        for (gname, kind) in &self.program.inputs {
            let fqn = match kind {
                InputKind::Parameter(f) | InputKind::Buffer(f) | InputKind::Constant(f) => f,
                InputKind::User => continue,
            };
            let Some(t) = self.stored.get(fqn) else {
                bail!("input '{gname}' ({kind:?}) is not among the archive's stored tensors");
            };
            if let Some(m) = self.program.tensor_meta.get(gname) {
                let sizes: Option<Vec<i64>> = m.sizes.iter().map(Dim::hint).collect();
                if m.dtype != t.dtype() || sizes.as_deref() != Some(t.sizes()) {
                    bail!(
                        "input '{gname}' is recorded as {} {:?} but '{fqn}' is stored as {} {:?}",
                        m.dtype,
                        sizes.unwrap_or_default(),
                        t.dtype(),
                        t.sizes()
                    );
                }
            }
        }
        Ok(())
    }

    /// `Err` naming the first node Opal cannot run.
    pub fn check(&self) -> Result<()> {
        plan::compile(&self.program, Device::cpu())
            .map(|_| ())
            .map_err(|e| e.context(&self.name))
    }

    /// The archive's path as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The program's schema version (major, minor).
    pub fn schema_version(&self) -> (i64, i64) {
        self.program.schema
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.program.nodes.len()
    }

    /// Bytes of stored tensors read (tied weights once).
    pub fn weight_bytes(&self) -> u64 {
        self.weight_bytes
    }

    /// Number of user outputs.
    pub fn num_outputs(&self) -> usize {
        self.program.outputs.len()
    }

    /// The user inputs, in order.
    pub fn inputs(&self) -> Vec<InputSpec> {
        self.program
            .inputs
            .iter()
            .filter(|(_, k)| *k == InputKind::User)
            .map(|(n, _)| {
                let m = self.program.tensor_meta.get(n);
                InputSpec {
                    name: n.clone(),
                    dtype: m.map_or(DType::F32, |m| m.dtype),
                    sizes: m.map_or_else(Vec::new, |m| {
                        m.sizes
                            .iter()
                            .map(|d| match d {
                                Dim::Int(i) => Some(*i),
                                Dim::Expr { .. } => None,
                            })
                            .collect()
                    }),
                    traced: m.map_or_else(Vec::new, |m| {
                        m.sizes.iter().map(|d| d.hint().unwrap_or(0)).collect()
                    }),
                }
            })
            .collect()
    }

    /// The runner for `device`: the plan compiled for it and every stored tensor
    /// moved there once (tensors sharing a storage still share one there).
    pub fn to_device(&self, device: Device) -> Result<Runner> {
        Runner::new(self, device).map_err(|e| e.context(&self.name))
    }
}

/// Moves stored tensors to `device`, one copy per storage, views re-made on it.
pub(crate) fn move_stored(ts: &[(usize, Tensor)], device: Device) -> Result<Vec<(usize, Tensor)>> {
    if device == Device::cpu() {
        return Ok(ts.to_vec());
    }
    let mut moved: HashMap<*const opal::tensor::StorageBuf, Tensor> = HashMap::new();
    let mut out = Vec::with_capacity(ts.len());
    for (slot, t) in ts {
        let key: *const opal::tensor::StorageBuf = t.storage();
        let base = match moved.get(&key) {
            Some(b) => b.clone(),
            None => {
                let n = (t.storage().nbytes() / t.dtype().size()) as i64;
                let b = move_to(&t.as_strided(&[n], &[1], 0)?, device)?;
                moved.insert(key, b.clone());
                b
            }
        };
        let v = base
            .as_strided(t.sizes(), t.strides(), t.storage_offset())
            .map_err(|e| Error::new(format!("re-viewing a stored tensor on {device}: {e}")))?;
        out.push((*slot, v));
    }
    Ok(out)
}

/// `t` on `device`; to meta, a data-less tensor of the same geometry (there is no
/// copy to meta: it holds no data).
pub(crate) fn move_to(t: &Tensor, device: Device) -> Result<Tensor> {
    if device.is_meta() && !t.device().is_meta() {
        return Ok(Tensor::empty_strided(
            t.sizes(),
            t.strides(),
            t.dtype(),
            device,
        )?);
    }
    Ok(t.to(device)?)
}
