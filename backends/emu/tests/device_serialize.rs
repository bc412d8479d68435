//! Safetensors files and backend metadata on the example `emu` device: every dtype
//! round trips from emu tensors, `map_location` puts tensors on an emu device,
//! strided device tensors save their logical elements, and backend metadata goes
//! into the file's `__metadata__` through emu's hooks and back.

use crate::common;

use std::collections::BTreeMap;

use common::{emu, floats, msg, serial};
use opal::serialize;
use opal::{DType, Device, Tensor};

// ---- serialization ----

/// A tensor of 16-bit floats from their bit patterns.
fn halves(bits: &[u16], dtype: DType) -> Tensor {
    let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_ne_bytes()).collect();
    Tensor::from_bytes(&bytes, &[bits.len() as i64], dtype).unwrap()
}

fn one_of_each_dtype() -> Vec<(&'static str, Tensor)> {
    vec![
        ("b", Tensor::from_slice(&[true, false, true], &[3]).unwrap()),
        ("u8", Tensor::from_slice(&[0u8, 7, 255], &[3]).unwrap()),
        ("i8", Tensor::from_slice(&[-128i8, 0, 127], &[3]).unwrap()),
        ("i16", Tensor::from_slice(&[-300i16, 1, 300], &[3]).unwrap()),
        (
            "i32",
            Tensor::from_slice(&[i32::MIN, 5, i32::MAX], &[3]).unwrap(),
        ),
        (
            "i64",
            Tensor::from_slice(&[i64::MIN, 6, i64::MAX], &[3]).unwrap(),
        ),
        // 0.5, -2.0, the largest f16; 1.5, -8.0, the lowest bf16.
        ("f16", halves(&[0x3800, 0xC000, 0x7BFF], DType::F16)),
        ("bf16", halves(&[0x3FC0, 0xC100, 0xFF7F], DType::BF16)),
        ("f32", floats(&[0.1, -0.2, 1e30], &[3])),
        (
            "f64",
            Tensor::from_slice(&[0.1f64, -0.2, 1e300], &[1, 3]).unwrap(),
        ),
    ]
}

#[test]
fn every_dtype_round_trips_from_emu_through_safetensors() {
    let _s = serial();
    let host = one_of_each_dtype();
    let on_emu: Vec<(&str, Tensor)> = host
        .iter()
        .map(|(n, t)| (*n, t.to(emu(1)).unwrap()))
        .collect();
    let refs: Vec<(&str, &Tensor)> = on_emu.iter().map(|(n, t)| (*n, t)).collect();
    let bytes = serialize::save_to_bytes(&refs, &BTreeMap::new()).unwrap();
    let loaded = serialize::load_from_bytes(&bytes, None).unwrap();
    assert_eq!(loaded.tensors.len(), host.len());
    for (name, t) in &host {
        let l = &loaded.tensors[*name];
        assert_eq!(
            (l.dtype(), l.sizes(), l.device()),
            (t.dtype(), t.sizes(), Device::cpu())
        );
        assert_eq!(l.to_bytes().unwrap(), t.to_bytes().unwrap(), "{name}");
    }
}

#[test]
fn map_location_loads_onto_an_emu_device() {
    let _s = serial();
    let dir = std::env::temp_dir().join(format!("opal-devrt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("map_location.safetensors");
    let w = floats(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let mut meta = BTreeMap::new();
    meta.insert("format".to_string(), "pt".to_string());
    serialize::save_file(&[("w", &w)], &meta, &path).unwrap();
    let loaded = serialize::load_file(&path, Some(emu(1))).unwrap();
    let l = &loaded.tensors["w"];
    assert_eq!(l.device(), emu(1));
    assert_eq!(
        l.to(Device::cpu()).unwrap().to_vec::<f32>().unwrap(),
        vec![1.0, 2.0, 3.0, 4.0]
    );
    assert_eq!(loaded.metadata, meta);
    let m = msg(serialize::load_file(&path, Some(emu(6))));
    assert!(m.contains("'emu:6'"), "{m}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn complex_tensors_cannot_be_saved() {
    let _s = serial();
    let z = Tensor::empty(&[2], DType::C64, Device::cpu()).unwrap();
    let m = msg(serialize::save_to_bytes(&[("z", &z)], &BTreeMap::new()));
    assert!(
        m.contains("'z'") && m.contains(&DType::C64.to_string()),
        "{m}"
    );
}

#[test]
fn non_contiguous_emu_tensors_save_their_logical_elements() {
    let _s = serial();
    let c = floats(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])
        .to(emu(0))
        .unwrap();
    let t = c.as_strided(&[3, 2], &[1, 3], 0).unwrap();
    let bytes = serialize::save_to_bytes(&[("t", &t)], &BTreeMap::new()).unwrap();
    let l = serialize::load_from_bytes(&bytes, Some(emu(0))).unwrap();
    let back = l.tensors["t"].to(Device::cpu()).unwrap();
    assert_eq!(back.sizes(), &[3, 2]);
    assert_eq!(
        back.to_vec::<f32>().unwrap(),
        vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    );
}

// ---- backend metadata ----

#[test]
fn backend_meta_is_shared_by_views_and_not_by_copies() {
    let _s = serial();
    let e = floats(&[1.0, 2.0, 3.0, 4.0], &[4]).to(emu(0)).unwrap();
    assert!(e.backend_meta().is_empty());
    e.set_backend_meta("layout", "tiled").unwrap();
    let view = e.as_strided(&[2], &[2], 0).unwrap();
    assert_eq!(view.backend_meta()["layout"], "tiled");
    assert_eq!(e.clone().backend_meta(), e.backend_meta());
    view.set_backend_meta("tile", "8").unwrap();
    assert_eq!(
        e.backend_meta().len(),
        2,
        "set through a view, seen by the base"
    );
    assert!(
        e.to(emu(1)).unwrap().backend_meta().is_empty(),
        "a copy starts empty"
    );
    e.clear_backend_meta();
    assert!(view.backend_meta().is_empty());
}

#[test]
fn backend_meta_keys_are_checked() {
    let _s = serial();
    let e = floats(&[1.0], &[1]).to(emu(1)).unwrap();
    let m = msg(e.set_backend_meta("a/b", "x"));
    assert!(m.contains("'a/b'") && m.contains("'emu:1'"), "{m}");
    assert!(e.set_backend_meta("", "x").is_err());
    let m = msg(Tensor::undefined().set_backend_meta("k", "v"));
    assert!(m.contains("undefined"), "{m}");
}

#[test]
fn backend_meta_round_trips_through_the_hooks_into_a_file() {
    let _s = serial();
    let e = floats(&[5.0, 6.0], &[2]).to(emu(0)).unwrap();
    e.set_backend_meta("layout", "tiled").unwrap();
    e.set_backend_meta("transient.cache", "42").unwrap();
    let bytes = serialize::save_to_bytes(&[("w.0", &e)], &BTreeMap::new()).unwrap();
    // The header holds emu's encoding, made by its hooks; transient keys are left out.
    let header = String::from_utf8_lossy(&bytes[8..]);
    assert!(
        header.contains(r#""opal.backend_meta/w.0/layout":"emu:emu-v1;tiled""#),
        "{header}"
    );
    assert!(!header.contains("transient"), "{header}");
    let on_emu = serialize::load_from_bytes(&bytes, Some(emu(1))).unwrap();
    let w = &on_emu.tensors["w.0"];
    assert_eq!(
        w.backend_meta().into_iter().collect::<Vec<_>>(),
        vec![("layout".to_string(), "tiled".to_string())]
    );
    assert!(
        on_emu.metadata.is_empty(),
        "backend entries are not user metadata"
    );
    let on_cpu = serialize::load_from_bytes(&bytes, None).unwrap();
    assert!(
        on_cpu.tensors["w.0"].backend_meta().is_empty(),
        "meaningless on the cpu"
    );
}

#[test]
fn unreadable_backend_meta_fails_the_load_and_reserved_keys_the_save() {
    let _s = serial();
    let e = floats(&[1.0], &[1]).to(emu(0)).unwrap();
    let mut meta = BTreeMap::new();
    meta.insert(
        "opal.backend_meta/e/k".to_string(),
        "emu:garbage".to_string(),
    );
    let m = msg(serialize::save_to_bytes(&[("e", &e)], &meta));
    assert!(m.contains("reserved"), "{m}");
    // A file whose entry lacks emu's encoding tag, written by hand.
    let mut header = String::from(
        r#"{"__metadata__":{"opal.backend_meta/e/k":"emu:garbage"},"e":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#,
    );
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(&1.0f32.to_le_bytes());
    let m = msg(serialize::load_from_bytes(&file, Some(emu(0))));
    assert!(m.contains("emu-v1;") && m.contains("'k'"), "{m}");
}
