//! Cost of a defaulted-argument adapter when the caller passes the defaults: the
//! generated adapter for emu's pinned `sum` (`dtype=None`) against calling the
//! pinned kernel directly, both through typed fn pointers as the dispatcher holds
//! them. Target: the difference is at most 2 ns.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use opal::dispatch::DispatchKeySet;
use opal::{DType, Result, Tensor};
use opal_emu::generated::adapters;
use opal_emu::generated::EmuKernels;

/// A kernel that does no work, so the measurement is the adapter alone.
struct Noop;

impl Noop {
    fn t() -> Tensor {
        thread_local!(static T: Tensor = Tensor::from_slice(&[1.0f32], &[1]).expect("tensor"));
        T.with(Clone::clone)
    }
}

macro_rules! unused {
    ($($name:ident($($a:ident: $t:ty),*) -> $r:ty;)*) => {$(
        fn $name(_ks: DispatchKeySet, $($a: $t),*) -> Result<$r> {
            $(let _ = $a;)*
            Err(opal::OpalError::msg("unused in this bench"))
        }
    )*};
}

impl EmuKernels for Noop {
    fn sum(_ks: DispatchKeySet, self_: &Tensor) -> Result<Tensor> {
        Ok(self_.clone())
    }
    unused! {
        add_out(a: &Tensor, b: &Tensor, c: &opal::Scalar, d: &Tensor) -> Tensor;
        sub_out(a: &Tensor, b: &Tensor, c: &opal::Scalar, d: &Tensor) -> Tensor;
        mm_out(a: &Tensor, b: &Tensor, d: &Tensor) -> Tensor;
        mul_out(a: &Tensor, b: &Tensor, d: &Tensor) -> Tensor;
        relu(a: &Tensor) -> Tensor;
        autograd_sigmoid(a: &Tensor) -> Tensor;
        _to_copy(a: &Tensor, b: Option<DType>, c: Option<opal::Layout>, d: Option<opal::Device>, e: Option<bool>, f: bool, g: Option<opal::MemoryFormat>) -> Tensor;
        view(a: &Tensor, b: &[i64]) -> Tensor;
        full(a: &[i64], b: &opal::Scalar, c: Option<DType>, d: Option<opal::Layout>, e: Option<opal::Device>, f: Option<bool>) -> Tensor;
        zeros(a: &[i64], c: Option<DType>, d: Option<opal::Layout>, e: Option<opal::Device>, f: Option<bool>) -> Tensor;
        ones(a: &[i64], c: Option<DType>, d: Option<opal::Layout>, e: Option<opal::Device>, f: Option<bool>) -> Tensor;
        arange_start_step(a: &opal::Scalar, b: &opal::Scalar, s: &opal::Scalar, c: Option<DType>, d: Option<opal::Layout>, e: Option<opal::Device>, f: Option<bool>) -> Tensor;
    }
    fn transfer_to_cpu(src: &Tensor) -> Result<Tensor> {
        Ok(src.clone())
    }
    fn transfer_from_cpu(_src: &Tensor, _dst: &Tensor) -> Result<()> {
        Ok(())
    }
}

type Adapted = fn(DispatchKeySet, &Tensor, Option<DType>) -> Result<Tensor>;
type Pinned = fn(DispatchKeySet, &Tensor) -> Result<Tensor>;

fn bench(c: &mut Criterion) {
    let t = Noop::t();
    let ks = DispatchKeySet::empty();
    let adapted: Adapted = black_box(adapters::sum::<Noop>);
    let direct: Pinned = black_box(<Noop as EmuKernels>::sum);
    let mut g = c.benchmark_group("adapter");
    g.bench_function("pinned_kernel_direct", |b| {
        b.iter(|| direct(black_box(ks), black_box(&t)))
    });
    g.bench_function("adapter_defaults_passed", |b| {
        b.iter(|| adapted(black_box(ks), black_box(&t), black_box(None)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
