//! Timing and reporting: medians of means like `libtorch_bench.cpp`, the ordered
//! result list, JSON output and the comparison table.

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Instant;

/// Which clock times a repetition.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Clock {
    /// Monotonic wall clock, like the anchor's `steady_clock`.
    Wall,
    /// CPU time of the measuring thread (Linux): excludes time the thread was
    /// descheduled, for machines shared with other work. Elsewhere: wall clock.
    /// It does not count rayon's worker threads, so it is meaningful only for
    /// single-threaded work (dispatch, 1-element ops, allocation); parallel kernels
    /// (add 1M, mm, softmax, layer_norm, conv2d) read too fast on it.
    ThreadCpu,
}

/// How hard to measure. `full` matches the anchor's repetition counts; `quick` is
/// for tests and smoke runs.
#[derive(Copy, Clone, Debug)]
pub struct Config {
    /// Repetitions; the median is reported.
    pub reps: usize,
    /// Divides the anchor's per-repetition iteration counts (1 = same as the anchor).
    pub iter_divisor: usize,
    /// The clock.
    pub clock: Clock,
}

impl Config {
    /// The anchor's counts (7 repetitions, full iteration counts), wall clock.
    pub const fn full() -> Self {
        Config {
            reps: 7,
            iter_divisor: 1,
            clock: Clock::Wall,
        }
    }

    /// A fast configuration for tests.
    pub const fn quick() -> Self {
        Config {
            reps: 3,
            iter_divisor: 1000,
            clock: Clock::Wall,
        }
    }

    /// The iteration count to use for a measurement the anchor runs `anchor_iters` times.
    pub fn iters(&self, anchor_iters: usize) -> usize {
        (anchor_iters / self.iter_divisor).max(1)
    }
}

#[cfg(target_os = "linux")]
fn thread_cpu_ns() -> Option<u128> {
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clk: i32, ts: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime (from the C library std links) writes one timespec,
    // which has this layout on 64-bit Linux, through a valid pointer.
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128)
}

#[cfg(not(target_os = "linux"))]
fn thread_cpu_ns() -> Option<u128> {
    None
}

/// Median over `reps` repetitions of the mean time of `iters` calls of `f`, in ns
/// (the anchor's `median_ns`), on `clock`. The result of `f` is passed through
/// `black_box` and dropped inside the timed loop, like the anchor's `auto c = ...`.
pub fn median_ns_on<R>(clock: Clock, reps: usize, iters: usize, mut f: impl FnMut() -> R) -> f64 {
    let mut v: Vec<f64> = (0..reps.max(1))
        .map(|_| {
            let cpu0 = (clock == Clock::ThreadCpu).then(thread_cpu_ns).flatten();
            let t0 = Instant::now();
            for _ in 0..iters {
                black_box(f());
            }
            let ns = match (cpu0, thread_cpu_ns()) {
                (Some(a), Some(b)) => (b - a) as f64,
                _ => t0.elapsed().as_nanos() as f64,
            };
            ns / iters.max(1) as f64
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Like two [`median_ns`] calls, but the repetitions of `f` and `g` alternate, so
/// both see the same machine conditions (their difference is then far less noisy on
/// a shared machine). Returns `(median f, median g)`.
pub fn median_pair_ns<R, S>(
    cfg: &Config,
    anchor_iters: usize,
    mut f: impl FnMut() -> R,
    mut g: impl FnMut() -> S,
) -> (f64, f64) {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..cfg.reps.max(1) {
        a.push(median_ns_on(cfg.clock, 1, cfg.iters(anchor_iters), &mut f));
        b.push(median_ns_on(cfg.clock, 1, cfg.iters(anchor_iters), &mut g));
    }
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    (a[a.len() / 2], b[b.len() / 2])
}

/// [`median_ns_on`] with the configured clock.
pub fn median_ns<R>(cfg: &Config, anchor_iters: usize, f: impl FnMut() -> R) -> f64 {
    median_ns_on(cfg.clock, cfg.reps, cfg.iters(anchor_iters), f)
}

/// Unit of a result (decides the JSON key suffix the measurement chose and the
/// table's formatting).
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Unit {
    /// Nanoseconds.
    Ns,
    /// Microseconds.
    Us,
    /// Anything else (e.g. GFLOP/s).
    Other(&'static str),
}

/// Ordered results: JSON key, value, unit.
#[derive(Default, Debug)]
pub struct Results {
    entries: Vec<(String, f64, Unit)>,
    /// Set when not the anchor's wall clock (`"thread_cpu"`); printed in the JSON.
    pub clock: Option<&'static str>,
    /// Measurements that failed: name and error (their keys are missing).
    pub failures: Vec<(&'static str, String)>,
}

impl Results {
    /// Records a value under `key` (replacing an earlier one).
    pub fn put(&mut self, key: &str, value: f64, unit: Unit) {
        match self.entries.iter_mut().find(|e| e.0 == key) {
            Some(e) => *e = (key.to_string(), value, unit),
            None => self.entries.push((key.to_string(), value, unit)),
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<f64> {
        self.entries.iter().find(|e| e.0 == key).map(|e| e.1)
    }

    /// All entries in insertion order.
    pub fn entries(&self) -> &[(String, f64, Unit)] {
        &self.entries
    }

    /// One JSON object: `engine`, `threads` (rayon's global pool, which the CPU
    /// kernels run on), `clock` (only when not the wall clock),
    /// then every key (2 decimals).
    pub fn to_json(&self) -> String {
        let mut m = serde_json::Map::new();
        m.insert("engine".into(), format!("opal {}", opal_version()).into());
        m.insert("threads".into(), rayon::current_num_threads().into());
        if let Some(c) = self.clock {
            m.insert("clock".into(), c.into());
        }
        for (k, v, _) in &self.entries {
            let rounded = (v * 100.0).round() / 100.0;
            m.insert(
                k.clone(),
                serde_json::Number::from_f64(rounded).map_or(serde_json::Value::Null, Into::into),
            );
        }
        serde_json::Value::Object(m).to_string()
    }

    /// A readable table; with an anchor object, adds its values and `speedup`:
    /// how many times faster Opal is (above 1: Opal is faster), `anchor/opal` for
    /// times and `opal/anchor` for throughputs. Every numeric key of the anchor gets
    /// a line, also those Opal did not measure (shown as `-`).
    pub fn to_table(&self, anchor: Option<&serde_json::Value>) -> String {
        const W: usize = 32;
        let mut s = String::new();
        let anchor_name = anchor
            .and_then(|a| a.get("engine"))
            .and_then(|e| e.as_str())
            .unwrap_or("anchor");
        let _ = writeln!(s, "opal {} benchmark", opal_version());
        if anchor.is_some() {
            let _ = writeln!(
                s,
                "{:<W$} {:>16} {:>18} {:>8}",
                "key", "opal", anchor_name, "speedup"
            );
        } else {
            let _ = writeln!(s, "{:<W$} {:>16}", "key", "opal");
        }
        for (k, v, u) in &self.entries {
            let unit = unit_name(*u);
            let ours = format!("{v:.2} {unit}");
            match anchor.and_then(|a| a.get(k)).and_then(|x| x.as_f64()) {
                Some(a) => {
                    let speedup = match u {
                        _ if *v <= 0.0 || a <= 0.0 => "-".into(),
                        Unit::Other(_) => format!("{:.2}x", v / a),
                        Unit::Ns | Unit::Us => format!("{:.2}x", a / v),
                    };
                    let theirs = format!("{a:.2} {unit}");
                    let _ = writeln!(s, "{k:<W$} {ours:>16} {theirs:>18} {speedup:>8}");
                }
                None if anchor.is_some() => {
                    let _ = writeln!(s, "{k:<W$} {ours:>16} {:>18} {:>8}", "-", "-");
                }
                None => {
                    let _ = writeln!(s, "{k:<W$} {ours:>16}");
                }
            }
        }
        if let Some(obj) = anchor.and_then(|a| a.as_object()) {
            for (k, a) in obj {
                if self.get(k).is_none() && k != "threads" {
                    if let Some(a) = a.as_f64() {
                        let _ = writeln!(s, "{k:<W$} {:>16} {:>18} {:>8}", "-", a, "-");
                    }
                }
            }
        }
        for (name, e) in &self.failures {
            let _ = writeln!(s, "failed: {name}: {e}");
        }
        s
    }
}

fn unit_name(u: Unit) -> &'static str {
    match u {
        Unit::Ns => "ns",
        Unit::Us => "us",
        Unit::Other(o) => o,
    }
}

/// Opal's version (the runtime crate's).
pub fn opal_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}
