//! The device-runtime suite of the linked emu (`backends/emu/tests/suites/
//! device_runtime.rs`), unchanged, on the emu plugin: everything `opal::device`
//! offers the compiled-in device, through ABI 1.4's device hooks.

#[path = "emu_plugin/common.rs"]
mod common;

#[path = "../../../backends/emu/tests/suites/device_runtime.rs"]
mod suite;
