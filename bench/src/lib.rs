//! Opal's benchmark harness: named measurements ([`measures`]) timed like
//! `../shared/anchors/libtorch_bench.cpp` ([`harness`]), printed as one JSON object
//! with the anchor's keys or as a table (with ratios against an anchor's JSON).

pub mod harness;
pub mod measures;

use harness::{Config, Results};

/// Runs the measurements whose names are in `only` (all when empty).
pub fn run_all(cfg: &Config, only: &[String]) -> Results {
    let mut r = Results::default();
    r.clock = (cfg.clock == harness::Clock::ThreadCpu).then_some("thread_cpu");
    for m in measures::all() {
        if only.is_empty() || only.iter().any(|o| o == m.name) {
            (m.run)(cfg, &mut r);
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_run_prints_the_anchor_keys() {
        let r = run_all(&Config::quick(), &[]);
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        for k in [
            "dispatch_noop_ns",
            "direct_call_ns",
            "dispatch_overhead_ns",
            "empty_1_ns",
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
    fn table_shows_ratios_against_an_anchor() {
        let mut r = Results::default();
        r.put("dispatch_overhead_ns", 2.5, harness::Unit::Ns);
        r.put("empty_1_ns", 40.0, harness::Unit::Ns);
        let anchor: serde_json::Value =
            serde_json::from_str(r#"{"engine": "libtorch 2.15.0", "dispatch_overhead_ns": 75.0}"#)
                .unwrap();
        let t = r.to_table(Some(&anchor));
        assert!(t.contains("libtorch 2.15.0"), "{t}");
        let line = t
            .lines()
            .find(|l| l.starts_with("dispatch_overhead_ns"))
            .unwrap();
        assert!(
            line.contains("75.00 ns") && line.trim_end().ends_with("30.0x"),
            "{line}"
        );
        let line = t.lines().find(|l| l.starts_with("empty_1_ns")).unwrap();
        assert!(line.trim_end().ends_with('-'), "{line}");
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
