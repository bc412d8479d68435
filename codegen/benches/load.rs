//! Load + validate PyTorch 2.15's `native_functions.yaml` (2,590 entries -> 3,110
//! functions). Target: 25 ms; torchgen's `parse_native_yaml` takes 0.76 s here.
//! Also: load + validate its `derivatives.yaml` (688 entries, 1,388 formulas)
//! against that model.

// What the CLI and build scripts run with (see `opal_codegen::BuildAllocator`).
#[global_allocator]
static ALLOC: opal_codegen::BuildAllocator = opal_codegen::BuildAllocator;

use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, Criterion};

fn load_2_15(c: &mut Criterion) {
    // OPAL_BENCH_DATA lets a copied bench binary run on another machine.
    let dir = std::env::var_os("OPAL_BENCH_DATA").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/pytorch-2.15"),
        PathBuf::from,
    );
    let yaml = std::fs::read(dir.join("native_functions.yaml")).expect("2.15 fixture");
    let tags = opal_codegen::load_tags_bytes(
        &std::fs::read(dir.join("tags.yaml")).expect("tags"),
        "tags.yaml",
    )
    .expect("tags.yaml loads");
    // Dropping the 3,110-function model is not part of loading: keep it out of the
    // timing.
    c.bench_function("load_validate_2_15", |b| {
        b.iter_with_large_drop(|| {
            let model = opal_codegen::load_bytes(&yaml, "native_functions.yaml", Some(&tags))
                .expect("2.15 loads");
            assert_eq!(model.functions.len(), 3110);
            model
        })
    });
    c.bench_function("load_from_disk_2_15", |b| {
        b.iter_with_large_drop(|| {
            opal_codegen::load(dir.join("native_functions.yaml")).expect("2.15 loads")
        })
    });
    let native =
        opal_codegen::load_bytes(&yaml, "native_functions.yaml", Some(&tags)).expect("2.15 loads");
    let derivatives =
        std::fs::read_to_string(dir.join("derivatives.yaml")).expect("2.15 derivatives");
    c.bench_function("load_validate_derivatives_2_15", |b| {
        b.iter_with_large_drop(|| {
            let d = opal_codegen::derivatives::load_derivatives_str(
                &derivatives,
                "derivatives.yaml",
                &native,
            )
            .expect("2.15 derivatives load");
            assert_eq!(d.entries.len(), 688);
            d
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = load_2_15
}
criterion_main!(benches);
