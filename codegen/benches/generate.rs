//! Generation of the whole PyTorch 2.15 operator layer (torchgen's full generation
//! takes 16.4 s on the reference machine, see `../shared/anchors/torchgen_bench.sh`;
//! Opal's target is 0.3 s). Two measurements: emission from a loaded model, and
//! load + validate + emission (what `opal-codegen generate` does, minus writing).

// What the CLI and build scripts run with (see `opal_codegen::BuildAllocator`).
#[global_allocator]
static ALLOC: opal_codegen::BuildAllocator = opal_codegen::BuildAllocator;

use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};
use opal_codegen::emit::{self, EmitOptions};

fn yaml() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/pytorch-2.15/native_functions.yaml")
}

fn bench(c: &mut Criterion) {
    let path = yaml();
    let model = match opal_codegen::load(&path) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}");
            return;
        }
    };
    let opts = EmitOptions::default();
    let mut g = c.benchmark_group("generate");
    g.sample_size(10);
    g.bench_function("emit_pytorch_2_15", |b| {
        b.iter(|| emit::generate(&model, &opts).map(|g| g.files.len()))
    });
    g.bench_function("load_and_emit_pytorch_2_15", |b| {
        b.iter(|| {
            let m = opal_codegen::load(&path).ok()?;
            emit::generate(&m, &opts).ok().map(|g| g.files.len())
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
