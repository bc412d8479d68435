//! `opal-bench [--json] [--vs anchor.json]... [--quick] [--cpu-time] [--only NAME]...`
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
        "usage: opal-bench [--json] [--vs anchor.json]... [--quick] [--cpu-time] [--only NAME]..."
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut json = false;
    let mut vs = Vec::new();
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
                Some(p) => vs.push(p),
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
    // Several anchor files (libtorch_bench.sh's, torch_nn.py's) merge into one
    // object; a key in a later file wins.
    let mut anchor: Option<serde_json::Map<String, serde_json::Value>> = None;
    for p in &vs {
        let text = match std::fs::read_to_string(p) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("opal-bench: cannot read the anchor file {p}: {e}");
                return ExitCode::FAILURE;
            }
        };
        match serde_json::from_str::<serde_json::Value>(text.trim()) {
            Ok(serde_json::Value::Object(m)) => {
                anchor.get_or_insert_with(Default::default).extend(m)
            }
            Ok(_) => {
                eprintln!("opal-bench: {p} is not a JSON object");
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("opal-bench: {p} is not JSON: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let anchor = anchor.map(serde_json::Value::Object);
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
