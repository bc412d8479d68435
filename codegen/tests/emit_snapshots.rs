//! Snapshot tests of generated code: each directory of `tests/fixtures/emit/` holds
//! a `native_functions.yaml`; its generated files (or its rendered errors) are
//! compared with insta snapshots kept beside it.

use std::path::{Path, PathBuf};

use opal_codegen::emit::{self, EmitOptions};

fn case_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/emit")
        .join(case)
}

fn generate(case: &str) -> Result<emit::Generated, String> {
    let yaml = case_dir(case).join("native_functions.yaml");
    let model = opal_codegen::load(&yaml).map_err(|d| d.render(false, 100))?;
    emit::generate(&model, &EmitOptions::default()).map_err(|errs| {
        // Rendered with a path relative to the fixtures, not replaced afterwards: the
        // message is wrapped at a fixed width, so the checkout's absolute path length
        // would otherwise change where lines break.
        let mut d = opal_codegen::builder::emit_diagnostics(&yaml, &errs);
        d.path = format!("{case}/native_functions.yaml");
        d.render(false, 100)
    })
}

fn snapshot_files(case: &str) {
    let g = generate(case).unwrap_or_else(|e| panic!("{case}: {e}"));
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(case_dir(case));
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| {
        for (name, text) in &g.files {
            insta::assert_snapshot!(name.replace(".rs", ""), text);
        }
        let unsupported: Vec<String> = g
            .unsupported
            .iter()
            .map(|u| format!("{}:{}: {}: {}", u.loc.line, u.loc.col, u.op, u.reason))
            .collect();
        insta::assert_snapshot!("unsupported", unsupported.join("\n"));
    });
}

#[test]
fn ops_fixture() {
    snapshot_files("ops");
}

#[test]
fn generation_is_byte_identical_on_rerun() {
    let a = generate("ops").unwrap();
    let b = generate("ops").unwrap();
    assert_eq!(a.files, b.files);
}

#[test]
fn each_op_documents_its_schema_once() {
    let g = generate("ops").unwrap();
    let ops = &g.files.iter().find(|(n, _)| n == "ops_000.rs").unwrap().1;
    // Each op's module carries the qualified schema in its docs, once per op; the
    // other public items are documented without repeating it.
    let mut doc: Vec<&str> = Vec::new();
    let mut schemas: Vec<&str> = Vec::new();
    let mut modules = 0;
    for line in ops.lines().map(str::trim) {
        if let Some(d) = line.strip_prefix("///") {
            doc.push(d);
            continue;
        }
        if line.starts_with("#[") {
            continue;
        }
        let item = [
            "pub fn ",
            "pub mod ",
            "pub type ",
            "pub static ",
            "pub struct ",
        ]
        .iter()
        .any(|p| line.starts_with(p));
        let schema = doc
            .iter()
            .find_map(|d| d.trim().strip_prefix("Schema: `aten::"));
        if item && !line.starts_with("pub mod prelude") {
            assert!(!doc.is_empty(), "undocumented item: {line}");
            if line.starts_with("pub mod ") {
                modules += 1;
                schemas.push(schema.unwrap_or_else(|| panic!("op module without schema: {line}")));
            } else {
                assert!(schema.is_none(), "schema repeated on {line}");
            }
        }
        if !line.is_empty() {
            doc.clear();
        }
    }
    assert!(modules > 3, "{modules} op modules");
    let mut unique = schemas.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), schemas.len(), "a schema documented twice");
}

#[test]
fn unsupported_ops_are_reported_not_generated() {
    let g = generate("ops").unwrap();
    let ops: Vec<&str> = g.unsupported.iter().map(|u| u.op.as_str()).collect();
    assert_eq!(ops, ["odd"]);
    assert!(g.unsupported[0].reason.contains("__hidden"));
    assert!(g.files.iter().all(|(_, t)| !t.contains("pub fn odd")));
}

#[test]
fn name_collisions_are_located_errors() {
    let err = generate("collision").unwrap_err();
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(case_dir("collision"));
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!("errors", err));
}
