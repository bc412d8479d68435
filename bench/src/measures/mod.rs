//! The named measurements, in output order. Each module measures one thing the way
//! `../shared/anchors/libtorch_bench.cpp` does and records its JSON keys.
//!
//! To add a key (e.g. `add_1elem_f32_ns`): add a module with
//! `pub fn run(cfg: &Config, out: &mut Results)`, list it in [`all`], and use the
//! anchor's iteration count through `cfg.iters(..)`. Registered kernels are reached
//! like any program reaches them: call the backend's `init()` and the generated op
//! (or `Dispatcher::global().call_boxed(..)`).

use crate::harness::{Config, Results};

pub mod dispatch;
pub mod empty;

/// A named measurement.
pub struct Measurement {
    /// Name used by `--only`.
    pub name: &'static str,
    /// Runs it, recording one or more keys.
    pub run: fn(&Config, &mut Results),
}

/// Every measurement, in output order.
pub fn all() -> Vec<Measurement> {
    vec![
        Measurement {
            name: "dispatch",
            run: dispatch::run,
        },
        Measurement {
            name: "empty",
            run: empty::run,
        },
    ]
}
