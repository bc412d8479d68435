//! Every integration test of this crate, as modules of one test binary.
//!
//! One binary links the runtime and its generated operators once instead of once
//! per file: a debug test binary is ~220 MB, and a binary per file filled CI's
//! disk and spent most of the test build linking. A test that needs a process of
//! its own is a `[[test]]` target of its own in Cargo.toml instead.

mod autograd_override;
mod common;
mod device_rule;
mod device_runtime;
mod device_serialize;
mod evolution;
mod inplace_views;
mod program;
mod undefined;
