//! The public device API: [`Device`], [`DeviceType`] and the names of out-of-tree
//! backends (defined in `device_type`), and the device runtime (vendor hooks, device
//! counts, the current device, streams, memory statistics; defined in
//! `device_runtime`), re-exported together under one path.
//!
//! Owns: nothing but that list. Must not: define anything, so that the modules it
//! gathers stay below everything that imports it.

pub use crate::device_runtime::backend_meta::BackendMeta;
pub use crate::device_runtime::memory::{
    empty_cache, max_memory_allocated, memory_allocated, memory_reserved, memory_stats,
    reset_peak_memory_stats,
};
pub use crate::device_runtime::stream::{
    current_stream, default_stream, exchange_stream, new_stream, set_stream, synchronize,
    DeviceEvent, Event, HostEvent, StreamGuard,
};
pub use crate::device_runtime::{
    accelerator, check_device, current_device, device_count, exchange_device, hooks, is_available,
    register_hooks, registered_device_types, resolve, set_device, DeviceGuard, DeviceHooks,
    MemoryStats,
};
pub use crate::device_type::{
    privateuse_backend_name, register_privateuse_backend, Device, DeviceType,
};
