//! Backend generation for 400 supported ops against PyTorch 2.15's
//! `native_functions.yaml`: the kernel trait, registration, 40 pinned kernels with
//! defaulted-argument adapters, derived structured ops and the per-op items.
//! Target: 30 ms; torchgen's `gen_backend_stubs` takes 1.54 s here.
//!
//! `backend_generate_400_ops_path`: resolve + generate from loaded YAMLs, referring to
//! the per-op items of `::opal::ops` (how a backend of Opal's own YAML is built).
//! `backend_generate_400`: the same, carrying its own copy of the per-op items (any
//! native YAML).
//! `backend_end_to_end_400`: loads and validates both YAMLs from bytes, then
//! generates with `ops_path` (what `opal-codegen backend --ops-path` does, minus
//! writing the file).

// What the CLI and build scripts run with (see `opal_codegen::BuildAllocator`).
#[global_allocator]
static ALLOC: opal_codegen::BuildAllocator = opal_codegen::BuildAllocator;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use opal_codegen::backend::run::{coverage_of, generate_code, Inputs};
use opal_codegen::backend::{load_bytes, BackendSpec, SourceFile, Status};
use opal_codegen::model::{NativeFunctions, Origin};

/// A backend YAML supporting the first 400 ops with a CPU kernel; the first 40 of
/// them with a defaulted argument are pinned to their schema without that argument.
fn backend_yaml(natives: &NativeFunctions) -> String {
    let mut y = String::from(
        "backend: Bench\ndispatch_key: PrivateUse1\ndevice: bench\nfallback: cpu\nsupported:\n",
    );
    let ops = natives
        .functions
        .iter()
        .filter(|f| matches!(f.origin, Origin::Declared) && f.dispatch.contains_key("CPU"))
        .filter(|f| opal_codegen::op_ident(&f.func.name).is_ok())
        .take(400);
    let mut pinned = 0;
    for f in ops {
        let mut s = f.func.clone();
        let kw = s
            .arguments
            .kwarg_only
            .iter()
            .rposition(|a| a.default.is_some());
        let pos = s
            .arguments
            .positional
            .iter()
            .rposition(|a| a.default.is_some());
        if pinned < 40 && (kw.is_some() || pos.is_some()) {
            match kw {
                Some(i) => drop(s.arguments.kwarg_only.remove(i)),
                None => drop(s.arguments.positional.remove(pos.unwrap_or_default())),
            }
            pinned += 1;
            let _ = writeln!(y, "  - func: {s}");
        } else {
            let _ = writeln!(y, "  - {}", f.func.name);
        }
    }
    y
}

fn bench(c: &mut Criterion) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/pytorch-2.15");
    let native_bytes = std::fs::read(dir.join("native_functions.yaml")).expect("2.15 fixture");
    let tags = opal_codegen::load_tags_bytes(
        &std::fs::read(dir.join("tags.yaml")).expect("tags"),
        "tags.yaml",
    )
    .expect("tags load");
    let natives = opal_codegen::load_bytes(&native_bytes, "native_functions.yaml", Some(&tags))
        .expect("2.15 loads");
    let yaml = backend_yaml(&natives);
    let spec = load_bytes("bench.yaml", yaml.as_bytes()).expect("backend YAML loads");
    assert_eq!(spec.supported.len(), 400);
    let backend_text: Arc<str> = Arc::from(yaml.as_str());
    let native_text: Arc<str> = Arc::from(std::str::from_utf8(&native_bytes).expect("UTF-8"));
    // What `opal-codegen backend` holds after loading both files.
    let inputs = |spec: BackendSpec, natives: NativeFunctions| Inputs {
        spec,
        natives,
        backend_file: SourceFile {
            path: "bench.yaml".into(),
            text: backend_text.clone(),
        },
        native_file: SourceFile {
            path: "native_functions.yaml".into(),
            text: native_text.clone(),
        },
        runtime: None,
        skip_unknown_ops: false,
        carry_entry_points: false,
    };
    let loaded = inputs(spec, natives);
    let (cov, errs) = coverage_of(&loaded);
    assert!(errs.is_none(), "the bench YAML resolves");
    // The 40 pinned kernels; ops derived from them count as adapters too.
    let pinned = cov
        .ops
        .iter()
        .filter(|r| matches!(r.status, Status::Adapter) && r.detail.starts_with("pinned"))
        .count();
    assert_eq!(pinned, 40, "{pinned} adapters");
    let mut g = c.benchmark_group("backend");
    g.sample_size(20);
    g.bench_function("backend_generate_400", |b| {
        b.iter(|| generate_code(&loaded, false, None).expect("generates"))
    });
    g.bench_function("backend_generate_400_ops_path", |b| {
        b.iter(|| generate_code(&loaded, false, Some("::opal::ops")).expect("generates"))
    });
    g.bench_function("backend_end_to_end_400", |b| {
        b.iter(|| {
            let natives =
                opal_codegen::load_bytes(&native_bytes, "native_functions.yaml", Some(&tags))
                    .expect("2.15 loads");
            let spec = load_bytes("bench.yaml", yaml.as_bytes()).expect("loads");
            generate_code(&inputs(spec, natives), false, Some("::opal::ops"))
                .expect("generates")
                .module
                .len()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
