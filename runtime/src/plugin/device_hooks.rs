//! ABI 1.4 on the host: a plugin's device-runtime table ([`OpalDeviceHooks`]) as
//! the runtime's [`DeviceHooks`], its events as [`DeviceEvent`]s, the default
//! runtime of a 1.4 plugin that registers none (one synchronous device with one
//! stream), and the host functions that tell a plugin its thread's current device
//! and stream.
//!
//! Nothing a plugin returns is trusted blindly: counts, flags, ids, event handles,
//! strings and the tables it points to are checked where they can be, and a
//! failure is an `Err` naming the plugin and the hook.
//!
//! Owns: the table's validation and the bridges. Must not: keep device state of
//! its own (the runtime keeps current devices and streams, the plugin the rest).

use super::host::PluginAllocator;
use super::value::{self, device_from};
use crate::device::DeviceType;
use crate::device_runtime::stream::{DeviceEvent, HostEvent};
use crate::device_runtime::{DeviceHooks, MemoryStats};
use crate::dtype::DType;
use crate::error::{OpalError, Result};
use crate::tensor::Allocator;
use crate::types::Stream;
use opal_plugin_abi::{
    OpalAllocator, OpalDeviceHooks, OpalEvent, OpalMemoryStats, OpalOwnedStr, OpalStatus, OpalStr,
};
use std::panic::catch_unwind;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A validated copy of a plugin's table and what it pointed to.
#[derive(Clone)]
pub struct Hooks {
    plugin: Arc<str>,
    raw: OpalDeviceHooks,
    count: usize,
    available: bool,
    pinned: Option<OpalAllocator>,
    autocast: Vec<DType>,
}

// SAFETY: the ABI requires every hook (and what `user` refers to) to be callable
// from any thread, concurrently (docs/abi.md, "Threads"); the rest is owned data.
unsafe impl Send for Hooks {}
// SAFETY: as above.
unsafe impl Sync for Hooks {}

/// The most autocast dtypes a table may list (there are fewer dtypes than this).
const MAX_AUTOCAST: usize = 64;

/// Hooks that only work together: every event hook with `event_create`,
/// `stream_exists` with `new_stream`.
fn check_pairs(t: &OpalDeviceHooks) -> std::result::Result<(), String> {
    if t.event_create.is_some() {
        let missing: Vec<&str> = [
            ("event_destroy", t.event_destroy.is_none()),
            ("event_record", t.event_record.is_none()),
            ("event_block", t.event_block.is_none()),
            ("event_query", t.event_query.is_none()),
            ("event_synchronize", t.event_synchronize.is_none()),
            ("event_completed_at", t.event_completed_at.is_none()),
        ]
        .into_iter()
        .filter_map(|(n, m)| m.then_some(n))
        .collect();
        if !missing.is_empty() {
            return Err(format!(
                "event_create is set but {} not",
                missing.join(", ")
            ));
        }
    }
    if t.new_stream.is_some() && t.stream_exists.is_none() {
        return Err(
            "new_stream is set but stream_exists is not (its streams could not be used)".into(),
        );
    }
    Ok(())
}

/// The table's pinned-memory allocator, if any: a whole ABI 1.0 allocator table
/// of host-accessible memory.
///
/// # Safety
/// `t.host_allocator` is null or points to a readable allocator table.
unsafe fn host_allocator(
    t: &OpalDeviceHooks,
) -> std::result::Result<Option<OpalAllocator>, String> {
    // SAFETY: null or a readable allocator table (contract).
    match unsafe { t.host_allocator.as_ref() } {
        None => Ok(None),
        Some(a) if a.size < std::mem::size_of::<OpalAllocator>() => Err(format!(
            "host_allocator's table has {} bytes, ABI 1.0 needs {}",
            a.size,
            std::mem::size_of::<OpalAllocator>()
        )),
        Some(a) if a.host_accessible != 1 => {
            Err("host_allocator is not host-accessible (pinned memory is host memory)".into())
        }
        Some(a) => Ok(Some(*a)),
    }
}

/// The dtypes autocast lowers to on the device: the table's list (at most
/// [`MAX_AUTOCAST`] known dtype codes), or f16 and bf16 when it gives none.
///
/// # Safety
/// `t.autocast_dtypes` is null or points to `t.n_autocast_dtypes` readable codes.
unsafe fn autocast_dtypes(t: &OpalDeviceHooks) -> std::result::Result<Vec<DType>, String> {
    if t.autocast_dtypes.is_null() {
        if t.n_autocast_dtypes != 0 {
            return Err(format!(
                "autocast_dtypes is null with n_autocast_dtypes {}",
                t.n_autocast_dtypes
            ));
        }
        return Ok(vec![DType::F16, DType::BF16]);
    }
    if t.n_autocast_dtypes > MAX_AUTOCAST {
        return Err(format!(
            "n_autocast_dtypes is {}, more than the {MAX_AUTOCAST} allowed",
            t.n_autocast_dtypes
        ));
    }
    // SAFETY: a non-null pointer to `n_autocast_dtypes` readable codes
    // (contract), a bounded number.
    let codes = unsafe { std::slice::from_raw_parts(t.autocast_dtypes, t.n_autocast_dtypes) };
    codes
        .iter()
        .map(|&c| value::dtype_from(i64::from(c)).map_err(|e| format!("autocast_dtypes: {e}")))
        .collect()
}

impl Hooks {
    /// Copies and checks the table at `raw` of `plugin`.
    ///
    /// # Safety
    /// `raw` is null or points to a readable table of at least its `size` bytes
    /// (ABI), whose `host_allocator` and `autocast_dtypes` are null or readable as
    /// the ABI describes, during this call.
    pub unsafe fn copy(plugin: &Arc<str>, raw: *const OpalDeviceHooks) -> Result<Hooks> {
        let bad =
            |what: String| OpalError::msg(format!("plugin '{plugin}''s device hooks: {what}"));
        if raw.is_null() {
            return Err(bad("null table".into()));
        }
        // SAFETY: per the contract `size`, the first field, is readable.
        let size = unsafe { std::ptr::addr_of!((*raw).size).read() };
        if size < opal_plugin_abi::DEVICE_HOOKS_SIZE_1_4 {
            return Err(bad(format!(
                "the table has {size} bytes, ABI 1.4 needs {}",
                opal_plugin_abi::DEVICE_HOOKS_SIZE_1_4
            )));
        }
        // SAFETY: the table holds at least this ABI's layout (checked above); a
        // longer one (a later minor version) has it as its prefix.
        let t = unsafe { raw.read() };
        let count = usize::try_from(t.device_count)
            .ok()
            .filter(|&c| c <= i16::MAX as usize)
            .ok_or_else(|| {
                bad(format!(
                    "device_count {} is outside 0..=32767",
                    t.device_count
                ))
            })?;
        let available = match t.available {
            -1 => count > 0,
            0 => false,
            1 => true,
            v => return Err(bad(format!("available is {v}, expected -1, 0 or 1"))),
        };
        check_pairs(&t).map_err(bad)?;
        // SAFETY: the table's pointers are null or readable as the ABI describes
        // (this function's contract).
        let (pinned, autocast) = unsafe { (host_allocator(&t), autocast_dtypes(&t)) };
        let (pinned, autocast) = (pinned.map_err(&bad)?, autocast.map_err(&bad)?);
        Ok(Hooks {
            plugin: plugin.clone(),
            raw: t,
            count,
            available,
            pinned,
            autocast,
        })
    }

    /// The runtime hooks of device type `ty`.
    pub fn into_device_hooks(self, ty: DeviceType) -> Box<dyn DeviceHooks> {
        let pinned = self.pinned.map(|raw| -> &'static dyn Allocator {
            Box::leak(Box::new(PluginAllocator::new(
                self.plugin.to_string(),
                raw,
                true,
            )))
        });
        Box::new(PluginHooks {
            shared: Arc::new(Shared {
                hooks: self,
                origin: Instant::now(),
            }),
            ty,
            pinned,
        })
    }
}

/// The default device runtime of a 1.4 plugin that registers none: one device,
/// synchronous, its default stream only, host events, no memory statistics (the
/// [`DeviceHooks`] defaults).
pub struct DefaultHooks;

impl DeviceHooks for DefaultHooks {
    fn device_count(&self) -> usize {
        1
    }
}

/// What the hooks and their events share.
struct Shared {
    hooks: Hooks,
    /// The instant a plugin's event time 0 stands for: only differences of event
    /// times are used, so any fixed instant gives exact elapsed times.
    origin: Instant,
}

impl Shared {
    /// Reads a plugin's status, naming the plugin and the hook on failure.
    fn check(&self, st: OpalStatus, hook: &str) -> Result<()> {
        // SAFETY: a status the plugin returned, consumed once.
        unsafe { value::check(st, || format!("plugin '{}''s {hook}", self.hooks.plugin)) }
    }

    fn bad(&self, hook: &str, what: impl std::fmt::Display) -> OpalError {
        OpalError::device(format!(
            "plugin '{}''s {hook} returned {what}",
            self.hooks.plugin
        ))
    }

    /// A 0/1 flag the plugin wrote for `hook`.
    fn flag(&self, hook: &str, v: i32) -> Result<bool> {
        match v {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(self.bad(hook, format!("the flag {v} (expected 0 or 1)"))),
        }
    }

    /// Copies and frees a string the plugin made for `hook`.
    fn take_string(&self, hook: &str, s: OpalOwnedStr) -> Result<String> {
        let text = if s.ptr.is_null() {
            if s.len != 0 {
                return Err(self.bad(hook, format!("a null string of {} bytes", s.len)));
            }
            Ok(String::new())
        } else {
            // SAFETY: the plugin made `len` readable bytes at `ptr` (ABI), alive
            // until we free them below.
            let bytes = unsafe { std::slice::from_raw_parts(s.ptr, s.len) };
            std::str::from_utf8(bytes)
                .map(str::to_string)
                .map_err(|_| self.bad(hook, "a string that is not UTF-8"))
        };
        if let (Some(free), false) = (s.free, s.ptr.is_null()) {
            // SAFETY: freed once, by the plugin's own function (ABI).
            unsafe { free(s.ptr, s.len) };
        }
        text
    }
}

struct PluginHooks {
    shared: Arc<Shared>,
    ty: DeviceType,
    pinned: Option<&'static dyn Allocator>,
}

impl PluginHooks {
    fn raw(&self) -> &OpalDeviceHooks {
        &self.shared.hooks.raw
    }
}

/// The index and id of a stream the runtime validated (an index it has).
fn stream_parts(s: Stream) -> (i32, i64) {
    (s.device.index().map_or(0, i32::from), s.id)
}

impl DeviceHooks for PluginHooks {
    fn device_count(&self) -> usize {
        self.shared.hooks.count
    }

    fn is_available(&self) -> bool {
        self.shared.hooks.available
    }

    fn set_current_device(&self, index: i16) -> Result<()> {
        let Some(f) = self.raw().set_device else {
            return Ok(());
        };
        // SAFETY: the plugin's hook, called as the ABI describes with a valid index.
        let st = unsafe { f(self.raw().user, i32::from(index)) };
        self.shared.check(st, "set_device")
    }

    fn memory_stats(&self, index: i16) -> Result<MemoryStats> {
        let Some(f) = self.raw().memory_stats else {
            return Err(OpalError::device(
                "this backend does not report memory statistics",
            ));
        };
        let mut out = OpalMemoryStats::default();
        // SAFETY: the plugin's hook with a valid index and a writable struct.
        let st = unsafe { f(self.raw().user, i32::from(index), &mut out) };
        self.shared.check(st, "memory_stats")?;
        if out.allocated > out.reserved {
            return Err(self.shared.bad(
                "memory_stats",
                format!(
                    "allocated {} above reserved {}",
                    out.allocated, out.reserved
                ),
            ));
        }
        Ok(MemoryStats {
            allocated: out.allocated,
            reserved: out.reserved,
            peak_allocated: out.peak_allocated,
        })
    }

    fn reset_peak_memory_stats(&self, index: i16) -> Result<()> {
        let Some(f) = self.raw().reset_peak_memory_stats else {
            return Err(OpalError::device(
                "this backend does not report memory statistics",
            ));
        };
        // SAFETY: the plugin's hook with a valid index.
        let st = unsafe { f(self.raw().user, i32::from(index)) };
        self.shared.check(st, "reset_peak_memory_stats")
    }

    fn empty_cache(&self, index: i16) -> Result<()> {
        let Some(f) = self.raw().empty_cache else {
            return Ok(());
        };
        // SAFETY: the plugin's hook with a valid index.
        let st = unsafe { f(self.raw().user, i32::from(index)) };
        self.shared.check(st, "empty_cache")
    }

    fn host_allocator(&self) -> Option<&'static dyn Allocator> {
        self.pinned
    }

    fn autocast_dtypes(&self) -> Vec<DType> {
        self.shared.hooks.autocast.clone()
    }

    fn new_stream(&self, index: i16) -> Result<i64> {
        let Some(f) = self.raw().new_stream else {
            return Err(OpalError::device(
                "this device runtime creates no streams (only the default stream, id 0)",
            ));
        };
        let mut id = 0i64;
        // SAFETY: the plugin's hook with a valid index and a writable id.
        let st = unsafe { f(self.raw().user, i32::from(index), &mut id) };
        self.shared.check(st, "new_stream")?;
        if id == 0 {
            return Err(self
                .shared
                .bad("new_stream", "id 0 (the default stream) for a new stream"));
        }
        Ok(id)
    }

    fn stream_exists(&self, stream: Stream) -> bool {
        let Some(f) = self.raw().stream_exists else {
            return stream.id == 0;
        };
        let ((i, id), user) = (stream_parts(stream), self.raw().user);
        // A panic never crosses the boundary (ABI); a hook without a status answers
        // 0 or 1, anything else is taken as "no such stream".
        // SAFETY: the plugin's hook with a valid index.
        catch_unwind(|| unsafe { f(user, i, id) }).is_ok_and(|v| v == 1)
    }

    fn query_stream(&self, stream: Stream) -> Result<bool> {
        let Some(f) = self.raw().query_stream else {
            return Ok(true);
        };
        let (i, id) = stream_parts(stream);
        let mut done = 0;
        // SAFETY: the plugin's hook with a valid stream and a writable flag.
        let st = unsafe { f(self.raw().user, i, id, &mut done) };
        self.shared.check(st, "query_stream")?;
        self.shared.flag("query_stream", done)
    }

    fn synchronize_stream(&self, stream: Stream) -> Result<()> {
        let Some(f) = self.raw().synchronize_stream else {
            return Ok(());
        };
        let (i, id) = stream_parts(stream);
        // SAFETY: the plugin's hook with a valid stream.
        let st = unsafe { f(self.raw().user, i, id) };
        self.shared.check(st, "synchronize_stream")
    }

    fn synchronize_device(&self, index: i16) -> Result<()> {
        let Some(f) = self.raw().synchronize_device else {
            return Ok(());
        };
        // SAFETY: the plugin's hook with a valid index.
        let st = unsafe { f(self.raw().user, i32::from(index)) };
        self.shared.check(st, "synchronize_device")
    }

    fn create_event(&self, index: i16, timing: bool) -> Result<Box<dyn DeviceEvent>> {
        let Some(f) = self.raw().event_create else {
            return Ok(Box::new(HostEvent::default()));
        };
        let mut ev: OpalEvent = std::ptr::null_mut();
        // SAFETY: the plugin's hook with a valid index and a writable handle.
        let st = unsafe {
            f(
                self.raw().user,
                i32::from(index),
                i32::from(timing),
                &mut ev,
            )
        };
        self.shared.check(st, "event_create")?;
        if ev.is_null() {
            return Err(self.shared.bad("event_create", "a null event"));
        }
        Ok(Box::new(PluginEvent {
            shared: self.shared.clone(),
            ev,
            ty: self.ty,
        }))
    }

    fn serialize_backend_meta(&self, key: &str, value: &str) -> Option<String> {
        let Some(f) = self.raw().serialize_backend_meta else {
            return Some(value.to_string());
        };
        let (mut out, mut keep) = (OpalOwnedStr::NONE, 0);
        // SAFETY: the plugin's hook with borrowed strings valid for the call and
        // writable results.
        let st = unsafe {
            f(
                self.raw().user,
                OpalStr::borrow(key),
                OpalStr::borrow(value),
                &mut out,
                &mut keep,
            )
        };
        let sh = &self.shared;
        // The runtime's hook cannot fail: a failing plugin's entry is dropped from
        // the file, with a warning saying why.
        let r = sh
            .check(st, "serialize_backend_meta")
            .and_then(|()| sh.take_string("serialize_backend_meta", out))
            .and_then(|text| Ok(sh.flag("serialize_backend_meta", keep)?.then_some(text)));
        r.unwrap_or_else(|e| {
            crate::warning::warn(
                "opal::plugin",
                &format!("backend metadata '{key}' not saved: {e}"),
            );
            None
        })
    }

    fn deserialize_backend_meta(&self, key: &str, text: &str) -> Result<String> {
        let Some(f) = self.raw().deserialize_backend_meta else {
            return Ok(text.to_string());
        };
        let mut out = OpalOwnedStr::NONE;
        // SAFETY: as in `serialize_backend_meta`.
        let st = unsafe {
            f(
                self.raw().user,
                OpalStr::borrow(key),
                OpalStr::borrow(text),
                &mut out,
            )
        };
        if let Err(e) = self.shared.check(st, "deserialize_backend_meta") {
            // A failing plugin may still have made a string: free it.
            let _ = self.shared.take_string("deserialize_backend_meta", out);
            return Err(e);
        }
        self.shared.take_string("deserialize_backend_meta", out)
    }
}

/// A plugin's event; destroyed by the plugin when dropped.
struct PluginEvent {
    shared: Arc<Shared>,
    ev: OpalEvent,
    ty: DeviceType,
}

// SAFETY: the ABI requires event hooks to be callable from any thread with any
// event of the plugin; the handle is only passed back to them.
unsafe impl Send for PluginEvent {}
// SAFETY: as above.
unsafe impl Sync for PluginEvent {}

/// The event hook `f` (checked present when the table was copied).
macro_rules! event_hook {
    ($self:ident, $f:ident) => {
        $self
            .shared
            .hooks
            .raw
            .$f
            .ok_or_else(|| OpalError::device(concat!("the plugin has no ", stringify!($f))))?
    };
}

impl PluginEvent {
    /// Checks that `stream` is on this event's device type before passing it.
    fn stream(&self, s: Stream) -> Result<(i32, i64)> {
        if s.device.device_type() != self.ty {
            return Err(OpalError::device(format!(
                "an event of '{}' cannot be used with stream {} of '{}'",
                self.ty, s.id, s.device
            )));
        }
        Ok(stream_parts(s))
    }
}

impl DeviceEvent for PluginEvent {
    fn record(&self, stream: Stream) -> Result<()> {
        let f = event_hook!(self, event_record);
        let (i, id) = self.stream(stream)?;
        // SAFETY: the plugin's hook with its own live event and a valid stream.
        let st = unsafe { f(self.shared.hooks.raw.user, self.ev, i, id) };
        self.shared.check(st, "event_record")
    }

    fn block(&self, stream: Stream) -> Result<()> {
        let f = event_hook!(self, event_block);
        let (i, id) = self.stream(stream)?;
        // SAFETY: as in `record`.
        let st = unsafe { f(self.shared.hooks.raw.user, self.ev, i, id) };
        self.shared.check(st, "event_block")
    }

    fn query(&self) -> Result<bool> {
        let f = event_hook!(self, event_query);
        let mut done = 0;
        // SAFETY: the plugin's hook with its own live event and a writable flag.
        let st = unsafe { f(self.shared.hooks.raw.user, self.ev, &mut done) };
        self.shared.check(st, "event_query")?;
        self.shared.flag("event_query", done)
    }

    fn synchronize(&self) -> Result<()> {
        let f = event_hook!(self, event_synchronize);
        // SAFETY: the plugin's hook with its own live event.
        let st = unsafe { f(self.shared.hooks.raw.user, self.ev) };
        self.shared.check(st, "event_synchronize")
    }

    fn completed_at(&self) -> Result<Instant> {
        let f = event_hook!(self, event_completed_at);
        let mut ns = 0u64;
        // SAFETY: the plugin's hook with its own live event and a writable time.
        let st = unsafe { f(self.shared.hooks.raw.user, self.ev, &mut ns) };
        self.shared.check(st, "event_completed_at")?;
        self.shared
            .origin
            .checked_add(Duration::from_nanos(ns))
            .ok_or_else(|| {
                self.shared
                    .bad("event_completed_at", format!("{ns} ns, past any instant"))
            })
    }
}

impl Drop for PluginEvent {
    fn drop(&mut self) {
        if let Some(f) = self.shared.hooks.raw.event_destroy {
            let (user, ev) = (self.shared.hooks.raw.user, self.ev);
            // SAFETY: the plugin's own event, destroyed once (this is its only
            // owner); a panic is the plugin's to catch (ABI), guarded again here.
            let _ = catch_unwind(|| unsafe { f(user, ev) });
        }
    }
}

/// `current_device` of the host table: this thread's current index of a device
/// type, -1 for an unknown code.
pub unsafe extern "C" fn current_device(device_type: i32) -> i32 {
    catch_unwind(|| match device_from(i64::from(device_type), -1) {
        Ok(d) => i32::from(crate::device_runtime::current_device(d.device_type())),
        Err(_) => -1,
    })
    .unwrap_or(-1)
}

/// `current_stream` of the host table: this thread's current stream id of a
/// device, -1 for an unknown code or an invalid index.
pub unsafe extern "C" fn current_stream(device_type: i32, index: i32) -> i64 {
    catch_unwind(|| {
        // A negative index is the thread's current device of the type.
        match device_from(i64::from(device_type), i64::from(index.max(-1))) {
            Ok(d) => crate::device_runtime::stream::current_stream(d).map_or(-1, |s| s.id),
            Err(_) => -1,
        }
    })
    .unwrap_or(-1)
}
