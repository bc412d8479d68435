//! PyTorch 2.15's `func:` strings parse and print back as torchgen's canonical
//! strings (`schemas.txt`), line for line.

use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/pytorch-2.15")
        .join(name)
}

#[test]
fn every_func_prints_as_schemas_txt() {
    let yaml = std::fs::read_to_string(fixture("native_functions.yaml")).unwrap();
    let expected = std::fs::read_to_string(fixture("schemas.txt")).unwrap();
    let funcs: Vec<&str> = yaml
        .lines()
        .filter_map(|l| l.strip_prefix("- func:"))
        .map(str::trim)
        .collect();
    let expected: Vec<&str> = expected.lines().collect();
    assert_eq!(funcs.len(), 2590);
    assert_eq!(funcs.len(), expected.len());
    let mut bad = Vec::new();
    for (func, want) in funcs.iter().zip(&expected) {
        match opal_codegen::parse::parse_schema(func) {
            Ok(s) if s.to_string() == *want => {}
            Ok(s) => bad.push(format!("printed {s}\n   want {want}")),
            Err(e) => bad.push(format!("{func}: {e}")),
        }
    }
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad[..bad.len().min(20)].join("\n")
    );
}
