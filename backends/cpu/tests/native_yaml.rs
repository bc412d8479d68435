//! Checks the project's `native_functions.yaml` against its sources of truth: every
//! `func:` line is PyTorch 2.15's verbatim, and every op with golden cases is
//! declared. (Full torchgen-rule validation runs in the runtime's build script.)

use std::collections::HashSet;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn funcs(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("- func:"))
        .map(|f| f.split('#').next().unwrap_or("").trim().to_string())
        .collect()
}

#[test]
fn func_lines_are_pytorch_2_15_verbatim_and_cover_golden_ops() {
    let ours = std::fs::read_to_string(root().join("runtime/native_functions.yaml"))
        .expect("native_functions.yaml");
    let shared = root().join("../shared/fixtures");
    let Ok(theirs) = std::fs::read_to_string(shared.join("pytorch-2.15/native_functions.yaml"))
    else {
        eprintln!("skipped: ../shared/fixtures is not beside the repository");
        return;
    };
    let reference: HashSet<String> = funcs(&theirs).into_iter().collect();
    let ours = funcs(&ours);
    let missing: Vec<&String> = ours.iter().filter(|f| !reference.contains(*f)).collect();
    assert!(
        missing.is_empty(),
        "func lines not in PyTorch 2.15: {missing:?}"
    );
    let names: HashSet<&str> = ours
        .iter()
        .map(|f| f.split('(').next().unwrap_or(""))
        .collect();
    assert_eq!(names.len(), ours.len(), "duplicate operator names");
    let cases = std::fs::read_to_string(shared.join("golden/cases.json")).expect("cases.json");
    let json: serde_json::Value = serde_json::from_str(&cases).expect("cases.json parses");
    let mut absent = Vec::new();
    for c in json["cases"].as_array().expect("cases") {
        let op = c["op"].as_str().unwrap_or("");
        if !names.contains(op) {
            absent.push(op.to_string());
        }
    }
    assert!(
        absent.is_empty(),
        "golden ops missing from the YAML: {absent:?}"
    );
}
