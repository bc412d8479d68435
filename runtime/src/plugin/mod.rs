//! Backend plugins: devices that a program gets without naming them. A plugin is a
//! shared library built against the stable C ABI (`opal-plugin-abi`, specified in
//! `docs/abi.md`; vendors write it with `opal-plugin-sdk`) plus a manifest
//! `<name>.opal-plugin.json` beside it. Plugins never link their own runtime: every
//! tensor they see is a handle into this one.
//!
//! **Where plugins are found**: the directories of `OPAL_PLUGIN_PATH` (separated by
//! `:`), then the per-user directory `$XDG_DATA_HOME/opal/plugins` (or
//! `$HOME/.local/share/opal/plugins`), each manifest in file-name order. In a
//! setuid/setgid process no environment path is used, so nothing is autoloaded.
//!
//! **When**: autoloading runs once per process, the first time a device name is not
//! known ([`crate::Device::parse`] of `"emu"` with no `emu` registered) or
//! [`plugins`]/[`autoload`] is called. `OPAL_DEVICE_BACKEND_AUTOLOAD=0` turns it
//! off; explicit [`load_manifest`] still works. A plugin that fails is reported
//! (a warning naming the plugin, the reason and the off switch, and an entry in
//! [`plugins`]) and the others still load, unless `OPAL_PLUGIN_STRICT=1`, which
//! makes the first failure the error of the call that triggered autoloading.
//!
//! **Order of a load** (no plugin code runs before step 4): 1. the manifest and
//! its directory pass the ownership/permission checks (module `security`); 2. the
//! manifest is parsed and validated: fields, ABI major version, a free dispatch
//! key, and each op's schema against the host's (incompatible ops are disabled,
//! module `adapt`); 3. the library passes the same checks; 4. it is opened and its
//! version symbol read (a data symbol) and compared; 5. its entry registers
//! kernels, a fallback, an allocator and a transfer into a pending registration,
//! which is applied only when the entry succeeds.
//!
//! Owns: discovery, validation, loading and the record of plugins. Must not:
//! change the dispatcher's or the device runtime's behaviour for non-plugin
//! backends.

mod adapt;
mod comm;
mod device_hooks;
#[cfg(unix)]
mod dl;
mod extend;
mod generators;
mod host;
pub mod manifest;
mod results;
mod security;
mod typed;
mod value;

use crate::dispatch::{DispatchKey, Dispatcher};
use crate::error::{OpalError, Result};
use std::cell::Cell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

pub use comm::{communicator, CommReduce, HostTransport, PluginCommunicator};
pub use manifest::{Manifest, ManifestOp, MANIFEST_SUFFIX};

/// The environment variable that turns autoloading off when `0`.
pub const AUTOLOAD_ENV: &str = "OPAL_DEVICE_BACKEND_AUTOLOAD";
/// The environment variable listing plugin directories (`:`-separated).
pub const PATH_ENV: &str = "OPAL_PLUGIN_PATH";
/// The environment variable that makes autoload failures errors when `1`.
pub const STRICT_ENV: &str = "OPAL_PLUGIN_STRICT";

/// The state of one op of a plugin's manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpStatus {
    /// The plugin's kernel serves the op (through an adapter when `adapted`).
    Active {
        /// True when the host's schema has arguments the plugin's lacks.
        adapted: bool,
        /// True when the plugin's typed entry (ABI 1.1) serves typed calls; false
        /// when its boxed kernel serves them.
        typed: bool,
    },
    /// Listed in the manifest but the plugin registered no kernel for it.
    NoKernel,
    /// Incompatible with the host's schema (or unknown to the host): never called.
    Disabled(String),
}

/// What happened to one plugin.
#[derive(Clone, Debug)]
pub struct PluginInfo {
    /// The plugin's name (from its manifest; the file stem when unreadable).
    pub name: String,
    /// The manifest file.
    pub manifest: PathBuf,
    /// The library (when the manifest named one).
    pub library: Option<PathBuf>,
    /// The device name.
    pub device: Option<String>,
    /// The dispatch key.
    pub key: Option<DispatchKey>,
    /// The ABI version the plugin was built against.
    pub abi: Option<(u32, u32)>,
    /// Per op of the manifest.
    pub ops: Vec<(String, OpStatus)>,
    /// `Ok` when loaded, else why not.
    pub result: std::result::Result<(), String>,
}

impl PluginInfo {
    /// True when the plugin loaded.
    pub fn loaded(&self) -> bool {
        self.result.is_ok()
    }
}

static RECORDS: Mutex<Vec<PluginInfo>> = Mutex::new(Vec::new());

fn records() -> std::sync::MutexGuard<'static, Vec<PluginInfo>> {
    RECORDS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The dispatch key of loaded plugin `name` (for the checks of its kernels'
/// results: cold, after a result was not on the plugin's device type).
fn key_of(name: &str) -> Option<DispatchKey> {
    records()
        .iter()
        .rev()
        .find(|p| p.name == name && p.loaded())
        .and_then(|p| p.key)
}

/// Every plugin this process tried to load, in order, with where it came from and
/// what happened. Runs autoloading first (once; see the module docs).
pub fn plugins() -> Vec<PluginInfo> {
    let _ = autoload();
    records().clone()
}

/// The directories autoloading searches, in order (see the module docs); empty in
/// a setuid/setgid process.
pub fn search_path() -> Vec<PathBuf> {
    if security::elevated() {
        return Vec::new();
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os(PATH_ENV)
        .map(|p| {
            std::env::split_paths(&p)
                .filter(|d| !d.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")));
    if let Some(d) = data {
        dirs.push(d.join("opal").join("plugins"));
    }
    dirs
}

fn off_switch() -> String {
    format!("set {AUTOLOAD_ENV}=0 to turn plugin autoloading off")
}

static AUTOLOADED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
static AUTOLOAD_LOCK: Mutex<()> = Mutex::new(());
thread_local! {
    static IN_AUTOLOAD: Cell<bool> = const { Cell::new(false) };
    /// Set while this thread loads a plugin: a nested load (a plugin's entry
    /// naming an unknown device, say) would wait for the load lock it holds.
    static IN_LOAD: Cell<bool> = const { Cell::new(false) };
}

/// Loads the plugins of [`search_path`] once per process (later calls return the
/// first call's outcome). `Ok` unless strict mode is on and a plugin failed.
pub fn autoload() -> Result<()> {
    if let Some(r) = AUTOLOADED.get() {
        return r.clone().map_err(OpalError::msg);
    }
    if IN_AUTOLOAD.with(Cell::get) {
        // A plugin's entry asked for an unknown device: no recursion.
        return Ok(());
    }
    let _g = AUTOLOAD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = AUTOLOADED.get() {
        return r.clone().map_err(OpalError::msg);
    }
    IN_AUTOLOAD.with(|f| f.set(true));
    let r = run_autoload();
    IN_AUTOLOAD.with(|f| f.set(false));
    AUTOLOADED.get_or_init(|| r).clone().map_err(OpalError::msg)
}

/// The warnings autoloading reported (also sent to [`crate::warning`], which prints
/// them or, with the `tracing` feature, emits events): for programs and tests that
/// want them whatever the build's features.
pub fn autoload_warnings() -> Vec<String> {
    AUTOLOAD_WARNINGS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

static AUTOLOAD_WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn run_autoload() -> std::result::Result<(), String> {
    if std::env::var_os(AUTOLOAD_ENV).is_some_and(|v| v == "0") {
        return Ok(());
    }
    let strict = std::env::var_os(STRICT_ENV).is_some_and(|v| v == "1");
    for dir in search_path() {
        for failure in load_dir_until(&dir, strict) {
            let msg = format!("{failure}; {}", off_switch());
            crate::warning::warn("opal::plugin", &msg);
            AUTOLOAD_WARNINGS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(msg.clone());
            if strict {
                return Err(msg);
            }
        }
    }
    Ok(())
}

/// Loads every plugin of `dir` (its `*.opal-plugin.json`, in file-name order), as
/// autoloading does for each directory of its search path, and returns each
/// failure (a missing directory is none; a directory failing the permission
/// checks is one and loads nothing). Every attempt is recorded in [`plugins`].
pub fn load_dir(dir: &Path) -> Vec<OpalError> {
    load_dir_until(dir, false)
}

/// [`load_dir`], stopping at the first failure when `stop`.
fn load_dir_until(dir: &Path, stop: bool) -> Vec<OpalError> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    if let Err(e) = security::check_path(dir, "plugin directory") {
        return vec![OpalError::msg(format!(
            "skipping plugins in {}: {e}",
            dir.display()
        ))];
    }
    let mut manifests: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(MANIFEST_SUFFIX))
        })
        .collect();
    manifests.sort();
    let mut failures = Vec::new();
    for m in manifests {
        if let Err(e) = load_manifest(&m) {
            failures.push(e);
            if stop {
                break;
            }
        }
    }
    failures
}

/// Called by device-name parsing when `name` is unknown: runs autoloading (once)
/// and says whether it may have registered new names. An `Err` only in strict mode.
pub(crate) fn autoload_for_unknown_device(_name: &str) -> Result<bool> {
    if IN_LOAD.with(Cell::get) {
        return Ok(false);
    }
    let first = AUTOLOADED.get().is_none() && !IN_AUTOLOAD.with(Cell::get);
    autoload()?;
    Ok(first)
}

/// Loads one plugin from its manifest (see the module docs for the steps) and
/// records the outcome in [`plugins`]. The error names the plugin and the reason.
pub fn load_manifest(path: &Path) -> Result<PluginInfo> {
    let stem = path
        .file_name()
        .and_then(|n| n.to_str())
        .map_or("?", |n| n.trim_end_matches(MANIFEST_SUFFIX))
        .to_string();
    let mut info = PluginInfo {
        name: stem,
        manifest: path.to_path_buf(),
        library: None,
        device: None,
        key: None,
        abi: None,
        ops: Vec::new(),
        result: Ok(()),
    };
    let r = load_into(path, &mut info);
    if let Err(e) = &r {
        info.result = Err(e.to_string());
    }
    records().push(info.clone());
    match r {
        Ok(()) => Ok(info),
        Err(e) => Err(OpalError::msg(format!(
            "opal plugin '{}' ({}) failed to load: {e}",
            info.name,
            path.display()
        ))),
    }
}

/// True when `name` is a built-in device name or another PrivateUse slot's.
fn name_taken(name: &str) -> bool {
    let builtin = crate::device::DeviceType::ALL
        .into_iter()
        .filter(|d| d.backend_key() != DispatchKey::PrivateUse1)
        .filter(|d| d.backend_key() != DispatchKey::PrivateUse2)
        .filter(|d| d.backend_key() != DispatchKey::PrivateUse3)
        .any(|d| d.name() == name);
    builtin
        || [
            DispatchKey::PrivateUse1,
            DispatchKey::PrivateUse2,
            DispatchKey::PrivateUse3,
        ]
        .into_iter()
        .any(|k| crate::device::privateuse_backend_name(k) == Some(name))
}

static LOAD_LOCK: Mutex<()> = Mutex::new(());

fn load_into(path: &Path, info: &mut PluginInfo) -> Result<()> {
    if IN_LOAD.with(Cell::get) {
        return Err(OpalError::msg(
            "a plugin's entry tried to load another plugin while being loaded",
        ));
    }
    let _g = LOAD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    IN_LOAD.with(|f| f.set(true));
    let r = load_locked(path, info);
    IN_LOAD.with(|f| f.set(false));
    r
}

fn load_locked(path: &Path, info: &mut PluginInfo) -> Result<()> {
    // 1. The manifest file and its directory.
    security::check_file_and_dir(path, "plugin manifest")?;
    let len = std::fs::metadata(path)
        .map_err(|e| OpalError::msg(format!("cannot stat {}: {e}", path.display())))?
        .len();
    if len > manifest::MAX_MANIFEST_BYTES {
        return Err(OpalError::msg(format!(
            "the manifest has {len} bytes, more than the {} allowed",
            manifest::MAX_MANIFEST_BYTES
        )));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| OpalError::msg(format!("cannot read {}: {e}", path.display())))?;
    // 2. Its contents.
    let m = manifest::parse(path, &text)?;
    info.name = m.name.clone();
    info.library = Some(m.library.clone());
    info.device = Some(m.device.clone());
    info.key = Some(m.key);
    info.abi = Some(m.abi);
    let host = (opal_plugin_abi::ABI_MAJOR, opal_plugin_abi::ABI_MINOR);
    if m.abi.0 != host.0 {
        return Err(OpalError::msg(format!(
            "the plugin was built for ABI {}.{}, this host has ABI {}.{} (major versions differ)",
            m.abi.0, m.abi.1, host.0, host.1
        )));
    }
    if records().iter().any(|r| r.loaded() && r.name == m.name) {
        return Err(OpalError::msg(format!(
            "a plugin named '{}' is already loaded",
            m.name
        )));
    }
    match crate::device::privateuse_backend_name(m.key) {
        Some(n) => {
            return Err(OpalError::msg(format!(
                "{} is already registered as device '{n}'",
                m.key
            )))
        }
        None if name_taken(&m.device) => {
            return Err(OpalError::msg(format!(
                "device name '{}' is already taken",
                m.device
            )))
        }
        None => {}
    }
    let mut plans = HashMap::new();
    let mut disabled = HashMap::new();
    for op in &m.ops {
        let verdict = match Dispatcher::global().find(&op.name).and_then(|h| h.def()) {
            None => Err(format!("the host has no operator '{}'", op.name)),
            Some(def) => adapt::plan(def, &op.schema),
        };
        match verdict {
            Ok(p) => {
                plans.insert(op.name.clone(), p);
            }
            Err(why) => {
                disabled.insert(op.name.clone(), why);
            }
        }
    }
    for (op, why) in &disabled {
        crate::warning::warn(
            "opal::plugin",
            &format!("plugin '{}': op {op} disabled: {why}", m.name),
        );
    }
    // 3.-5. The library.
    load_library(&m, plans, disabled, info)
}

#[cfg(not(unix))]
fn load_library(
    _m: &Manifest,
    _plans: HashMap<String, adapt::Plan>,
    _disabled: HashMap<String, String>,
    _info: &mut PluginInfo,
) -> Result<()> {
    Err(OpalError::not_implemented(
        "plugin loading",
        "this platform (Unix only)",
    ))
}

#[cfg(unix)]
fn load_library(
    m: &Manifest,
    plans: HashMap<String, adapt::Plan>,
    disabled: HashMap<String, String>,
    info: &mut PluginInfo,
) -> Result<()> {
    use opal_plugin_abi::{OpalAbiVersion, OpalPluginEntry, OpalStr, VERSION_SYMBOL};
    security::check_file_and_dir(&m.library, "plugin library")?;
    let lib = dl::Lib::open(&m.library)?;
    let ver = lib.symbol(VERSION_SYMBOL).ok_or_else(|| {
        OpalError::msg(format!(
            "{} does not export the version symbol '{VERSION_SYMBOL}' (not an Opal plugin?)",
            m.library.display()
        ))
    })?;
    // SAFETY: the symbol is the plugin's `OpalAbiVersion` static (two u32s), which
    // the ABI requires; reading it runs no code.
    let ver = unsafe { std::ptr::read_unaligned(ver.cast::<OpalAbiVersion>()) };
    let host = (opal_plugin_abi::ABI_MAJOR, opal_plugin_abi::ABI_MINOR);
    if ver.major != host.0 {
        return Err(OpalError::msg(format!(
            "the library was built for ABI {}.{}, this host has ABI {}.{} (major versions differ)",
            ver.major, ver.minor, host.0, host.1
        )));
    }
    if (ver.major, ver.minor) != m.abi {
        return Err(OpalError::msg(format!(
            "the manifest says ABI {}.{} but the library says {}.{}",
            m.abi.0, m.abi.1, ver.major, ver.minor
        )));
    }
    let entry = lib.symbol(&m.entry).ok_or_else(|| {
        OpalError::msg(format!(
            "{} has no entry symbol '{}'",
            m.library.display(),
            m.entry
        ))
    })?;
    // SAFETY: the entry symbol is an `OpalPluginEntry` function, as the ABI requires
    // of the symbol a manifest names.
    let entry: OpalPluginEntry =
        unsafe { std::mem::transmute::<*mut libc::c_void, OpalPluginEntry>(entry) };
    let mut reg = host::Registration::new(&m.name, m.key, plans, disabled);
    reg.abi_minor = ver.minor;
    reg.device = m.device.clone();
    let registrar = reg.registrar();
    // SAFETY: the host table is static; the registrar's ctx is `reg`, alive and not
    // otherwise used during the call; the config string outlives the call.
    let st = unsafe { entry(&host::HOST_API, &registrar, OpalStr::borrow(&m.config)) };
    // SAFETY: a status from the plugin, consumed once.
    unsafe { value::check(st, || "its entry".to_string()) }?;
    crate::device::register_privateuse_backend(m.key, &m.device)?;
    let plans = reg.plans.clone();
    let disabled = reg.disabled.clone();
    let active = reg.apply()?;
    let mut ops: Vec<(String, OpStatus)> = m
        .ops
        .iter()
        .map(|o| {
            let st = if let Some(why) = disabled.get(&o.name) {
                OpStatus::Disabled(why.clone())
            } else if let Some((_, typed)) = active.iter().find(|a| a.0 == o.name) {
                OpStatus::Active {
                    adapted: plans.get(&o.name).is_some_and(|p| !p.is_identity()),
                    typed: *typed,
                }
            } else {
                OpStatus::NoKernel
            };
            (o.name.clone(), st)
        })
        .collect();
    ops.sort_by(|a, b| a.0.cmp(&b.0));
    info.ops = ops;
    // The library stays open for the life of the process (its kernels are
    // registered): `Lib` has no `Drop`, nothing ever calls dlclose.
    let _ = lib;
    Ok(())
}
