//! Opal's benchmark harness: named measurements ([`measures`]) timed like
//! `../shared/anchors/libtorch_bench.cpp` ([`harness`]), printed as one JSON object
//! with the anchor's keys or as a table (with ratios against an anchor's JSON).

pub mod harness;
pub mod measures;

/// Every binary linking the harness (`opal-bench`, its examples) allocates with
/// mimalloc, as an application that cares about allocation speed chooses to: the
/// training steps ran 7–13% slower on glibc's malloc. Opal's libraries set no
/// allocator; README's speed table says which one its figures used.
#[global_allocator]
static ALLOCATOR: alloc_count::Counting = alloc_count::Counting;

pub mod alloc_count;

use harness::{Config, Results};

/// Threads of the anchors (`at::set_num_threads(2)`); the CPU backend runs its
/// parallel kernels on at most as many threads as rayon's global pool has, which
/// [`setup`] sizes to this.
pub const THREADS: usize = 2;

/// Registers the CPU backend and sizes rayon's global pool to [`THREADS`]. Call it
/// before anything else uses rayon: the global pool can be built once per process,
/// and a pool built earlier (by a test, say) is kept and reported as is.
pub fn setup() -> opal::Result<()> {
    opal_cpu::init()?;
    // Err only when the pool already exists; its size is then what `threads` reports.
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(THREADS)
        .build_global();
    Ok(())
}

/// The call count an example profiler loop was given as its one argument, or
/// `default`; exits with a usage line when the argument is not a number.
pub fn calls_from_args(example: &str, default: usize) -> usize {
    match std::env::args().nth(1) {
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!("usage: {example} [CALLS]");
            std::process::exit(2)
        }),
        None => default,
    }
}

/// Runs the measurements whose names are in `only` (all when empty), after
/// [`setup`]. A measurement that fails is named in [`Results::failures`] with its
/// error and the others still run.
pub fn run_all(cfg: &Config, only: &[String]) -> opal::Result<Results> {
    setup()?;
    let mut r = Results::default();
    r.clock = (cfg.clock == harness::Clock::ThreadCpu).then_some("thread_cpu");
    let named = measures::opt_in()
        .into_iter()
        .filter(|m| only.iter().any(|o| o == m.name));
    for m in measures::all().into_iter().chain(named) {
        if only.is_empty() || only.iter().any(|o| o == m.name) {
            if let Err(e) = (m.run)(cfg, &mut r) {
                r.failures.push((m.name, e.to_string()));
            }
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_run_prints_the_anchor_keys() {
        let r = run_all(&Config::quick(), &[]).unwrap();
        assert!(r.failures.is_empty(), "{:?}", r.failures);
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        for k in [
            "dispatch_noop_ns",
            "direct_call_ns",
            "dispatch_overhead_ns",
            "add_1elem_f32_ns",
            "empty_1_ns",
            "add_1m_f32_us",
            "mm_512_f32_us",
            "mm_512_f32_gflops",
            "empty_1_raw_ns",
            "mm_512_bf16_us",
            "softmax_256x1024_f32_us",
            "layer_norm_256x1024_f32_us",
            "conv2d_64x3x32x32_k3_16_f32_us",
            "train_mlp_step_us",
            "train_cnn_step_us",
            "train_gpt_step_us",
            "autograd_add_1elem_ns",
        ] {
            assert!(
                v.get(k).and_then(|x| x.as_f64()).is_some(),
                "{k} missing in {v}"
            );
        }
        let noop = r.get("dispatch_noop_ns").unwrap();
        let direct = r.get("direct_call_ns").unwrap();
        assert!((r.get("dispatch_overhead_ns").unwrap() - (noop - direct)).abs() < 1e-9);
        assert!(measures::dispatch::SINK.load(std::sync::atomic::Ordering::Relaxed) > 0);
    }

    #[test]
    fn table_shows_speedups_for_every_anchor_key() {
        let mut r = Results::default();
        r.put("dispatch_overhead_ns", 2.5, harness::Unit::Ns);
        r.put("empty_1_ns", 40.0, harness::Unit::Ns);
        r.put("mm_512_f32_gflops", 626.0, harness::Unit::Other("GFLOP/s"));
        let anchor: serde_json::Value = serde_json::from_str(
            r#"{"engine": "libtorch 2.15.0", "threads": 2, "dispatch_overhead_ns": 75.0,
                "mm_512_f32_gflops": 313.0, "add_1m_f32_us": 241.0}"#,
        )
        .unwrap();
        let t = r.to_table(Some(&anchor));
        assert!(t.contains("libtorch 2.15.0"), "{t}");
        let line = |key: &str| t.lines().find(|l| l.starts_with(key)).unwrap().to_string();
        // Times: anchor / opal.
        let l = line("dispatch_overhead_ns");
        assert!(
            l.contains("75.00 ns") && l.trim_end().ends_with("30.00x"),
            "{l}"
        );
        // Throughputs: opal / anchor, so above 1 still means Opal is faster.
        assert!(
            line("mm_512_f32_gflops").trim_end().ends_with("2.00x"),
            "{t}"
        );
        // Ours only, and the anchor's only.
        assert!(line("empty_1_ns").trim_end().ends_with('-'), "{t}");
        let l = line("add_1m_f32_us");
        assert!(l.contains("241") && l.trim_end().ends_with('-'), "{l}");
        assert!(!t.contains("threads"), "{t}");
    }

    #[test]
    fn median_is_the_middle_repetition() {
        let mut n = 0u64;
        let m = harness::median_ns_on(harness::Clock::Wall, 5, 10, || {
            n += 1;
            n
        });
        assert!(m >= 0.0);
        assert_eq!(n, 50);
    }
}
