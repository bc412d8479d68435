//! ABI 1.4: the device runtime of a plugin's device type ([`OpalDeviceHooks`],
//! registered with [`super::OpalRegistrar::register_device_hooks`]) and the
//! small structs its functions fill. `docs/abi.md`, "Device hooks (1.4)", is the
//! specification.
//!
//! Owns: those types. Must not: contain behaviour (the host's adapter is in
//! `opal::plugin`, the plugin side in `opal-plugin-sdk`).

use super::{OpalAllocator, OpalFreeFn, OpalStatus, OpalStr};
use core::ffi::c_void;

/// A plugin's event: opaque to the host, made by [`OpalDeviceHooks::event_create`]
/// and destroyed exactly once by [`OpalDeviceHooks::event_destroy`].
pub type OpalEvent = *mut c_void;

/// Memory counters of one device, in bytes ([`OpalDeviceHooks::memory_stats`]).
/// Filled by the plugin into a struct the host owns; fixed for ABI 1.x (new
/// counters would come with a new function).
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct OpalMemoryStats {
    /// Bytes held by live tensors (rounded to the allocator's block size).
    pub allocated: u64,
    /// Bytes the allocator holds: `allocated` plus cached free blocks.
    pub reserved: u64,
    /// The largest `allocated` since the start or the last peak reset.
    pub peak_allocated: u64,
}

/// A string the plugin made and the host frees by calling `free(ptr, len)` (the
/// plugin's own function) once it has copied it. `ptr` null: no string.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct OpalOwnedStr {
    /// The UTF-8 bytes (null for none).
    pub ptr: *mut u8,
    /// Their number.
    pub len: usize,
    /// Frees `ptr`/`len`; `None` when `ptr` is null.
    pub free: Option<OpalFreeFn>,
}

impl OpalOwnedStr {
    /// No string.
    pub const NONE: OpalOwnedStr = OpalOwnedStr {
        ptr: core::ptr::null_mut(),
        len: 0,
        free: None,
    };
}

/// The device runtime of a plugin's device type (ABI 1.4). The plugin fills it and
/// passes it to [`super::OpalRegistrar::register_device_hooks`]; the host copies
/// it (and the host allocator table and dtype list it points to) during that
/// call. Every function pointer may be null: the host then does what a
/// synchronous device with one stream per device does (see each field). Indices
/// passed to the functions are valid (`0..device_count`): the host checks them
/// first. `user` is passed back to every function.
#[repr(C)]
#[derive(Copy, Clone)]
pub struct OpalDeviceHooks {
    /// Byte size of this table as the plugin compiled it.
    pub size: usize,
    /// Passed back to every function.
    pub user: *mut c_void,
    /// How many devices of this type exist (indices `0..device_count`; 0 to
    /// 32767). Read once, at registration.
    pub device_count: i32,
    /// 1 when the device type can be used now, 0 when not, -1: when it has a
    /// device. Read once, at registration.
    pub available: i32,
    /// Tells the plugin that `index` became this thread's current device (the
    /// host keeps the current device; `DeviceGuard`s call this on entry and on
    /// exit). An error leaves the current device unchanged. Null: nothing to do.
    pub set_device: Option<unsafe extern "C" fn(user: *mut c_void, index: i32) -> OpalStatus>,
    /// A new stream of device `index`: writes its id (not 0) to `id`. Null: the
    /// device has only its default stream (an error naming the device).
    pub new_stream:
        Option<unsafe extern "C" fn(user: *mut c_void, index: i32, id: *mut i64) -> OpalStatus>,
    /// 1 when stream `id` of device `index` exists, else 0. Null: only id 0.
    pub stream_exists: Option<unsafe extern "C" fn(user: *mut c_void, index: i32, id: i64) -> i32>,
    /// Writes 1 to `done` when all work queued on the stream has run, else 0;
    /// reports (once) an error an asynchronous kernel on it hit. Null: always 1.
    pub query_stream: Option<
        unsafe extern "C" fn(user: *mut c_void, index: i32, id: i64, done: *mut i32) -> OpalStatus,
    >,
    /// Waits until all work queued on the stream has run. Null: returns at once.
    pub synchronize_stream:
        Option<unsafe extern "C" fn(user: *mut c_void, index: i32, id: i64) -> OpalStatus>,
    /// Waits for every stream of device `index`. Null: returns at once.
    pub synchronize_device:
        Option<unsafe extern "C" fn(user: *mut c_void, index: i32) -> OpalStatus>,
    /// A new event of device `index` (`timing` 1: it will be asked for its
    /// completion time), written to `out`; the host destroys it with
    /// `event_destroy`. Null: the host's own events (complete when recorded, at
    /// the time of recording), and the other `event_*` fields are ignored; when
    /// set, all of them must be set (otherwise the registration is refused).
    pub event_create: Option<
        unsafe extern "C" fn(
            user: *mut c_void,
            index: i32,
            timing: i32,
            out: *mut OpalEvent,
        ) -> OpalStatus,
    >,
    /// Destroys an event made by `event_create` (once; never used afterwards).
    pub event_destroy: Option<unsafe extern "C" fn(user: *mut c_void, event: OpalEvent)>,
    /// Puts the event at the current end of stream `stream` of device `index`
    /// (replacing an earlier recording).
    pub event_record: Option<
        unsafe extern "C" fn(
            user: *mut c_void,
            event: OpalEvent,
            index: i32,
            stream: i64,
        ) -> OpalStatus,
    >,
    /// Makes later work on stream `stream` of device `index` wait for the
    /// event's latest recording.
    pub event_block: Option<
        unsafe extern "C" fn(
            user: *mut c_void,
            event: OpalEvent,
            index: i32,
            stream: i64,
        ) -> OpalStatus,
    >,
    /// Writes 1 to `done` when the latest recording has completed (or there was
    /// none), else 0.
    pub event_query: Option<
        unsafe extern "C" fn(user: *mut c_void, event: OpalEvent, done: *mut i32) -> OpalStatus,
    >,
    /// Waits on this thread until the latest recording has completed.
    pub event_synchronize:
        Option<unsafe extern "C" fn(user: *mut c_void, event: OpalEvent) -> OpalStatus>,
    /// Writes to `ns` when the latest recording completed: nanoseconds since an
    /// origin the plugin fixes once for the process (the host only subtracts two
    /// of them); an error when it never was recorded or has not completed.
    pub event_completed_at: Option<
        unsafe extern "C" fn(user: *mut c_void, event: OpalEvent, ns: *mut u64) -> OpalStatus,
    >,
    /// Fills `out` with device `index`'s memory counters. Null: the device
    /// reports no memory statistics (an error naming it).
    pub memory_stats: Option<
        unsafe extern "C" fn(
            user: *mut c_void,
            index: i32,
            out: *mut OpalMemoryStats,
        ) -> OpalStatus,
    >,
    /// Makes device `index`'s peak its current allocation. Null: as for
    /// `memory_stats`.
    pub reset_peak_memory_stats:
        Option<unsafe extern "C" fn(user: *mut c_void, index: i32) -> OpalStatus>,
    /// Returns device `index`'s cached free memory to the device. Null: nothing
    /// cached.
    pub empty_cache: Option<unsafe extern "C" fn(user: *mut c_void, index: i32) -> OpalStatus>,
    /// The allocator of pinned host memory for copies to this device (copied by
    /// the host; its `host_accessible` must be 1). Null: the device has none.
    pub host_allocator: *const OpalAllocator,
    /// Encodes the backend metadata entry `key` = `value` for a file: writes the
    /// text to `out` (a string the plugin made) and `keep` 1, or `keep` 0 to drop
    /// the entry. Null: the text as is.
    pub serialize_backend_meta: Option<
        unsafe extern "C" fn(
            user: *mut c_void,
            key: OpalStr,
            value: OpalStr,
            out: *mut OpalOwnedStr,
            keep: *mut i32,
        ) -> OpalStatus,
    >,
    /// Decodes what `serialize_backend_meta` wrote into `out`; an error fails the
    /// load. Null: the text as is.
    pub deserialize_backend_meta: Option<
        unsafe extern "C" fn(
            user: *mut c_void,
            key: OpalStr,
            text: OpalStr,
            out: *mut OpalOwnedStr,
        ) -> OpalStatus,
    >,
    /// The dtypes autocast may cast to on this device ([`super::dtype`] codes,
    /// `n_autocast_dtypes` of them, copied at registration). Null: float16 and
    /// bfloat16.
    pub autocast_dtypes: *const i32,
    /// The number of `autocast_dtypes`.
    pub n_autocast_dtypes: usize,
}

/// The size of the 1.4 layout of [`OpalDeviceHooks`] (the host refuses a shorter
/// table).
pub const DEVICE_HOOKS_SIZE_1_4: usize = core::mem::size_of::<OpalDeviceHooks>();
