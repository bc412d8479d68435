//! The malformed corpus (`tests/fixtures/malformed/`, one fault per file): every
//! file is rejected without panicking, quickly, and its rendered diagnostics (no
//! colors, 100 columns) match the insta snapshot.

use std::path::PathBuf;
use std::time::{Duration, Instant};

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/malformed")
}

fn render(name: &str) -> (String, usize) {
    let dir = corpus();
    let tags = opal_codegen::load_tags_bytes(
        &std::fs::read(dir.join("tags.yaml")).unwrap(),
        "tests/fixtures/malformed/tags.yaml",
    )
    .unwrap();
    let bytes = std::fs::read(dir.join(name)).unwrap();
    let shown = format!("tests/fixtures/malformed/{name}");
    let start = Instant::now();
    let result = opal_codegen::load_bytes(&bytes, &shown, Some(&tags));
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{name} took {:?}",
        start.elapsed()
    );
    match result {
        Ok(m) => panic!(
            "{name} loaded ({} functions) but must be rejected",
            m.functions.len()
        ),
        Err(d) => (d.render(false, 100), d.len()),
    }
}

#[test]
fn every_malformed_file_is_rejected_with_a_stable_message() {
    let mut names: Vec<String> = std::fs::read_dir(corpus())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && n != "tags.yaml")
        .collect();
    names.sort();
    assert!(names.len() >= 30, "corpus has {} files", names.len());
    for name in &names {
        let (text, _) = render(name);
        assert!(
            text.contains(&format!("tests/fixtures/malformed/{name}:")),
            "{name}: no path:line:col\n{text}"
        );
        assert!(
            !text.contains('\u{1b}'),
            "{name}: ANSI escapes in plain rendering"
        );
        insta::assert_snapshot!(name.trim_end_matches(".yaml"), text);
    }
}

#[test]
fn all_errors_of_a_file_are_reported_in_one_run() {
    let (text, n) = render("several_errors.yaml");
    assert_eq!(n, 3, "{text}");
    for what in ["functoin", "Tensr", "CPUU"] {
        assert!(text.contains(what), "{what} missing from\n{text}");
    }
}

#[test]
fn alias_bomb_is_refused_fast() {
    let start = Instant::now();
    let (text, _) = render("alias_bomb.yaml");
    assert!(
        start.elapsed() < Duration::from_millis(500),
        "{:?}",
        start.elapsed()
    );
    assert!(text.contains("invalid YAML"), "{text}");
}

#[test]
fn every_error_has_a_hint() {
    let dir = corpus();
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        if path.file_name().unwrap() == "tags.yaml" {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let d = opal_codegen::load_bytes(&bytes, "x.yaml", None).err();
        for item in d.iter().flat_map(|d| &d.items) {
            assert!(
                item.hint.is_some(),
                "{}: `{}` has no hint",
                path.display(),
                item.message
            );
            assert!(
                !item.loc.is_synthetic(),
                "{}: `{}` has no location",
                path.display(),
                item.message
            );
        }
    }
}
