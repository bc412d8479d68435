//! The `resave` example on a temporary file: every tensor and the metadata survive
//! a load and save; bad arguments and unreadable files are errors naming them.

#[allow(dead_code)] // `main` is the example's entry point, unused here.
#[path = "../examples/resave.rs"]
mod example;

use std::collections::BTreeMap;

use opal::{serialize, DType, Tensor};

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("opal-resave-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn resave_round_trips_tensors_and_metadata() {
    let dir = temp_dir("ok");
    let (input, output) = (dir.join("in.safetensors"), dir.join("out.safetensors"));
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let b = Tensor::from_slice(&[-1i64, 9], &[2]).unwrap();
    let c = Tensor::from_slice(&[true, false, true, true], &[2, 2]).unwrap();
    let mut meta = BTreeMap::new();
    meta.insert("format".to_string(), "pt".to_string());
    serialize::save_file(&[("a", &a), ("b", &b), ("c", &c)], &meta, &input).unwrap();
    let args = [input.display().to_string(), output.display().to_string()];
    assert_eq!(example::run(&args), Ok(3));
    // Same tensors in, same bytes out: the writer's order and layout are canonical.
    assert_eq!(
        std::fs::read(&input).unwrap(),
        std::fs::read(&output).unwrap()
    );
    let loaded = serialize::load_file(&output, None).unwrap();
    assert_eq!(loaded.metadata, meta);
    assert_eq!(
        loaded.tensors["a"].to_vec::<f32>().unwrap(),
        a.to_vec::<f32>().unwrap()
    );
    assert_eq!(loaded.tensors["b"].dtype(), DType::I64);
    assert_eq!(
        loaded.tensors["c"].to_vec::<bool>().unwrap(),
        vec![true, false, true, true]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn resave_reports_bad_arguments_and_bad_files() {
    let dir = temp_dir("bad");
    let err = example::run(&["only-one".to_string()]).unwrap_err();
    assert!(err.contains("expected 2 arguments"), "{err}");
    let missing = dir.join("missing.safetensors").display().to_string();
    let err = example::run(&[missing.clone(), dir.join("o").display().to_string()]).unwrap_err();
    assert!(err.contains(&missing), "{err}");
    let junk = dir.join("junk.safetensors");
    std::fs::write(&junk, b"not a safetensors file").unwrap();
    let err = example::run(&[
        junk.display().to_string(),
        dir.join("o").display().to_string(),
    ])
    .unwrap_err();
    assert!(err.contains("junk.safetensors"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
