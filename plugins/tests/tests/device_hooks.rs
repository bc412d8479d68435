//! Device runtimes through the ABI (1.4): the emu plugin's (two devices, its pools'
//! statistics, streams, events, pinned memory, backend metadata, autocast dtype)
//! answers `opal::device` as the linked emu does; a 1.4 plugin that registers
//! none gets the default one (one synchronous device, its default stream); a
//! plugin built for 1.3 has no device runtime, as before 1.4.
//!
//! The emu plugin is loaded at PrivateUse1, the test plugin built for 1.4 at
//! PrivateUse2 and built for 1.3 at PrivateUse3, once per process. Tests that
//! count pool bytes hold `serial()`.

use opal::autocast::{self, AutocastGuard};
use opal::device::{self, DeviceGuard, Event, StreamGuard};
use opal::{ops, DType, Device, DeviceType, Stream, Tensor};
use opal_plugin_tests::{
    built_plugins, built_test_plugin_abi_1_3, init_cpu, install_emu, install_test_plugin,
    private_dir, Spec,
};
use std::path::Path;
use std::sync::{Mutex, MutexGuard, Once};

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

fn emu(i: i16) -> Device {
    setup();
    Device::new(DeviceType::PrivateUse1, Some(i))
}

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    setup();
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn msg<T: std::fmt::Debug>(r: opal::Result<T>) -> String {
    r.expect_err("expected an error").to_string()
}

fn allocated(d: Device) -> u64 {
    device::memory_allocated(d).unwrap()
}

fn floats(v: &[f32]) -> Tensor {
    Tensor::from_slice(v, &[v.len() as i64]).unwrap()
}

#[test]
fn the_emu_plugin_has_two_available_devices() {
    setup();
    assert_eq!(device::device_count(DeviceType::PrivateUse1).unwrap(), 2);
    assert!(device::is_available(DeviceType::PrivateUse1));
    assert_eq!(device::accelerator(), Some(DeviceType::PrivateUse1));
    let m = msg(Tensor::empty(&[2], DType::F32, emu(2)));
    assert!(
        m.contains("'emu:2'") && m.contains("emu has 2 devices"),
        "{m}"
    );
}

#[test]
fn guards_set_the_current_plugin_device_and_tensors_land_there() {
    let _s = serial();
    let any = Device::new(DeviceType::PrivateUse1, None);
    {
        let g = DeviceGuard::new(emu(1)).unwrap();
        assert_eq!(g.original_index(), 0);
        assert_eq!(device::current_device(DeviceType::PrivateUse1), 1);
        let t = floats(&[1.0, 2.0]).to(any).unwrap();
        assert_eq!(t.device(), emu(1));
        let y = ops::add_tensor(&t, &t).unwrap();
        assert_eq!(y.device(), emu(1));
        assert_eq!(
            y.to(Device::cpu()).unwrap().to_vec::<f32>().unwrap(),
            [2.0, 4.0]
        );
    }
    assert_eq!(device::current_device(DeviceType::PrivateUse1), 0);
    assert!(DeviceGuard::new(emu(5)).is_err());
}

#[test]
fn pool_statistics_come_from_the_plugin() {
    let _s = serial();
    let d = emu(0);
    let before = allocated(d);
    let t = Tensor::empty(&[100], DType::F32, d).unwrap(); // 400 bytes -> 448
    assert_eq!(allocated(d), before + 448);
    drop(t);
    assert_eq!(allocated(d), before);
    // Peak and its reset.
    device::reset_peak_memory_stats(d).unwrap();
    let base = allocated(d);
    let a = Tensor::empty(&[256], DType::F32, d).unwrap();
    let b = Tensor::empty(&[16], DType::F32, d).unwrap();
    drop(a);
    assert_eq!(device::max_memory_allocated(d).unwrap(), base + 1088);
    device::reset_peak_memory_stats(d).unwrap();
    assert_eq!(device::max_memory_allocated(d).unwrap(), base + 64);
    drop(b);
    // Freed blocks stay reserved until empty_cache.
    device::empty_cache(d).unwrap();
    assert_eq!(device::memory_reserved(d).unwrap(), allocated(d));
    let t = Tensor::empty(&[1000], DType::F64, d).unwrap();
    let with = device::memory_reserved(d).unwrap();
    drop(t);
    assert_eq!(device::memory_reserved(d).unwrap(), with);
    device::empty_cache(d).unwrap();
    assert_eq!(device::memory_reserved(d).unwrap(), allocated(d));
}

#[test]
fn each_plugin_device_has_its_own_pool() {
    let _s = serial();
    let (a0, a1) = (allocated(emu(0)), allocated(emu(1)));
    let t = Tensor::empty(&[32], DType::F32, emu(1)).unwrap();
    assert_eq!(allocated(emu(1)), a1 + 128);
    assert_eq!(allocated(emu(0)), a0);
    drop(t);
    assert_eq!(allocated(emu(1)), a1);
}

#[test]
fn plugin_streams_are_distinct_and_guarded() {
    setup();
    let a = device::new_stream(emu(0)).unwrap();
    let b = device::new_stream(emu(0)).unwrap();
    assert!(a.id != 0 && b.id != 0 && a != b, "{a:?} {b:?}");
    assert!(a.query().unwrap());
    a.synchronize().unwrap();
    device::synchronize(emu(1)).unwrap();
    {
        let _g = StreamGuard::new(b).unwrap();
        assert_eq!(device::current_stream(emu(0)).unwrap(), b);
    }
    assert_eq!(device::current_stream(emu(0)).unwrap().id, 0);
    let m = msg(device::set_stream(Stream {
        device: emu(0),
        id: 99,
    }));
    assert!(m.contains("'emu:0'") && m.contains("no stream 99"), "{m}");
}

#[test]
fn plugin_events_record_query_and_time() {
    setup();
    let s = device::new_stream(emu(1)).unwrap();
    let (start, end) = (Event::new(true), Event::new(true));
    start.record(s).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    end.record(s).unwrap();
    end.synchronize().unwrap();
    assert!(start.query().unwrap() && end.query().unwrap());
    let ms = start.elapsed_time(&end).unwrap();
    assert!((4.0..5000.0).contains(&ms), "{ms} ms");
    assert!(end.elapsed_time(&start).unwrap() <= 0.0);
    let e = s.record_event(false).unwrap();
    let m = msg(e.record(device::default_stream(emu(0)).unwrap()));
    assert!(m.contains("'emu:1'") && m.contains("'emu:0'"), "{m}");
}

#[test]
fn pinned_memory_and_autocast_dtypes_come_from_the_plugin() {
    let _s = serial();
    let p = floats(&[1.0, 2.0]).pin_memory().unwrap();
    assert!(p.is_pinned() && p.device().is_cpu());
    assert_eq!(p.to_vec::<f32>().unwrap(), [1.0, 2.0]);
    assert_eq!(
        autocast::supported_dtypes(DeviceType::PrivateUse1).unwrap(),
        [DType::F16]
    );
    let m = msg(AutocastGuard::with_dtype(
        DeviceType::PrivateUse1,
        DType::BF16,
    ));
    assert!(m.contains("supports float16"), "{m}");
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
