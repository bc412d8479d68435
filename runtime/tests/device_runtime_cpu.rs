//! The device runtime on the CPU: its built-in hooks (one device, no memory
//! statistics), index validation, the current device and guard, per-device
//! generators, `to_dtype`, the safetensors format's exact bytes, and its one
//! synchronous default stream with host-timed events. Autocast on the CPU is in
//! `autocast_cpu.rs`.

use std::collections::BTreeMap;

use opal::device::{self, DeviceGuard};
use opal::{serialize, DType, Device, DeviceType, Generator, Tensor};

fn cpu(i: i16) -> Device {
    Device::new(DeviceType::Cpu, Some(i))
}

fn msg<T: std::fmt::Debug>(r: opal::Result<T>) -> String {
    r.expect_err("expected an error").to_string()
}

#[test]
fn the_cpu_has_one_device_without_registration() {
    assert_eq!(device::device_count(DeviceType::Cpu).unwrap(), 1);
    assert!(device::is_available(DeviceType::Cpu));
    assert_eq!(device::registered_device_types(), vec![DeviceType::Cpu]);
    assert_eq!(device::accelerator(), None);
}

#[test]
fn cpu_indices_past_zero_are_errors() {
    assert!(Tensor::empty(&[2], DType::F32, cpu(0)).is_ok());
    let m = msg(Tensor::empty(&[2], DType::F32, cpu(1)));
    assert!(
        m.contains("'cpu:1'") && m.contains("cpu has 1 device (available: cpu:0)"),
        "{m}"
    );
    let m = msg(Generator::new_for(cpu(3)));
    assert!(m.contains("'cpu:3'"), "{m}");
}

#[test]
fn current_cpu_device_and_guard() {
    assert_eq!(device::current_device(DeviceType::Cpu), 0);
    {
        let g = DeviceGuard::new(cpu(0)).unwrap();
        assert_eq!(g.original_index(), 0);
    }
    assert!(device::set_device(cpu(1)).is_err());
    assert_eq!(device::current_device(DeviceType::Cpu), 0);
}

#[test]
fn the_cpu_reports_no_memory_statistics() {
    let m = msg(device::memory_allocated(Device::cpu()));
    assert!(
        m.contains("cpu") && m.contains("does not report memory statistics"),
        "{m}"
    );
    assert!(device::reset_peak_memory_stats(Device::cpu()).is_err());
    assert!(device::empty_cache(Device::cpu()).is_ok());
}

#[test]
fn pinning_needs_an_accelerator() {
    let t = Tensor::from_slice(&[1.0f32], &[1]).unwrap();
    assert!(!t.is_pinned());
    let m = msg(t.pin_memory());
    assert!(m.contains("no accelerator") && m.contains("cpu"), "{m}");
}

#[test]
fn cpu_generator_state_round_trip() {
    let g = Generator::new_for(Device::cpu()).unwrap();
    g.manual_seed(11);
    let state = g.get_state();
    let a = g.next_f64();
    g.set_state(&state).unwrap();
    assert_eq!(g.next_f64(), a);
    let m = msg(g.set_state(&[0u8; 35]));
    assert!(m.contains("'cpu'") && m.contains("35 bytes"), "{m}");
}

#[test]
fn to_dtype_on_the_cpu() {
    opal_cpu::init().unwrap();
    let t = Tensor::from_slice(&[1.5f32, -2.0], &[2]).unwrap();
    let d = t.to_dtype(DType::F64).unwrap();
    assert_eq!(d.to_vec::<f64>().unwrap(), vec![1.5, -2.0]);
    assert!(t.to(Device::cpu()).unwrap().is_same(&t));
    assert!(t.to_dtype(DType::F32).unwrap().is_same(&t));
}

/// The bytes of a file, worked out from the format: an 8-byte little-endian header
/// length, the JSON header (tensors by descending dtype alignment, then by name;
/// `__metadata__` first) padded with spaces to a multiple of 8, then the data.
#[test]
fn saved_bytes_match_the_format_exactly() {
    // A transposed (non-contiguous) view: its logical order is 1, 3, 2, 4.
    let m = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let w = m.as_strided(&[2, 2], &[1, 2], 0).unwrap();
    let idx = Tensor::from_slice(&[1i16, -1], &[2, 1]).unwrap();
    let mut meta = BTreeMap::new();
    meta.insert("format".to_string(), "pt".to_string());
    let bytes = serialize::save_to_bytes(&[("idx", &idx), ("w", &w)], &meta).unwrap();

    let mut header = String::from(
        r#"{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"idx":{"dtype":"I16","shape":[2,1],"data_offsets":[16,20]}}"#,
    );
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut want = (header.len() as u64).to_le_bytes().to_vec();
    want.extend_from_slice(header.as_bytes());
    want.extend_from_slice(&[
        0x00, 0x00, 0x80, 0x3F, // 1.0
        0x00, 0x00, 0x40, 0x40, // 3.0
        0x00, 0x00, 0x00, 0x40, // 2.0
        0x00, 0x00, 0x80, 0x40, // 4.0
        0x01, 0x00, // 1
        0xFF, 0xFF, // -1
    ]);
    assert_eq!(bytes, want);
}

#[test]
fn dtypes_the_format_lacks_are_errors_naming_them() {
    let z = Tensor::empty(&[1], DType::C128, Device::cpu()).unwrap();
    let m = msg(serialize::save_to_bytes(&[("z", &z)], &BTreeMap::new()));
    assert!(
        m.contains("'z'") && m.contains(&DType::C128.to_string()),
        "{m}"
    );
    // A file holding a U16 tensor, which Opal has no dtype for.
    let mut header = String::from(r#"{"u":{"dtype":"U16","shape":[1],"data_offsets":[0,2]}}"#);
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(&[7, 0]);
    let m = msg(serialize::load_from_bytes(&file, None));
    assert!(m.contains("'u'") && m.contains("U16"), "{m}");
}

#[test]
fn malformed_input_and_names_are_errors() {
    assert!(serialize::load_from_bytes(b"short", None).is_err());
    assert!(serialize::load_from_bytes(&[255; 64], None).is_err());
    let t = Tensor::from_slice(&[1u8], &[1]).unwrap();
    let m = msg(serialize::save_to_bytes(
        &[("t", &t), ("t", &t)],
        &BTreeMap::new(),
    ));
    assert!(m.contains("'t'") && m.contains("twice"), "{m}");
    let m = msg(serialize::save_to_bytes(
        &[("x", &Tensor::undefined())],
        &BTreeMap::new(),
    ));
    assert!(m.contains("'x'") && m.contains("undefined"), "{m}");
    let m = msg(serialize::load_file("/nonexistent/opal.safetensors", None));
    assert!(m.contains("/nonexistent/opal.safetensors"), "{m}");
}

#[test]
fn map_location_on_a_missing_cpu_index_is_an_error() {
    opal_cpu::init().unwrap(); // `cpu` -> `cpu:0` is a `_to_copy`
    let t = Tensor::from_slice(&[1u8], &[1]).unwrap();
    let bytes = serialize::save_to_bytes(&[("t", &t)], &BTreeMap::new()).unwrap();
    let m = msg(serialize::load_from_bytes(&bytes, Some(cpu(2))));
    assert!(m.contains("'cpu:2'"), "{m}");
    let l = serialize::load_from_bytes(&bytes, Some(cpu(0))).unwrap();
    // Like PyTorch, a tensor moved to `cpu:0` reports `cpu`.
    assert!(l.tensors["t"].device().is_cpu());
    assert_eq!(l.tensors["t"].to_vec::<u8>().unwrap(), vec![1]);
}

#[test]
fn cpu_backend_meta_round_trips_unchanged() {
    let t = Tensor::from_slice(&[1i32, 2], &[2]).unwrap();
    t.set_backend_meta("origin", "a:b/c").unwrap();
    let mut meta = BTreeMap::new();
    meta.insert("format".to_string(), "pt".to_string());
    let bytes = serialize::save_to_bytes(&[("t", &t)], &meta).unwrap();
    let l = serialize::load_from_bytes(&bytes, None).unwrap();
    assert_eq!(l.tensors["t"].backend_meta()["origin"], "a:b/c");
    assert_eq!(l.metadata, meta, "only the caller's entries");
}

#[test]
fn factories_asked_to_pin_without_an_accelerator_fail() {
    opal_cpu::init().unwrap();
    let m = msg(opal::ops::zeros::call(&[2], None, None, None, Some(true)));
    assert!(m.contains("zeros") && m.contains("no accelerator"), "{m}");
    let t = opal::ops::zeros::call(&[2], None, None, None, Some(false)).unwrap();
    assert!(!t.is_pinned());
}

// ---- streams and events on the CPU: one synchronous default stream ----

#[test]
fn the_cpu_has_one_synchronous_default_stream() {
    let s = device::current_stream(Device::cpu()).unwrap();
    assert_eq!(s, opal::Stream::default_for(cpu(0)));
    assert_eq!(device::default_stream(Device::cpu()).unwrap(), s);
    assert!(s.query().unwrap());
    s.synchronize().unwrap();
    device::synchronize(Device::cpu()).unwrap();
    let m = msg(device::new_stream(Device::cpu()));
    assert!(
        m.contains("'cpu:0'") && m.contains("only the default stream"),
        "{m}"
    );
    let m = msg(device::set_stream(opal::Stream {
        device: cpu(0),
        id: 3,
    }));
    assert!(m.contains("'cpu:0' has no stream 3"), "{m}");
    let m = msg(device::current_stream(cpu(1)));
    assert!(m.contains("'cpu:1'"), "{m}");
    {
        let g = device::StreamGuard::new(s).unwrap();
        assert_eq!(g.original_stream(), s);
    }
    assert_eq!(device::current_stream(Device::cpu()).unwrap(), s);
}

#[test]
fn cpu_events_complete_when_recorded_and_time_the_host() {
    let s = device::default_stream(Device::cpu()).unwrap();
    let (start, end) = (device::Event::new(true), device::Event::new(true));
    assert!(start.query().unwrap());
    let m = msg(start.elapsed_time(&end));
    assert!(m.contains("never recorded"), "{m}");
    start.record(s).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    end.record(s).unwrap();
    assert!(end.query().unwrap());
    end.synchronize().unwrap();
    s.wait_event(&start).unwrap();
    let ms = start.elapsed_time(&end).unwrap();
    assert!(ms >= 15.0, "{ms} ms");
    assert_eq!(start.device(), Some(cpu(0)));
    let untimed = s.record_event(false).unwrap();
    let m = msg(untimed.elapsed_time(&end));
    assert!(m.contains("timing enabled"), "{m}");
}
