//! Malformed and over-limit archives: each is an `Err` whose message names the
//! archive and the thing that is wrong, found before the allocation it would
//! cause and before any node runs. The archives are this crate's tiny fixture,
//! rewritten in a temporary directory.

use crate::common;

use common::dir_from_env;
use opal_export::{device, ExportedProgram, LoadLimits, RunLimits};
use serde_json::Value;
use std::io::{Read, Write};
use std::path::PathBuf;

const NAME: &str = "tied_mlp_dynamic";

fn fixture() -> PathBuf {
    dir_from_env("OPAL_EXPORT_MODELS_DIR", "export/tests/fixtures/models")
        .join(format!("{NAME}.pt2"))
}

fn temp(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("opal_export_malformed_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{tag}.pt2"))
}

/// The fixture with each entry passed through `edit` (relative name, bytes);
/// `false` drops the entry.
fn rewrite(tag: &str, edit: impl Fn(&str, &mut Vec<u8>) -> bool) -> PathBuf {
    let mut src = zip::ZipArchive::new(std::fs::File::open(fixture()).unwrap()).unwrap();
    let out = temp(tag);
    let mut w = zip::ZipWriter::new(std::fs::File::create(&out).unwrap());
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for i in 0..src.len() {
        let mut f = src.by_index(i).unwrap();
        let name = f.name().unwrap().to_string();
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).unwrap();
        let rel = name
            .strip_prefix(&format!("{NAME}/"))
            .unwrap_or(&name)
            .to_string();
        if edit(&rel, &mut bytes) {
            w.start_file(name, opts).unwrap();
            w.write_all(&bytes).unwrap();
        }
    }
    w.finish().unwrap();
    out
}

/// The fixture with the JSON entry `rel` changed by `f`.
fn edit_json(tag: &str, rel: &'static str, f: impl Fn(&mut Value)) -> PathBuf {
    rewrite(tag, |name, bytes| {
        if name == rel {
            let mut v: Value = serde_json::from_slice(bytes).unwrap();
            f(&mut v);
            *bytes = serde_json::to_vec(&v).unwrap();
        }
        true
    })
}

const MODEL: &str = "models/model.json";
const WEIGHTS: &str = "data/weights/model_weights_config.json";

fn load_err(path: &PathBuf) -> String {
    let e = ExportedProgram::load(path)
        .err()
        .expect("loading must fail");
    let msg = e.to_string();
    assert!(
        msg.contains(path.file_name().unwrap().to_str().unwrap()),
        "names the archive: {msg}"
    );
    msg
}

fn assert_has(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "expected `{p}` in: {msg}");
    }
}

#[test]
fn the_fixture_itself_loads() {
    ExportedProgram::load(fixture()).unwrap();
}

#[test]
fn a_truncated_archive_is_refused() {
    let bytes = std::fs::read(fixture()).unwrap();
    for (i, cut) in [bytes.len() / 2, bytes.len() - 30, 100]
        .into_iter()
        .enumerate()
    {
        let p = temp(&format!("truncated{i}"));
        std::fs::write(&p, &bytes[..cut]).unwrap();
        let msg = load_err(&p);
        assert_has(&msg, &["zip"]);
    }
}

#[test]
fn a_weight_larger_than_its_file_is_refused() {
    let p = edit_json("weight_size", WEIGHTS, |v| {
        v["config"]["inp.weight"]["tensor_meta"]["sizes"][0]["as_int"] = 160.into();
    });
    assert_has(&load_err(&p), &["inp.weight", "reach", "bytes", "weight_"]);
}

#[test]
fn a_weight_offset_past_its_file_is_refused() {
    let p = edit_json("weight_offset", WEIGHTS, |v| {
        v["config"]["inp.bias"]["tensor_meta"]["storage_offset"]["as_int"] = 1_000_000.into();
    });
    assert_has(&load_err(&p), &["inp.bias", "reach"]);
}

#[test]
fn a_huge_weight_shape_is_refused_before_allocating() {
    let p = edit_json("huge_weight", WEIGHTS, |v| {
        let m = &mut v["config"]["inp.weight"]["tensor_meta"];
        m["sizes"] = serde_json::json!([{"as_int": 1_i64 << 40}, {"as_int": 1_i64 << 40}]);
        m["strides"] = serde_json::json!([{"as_int": 1_i64 << 40}, {"as_int": 1}]);
    });
    assert_has(&load_err(&p), &["inp.weight", "overflows"]);
}

#[test]
fn a_huge_tensor_value_shape_is_refused() {
    let p = edit_json("huge_value", MODEL, |v| {
        let tv = v["graph_module"]["graph"]["tensor_values"]
            .as_object_mut()
            .unwrap();
        let (_, m) = tv.iter_mut().next().unwrap();
        m["sizes"] = serde_json::json!([{"as_int": i64::MAX}, {"as_int": 4}]);
        m["strides"] = serde_json::json!([{"as_int": 4}, {"as_int": 1}]);
    });
    assert_has(&load_err(&p), &["tensor value", "overflows"]);
}

#[test]
fn pickled_weights_are_refused() {
    let p = edit_json("pickle", WEIGHTS, |v| {
        v["config"]["inp.bias"]["use_pickle"] = true.into();
    });
    assert_has(&load_err(&p), &["inp.bias", "use_pickle"]);
}

#[test]
fn a_missing_weight_file_is_refused() {
    let p = rewrite("missing_weight", |name, _| name != "data/weights/weight_1");
    assert_has(&load_err(&p), &["weight_1", "missing"]);
}

/// The fixture with the first node of `target` (`relu` for
/// `torch.ops.aten.relu.default`) changed by `f`; the load error must name `parts`.
fn edit_node_err(tag: &str, op: &str, f: impl Fn(&mut Value), parts: &[&str]) {
    let target = format!("torch.ops.aten.{op}.default");
    let p = edit_json(tag, MODEL, |v| {
        let nodes = v["graph_module"]["graph"]["nodes"].as_array_mut().unwrap();
        f(nodes
            .iter_mut()
            .find(|n| n["target"] == target.as_str())
            .unwrap());
    });
    assert_has(&load_err(&p), parts);
}

#[test]
fn a_node_naming_an_undefined_value_is_refused() {
    edit_node_err(
        "undefined_value",
        "relu",
        |n| n["inputs"][0]["arg"]["as_tensor"]["name"] = "no_such_value".into(),
        &[
            "node 'relu'",
            "no_such_value",
            "no graph input or earlier node",
        ],
    );
}

#[test]
fn an_unknown_aten_target_is_refused() {
    edit_node_err(
        "unknown_op",
        "relu",
        |n| n["target"] = "torch.ops.aten.frobnicate.default".into(),
        &["node 'relu'", "aten::frobnicate", "not defined in Opal"],
    );
}

#[test]
fn an_operator_of_an_undeclared_namespace_is_refused() {
    edit_node_err(
        "custom_op",
        "tanh",
        |n| n["target"] = "torch.ops.mylib.fancy.default".into(),
        &["node 'tanh'", "mylib::fancy", "not defined in Opal"],
    );
}

#[test]
fn a_target_outside_torch_ops_is_refused() {
    edit_node_err(
        "other_target",
        "tanh",
        |n| n["target"] = "math.tanh".into(),
        &["node 'tanh'", "math.tanh", "not an ATen operator"],
    );
}

#[test]
fn an_unknown_argument_name_is_refused() {
    edit_node_err(
        "unknown_arg",
        "relu",
        |n| n["inputs"][0]["name"] = "input_tensor".into(),
        &["node 'relu'", "no argument 'input_tensor'"],
    );
}

#[test]
fn a_newer_schema_major_is_refused() {
    let p = edit_json("schema9", MODEL, |v| {
        v["schema_version"]["major"] = 9.into();
    });
    assert_has(&load_err(&p), &["schema version 9.", "major 8"]);
}

#[test]
fn not_a_pt2_archive_is_refused() {
    let p = rewrite("format", |name, bytes| {
        if name == "archive_format" {
            *bytes = b"torchscript".to_vec();
        }
        true
    });
    assert_has(&load_err(&p), &["archive_format", "torchscript"]);
    let p = rewrite("no_model", |name, _| name != MODEL);
    assert_has(&load_err(&p), &["models/<name>.json"]);
    let p = temp("empty");
    std::fs::write(&p, b"").unwrap();
    load_err(&p);
}

#[test]
fn invalid_json_is_refused() {
    let p = rewrite("bad_json", |name, bytes| {
        if name == MODEL {
            bytes.truncate(bytes.len() / 2);
        }
        true
    });
    assert_has(&load_err(&p), &["JSON"]);
}

#[test]
fn load_limits_are_enforced_and_named() {
    let path = fixture();
    let check = |limits: LoadLimits, name: &str| {
        let msg = ExportedProgram::load_with(&path, &limits)
            .err()
            .expect("over the limit")
            .to_string();
        assert_has(&msg, &[name]);
    };
    check(
        LoadLimits {
            max_nodes: 3,
            ..Default::default()
        },
        "max_nodes",
    );
    check(
        LoadLimits {
            max_weight_bytes: 600,
            ..Default::default()
        },
        "max_weight_bytes",
    );
    check(
        LoadLimits {
            max_json_bytes: 1000,
            ..Default::default()
        },
        "max_json_bytes",
    );
    check(
        LoadLimits {
            max_archive_bytes: 1000,
            ..Default::default()
        },
        "max_archive_bytes",
    );
}

#[test]
fn the_peak_intermediate_limit_is_enforced_and_named() {
    let p = ExportedProgram::load(fixture()).unwrap();
    let r = p.to_device(device("cpu").unwrap()).unwrap();
    let x = opal::Tensor::empty(&[3, 8], opal::DType::F32, opal::Device::cpu()).unwrap();
    let limits = RunLimits {
        max_peak_intermediate_bytes: 64,
    };
    let msg = r
        .run_with(std::slice::from_ref(&x), &limits)
        .unwrap_err()
        .to_string();
    assert_has(&msg, &["max_peak_intermediate_bytes", "node '"]);
    r.run_with(&[x], &RunLimits::default()).unwrap();
}

#[test]
fn wrong_input_counts_are_refused() {
    let p = ExportedProgram::load(fixture()).unwrap();
    let r = p.to_device(device("cpu").unwrap()).unwrap();
    let msg = r.run(&[]).unwrap_err().to_string();
    assert_has(&msg, &["takes 1 inputs, 0 were given"]);
}
