//! The device-runtime suite (`suites/device_runtime.rs`) on the linked emu.

#[path = "suites/device_runtime.rs"]
mod suite;
