//! The named measurements, in output order. Each module measures one thing the way
//! `../shared/anchors/libtorch_bench.cpp` does and records its JSON keys.
//!
//! To add a key (e.g. `softmax_256x1024_f32_us`): add a module with
//! `pub fn run(cfg: &Config, out: &mut Results) -> opal::Result<()>`, list it in
//! [`all`], and use the anchor's iteration count through `cfg.iters(..)` (via
//! `median_ns`). Call the op once before timing it, so an error is returned instead
//! of timed. Registered kernels are reached like any program reaches them: the
//! harness calls `opal_cpu::init()` before running, measurements call the generated
//! op (or `Dispatcher::global().call_boxed(..)`). Inputs come from [`data`].

use crate::harness::{Config, Results};

pub mod add;
pub mod core_ops;
pub mod data;
pub mod dispatch;
pub mod empty;
pub mod mm;
pub mod models;
pub mod nn;
pub mod plugin;
pub mod train;

/// A named measurement.
pub struct Measurement {
    /// Name used by `--only`.
    pub name: &'static str,
    /// Runs it, recording one or more keys; an error means none of its remaining keys.
    pub run: fn(&Config, &mut Results) -> opal::Result<()>,
}

/// Every measurement, in output order (the anchor's keys first).
pub fn all() -> Vec<Measurement> {
    vec![
        Measurement {
            name: "dispatch",
            run: dispatch::run,
        },
        Measurement {
            name: "add",
            run: add::run,
        },
        Measurement {
            name: "empty",
            run: empty::run,
        },
        Measurement {
            name: "mm",
            run: mm::run,
        },
        Measurement {
            name: "nn",
            run: nn::run,
        },
        Measurement {
            name: "train",
            run: train::run,
        },
        Measurement {
            name: "core_ops",
            run: core_ops::run,
        },
        Measurement {
            name: "models",
            run: models::run,
        },
    ]
}

/// Measurements that run only when named with `--only` (they need files built
/// separately; see each module).
pub fn opt_in() -> Vec<Measurement> {
    vec![Measurement {
        name: "plugin",
        run: plugin::run,
    }]
}
