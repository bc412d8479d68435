//! What a device-runtime call costs through the plugin ABI (1.4) against the
//! same call on a linked backend: `Stream::query` on a non-default stream and an
//! event's record + query, on the emu plugin (PrivateUse1, loaded from the
//! directory given as the first argument, e.g. `target/release`) and on the
//! linked `emu2` (PrivateUse2). Prints the median nanoseconds per call of 15
//! rounds for each and their difference.
//!
//! Run: `cargo build --release -p opal-emu-plugin && cargo run --release -p
//! opal-plugin-tests --example device_hooks_cost -- target/release`

use opal::device::{self, Event};
use opal::{Device, DeviceType, Stream};
use std::hint::black_box;
use std::time::Instant;

const CALLS: u32 = 200_000;
const ROUNDS: usize = 15;

/// Median nanoseconds per call of `f` over `ROUNDS` rounds of `CALLS` calls.
fn median_ns(mut f: impl FnMut()) -> f64 {
    let mut r: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..CALLS {
                f();
            }
            t.elapsed().as_nanos() as f64 / f64::from(CALLS)
        })
        .collect();
    r.sort_by(f64::total_cmp);
    r[ROUNDS / 2]
}

fn stream_query(s: Stream) -> f64 {
    median_ns(|| {
        black_box(s.query().unwrap());
    })
}

fn event_record_query(s: Stream) -> f64 {
    let e = Event::new(false);
    median_ns(|| {
        e.record(s).unwrap();
        black_box(e.query().unwrap());
    })
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/release".into());
    opal_cpu::init().expect("cpu");
    opal_emu::init_emu2().expect("linked emu2");
    let manifest = std::path::Path::new(&dir).join("emu.opal-plugin.json");
    opal::plugin::load_manifest(&manifest).expect("the emu plugin (build it first)");
    let plugin = device::new_stream(Device::new(DeviceType::PrivateUse1, Some(0))).unwrap();
    let linked = device::new_stream(Device::new(DeviceType::PrivateUse2, Some(0))).unwrap();
    for (what, f) in [
        ("Stream::query", stream_query as fn(Stream) -> f64),
        ("Event::record + query", event_record_query),
    ] {
        let (p, l) = (f(plugin), f(linked));
        println!(
            "{what:<24} plugin {p:>7.1} ns  linked {l:>7.1} ns  difference {:>+7.1} ns  ratio {:.2}",
            p - l,
            p / l
        );
    }
}
