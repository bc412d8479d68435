//! Saving and loading tensors in the safetensors format (an 8-byte little-endian
//! header length, a JSON header naming each tensor's dtype, shape and byte range,
//! then the little-endian data), through the `safetensors` crate.
//!
//! Every Opal dtype the format has is supported: bool, u8, i8, i16, i32, i64, f16,
//! bf16, f32, f64. Complex tensors (and, on load, format dtypes Opal lacks such as
//! u16 or f8) are an error naming the dtype. Tensors on any device and of any
//! strides are saved by their logical elements (device tensors through a copy to
//! the host); loading puts them on the CPU or on `map_location`.
//!
//! Backend metadata ([`Tensor::set_backend_meta`]) is stored in the header's
//! `__metadata__` as `opal.backend_meta/<tensor>/<key>` = `<device type>:<text>`,
//! the text written by the device's `DeviceHooks::serialize_backend_meta`; on
//! load, `DeviceHooks::deserialize_backend_meta` reads it back onto tensors that
//! land on a device of that type (elsewhere it is dropped, as it means nothing
//! there). Such keys never appear in [`Loaded::metadata`].
//!
//! Owns: the file format. Must not: know backends (device copies go through
//! [`Tensor::to`]).

#![warn(missing_docs)]

use crate::device::{hooks, Device, DeviceType};
use crate::dtype::DType;
use crate::error::{OpalError, Result};
use crate::tensor::Tensor;
use safetensors::tensor::{Dtype as StDtype, SafeTensors, View};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

/// Tensors read from a file, by name, with the file's free-form metadata.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The tensors, by name.
    pub tensors: BTreeMap<String, Tensor>,
    /// The header's `__metadata__` map (empty when the file has none).
    pub metadata: BTreeMap<String, String>,
}

fn to_format(dtype: DType, name: &str) -> Result<StDtype> {
    Ok(match dtype {
        DType::Bool => StDtype::BOOL,
        DType::U8 => StDtype::U8,
        DType::I8 => StDtype::I8,
        DType::I16 => StDtype::I16,
        DType::I32 => StDtype::I32,
        DType::I64 => StDtype::I64,
        DType::F16 => StDtype::F16,
        DType::BF16 => StDtype::BF16,
        DType::F32 => StDtype::F32,
        DType::F64 => StDtype::F64,
        other => {
            return Err(OpalError::msg(format!(
                "cannot save tensor '{name}': safetensors has no {other} dtype (supported: bool, u8, i8, i16, i32, i64, f16, bf16, f32, f64)"
            )))
        }
    })
}

fn from_format(dtype: StDtype, name: &str) -> Result<DType> {
    Ok(match dtype {
        StDtype::BOOL => DType::Bool,
        StDtype::U8 => DType::U8,
        StDtype::I8 => DType::I8,
        StDtype::I16 => DType::I16,
        StDtype::I32 => DType::I32,
        StDtype::I64 => DType::I64,
        StDtype::F16 => DType::F16,
        StDtype::BF16 => DType::BF16,
        StDtype::F32 => DType::F32,
        StDtype::F64 => DType::F64,
        other => {
            return Err(OpalError::msg(format!(
                "cannot load tensor '{name}': Opal has no dtype for safetensors {other:?} (supported: BOOL, U8, I8, I16, I32, I64, F16, BF16, F32, F64)"
            )))
        }
    })
}

/// Reverses each `size`-byte element in place: native <-> little endian on
/// big-endian hosts (a no-op on little-endian ones).
fn to_little_endian(bytes: &mut [u8], size: usize) {
    if cfg!(target_endian = "big") && size > 1 {
        bytes.chunks_exact_mut(size).for_each(<[u8]>::reverse);
    }
}

/// One tensor ready for the writer: its elements as little-endian bytes.
struct Prepared {
    dtype: StDtype,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

impl View for &Prepared {
    fn dtype(&self) -> StDtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.bytes)
    }
    fn data_len(&self) -> usize {
        self.bytes.len()
    }
}

fn prepare(name: &str, t: &Tensor) -> Result<Prepared> {
    if !t.is_defined() {
        return Err(OpalError::msg(format!(
            "cannot save tensor '{name}': it is undefined"
        )));
    }
    let dtype = to_format(t.dtype(), name)?;
    let host = if t.storage().is_host_accessible() {
        t.clone()
    } else {
        t.to(Device::cpu()).map_err(|e| {
            OpalError::msg(format!(
                "cannot save tensor '{name}' from '{}': copying it to the cpu failed: {e}",
                t.device()
            ))
        })?
    };
    // Logical order, whatever the strides.
    let mut bytes = host.to_bytes()?;
    to_little_endian(&mut bytes, t.element_size());
    Ok(Prepared {
        dtype,
        shape: t.sizes().iter().map(|&s| s as usize).collect(),
        bytes,
    })
}

fn prepare_all<S: AsRef<str>>(tensors: &[(S, &Tensor)]) -> Result<Vec<(String, Prepared)>> {
    let mut seen = HashSet::new();
    tensors
        .iter()
        .map(|(name, t)| {
            let name = name.as_ref();
            if name == "__metadata__" || !seen.insert(name) {
                return Err(OpalError::msg(format!(
                    "cannot save tensor '{name}': the name is reserved or appears twice"
                )));
            }
            Ok((name.to_string(), prepare(name, t)?))
        })
        .collect()
}

/// The `__metadata__` key prefix of backend metadata entries.
const BACKEND_META: &str = "opal.backend_meta/";

/// The file's `__metadata__`: the caller's entries and the tensors' backend
/// metadata, encoded by their devices' hooks.
fn file_metadata<S: AsRef<str>>(
    tensors: &[(S, &Tensor)],
    metadata: &BTreeMap<String, String>,
) -> Result<Option<HashMap<String, String>>> {
    let mut out: HashMap<String, String> = HashMap::new();
    for (k, v) in metadata {
        if k.starts_with(BACKEND_META) {
            return Err(OpalError::msg(format!(
                "metadata key '{k}': keys starting with '{BACKEND_META}' are reserved for backend metadata"
            )));
        }
        out.insert(k.clone(), v.clone());
    }
    for (name, t) in tensors {
        let name = name.as_ref();
        let meta = t.backend_meta();
        if meta.is_empty() {
            continue;
        }
        let ty = t.device().device_type();
        let h = hooks(ty).map_err(|e| {
            OpalError::msg(format!(
                "cannot save the backend metadata of tensor '{name}': {e}"
            ))
        })?;
        for (k, v) in &meta {
            if let Some(text) = h.serialize_backend_meta(k, v) {
                out.insert(format!("{BACKEND_META}{name}/{k}"), format!("{ty}:{text}"));
            }
        }
    }
    Ok((!out.is_empty()).then_some(out))
}

/// Decodes the backend metadata entry `key` = `value` (key without the prefix)
/// onto the loaded tensor it names, if that tensor is on a device of its type.
fn restore_backend_meta(key: &str, value: &str, tensors: &BTreeMap<String, Tensor>) -> Result<()> {
    let bad = |why: &str| OpalError::msg(format!("backend metadata '{BACKEND_META}{key}': {why}"));
    let (name, meta_key) = key.rsplit_once('/').ok_or_else(|| bad("no '/<key>'"))?;
    let (ty, text) = value
        .split_once(':')
        .ok_or_else(|| bad("the value does not start with '<device type>:'"))?;
    let ty = DeviceType::parse(ty).map_err(|e| bad(&e.to_string()))?;
    let t = tensors
        .get(name)
        .ok_or_else(|| bad(&format!("the file has no tensor '{name}'")))?;
    if t.device().device_type() != ty {
        return Ok(());
    }
    let decoded = hooks(ty)
        .and_then(|h| h.deserialize_backend_meta(meta_key, text))
        .map_err(|e| bad(&e.to_string()))?;
    t.set_backend_meta(meta_key, &decoded)
}

fn format_error(what: &str, e: safetensors::SafeTensorError) -> OpalError {
    OpalError::msg(format!("{what}: {e}"))
}

/// The safetensors bytes of `tensors` (name, tensor) with free-form `metadata`.
pub fn save_to_bytes<S: AsRef<str>>(
    tensors: &[(S, &Tensor)],
    metadata: &BTreeMap<String, String>,
) -> Result<Vec<u8>> {
    let prepared = prepare_all(tensors)?;
    let meta = file_metadata(tensors, metadata)?;
    let views = prepared.iter().map(|(n, p)| (n.as_str(), p));
    safetensors::tensor::serialize(views, &meta).map_err(|e| format_error("saving tensors", e))
}

/// Writes `tensors` (name, tensor) and `metadata` to the safetensors file `path`.
pub fn save_file<S: AsRef<str>>(
    tensors: &[(S, &Tensor)],
    metadata: &BTreeMap<String, String>,
    path: impl AsRef<Path>,
) -> Result<()> {
    let path = path.as_ref();
    let prepared = prepare_all(tensors)?;
    let meta = file_metadata(tensors, metadata)?;
    let views = prepared.iter().map(|(n, p)| (n.as_str(), p));
    safetensors::tensor::serialize_to_file(views, &meta, path)
        .map_err(|e| format_error(&format!("writing '{}'", path.display()), e))
}

/// Reads safetensors `bytes`; the tensors go to `map_location` (CPU when `None`).
pub fn load_from_bytes(bytes: &[u8], map_location: Option<Device>) -> Result<Loaded> {
    let target = map_location.unwrap_or_default(); // `Device::default()` is the cpu
    crate::device::check_device(target)?;
    let file = SafeTensors::deserialize(bytes).map_err(|e| format_error("reading tensors", e))?;
    let (_, header) =
        SafeTensors::read_metadata(bytes).map_err(|e| format_error("reading tensors", e))?;
    let mut out = Loaded::default();
    let mut backend = Vec::new();
    for (k, v) in header.metadata().iter().flatten() {
        match k.strip_prefix(BACKEND_META) {
            Some(rest) => backend.push((rest, v)),
            None => {
                out.metadata.insert(k.clone(), v.clone());
            }
        }
    }
    for (name, view) in file.tensors() {
        let dtype = from_format(view.dtype(), &name)?;
        let shape: Vec<i64> = view
            .shape()
            .iter()
            .map(|&s| i64::try_from(s))
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| OpalError::shape(format!("tensor '{name}': shape too large")))?;
        let mut data = view.data().to_vec();
        to_little_endian(&mut data, dtype.size());
        let t = Tensor::from_bytes(&data, &shape, dtype)
            .map_err(|e| OpalError::msg(format!("tensor '{name}': {e}")))?;
        out.tensors.insert(name, t.to(target)?);
    }
    for (key, value) in backend {
        restore_backend_meta(key, value, &out.tensors)?;
    }
    Ok(out)
}

/// Reads the safetensors file `path`; the tensors go to `map_location` (CPU when
/// `None`).
pub fn load_file(path: impl AsRef<Path>, map_location: Option<Device>) -> Result<Loaded> {
    let path = path.as_ref();
    let bytes = std::fs::read(path)
        .map_err(|e| OpalError::msg(format!("reading '{}': {e}", path.display())))?;
    load_from_bytes(&bytes, map_location)
        .map_err(|e| OpalError::msg(format!("'{}': {e}", path.display())))
}
