//! Files PyTorch writes load: the model files of
//! `../shared/fixtures/training/*/init.safetensors`, which the fixture generator
//! wrote from PyTorch state dicts with `safetensors.torch.save_file`, and bytes
//! laid out exactly as `save_file(tensors, path, metadata={"format": "pt"})` writes
//! them (the `__metadata__` entry first, then the tensors sorted by alignment and
//! name, compact JSON padded with spaces to a multiple of 8 bytes).
//!
//! Values are checked against the file's own bytes, read here without Opal.

use std::path::PathBuf;

use opal::{serialize, DType};

fn shared() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/training")
}

/// The header (as text) and the data section of a safetensors file.
fn split(bytes: &[u8]) -> (&str, &[u8]) {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    (
        std::str::from_utf8(&bytes[8..8 + n]).unwrap(),
        &bytes[8 + n..],
    )
}

#[test]
fn model_files_written_by_pytorch_load_with_their_values() {
    opal_cpu::init().unwrap();
    let (mut checked, mut files) = (0, 0);
    for model in ["mlp", "cnn", "gpt"] {
        let path = shared().join(model).join("init.safetensors");
        let Ok(bytes) = std::fs::read(&path) else {
            eprintln!("skipped {model}: ../shared/fixtures is not beside the repository");
            continue;
        };
        files += 1;
        let loaded = serialize::load_file(&path, None).unwrap();
        let (header, data) = split(&bytes);
        assert!(!loaded.tensors.is_empty());
        for (name, t) in &loaded.tensors {
            // The header entry of this tensor, found by its quoted name.
            let at = header
                .find(&format!("\"{name}\":{{"))
                .expect("named in the header");
            let entry = &header[at..];
            let entry = &entry[..entry.find('}').unwrap()];
            let offsets = &entry[entry.find("\"data_offsets\":[").unwrap() + 16..];
            let (a, b) = offsets.split_once(',').unwrap();
            let (a, b): (usize, usize) =
                (a.parse().unwrap(), b.trim_end_matches(']').parse().unwrap());
            assert!(entry.contains("\"dtype\":\"F64\""), "{name}: {entry}");
            assert_eq!(t.dtype(), DType::F64);
            let raw: Vec<f64> = data[a..b]
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                .collect();
            assert_eq!(t.to_vec::<f64>().unwrap(), raw, "{model}/{name}");
            let shape = &entry[entry.find("\"shape\":[").unwrap() + 9..];
            let shape: Vec<i64> = shape[..shape.find(']').unwrap()]
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().unwrap())
                .collect();
            assert_eq!(t.sizes(), &shape[..], "{model}/{name}");
            checked += 1;
        }
    }
    assert!(
        files == 0 || checked > files,
        "{checked} tensors in {files} files"
    );
}

/// Bytes as `safetensors.torch.save_file({"b": f32 [2], "a": i64 [1], "h": f16 [2]},
/// path, metadata={"format": "pt"})` writes them.
fn pytorch_style_file() -> Vec<u8> {
    let mut header = String::from(concat!(
        r#"{"__metadata__":{"format":"pt"},"#,
        r#""a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},"#,
        r#""b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},"#,
        r#""h":{"dtype":"F16","shape":[2],"data_offsets":[16,20]}}"#
    ));
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&(-3i64).to_le_bytes());
    bytes.extend_from_slice(&1.5f32.to_le_bytes());
    bytes.extend_from_slice(&(-2.0f32).to_le_bytes());
    bytes.extend_from_slice(&[0x00, 0x3c, 0x00, 0xc0]); // f16 1.0, -2.0
    bytes
}

#[test]
fn pytorch_layout_with_format_metadata_loads() {
    opal_cpu::init().unwrap();
    let loaded = serialize::load_from_bytes(&pytorch_style_file(), None).unwrap();
    assert_eq!(
        loaded.metadata.get("format").map(String::as_str),
        Some("pt")
    );
    let t = &loaded.tensors;
    assert_eq!(t["a"].to_vec::<i64>().unwrap(), [-3]);
    assert_eq!(t["b"].to_vec::<f32>().unwrap(), [1.5, -2.0]);
    assert_eq!(t["h"].dtype(), DType::F16);
    let h = t["h"].to_dtype(DType::F32).unwrap();
    assert_eq!(h.to_vec::<f32>().unwrap(), [1.0, -2.0]);
    // Saving it again keeps the metadata (and what PyTorch reads back).
    let named: Vec<(&str, &opal::Tensor)> = t.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let again = serialize::save_to_bytes(&named, &loaded.metadata).unwrap();
    let back = serialize::load_from_bytes(&again, None).unwrap();
    assert_eq!(back.metadata.get("format").map(String::as_str), Some("pt"));
    assert_eq!(back.tensors["b"].to_vec::<f32>().unwrap(), [1.5, -2.0]);
}
