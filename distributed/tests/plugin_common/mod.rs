//! Loads the emu plugin (built by `opal-plugin-tests`' helper into the test
//! target's temporary directory) twice: as `emu` (PrivateUse1) with its
//! communicator, and as `emunc` (PrivateUse2, one device, config
//! `no-communicator`) without one, whose collectives the host stages.

#![allow(dead_code)] // each test uses a subset

use opal_plugin_tests::{built_plugins, install_emu_copy, private_dir};
use std::path::{Path, PathBuf};

/// The two loaded copies' libraries: (`emu`, `emunc`). `tag` names the private
/// directory (processes running at once use different tags).
pub fn load_emu_plugins(tag: &str) -> (PathBuf, PathBuf) {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let built = built_plugins(tmp);
    let dir = private_dir(tmp, tag);
    let mut libs = Vec::new();
    for (name, key, config) in [
        ("emu", "PrivateUse1", ""),
        (
            "emunc",
            "PrivateUse2",
            "devices=1,no-custom-op,no-communicator",
        ),
    ] {
        let path = install_emu_copy(&built, &dir, name, key, config);
        opal::plugin::load_manifest(&path).expect("the emu plugin loads");
        libs.push(dir.join(format!("lib{name}_plugin.so")));
    }
    (libs[0].clone(), libs[1].clone())
}

/// The native `all_reduce` calls the loaded copy `lib` counted
/// (`opal_emu_plugin_probe(6, ..)`).
pub fn native_all_reduces(lib: &Path) -> u64 {
    type Probe = extern "C" fn(u32, i32, i64, u64) -> u64;
    let p = opal_plugin_tests::loaded_symbol(lib, "opal_emu_plugin_probe");
    // SAFETY: the emu plugin defines the symbol with this type.
    let f = unsafe { std::mem::transmute::<*mut std::ffi::c_void, Probe>(p) };
    f(6, 0, 0, 0)
}
