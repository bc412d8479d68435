//! `opal-bench [--json] [--vs anchor.json] [--quick] [--cpu-time] [--only NAME]...`
//!
//! Prints one JSON object with the keys of `../shared/anchors/libtorch_bench.sh`
//! and the other speed targets (`--json`), or a readable table, with
//! speedups against an anchor's JSON output when given one (`--vs`; the figures
//! measured on the reference machine are in `bench/anchors/`). Runs on 2 rayon
//! threads, like the anchor. `--cpu-time` times with the thread's CPU clock instead of
//! the wall clock (for a machine shared with other work; the JSON then says
//! `"clock": "thread_cpu"`).

use opal_bench::harness::Config;
use std::process::ExitCode;

fn usage() -> ExitCode {
    eprintln!(
        "usage: opal-bench [--json] [--vs anchor.json] [--quick] [--cpu-time] [--only NAME]..."
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut json = false;
    let mut vs = None;
    let mut cfg = Config::full();
    let mut only = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => json = true,
            "--quick" => {
                cfg = Config {
                    clock: cfg.clock,
                    ..Config::quick()
                }
            }
            "--cpu-time" => cfg.clock = opal_bench::harness::Clock::ThreadCpu,
            "--vs" => match args.next() {
                Some(p) => vs = Some(p),
                None => return usage(),
            },
            "--only" => match args.next() {
                Some(n) => only.push(n),
                None => return usage(),
            },
            "-h" | "--help" => {
                usage();
                return ExitCode::SUCCESS;
            }
            _ => return usage(),
        }
    }
    let anchor = match vs.map(|p| std::fs::read_to_string(&p).map(|s| (p, s))) {
        None => None,
        Some(Ok((p, text))) => match serde_json::from_str::<serde_json::Value>(text.trim()) {
            Ok(v) => Some(v),
            Err(e) => {
                eprintln!("opal-bench: {p} is not JSON: {e}");
                return ExitCode::FAILURE;
            }
        },
        Some(Err(e)) => {
            eprintln!("opal-bench: cannot read the anchor file: {e}");
            return ExitCode::FAILURE;
        }
    };
    let results = match opal_bench::run_all(&cfg, &only) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("opal-bench: setup failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    if json {
        println!("{}", results.to_json());
        for (name, e) in &results.failures {
            eprintln!("opal-bench: {name} failed: {e}");
        }
    } else {
        print!("{}", results.to_table(anchor.as_ref()));
    }
    if results.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
