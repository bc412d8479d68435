//! cargo-fuzz target `pt2`: see `targets::pt2` (shared with the stable replay test).
#![no_main]

#[allow(dead_code, reason = "each binary runs one of the shared bodies")]
#[path = "../targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| targets::pt2(data));
