//! Tensors in safetensors files, named as the fixtures name them: `input.0`,
//! `input.1`, ... for inputs and `output.0`, ... for outputs.
//!
//! Owns: the `PREFIX.N` naming. Must not: implement the file format (that is
//! `opal::serialize`'s) or know about programs.

use crate::error::{bail, Error, Result};
use opal::serialize;
use opal::Tensor;
use std::collections::BTreeMap;
use std::path::Path;

/// The tensors `PREFIX.0`, `PREFIX.1`, ... of a safetensors file, in index order
/// (a gap is an error naming the missing index), on the CPU.
pub fn read_indexed(path: impl AsRef<Path>, prefix: &str) -> Result<Vec<Tensor>> {
    let path = path.as_ref();
    let loaded =
        serialize::load_file(path, None).map_err(|e| Error::from(e).context(path.display()))?;
    let mut found = BTreeMap::new();
    for (name, t) in loaded.tensors {
        let index = name
            .strip_prefix(prefix)
            .and_then(|r| r.strip_prefix('.'))
            .and_then(|r| r.parse::<usize>().ok());
        if let Some(i) = index {
            found.insert(i, t);
        }
    }
    let mut out = Vec::with_capacity(found.len());
    for (i, (k, t)) in found.into_iter().enumerate() {
        if k != i {
            bail!("{}: `{prefix}.{i}` is missing", path.display());
        }
        out.push(t);
    }
    Ok(out)
}

/// Writes `tensors` as `PREFIX.0`, `PREFIX.1`, ... (device tensors through a copy
/// to the host; meta tensors have no data and are refused).
pub fn write_indexed(path: impl AsRef<Path>, prefix: &str, tensors: &[Tensor]) -> Result<()> {
    let mut named = Vec::with_capacity(tensors.len());
    for (i, t) in tensors.iter().enumerate() {
        if t.device().is_meta() {
            bail!("{prefix}.{i} is a meta tensor (it has no data to write)");
        }
        named.push((format!("{prefix}.{i}"), t));
    }
    Ok(serialize::save_file(&named, &BTreeMap::new(), path)?)
}
