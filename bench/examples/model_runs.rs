//! Runs one exported model on the CPU many times (for profilers):
//! `cargo run --release -p opal-bench --example model_runs -- PATH.pt2 200`
//! (inputs from `PATH.io.safetensors` beside it); `--profile` as a third
//! argument prints the time per step instead (`Runner::profile`).

// Linked for its global allocator (mimalloc), like every opal-bench binary.
extern crate opal_bench;

use opal_export::{device, io, ExportedProgram};

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: model_runs PATH.pt2 [RUNS]")?;
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100);
    opal_bench::setup().map_err(|e| e.to_string())?;
    let e = |e: opal_export::Error| e.to_string();
    let runner = ExportedProgram::load(&path)
        .map_err(e)?
        .to_device(device("cpu").map_err(e)?)
        .map_err(e)?;
    let io_path = path.trim_end_matches(".pt2").to_string() + ".io.safetensors";
    let inputs = io::read_indexed(&io_path, "input").map_err(e)?;
    if args.next().as_deref() == Some("--profile") {
        print!("{}", runner.profile(&inputs, n).map_err(e)?);
        return Ok(());
    }
    runner.run(&inputs).map_err(e)?;
    let t = std::time::Instant::now();
    for _ in 0..n {
        runner.run(&inputs).map_err(e)?;
    }
    println!(
        "{path}: {:.1} us/run",
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    );
    Ok(())
}
