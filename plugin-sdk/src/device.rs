//! ABI 1.4 on the plugin side: [`DeviceRuntime`], what a plugin implements once for
//! its device type (device count, current device, streams, events, memory
//! statistics, pinned host memory, backend metadata, autocast dtypes), registered
//! with [`crate::Registrar::device_runtime`]; [`Event`]s; and the thread's current
//! device and stream as the host keeps them ([`current_device`],
//! [`current_stream`]).
//!
//! Every default describes a synchronous device with only its default stream, as
//! the host does for a table entry left null.
//!
//! Owns: the trait, its table and trampolines (each catches panics). Must not:
//! keep the current device or stream itself (the host does).

use crate::abi::{self, OpalDeviceHooks, OpalEvent, OpalMemoryStats, OpalOwnedStr, OpalStatus};
use crate::abi::{OpalAllocator, OpalStr};
use crate::registrar::allocator_table;
use crate::{guarded, host, Allocator, DType, DeviceKind, Error, Result};
use std::ffi::c_void;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// Memory counters of one device, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes held by live tensors (rounded to the allocator's block size).
    pub allocated: u64,
    /// Bytes the allocator holds: `allocated` plus cached free blocks.
    pub reserved: u64,
    /// The largest `allocated` since the start or the last peak reset.
    pub peak_allocated: u64,
}

/// A marker in one of the device's streams (see [`DeviceRuntime::create_event`]).
pub trait Event: Send + Sync {
    /// Puts the marker at the current end of stream `stream` of device `index`.
    fn record(&self, index: i32, stream: i64) -> Result<()>;
    /// Makes later work on the stream wait for the latest recording.
    fn block(&self, index: i32, stream: i64) -> Result<()>;
    /// Whether the latest recording has completed (true if never recorded).
    fn query(&self) -> Result<bool>;
    /// Waits on this thread until the latest recording has completed.
    fn synchronize(&self) -> Result<()>;
    /// When the latest recording completed; an error if it has not, or never was.
    fn completed_at(&self) -> Result<Instant>;
}

/// The event of a synchronous device: complete when recorded, at that time.
#[derive(Default)]
pub struct HostEvent {
    at: Mutex<Option<Instant>>,
}

impl Event for HostEvent {
    fn record(&self, _index: i32, _stream: i64) -> Result<()> {
        *self.at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        Ok(())
    }
    fn block(&self, _index: i32, _stream: i64) -> Result<()> {
        Ok(())
    }
    fn query(&self) -> Result<bool> {
        Ok(true)
    }
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
    fn completed_at(&self) -> Result<Instant> {
        self.at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .ok_or_else(|| Error::msg("the event was never recorded"))
    }
}

/// The device runtime of the plugin's device type. Indices passed in are valid
/// (the host checks them against [`DeviceRuntime::device_count`] first); streams
/// are `(device index, id)`, 0 being each device's default stream.
pub trait DeviceRuntime: Send + Sync + 'static {
    /// How many devices exist (asked once, at registration).
    fn device_count(&self) -> usize;
    /// Whether the device type can be used now (asked once; default: it has a
    /// device).
    fn is_available(&self) -> bool {
        self.device_count() > 0
    }
    /// `index` becomes this thread's current device (the host keeps it; see
    /// [`current_device`]). Default: nothing to do.
    fn set_device(&self, index: i32) -> Result<()> {
        let _ = index;
        Ok(())
    }
    /// A new stream of device `index`: its id, not 0. Default: an error (only
    /// the default stream).
    fn new_stream(&self, index: i32) -> Result<i64> {
        let _ = index;
        Err(Error::not_implemented(
            "new_stream (only the default stream, id 0)",
        ))
    }
    /// Whether stream `id` of device `index` exists. Default: only id 0.
    fn stream_exists(&self, index: i32, id: i64) -> bool {
        let _ = index;
        id == 0
    }
    /// Whether all work queued on the stream has run. Default: true.
    fn query_stream(&self, index: i32, id: i64) -> Result<bool> {
        let _ = (index, id);
        Ok(true)
    }
    /// Waits for the stream's work. Default: nothing to wait for.
    fn synchronize_stream(&self, index: i32, id: i64) -> Result<()> {
        let _ = (index, id);
        Ok(())
    }
    /// Waits for every stream of device `index`. Default: nothing to wait for.
    fn synchronize_device(&self, index: i32) -> Result<()> {
        let _ = index;
        Ok(())
    }
    /// A new event of device `index` (`timing`: it will be asked for its
    /// completion time). Default: a [`HostEvent`].
    fn create_event(&self, index: i32, timing: bool) -> Result<Box<dyn Event>> {
        let _ = (index, timing);
        Ok(Box::new(HostEvent::default()))
    }
    /// Memory counters of device `index`. Default: not reported (an error).
    fn memory_stats(&self, index: i32) -> Result<MemoryStats> {
        let _ = index;
        Err(Error::not_implemented("memory statistics"))
    }
    /// Makes device `index`'s peak its current allocation. Default: an error.
    fn reset_peak_memory_stats(&self, index: i32) -> Result<()> {
        let _ = index;
        Err(Error::not_implemented("memory statistics"))
    }
    /// Returns device `index`'s cached free memory. Default: nothing cached.
    fn empty_cache(&self, index: i32) -> Result<()> {
        let _ = index;
        Ok(())
    }
    /// The allocator of pinned host memory (host-accessible). Default: none.
    fn host_allocator(&self) -> Option<&'static dyn Allocator> {
        None
    }
    /// Encodes a backend metadata entry for a file; `None` drops it. Default:
    /// the value as is.
    fn serialize_backend_meta(&self, key: &str, value: &str) -> Result<Option<String>> {
        let _ = key;
        Ok(Some(value.to_string()))
    }
    /// Decodes what [`DeviceRuntime::serialize_backend_meta`] wrote. Default: the
    /// text as is.
    fn deserialize_backend_meta(&self, key: &str, text: &str) -> Result<String> {
        let _ = key;
        Ok(text.to_string())
    }
    /// The dtypes autocast may cast to. Default: float16 and bfloat16.
    fn autocast_dtypes(&self) -> Vec<DType> {
        vec![DType::F16, DType::BF16]
    }
}

/// This thread's current device index of `kind`, as the host keeps it (0 until a
/// `set_device` or a guard); an error on a host older than ABI 1.4.
pub fn current_device(kind: DeviceKind) -> Result<i32> {
    let h = host_1_4("current_device")?;
    let code = crate::Device { kind, index: None }.code();
    // SAFETY: the host's function (its table covers it: `host_1_4`).
    match unsafe { (h.current_device)(code) } {
        -1 => Err(Error::msg(format!(
            "current_device: the host does not know {kind:?}"
        ))),
        i => Ok(i),
    }
}

/// This thread's current stream id of device `index` of `kind` (negative index:
/// the current device), as the host keeps it (0, the default stream, until set);
/// an error on a host older than ABI 1.4 or for a device the host does not know.
pub fn current_stream(kind: DeviceKind, index: i32) -> Result<i64> {
    let h = host_1_4("current_stream")?;
    let code = crate::Device { kind, index: None }.code();
    // SAFETY: the host's function (its table covers it: `host_1_4`).
    match unsafe { (h.current_stream)(code, index) } {
        -1 => Err(Error::msg(format!(
            "current_stream: the host has no stream for {kind:?}:{index}"
        ))),
        id => Ok(id),
    }
}

/// The host's table when it has the 1.4 functions; an error naming both versions
/// otherwise.
pub(crate) fn host_1_4(what: &str) -> Result<&'static abi::OpalHostApi> {
    let h = host()?;
    if !abi::has_field(h.size, std::mem::size_of::<abi::OpalHostApi>()) {
        return Err(Error {
            code: abi::code::ABI_MISMATCH,
            message: format!(
                "{what} needs ABI {}.4, this host has ABI {}.{}",
                abi::ABI_MAJOR,
                h.abi_major,
                h.abi_minor
            ),
        });
    }
    Ok(h)
}

/// The origin of the event times the plugin reports (fixed at the first event).
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// The table for `rt` (leaked with what it points to: the host keeps using it for
/// the process).
pub(crate) fn table(rt: &'static dyn DeviceRuntime) -> OpalDeviceHooks {
    origin();
    let user: &'static &'static dyn DeviceRuntime = Box::leak(Box::new(rt));
    let pinned: *const OpalAllocator = match rt.host_allocator() {
        Some(a) => Box::leak(Box::new(allocator_table(a))),
        None => std::ptr::null(),
    };
    let codes: &'static [i32] = Box::leak(
        rt.autocast_dtypes()
            .iter()
            .map(|d| d.code())
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    OpalDeviceHooks {
        size: std::mem::size_of::<OpalDeviceHooks>(),
        user: user as *const &dyn DeviceRuntime as *mut c_void,
        device_count: i32::try_from(rt.device_count()).unwrap_or(i32::MAX),
        available: i32::from(rt.is_available()),
        set_device: Some(set_device),
        new_stream: Some(new_stream),
        stream_exists: Some(stream_exists),
        query_stream: Some(query_stream),
        synchronize_stream: Some(synchronize_stream),
        synchronize_device: Some(synchronize_device),
        event_create: Some(event_create),
        event_destroy: Some(event_destroy),
        event_record: Some(event_record),
        event_block: Some(event_block),
        event_query: Some(event_query),
        event_synchronize: Some(event_synchronize),
        event_completed_at: Some(event_completed_at),
        memory_stats: Some(memory_stats),
        reset_peak_memory_stats: Some(reset_peak_memory_stats),
        empty_cache: Some(empty_cache),
        host_allocator: pinned,
        serialize_backend_meta: Some(serialize_backend_meta),
        deserialize_backend_meta: Some(deserialize_backend_meta),
        autocast_dtypes: codes.as_ptr(),
        n_autocast_dtypes: codes.len(),
    }
}

/// The runtime behind `user`.
///
/// # Safety
/// `user` is the leaked `&dyn DeviceRuntime` of [`table`].
unsafe fn rt<'a>(user: *mut c_void) -> &'a dyn DeviceRuntime {
    // SAFETY: forwarded contract.
    unsafe { *(user as *const &'static dyn DeviceRuntime) }
}

/// The event behind a handle.
///
/// # Safety
/// `ev` came from [`event_create`] and was not destroyed.
unsafe fn event<'a>(ev: OpalEvent) -> Result<&'a dyn Event> {
    // SAFETY: forwarded contract: a leaked `Box<Box<dyn Event>>`.
    unsafe { (ev as *const Box<dyn Event>).as_ref() }
        .map(|b| &**b)
        .ok_or_else(|| Error::msg("null event"))
}

/// Writes `v` through `out`, refusing a null pointer.
///
/// # Safety
/// `out` is null or writable.
unsafe fn put<T>(out: *mut T, v: T, what: &str) -> Result<()> {
    // SAFETY: forwarded contract.
    let o = unsafe { out.as_mut() }.ok_or_else(|| Error::msg(format!("{what}: null out")))?;
    *o = v;
    Ok(())
}

/// A string the host frees with [`abi::free_message`] (this copy's).
fn owned(s: String) -> OpalOwnedStr {
    let b: Box<[u8]> = s.into_bytes().into_boxed_slice();
    let len = b.len();
    OpalOwnedStr {
        ptr: Box::into_raw(b).cast::<u8>(),
        len,
        free: Some(abi::free_message),
    }
}

macro_rules! hook {
    ($name:literal, $body:expr) => {
        guarded(|| concat!("the plugin's ", $name).to_string(), $body)
    };
}

unsafe extern "C" fn set_device(user: *mut c_void, index: i32) -> OpalStatus {
    // SAFETY: `user` is the table's own (the host passes it back).
    hook!("set_device", || unsafe { rt(user) }.set_device(index))
}

unsafe extern "C" fn new_stream(user: *mut c_void, index: i32, id: *mut i64) -> OpalStatus {
    hook!("new_stream", || {
        // SAFETY: `user` is the table's own; `id` is writable (ABI).
        let s = unsafe { rt(user) }.new_stream(index)?;
        // SAFETY: as above.
        unsafe { put(id, s, "new_stream") }
    })
}

unsafe extern "C" fn stream_exists(user: *mut c_void, index: i32, id: i64) -> i32 {
    // SAFETY: `user` is the table's own.
    std::panic::catch_unwind(|| i32::from(unsafe { rt(user) }.stream_exists(index, id)))
        .unwrap_or(0)
}

unsafe extern "C" fn query_stream(
    user: *mut c_void,
    index: i32,
    id: i64,
    done: *mut i32,
) -> OpalStatus {
    hook!("query_stream", || {
        // SAFETY: `user` is the table's own; `done` is writable (ABI).
        let d = unsafe { rt(user) }.query_stream(index, id)?;
        // SAFETY: as above.
        unsafe { put(done, i32::from(d), "query_stream") }
    })
}

unsafe extern "C" fn synchronize_stream(user: *mut c_void, index: i32, id: i64) -> OpalStatus {
    // SAFETY: `user` is the table's own.
    hook!("synchronize_stream", || unsafe { rt(user) }
        .synchronize_stream(index, id))
}

unsafe extern "C" fn synchronize_device(user: *mut c_void, index: i32) -> OpalStatus {
    // SAFETY: `user` is the table's own.
    hook!("synchronize_device", || unsafe { rt(user) }
        .synchronize_device(index))
}

unsafe extern "C" fn event_create(
    user: *mut c_void,
    index: i32,
    timing: i32,
    out: *mut OpalEvent,
) -> OpalStatus {
    hook!("event_create", || {
        // SAFETY: `user` is the table's own.
        let e = unsafe { rt(user) }.create_event(index, timing != 0)?;
        let p = Box::into_raw(Box::new(e)).cast::<c_void>();
        // SAFETY: `out` is writable (ABI); on failure the event is dropped here.
        unsafe { put(out, p, "event_create") }.inspect_err(|_| {
            // SAFETY: `p` was just leaked above and never handed out.
            drop(unsafe { Box::from_raw(p.cast::<Box<dyn Event>>()) })
        })
    })
}

unsafe extern "C" fn event_destroy(_user: *mut c_void, ev: OpalEvent) {
    if ev.is_null() {
        return;
    }
    // SAFETY: the host destroys each event of `event_create` once (ABI).
    let _ =
        std::panic::catch_unwind(|| drop(unsafe { Box::from_raw(ev.cast::<Box<dyn Event>>()) }));
}

unsafe extern "C" fn event_record(
    _user: *mut c_void,
    ev: OpalEvent,
    index: i32,
    stream: i64,
) -> OpalStatus {
    // SAFETY: a live event of `event_create` (ABI).
    hook!("event_record", || unsafe { event(ev) }?
        .record(index, stream))
}

unsafe extern "C" fn event_block(
    _user: *mut c_void,
    ev: OpalEvent,
    index: i32,
    stream: i64,
) -> OpalStatus {
    // SAFETY: a live event of `event_create` (ABI).
    hook!("event_block", || unsafe { event(ev) }?.block(index, stream))
}

unsafe extern "C" fn event_query(_user: *mut c_void, ev: OpalEvent, done: *mut i32) -> OpalStatus {
    hook!("event_query", || {
        // SAFETY: a live event of `event_create` (ABI).
        let d = unsafe { event(ev) }?.query()?;
        // SAFETY: `done` is writable (ABI).
        unsafe { put(done, i32::from(d), "event_query") }
    })
}

unsafe extern "C" fn event_synchronize(_user: *mut c_void, ev: OpalEvent) -> OpalStatus {
    // SAFETY: a live event of `event_create` (ABI).
    hook!("event_synchronize", || unsafe { event(ev) }?.synchronize())
}

unsafe extern "C" fn event_completed_at(
    _user: *mut c_void,
    ev: OpalEvent,
    ns: *mut u64,
) -> OpalStatus {
    hook!("event_completed_at", || {
        // SAFETY: a live event of `event_create` (ABI).
        let at = unsafe { event(ev) }?.completed_at()?;
        let t = at.saturating_duration_since(origin()).as_nanos();
        // SAFETY: `ns` is writable (ABI).
        unsafe {
            put(
                ns,
                u64::try_from(t).unwrap_or(u64::MAX),
                "event_completed_at",
            )
        }
    })
}

unsafe extern "C" fn memory_stats(
    user: *mut c_void,
    index: i32,
    out: *mut OpalMemoryStats,
) -> OpalStatus {
    hook!("memory_stats", || {
        // SAFETY: `user` is the table's own.
        let s = unsafe { rt(user) }.memory_stats(index)?;
        let v = OpalMemoryStats {
            allocated: s.allocated,
            reserved: s.reserved,
            peak_allocated: s.peak_allocated,
        };
        // SAFETY: `out` is writable (ABI).
        unsafe { put(out, v, "memory_stats") }
    })
}

unsafe extern "C" fn reset_peak_memory_stats(user: *mut c_void, index: i32) -> OpalStatus {
    // SAFETY: `user` is the table's own.
    hook!("reset_peak_memory_stats", || unsafe { rt(user) }
        .reset_peak_memory_stats(index))
}

unsafe extern "C" fn empty_cache(user: *mut c_void, index: i32) -> OpalStatus {
    // SAFETY: `user` is the table's own.
    hook!("empty_cache", || unsafe { rt(user) }.empty_cache(index))
}

/// The two strings of a metadata hook.
///
/// # Safety
/// Both are borrowed strings valid for the call (ABI).
unsafe fn strs<'a>(a: OpalStr, b: OpalStr) -> Result<(&'a str, &'a str)> {
    // SAFETY: forwarded contract.
    let (a, b) = unsafe { (a.as_str(), b.as_str()) };
    Ok((
        a.ok_or_else(|| Error::msg("the key is not UTF-8"))?,
        b.ok_or_else(|| Error::msg("the text is not UTF-8"))?,
    ))
}

unsafe extern "C" fn serialize_backend_meta(
    user: *mut c_void,
    key: OpalStr,
    value: OpalStr,
    out: *mut OpalOwnedStr,
    keep: *mut i32,
) -> OpalStatus {
    hook!("serialize_backend_meta", || {
        // SAFETY: borrowed strings valid for the call (ABI).
        let (k, v) = unsafe { strs(key, value) }?;
        // SAFETY: `user` is the table's own.
        let r = unsafe { rt(user) }.serialize_backend_meta(k, v)?;
        // SAFETY: `keep` and `out` are writable (ABI).
        unsafe { put(keep, i32::from(r.is_some()), "serialize_backend_meta") }?;
        // SAFETY: as above.
        unsafe {
            put(
                out,
                r.map_or(OpalOwnedStr::NONE, owned),
                "serialize_backend_meta",
            )
        }
    })
}

unsafe extern "C" fn deserialize_backend_meta(
    user: *mut c_void,
    key: OpalStr,
    text: OpalStr,
    out: *mut OpalOwnedStr,
) -> OpalStatus {
    hook!("deserialize_backend_meta", || {
        // SAFETY: borrowed strings valid for the call (ABI).
        let (k, t) = unsafe { strs(key, text) }?;
        // SAFETY: `user` is the table's own.
        let r = unsafe { rt(user) }.deserialize_backend_meta(k, t)?;
        // SAFETY: `out` is writable (ABI).
        unsafe { put(out, owned(r), "deserialize_backend_meta") }
    })
}
