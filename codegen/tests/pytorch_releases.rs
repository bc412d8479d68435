//! Every PyTorch release from 1.13 to 2.15 loads. The committed fixtures are the
//! entries of each release that use something 2.15 does not (reduced by
//! `tests/tools/reduce_pytorch_yaml.py`); when the full files are cached (fetched by
//! `tests/tools/fetch_pytorch_yaml.py`) they are loaded too.

use std::path::{Path, PathBuf};

const RELEASES: [&str; 16] = [
    "1.13.1", "2.0.1", "2.1.2", "2.2.2", "2.3.1", "2.4.1", "2.5.1", "2.6.0", "2.7.1", "2.8.0",
    "2.9.1", "2.10.0", "2.11.0", "2.12.1", "2.13.0", "2.14.1",
];

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pytorch-releases")
}

fn load_and_round_trip(dir: &Path) -> usize {
    let yaml = dir.join("native_functions.yaml");
    let model = match opal_codegen::load_with_tags(&yaml, Some(&dir.join("tags.yaml"))) {
        Ok(m) => m,
        Err(d) => panic!("{}", d.render(false, 120)),
    };
    let src = std::fs::read_to_string(&yaml).unwrap();
    let written: Vec<&str> = src
        .lines()
        .filter_map(|l| l.strip_prefix("- func:"))
        .map(str::trim)
        .collect();
    let declared: Vec<String> = model
        .functions
        .iter()
        .filter(|f| f.origin == opal_codegen::model::Origin::Declared)
        .map(|f| f.func.to_string())
        .collect();
    assert_eq!(declared.len(), written.len(), "{}", yaml.display());
    for (ours, theirs) in declared.iter().zip(&written) {
        assert_eq!(ours, theirs, "{}", yaml.display());
    }
    written.len()
}

#[test]
fn reduced_release_fixtures_load() {
    let mut dirs: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    let mut want: Vec<String> = RELEASES.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(dirs, want, "one fixture per release 1.13 .. 2.14");
    let total: usize = RELEASES
        .iter()
        .map(|v| load_and_round_trip(&fixtures().join(v)))
        .sum();
    // 1.13 alone has hundreds of entries 2.15 lacks (Dimname overloads and more).
    assert!(total > 3000, "{total}");
}

#[test]
fn old_only_features_are_present_in_fixtures() {
    let src = std::fs::read_to_string(fixtures().join("1.13.1/native_functions.yaml")).unwrap();
    assert!(
        src.contains("Dimname"),
        "1.13 fixture keeps named-tensor overloads"
    );
}

#[test]
fn full_cached_releases_load() {
    let cache = std::env::var_os("OPAL_PYTORCH_YAML")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/opal-pytorch-yaml"))
        });
    let Some(cache) = cache.filter(|c| c.is_dir()) else {
        eprintln!(
            "no cached PyTorch releases; run tests/tools/fetch_pytorch_yaml.py to load full files"
        );
        return;
    };
    let mut loaded = 0;
    for v in RELEASES.iter().chain(&["2.15.0"]) {
        let dir = cache.join(v);
        if dir.join("native_functions.yaml").is_file() {
            assert!(load_and_round_trip(&dir) > 2400, "{v}");
            loaded += 1;
        }
    }
    eprintln!("loaded {loaded} full releases from {}", cache.display());
}
