//! The emu plugin under the device-runtime suite: `setup` loads the plugin from a
//! private directory as `emu` (PrivateUse1, two devices) and a second copy as
//! `emu2` (PrivateUse2, `devices=1`, standing for the linked `emu2`); what only
//! the device can say comes from the loaded copy's `opal_emu_plugin_probe`. The
//! device-independent helpers are the linked emu suite's own.

#![allow(dead_code)] // the suite uses a subset

use opal::{Device, Stream};
use opal_plugin_tests::{built_plugins, init_cpu, install_emu_copy, private_dir};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

#[path = "../../../../backends/emu/tests/common/helpers.rs"]
mod helpers;
pub use helpers::*;

/// The loaded `emu` copy.
fn emu_library() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        init_cpu();
        let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let built = built_plugins(tmp);
        let dir = private_dir(tmp, "emu-suite");
        for (name, key, config) in [
            ("emu", "PrivateUse1", ""),
            ("emu2", "PrivateUse2", "devices=1,no-custom-op"),
        ] {
            let path = install_emu_copy(&built, &dir, name, key, config);
            opal::plugin::load_manifest(&path).expect("the emu plugin loads");
        }
        dir.join("libemu_plugin.so")
    })
}

/// Loads the plugin (once) and registers the cpu backend.
pub fn setup() {
    emu_library();
}

/// The loaded copy's `opal_emu_plugin_probe(what, index, stream, arg)`.
fn probe(what: u32, index: i32, stream: i64, arg: u64) -> u64 {
    type Probe = extern "C" fn(u32, i32, i64, u64) -> u64;
    static F: OnceLock<Probe> = OnceLock::new();
    let f = F.get_or_init(|| {
        let p = opal_plugin_tests::loaded_symbol(emu_library(), "opal_emu_plugin_probe");
        // SAFETY: the emu plugin defines the symbol with this type.
        unsafe { std::mem::transmute::<*mut std::ffi::c_void, Probe>(p) }
    });
    f(what, index, stream, arg)
}

/// The plugin's device count.
pub fn expected_device_count() -> usize {
    2
}

/// Bytes held by live tensors in `d`'s pool, as the plugin counts them.
pub fn pool_bytes_in_use(d: Device) -> u64 {
    probe(2, i32::from(d.index().unwrap_or(0)), 0, 0)
}

/// Bytes of pinned host memory held by live tensors.
pub fn pinned_bytes_in_use() -> u64 {
    probe(1, 0, 0, 0)
}

/// Queues `d` of work on stream `s` (a slow kernel on the stream's timeline).
pub fn hold(s: Stream, d: std::time::Duration) {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    assert_eq!(
        probe(0, i32::from(s.device.index().unwrap_or(0)), s.id, ms),
        0,
        "hold {s:?}"
    );
}

/// The plugin's kernels compute when called (its streams are timelines).
pub const KERNELS_QUEUE: bool = false;
