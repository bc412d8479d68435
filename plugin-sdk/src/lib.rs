//! `opal-plugin-sdk`: write an Opal backend plugin, a shared library the Opal
//! runtime loads at run time (see `docs/abi.md` and the README's "Plugins"). A
//! plugin depends on this crate instead of `opal-runtime`: it never links a runtime
//! of its own, and every tensor it sees is a handle owned by the host's runtime.
//!
//! ```ignore
//! use opal_plugin_sdk::{export_plugin, Registrar, Result, Value};
//!
//! fn relu(args: &[Value]) -> Result<Vec<Value>> { /* ... */ }
//!
//! fn init(reg: &mut Registrar, _config: &str) -> Result<()> {
//!     reg.kernel("aten::relu", relu)?;
//!     Ok(())
//! }
//! export_plugin!(init);
//! ```
//!
//! Every function the SDK exports to the host catches panics and reports them as
//! [`abi::code::PANIC`] with the panic's message.
//!
//! Owns: the plugin side of the ABI (safe types, trampolines, the export macro).
//! Must not: depend on `opal-runtime` or keep host objects past their ABI lifetime.

#![warn(missing_docs)]

pub use opal_plugin_abi as abi;

use abi::{code, OpalHostApi, OpalStatus, OpalStr, OpalTensor, OpalTensorInfo, OpalValue};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, Ordering};

pub mod args;
pub mod comm;
pub mod device;
mod generator;
mod registrar;
pub mod strided;
mod tensor;
pub mod typed;
mod value;

pub use comm::{Communicator, Group, OwnedGroup, ReduceOp};
pub use device::{DeviceRuntime, Event, HostEvent, MemoryStats};
pub use generator::Generator;
pub use registrar::{Allocator, HostMemory, KernelFn, Registrar, Transfer};
pub use tensor::{DType, Device, DeviceKind, Tensor};
pub use typed::{OutKernel, TypedKernel};
pub use value::{Scalar, Value};

/// An error crossing the ABI: a [`abi::code`] and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// One of [`abi::code`].
    pub code: i32,
    /// What went wrong.
    pub message: String,
}

impl Error {
    /// A [`abi::code::ERROR`] with `message`.
    pub fn msg(message: impl Into<String>) -> Error {
        Error {
            code: code::ERROR,
            message: message.into(),
        }
    }

    /// Asks the host to run the plugin's fallback instead of this kernel.
    pub fn declined() -> Error {
        Error {
            code: code::DECLINED,
            message: String::new(),
        }
    }

    /// A [`abi::code::NOT_IMPLEMENTED`] naming what.
    pub fn not_implemented(what: &str) -> Error {
        Error {
            code: code::NOT_IMPLEMENTED,
            message: format!("{what} is not implemented"),
        }
    }

    fn into_status(self) -> OpalStatus {
        OpalStatus::error(self.code, &self.message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// The SDK's result type.
pub type Result<T> = std::result::Result<T, Error>;

/// Turns a status the host returned into a `Result`.
///
/// # Safety
/// `s` came from the host under the ABI's rules and is consumed once.
#[inline]
unsafe fn check(s: OpalStatus) -> Result<()> {
    // Kept apart so that the common success stays a two-field test where it is
    // inlined (every host call a kernel makes ends here).
    #[cold]
    #[inline(never)]
    unsafe fn failed(s: OpalStatus) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { s.into_result() }.map_err(|(code, message)| Error { code, message })
    }
    if s.code == code::OK && s.msg_ptr.is_null() {
        return Ok(());
    }
    // SAFETY: forwarded contract.
    unsafe { failed(s) }
}

/// The host's table, set by the entry before anything else runs.
static HOST: AtomicPtr<OpalHostApi> = AtomicPtr::new(std::ptr::null_mut());

/// The host's table (an error before the entry ran).
#[inline]
fn host() -> Result<&'static OpalHostApi> {
    let p = HOST.load(Ordering::Acquire);
    // SAFETY: only `__entry` stores it: the host's static table, alive for the
    // process, whose size was checked there.
    unsafe { p.as_ref() }.ok_or_else(|| Error::msg("the plugin was not initialised by a host"))
}

/// The panic payload as text.
fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

/// Runs `f` at an exported function, turning an `Err` or a panic into a status;
/// `what()` (only called after a panic) names the function.
#[inline]
fn guarded(what: impl FnOnce() -> String, f: impl FnOnce() -> Result<()>) -> OpalStatus {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => OpalStatus::OK,
        Ok(Err(e)) => e.into_status(),
        Err(p) => OpalStatus::error(
            code::PANIC,
            &format!("{} panicked: {}", what(), panic_text(&*p)),
        ),
    }
}

/// Calls operator `name` (`aten::add.Tensor`, arguments in schema order) through
/// the host's dispatcher, e.g. to compute on the CPU.
pub fn call_op(name: &str, args: &[Value]) -> Result<Vec<Value>> {
    let h = host()?;
    let mut m = value::Marshal::default();
    for a in args {
        m.push(a)?;
    }
    let mut rets = [OpalValue::NONE; 8];
    let mut n = 0usize;
    // SAFETY: borrowed arguments valid for the call, room for 8 returns.
    let st = unsafe {
        (h.call_op)(
            OpalStr::borrow(name),
            m.values.as_ptr(),
            m.values.len(),
            rets.as_mut_ptr(),
            rets.len(),
            &mut n,
        )
    };
    // SAFETY: a host status, consumed once.
    unsafe { check(st) }?;
    rets[..n.min(rets.len())]
        .iter()
        // SAFETY: returns of `call_op` are owned by the caller (ABI).
        .map(|r| unsafe { value::from_abi(r, true) })
        .collect()
}

/// The plugin entry behind [`export_plugin!`] (not for direct use).
///
/// # Safety
/// Called by the host as an [`abi::OpalPluginEntry`].
#[doc(hidden)]
pub unsafe fn __entry(
    host_api: *const OpalHostApi,
    reg: *const abi::OpalRegistrar,
    config: OpalStr,
    init: fn(&mut Registrar, &str) -> Result<()>,
) -> OpalStatus {
    guarded(
        || "the plugin's init".to_string(),
        || {
            // SAFETY: the host passes its static table or null.
            let h = unsafe { host_api.as_ref() }.ok_or_else(|| Error::msg("null host table"))?;
            // A 1.0 host's table ends before the 1.1 fields (checked where used).
            if h.abi_major != abi::ABI_MAJOR || h.size < abi::HOST_API_SIZE_1_0 {
                return Err(Error {
                    code: code::ABI_MISMATCH,
                    message: format!(
                        "the host has ABI {}.{} ({} byte table), the plugin needs {}.{}",
                        h.abi_major,
                        h.abi_minor,
                        h.size,
                        abi::ABI_MAJOR,
                        abi::ABI_MINOR
                    ),
                });
            }
            HOST.store(host_api as *mut OpalHostApi, Ordering::Release);
            // SAFETY: the host passes a registrar valid for this call, or null.
            let raw = unsafe { reg.as_ref() }.ok_or_else(|| Error::msg("null registrar"))?;
            // SAFETY: a borrowed string valid for the call.
            let config =
                unsafe { config.as_str() }.ok_or_else(|| Error::msg("config is not UTF-8"))?;
            let mut r = Registrar::new(raw)?;
            init(&mut r, config)
        },
    )
}

/// Exports the plugin's version symbol and entry; `init` is a
/// `fn(&mut Registrar, &str) -> Result<()>` receiving the manifest's `config`.
/// `export_plugin!(init, minor = 0)` declares an older minor version of the ABI
/// (the plugin must then use only what that version has: for 1.0, no typed entries).
#[macro_export]
macro_rules! export_plugin {
    ($init:path) => {
        $crate::export_plugin!($init, minor = $crate::abi::ABI_MINOR);
    };
    ($init:path, minor = $minor:expr) => {
        /// The ABI version this plugin was built against (read by the host).
        #[no_mangle]
        pub static opal_plugin_abi_version: $crate::abi::OpalAbiVersion =
            $crate::abi::OpalAbiVersion {
                major: $crate::abi::ABI_MAJOR,
                minor: $minor,
            };

        /// The plugin's entry (called by the host once).
        ///
        /// # Safety
        /// Called by an Opal host as an `OpalPluginEntry`.
        #[no_mangle]
        pub unsafe extern "C" fn opal_plugin_init(
            host: *const $crate::abi::OpalHostApi,
            reg: *const $crate::abi::OpalRegistrar,
            config: $crate::abi::OpalStr,
        ) -> $crate::abi::OpalStatus {
            // SAFETY: forwarded: the host calls this as the ABI's entry.
            unsafe { $crate::__entry(host, reg, config, $init) }
        }
    };
}

/// Fills `info` for a handle.
fn tensor_info(h: OpalTensor) -> Result<OpalTensorInfo> {
    let api = host()?;
    let mut info = OpalTensorInfo::blank();
    // SAFETY: `h` is a live handle (the callers hold it) and `info` is writable.
    let st = unsafe { (api.tensor_info)(h, &mut info) };
    // SAFETY: a host status, consumed once.
    unsafe { check(st) }?;
    tensor::complete(&mut info);
    Ok(info)
}
