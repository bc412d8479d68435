//! cargo-fuzz target `plugin_manifest`: see `targets::plugin_manifest` (shared with the stable replay test).
#![no_main]

#[allow(dead_code, reason = "each binary runs one of the shared bodies")]
#[path = "../targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| targets::plugin_manifest(data));
