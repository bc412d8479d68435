//! Device runtimes through the ABI (1.4), beyond the device-runtime suite the emu
//! plugin runs (`emu_device_runtime.rs`): the plugin's backend-metadata hooks and
//! their errors; a 1.4 plugin that registers none gets the default runtime (one
//! synchronous device, its default stream); a plugin built for 1.3 has no device
//! runtime, as before 1.4.
//!
//! The emu plugin is loaded at PrivateUse1, the test plugin built for 1.4 at
//! PrivateUse2 and built for 1.3 at PrivateUse3, once per process.

use opal::device;
use opal::{ops, Device, DeviceType, Tensor};
use opal_plugin_tests::{
    built_plugins, built_test_plugin_abi_1_3, init_cpu, install_emu, install_test_plugin,
    private_dir, Spec,
};
use std::path::Path;
use std::sync::Once;

fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        init_cpu();
        let built = built_plugins(tmp());
        let dir = private_dir(tmp(), "emu-hooks");
        install_emu(&built, &dir);
        let info = opal::plugin::load_manifest(&dir.join("emu.opal-plugin.json")).expect("emu");
        assert_eq!(info.abi, Some((1, 4)));
        install_test_plugin(
            tmp(),
            &built,
            &Spec::test_plugin("tp14", "tp", "PrivateUse2"),
        );
        let mut old = Spec::test_plugin("tp13", "tpold", "PrivateUse3");
        old.abi = "1.3";
        install_test_plugin(tmp(), &built_test_plugin_abi_1_3(tmp()), &old);
    });
}

fn msg<T: std::fmt::Debug>(r: opal::Result<T>) -> String {
    r.expect_err("expected an error").to_string()
}

fn floats(v: &[f32]) -> Tensor {
    Tensor::from_slice(v, &[v.len() as i64]).unwrap()
}

#[test]
fn backend_metadata_goes_through_the_plugins_encoding() {
    setup();
    let h = device::hooks(DeviceType::PrivateUse1).unwrap();
    assert_eq!(
        h.serialize_backend_meta("layout", "tiled").as_deref(),
        Some("emu-v1;tiled")
    );
    assert_eq!(h.serialize_backend_meta("transient.x", "1"), None);
    assert_eq!(
        h.deserialize_backend_meta("layout", "emu-v1;tiled")
            .unwrap(),
        "tiled"
    );
    let m = msg(h.deserialize_backend_meta("layout", "v0;tiled"));
    assert!(
        m.contains("plugin 'emu'") && m.contains("expected the 'emu-v1;' encoding"),
        "{m}"
    );
}

/// A 1.4 plugin without a device runtime gets the default: one synchronous
/// device with its default stream only.
#[test]
fn a_plugin_without_hooks_is_one_synchronous_device() {
    setup();
    let tp = DeviceType::PrivateUse2;
    assert_eq!(device::device_count(tp).unwrap(), 1);
    let d = Device::new(tp, Some(0));
    let m = msg(device::new_stream(d));
    assert!(m.contains("only the default stream"), "{m}");
    let e = device::default_stream(d)
        .unwrap()
        .record_event(true)
        .unwrap();
    assert!(e.query().unwrap());
    let m = msg(device::memory_stats(d));
    assert!(m.contains("does not report memory statistics"), "{m}");
    assert!(device::set_device(Device::new(tp, Some(1))).is_err());
}

/// A plugin built for ABI 1.3 loads and has no device runtime, as before 1.4.
#[test]
fn a_plugin_built_for_1_3_has_no_device_runtime() {
    setup();
    let info = opal::plugin::plugins();
    let old = info.iter().find(|p| p.name == "tp13").expect("tp13");
    assert!(old.loaded(), "{old:?}");
    assert_eq!(old.abi, Some((1, 3)));
    let m = msg(device::device_count(DeviceType::PrivateUse3));
    assert!(m.contains("no device runtime registered"), "{m}");
    let x = floats(&[1.0, -2.0])
        .to(Device::new(DeviceType::PrivateUse3, Some(0)))
        .unwrap();
    let r = ops::relu(&x).unwrap();
    assert_eq!(
        r.to(Device::cpu()).unwrap().to_vec::<f32>().unwrap(),
        [1.0, 0.0]
    );
}
