//! Replays every file of the fuzz corpora (`fuzz/corpus/<target>/`) and every
//! reproducer (`fuzz/regressions/<target>/`) through the same target bodies the
//! cargo-fuzz binaries run (`fuzz/targets.rs`), on stable: a crash the fuzzer once
//! found stays fixed without nightly or libFuzzer. `fuzz/regressions/boxed_known/`
//! holds crashes of the runtime and backends not fixed yet; it is not replayed.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

#[allow(dead_code, reason = "the fuzz-only helpers are used by the targets")]
#[path = "../../fuzz/targets.rs"]
mod targets;

/// Runs `body` on every file under `fuzz/{corpus,regressions}/<target>/`; returns
/// how many ran. Fails naming each file that panicked.
fn replay(target: &str, body: fn(&[u8])) -> usize {
    let fuzz = opal_tests::scratch::workspace_root().join("fuzz");
    let mut ran = 0;
    let mut failed = Vec::new();
    for dir in ["corpus", "regressions"] {
        let dir = fuzz.join(dir).join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<_> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
        files.sort();
        for f in files.iter().filter(|f| f.is_file()) {
            let data = std::fs::read(f).expect("readable corpus file");
            ran += 1;
            if catch_unwind(AssertUnwindSafe(|| body(&data))).is_err() {
                failed.push(shown(&fuzz, f));
            }
        }
    }
    assert!(failed.is_empty(), "{target}: panicked on {failed:?}");
    ran
}

fn shown(root: &Path, f: &Path) -> String {
    f.strip_prefix(root).unwrap_or(f).display().to_string()
}

/// One test per target: its corpus and regressions replay without a panic.
macro_rules! replays {
    ($($test:ident: $target:ident),* $(,)?) => {$(
        #[test]
        fn $test() {
            assert!(replay(stringify!($target), targets::$target) > 0);
        }
    )*};
}

replays! {
    schema_corpus_replays: schema,
    native_yaml_corpus_replays: native_yaml,
    backend_yaml_corpus_replays: backend_yaml,
    boxed_call_corpus_replays: boxed_call,
    safetensors_corpus_replays: safetensors,
    plugin_manifest_corpus_replays: plugin_manifest,
    pt2_corpus_replays: pt2,
}
