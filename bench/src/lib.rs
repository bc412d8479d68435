//! Opal's benchmark harness: named measurements ([`measures`]) timed like
//! `../shared/anchors/libtorch_bench.cpp` ([`harness`]), printed as one JSON object
//! with the anchor's keys or as a table (with ratios against an anchor's JSON).

pub mod harness;
pub mod measures;

use harness::{Config, Results};

/// Runs the measurements whose names are in `only` (all when empty).
pub fn run_all(cfg: &Config, only: &[String]) -> Results {
    let mut r = Results::default();
    for m in measures::all() {
        if only.is_empty() || only.iter().any(|o| o == m.name) {
            (m.run)(cfg, &mut r);
        }
    }
    r
}
