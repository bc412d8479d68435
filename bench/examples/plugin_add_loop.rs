//! `plugin_overhead_ns`'s work alone, for profilers: N one-element f32 `add.Tensor`
//! calls (default 100000) on the plugin bench's devices, through the test plugin's
//! kernel (`plugin`, the default) or the same arithmetic linked statically
//! (`static`), and nothing else. Two runs with different N give the instructions of
//! one call from the difference of their totals under `valgrind --tool=callgrind`.
//!
//! `cargo build --release -p opal-test-plugin -p opal-bench --example plugin_add_loop`
//! then `target/release/examples/plugin_add_loop [plugin|static] [CALLS]` (the test
//! plugin is looked up beside the example's directory, or in `OPAL_BENCH_PLUGIN_DIR`).

use opal::ops;
use std::hint::black_box;

fn main() -> opal::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || -> ! {
        eprintln!("usage: plugin_add_loop [plugin|static] [CALLS]");
        std::process::exit(2)
    };
    let (which, n) = match args.as_slice() {
        [] => ("plugin", 100_000),
        [w] => (w.as_str(), 100_000),
        [w, n] => (w.as_str(), n.parse().unwrap_or_else(|_| usage())),
        _ => usage(),
    };
    opal_bench::setup()?;
    let s = opal_bench::measures::plugin::setup()?;
    let (x, y) = match which {
        "plugin" => (&s.a, &s.b),
        "static" => (&s.c, &s.d),
        _ => usage(),
    };
    for _ in 0..n {
        black_box(ops::add_tensor(black_box(x), black_box(y))?);
    }
    Ok(())
}
