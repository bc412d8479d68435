//! Shared by the model tests: where the fixture directories are, their
//! `models.json`, and the elementwise comparison (`|a - e| <= atol + rtol * |e|`,
//! NaN equals NaN).

#![allow(dead_code)]

use opal::{DType, Tensor};
use serde_json::Value;
use std::path::{Path, PathBuf};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The directory named by `var` (relative: from the repository root), else
/// `default` under the repository root.
pub fn dir_from_env(var: &str, default: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(d) if Path::new(&d).is_absolute() => PathBuf::from(d),
        Some(d) => repo_root().join(d),
        None => repo_root().join(default),
    }
}

/// The shared six (`OPAL_MODELS_DIR`, default `../shared/fixtures/models`).
pub fn shared_dir() -> PathBuf {
    dir_from_env("OPAL_MODELS_DIR", "../shared/fixtures/models")
}

pub struct Model {
    pub name: String,
    pub path: PathBuf,
    pub io: PathBuf,
    pub outputs: Vec<(Vec<i64>, DType)>,
    pub atol: f64,
    pub rtol: f64,
}

fn dtype(s: &str) -> DType {
    DType::parse(s).unwrap_or_else(|e| panic!("models.json dtype '{s}': {e}"))
}

/// Every model of `dir/models.json`.
pub fn models(dir: &Path) -> Vec<Model> {
    let path = dir.join("models.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let v: Value = serde_json::from_str(&text).expect("models.json is JSON");
    let ms = v["models"].as_object().expect("models.json has `models`");
    assert!(!ms.is_empty(), "{} lists no models", path.display());
    ms.iter()
        .map(|(name, m)| Model {
            name: name.clone(),
            path: dir.join(format!("{name}.pt2")),
            io: dir.join(format!("{name}.io.safetensors")),
            outputs: m["outputs"]
                .as_array()
                .expect("outputs")
                .iter()
                .map(|o| {
                    let shape = o["shape"]
                        .as_array()
                        .expect("shape")
                        .iter()
                        .map(|s| s.as_i64().expect("int size"))
                        .collect();
                    (shape, dtype(o["dtype"].as_str().expect("dtype")))
                })
                .collect(),
            atol: m["atol"].as_f64().expect("atol"),
            rtol: m["rtol"].as_f64().expect("rtol"),
        })
        .collect()
}

/// `Err` describing the first element out of tolerance.
pub fn compare(actual: &Tensor, expected: &Tensor, atol: f64, rtol: f64) -> Result<(), String> {
    // Registers the CPU backend the conversions below run on.
    opal_export::device("cpu").map_err(|e| e.to_string())?;
    if actual.dtype() != expected.dtype() || actual.sizes() != expected.sizes() {
        return Err(format!(
            "got {} {:?}, expected {} {:?}",
            actual.dtype(),
            actual.sizes(),
            expected.dtype(),
            expected.sizes()
        ));
    }
    let as_f64 = |t: &Tensor| -> Vec<f64> {
        t.to(opal::Device::cpu())
            .and_then(|t| t.to_dtype(DType::F64))
            .and_then(|t| t.to_vec::<f64>())
            .expect("reading values")
    };
    let (a, e) = (as_f64(actual), as_f64(expected));
    let mut worst: Option<(usize, f64, f64)> = None;
    let mut bad = 0usize;
    for (i, (&x, &y)) in a.iter().zip(&e).enumerate() {
        let ok = (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= atol + rtol * y.abs();
        if !ok {
            bad += 1;
            if worst.is_none_or(|(_, wx, wy)| (x - y).abs() > (wx - wy).abs() || wx.is_nan()) {
                worst = Some((i, x, y));
            }
        }
    }
    match worst {
        None => Ok(()),
        Some((i, x, y)) => Err(format!(
            "{bad} of {} elements out of tolerance (atol {atol}, rtol {rtol}); worst at {i}: {x} vs {y}",
            a.len()
        )),
    }
}
