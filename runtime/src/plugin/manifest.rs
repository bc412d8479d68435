//! Plugin manifests: `<name>.opal-plugin.json` files, read and validated before any
//! plugin code is loaded.
//!
//! Owns: the manifest format and its validation. Must not: open libraries or touch
//! the dispatcher.

use crate::dispatch::DispatchKey;
use crate::error::{OpalError, Result};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The file-name suffix of manifests in plugin directories.
pub const MANIFEST_SUFFIX: &str = ".opal-plugin.json";

/// Manifests larger than this are refused unread (1 MiB).
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// One op a plugin was built against: its qualified name and schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestOp {
    /// `aten::add.Tensor`.
    pub name: String,
    /// The schema the plugin's kernel was written against,
    /// `add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor`.
    pub schema: String,
}

/// A validated manifest.
#[derive(Clone, Debug)]
pub struct Manifest {
    /// The manifest file.
    pub path: PathBuf,
    /// The plugin's name (a lowercase identifier).
    pub name: String,
    /// The library, beside the manifest.
    pub library: PathBuf,
    /// The device name it registers (`emu`).
    pub device: String,
    /// Its dispatch key (PrivateUse1..3).
    pub key: DispatchKey,
    /// The ABI version it was built against.
    pub abi: (u32, u32),
    /// The entry symbol.
    pub entry: String,
    /// Free-form text passed to the entry.
    pub config: String,
    /// The op schemas it was built against.
    pub ops: Vec<ManifestOp>,
}

fn is_ident(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn field<'a>(obj: &'a Map<String, Value>, key: &str, path: &Path) -> Result<&'a str> {
    obj.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(path, format!("field \"{key}\" is missing or not a string")))
}

/// Parses `M.m`.
pub fn parse_abi(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.split_once('.')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// A manifest error: the manifest's path and what is wrong.
fn invalid(path: &Path, what: String) -> OpalError {
    OpalError::msg(format!("manifest {}: {what}", path.display()))
}

/// The manifest's `ops`: each a namespaced name and its schema.
fn ops_of(obj: &Map<String, Value>, path: &Path) -> Result<Vec<ManifestOp>> {
    let bad = |what: String| invalid(path, what);
    let ops_v = obj
        .get("ops")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("field \"ops\" is missing or not an array".into()))?;
    let mut ops = Vec::with_capacity(ops_v.len());
    for (i, o) in ops_v.iter().enumerate() {
        let o = o
            .as_object()
            .ok_or_else(|| bad(format!("ops[{i}] is not an object")))?;
        let name = field(o, "name", path)?;
        let schema = field(o, "schema", path)?;
        if !name.contains("::") {
            return Err(bad(format!(
                "ops[{i}]: '{name}' needs a namespace (aten::{name})"
            )));
        }
        ops.push(ManifestOp {
            name: name.to_string(),
            schema: schema.to_string(),
        });
    }
    Ok(ops)
}

/// Parses and validates the text of the manifest at `path`.
pub fn parse(path: &Path, text: &str) -> Result<Manifest> {
    let bad = |what: String| invalid(path, what);
    let v: Value = serde_json::from_str(text).map_err(|e| bad(format!("not valid JSON: {e}")))?;
    let obj = v
        .as_object()
        .ok_or_else(|| bad("the top level is not a JSON object".into()))?;
    const KNOWN: [&str; 8] = [
        "name",
        "library",
        "device",
        "dispatch_key",
        "abi",
        "entry",
        "config",
        "ops",
    ];
    if let Some(k) = obj.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(bad(format!(
            "unknown field \"{k}\" (expected one of {})",
            KNOWN.join(", ")
        )));
    }
    let name = field(obj, "name", path)?;
    if !is_ident(name) {
        return Err(bad(format!(
            "plugin name '{name}' is not a lowercase identifier"
        )));
    }
    let library = field(obj, "library", path)?;
    if library.is_empty() || library.contains('/') || library.contains('\\') || library == ".." {
        return Err(bad(format!(
            "library '{library}' must be a file name in the manifest's directory"
        )));
    }
    let device = field(obj, "device", path)?;
    if !is_ident(device) {
        return Err(bad(format!(
            "device name '{device}' is not a lowercase identifier"
        )));
    }
    let key = match field(obj, "dispatch_key", path)? {
        "PrivateUse1" => DispatchKey::PrivateUse1,
        "PrivateUse2" => DispatchKey::PrivateUse2,
        "PrivateUse3" => DispatchKey::PrivateUse3,
        k => {
            return Err(bad(format!(
                "dispatch_key '{k}' is not PrivateUse1, PrivateUse2 or PrivateUse3"
            )))
        }
    };
    let abi_text = field(obj, "abi", path)?;
    let abi =
        parse_abi(abi_text).ok_or_else(|| bad(format!("abi '{abi_text}' is not MAJOR.MINOR")))?;
    let entry = match obj.get("entry") {
        None => opal_plugin_abi::ENTRY_SYMBOL.to_string(),
        Some(_) => {
            let e = field(obj, "entry", path)?;
            if e.is_empty() || !e.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(bad(format!("entry '{e}' is not a symbol name")));
            }
            e.to_string()
        }
    };
    let config = match obj.get("config") {
        None => String::new(),
        Some(_) => field(obj, "config", path)?.to_string(),
    };
    let ops = ops_of(obj, path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    Ok(Manifest {
        path: path.to_path_buf(),
        name: name.to_string(),
        library: dir.join(library),
        device: device.to_string(),
        key,
        abi,
        entry,
        config,
        ops,
    })
}
