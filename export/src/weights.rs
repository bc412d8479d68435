//! Parameters, buffers and tensor constants of an archive: the raw files under
//! `data/weights/` and `data/constants/`, described by
//! `<model>_weights_config.json` and `<model>_constants_config.json`.
//!
//! Owns: reading and validating those files into CPU tensors; entries sharing a
//! file (tied weights) are read once and share one storage. Must not: move
//! tensors to devices (see `runner`).

use crate::archive::Archive;
use crate::error::{bail, Error, Result};
use crate::limits::LoadLimits;
use crate::schema::{static_bytes, tensor_meta, TensorMeta};
use opal::{DType, Tensor};
use serde_json::Value;
use std::collections::HashMap;

/// Every stored tensor by its fully qualified name (`transformer.wte.weight`),
/// plus the bytes read.
pub(crate) struct Stored {
    pub tensors: HashMap<String, Tensor>,
    pub bytes: u64,
}

pub(crate) fn load(a: &mut Archive, limits: &LoadLimits) -> Result<Stored> {
    let mut files: HashMap<String, Tensor> = HashMap::new();
    let mut stored = Stored {
        tensors: HashMap::new(),
        bytes: 0,
    };
    for dir in ["weights", "constants"] {
        let cfg_path = format!("data/{dir}/{}_{dir}_config.json", a.model);
        let Some(text) = a.read_opt(&cfg_path, limits.max_json_bytes)? else {
            continue;
        };
        let v: Value = serde_json::from_slice(&text)
            .map_err(|e| Error::new(format!("`{cfg_path}` is invalid JSON: {e}")))?;
        let Some(cfg) = v.get("config").and_then(Value::as_object) else {
            bail!("`{cfg_path}` has no `config` object");
        };
        for (fqn, entry) in cfg {
            let t = load_one(a, limits, dir, entry, &mut files, &mut stored.bytes)
                .map_err(|e| e.context(format!("{dir} entry '{fqn}'")))?;
            stored.tensors.insert(fqn.clone(), t);
        }
    }
    Ok(stored)
}

fn load_one(
    a: &mut Archive,
    limits: &LoadLimits,
    dir: &str,
    entry: &Value,
    files: &mut HashMap<String, Tensor>,
    total: &mut u64,
) -> Result<Tensor> {
    if entry.get("use_pickle").and_then(Value::as_bool) == Some(true) {
        bail!("pickled tensors (use_pickle) are not supported");
    }
    let Some(path_name) = entry.get("path_name").and_then(Value::as_str) else {
        bail!("no `path_name`");
    };
    if path_name.contains('/') || path_name.contains("..") {
        bail!("path_name `{path_name}` leaves data/{dir}/");
    }
    let meta: TensorMeta = tensor_meta(
        entry
            .get("tensor_meta")
            .ok_or_else(|| Error::new("no `tensor_meta`"))?,
    )?;
    let Some((sizes, strides, offset)) = meta.hinted() else {
        bail!("symbolic sizes in a stored tensor");
    };
    let need = static_bytes(&sizes, &strides, offset, meta.dtype)?;
    let rel = format!("data/{dir}/{path_name}");
    let base = match files.get(&rel) {
        Some(b) => {
            if b.dtype() != meta.dtype {
                bail!(
                    "`{rel}` is shared by a {} and a {} tensor",
                    b.dtype(),
                    meta.dtype
                );
            }
            b.clone()
        }
        None => {
            let size = a
                .size(&rel)
                .ok_or_else(|| Error::new(format!("entry `{rel}` is missing")))?;
            check_fits(&rel, need, size)?;
            *total = total.saturating_add(size);
            if *total > limits.max_weight_bytes {
                bail!(
                    "weights and constants take over LoadLimits::max_weight_bytes ({})",
                    limits.max_weight_bytes
                );
            }
            let bytes = a.read(&rel, size)?;
            let b = base_tensor(&bytes, meta.dtype).map_err(|e| e.context(&rel))?;
            files.insert(rel.clone(), b.clone());
            b
        }
    };
    let have = (base.numel() as u64) * meta.dtype.size() as u64;
    check_fits(&rel, need, have)?;
    Ok(base.as_strided(&sizes, &strides, offset)?)
}

fn check_fits(rel: &str, need: u64, have: u64) -> Result<()> {
    if need > have {
        bail!("its sizes, strides and offset reach {need} bytes but `{rel}` has {have}");
    }
    Ok(())
}

/// The whole file as a flat tensor (trailing bytes short of one element ignored).
fn base_tensor(bytes: &[u8], dtype: DType) -> Result<Tensor> {
    let n = bytes.len() / dtype.size();
    Ok(Tensor::from_bytes(
        &bytes[..n * dtype.size()],
        &[n as i64],
        dtype,
    )?)
}
