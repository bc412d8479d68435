//! Every integration test of this crate, as modules of one test binary.
//!
//! One binary links the runtime and its generated operators once instead of once
//! per file: a debug test binary is ~220 MB, and a binary per file filled CI's
//! disk and spent most of the test build linking. A test that needs a process of
//! its own is a `[[test]]` target of its own in Cargo.toml instead.

mod complex;
mod complex_kernels;
mod dropout;
mod elementwise;
mod golden;
mod golden_support;
mod native_yaml;
mod part2_golden;
mod reduce;
mod registration;
