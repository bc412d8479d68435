//! Every integration test of this crate, as modules of one test binary.
//!
//! One binary links the runtime and its generated operators once instead of once
//! per file: a debug test binary is ~220 MB, and a binary per file filled CI's
//! disk and spent most of the test build linking. A test that needs a process of
//! its own is a `[[test]]` target of its own in Cargo.toml instead.

mod autogen_out;
mod backend_deny_warnings;
mod bool_storage;
mod composite;
mod core_b_queries;
mod core_ops_e;
mod core_opset;
mod cpu_scalars_on_devices;
mod dispatch_keys_agree;
mod docs_snippets;
mod factory_empty;
mod fallible_sizes;
mod fuzz_replay;
mod generated_fixtures_compile;
mod golden;
mod golden_grad;
mod gradcheck;
mod inplace_views;
mod interop;
mod out_alias;
mod overlap;
mod pytorch_generate;
mod readme_example;
mod serde_values;
mod structured_promotion;
mod torture;
mod tracing_events;
mod training;
mod values_as_pytorch;
