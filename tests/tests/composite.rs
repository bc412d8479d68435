//! The CompositeImplicitAutograd kernels of `opal` (runtime/src/composite): each one
//! on CPU tensors with checked values — the CPU backend registers none of these ops,
//! so the composite is what runs — and the composite `matmul`/`reshape`/`linear` on
//! meta tensors for shapes.

use opal::dispatch::{DispatchKey, DispatchKeySet, Dispatcher};
use opal::{ops, DType, Device, MemoryFormat, Result, Tensor};

fn init() {
    opal_cpu::init().expect("CPU backend registers");
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().expect("f32 tensor")
}

/// 0, 1, 2, ... as f32 in `shape`.
fn iota(shape: &[i64]) -> Tensor {
    let n: i64 = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|v| v as f32).collect();
    Tensor::from_slice(&data, shape).expect("tensor")
}

fn same_storage(a: &Tensor, b: &Tensor) -> bool {
    a.storage().data_ptr() == b.storage().data_ptr()
}

#[test]
fn composites_are_registered_at_the_alias_key_only() {
    // (The kernels are registered when the dispatcher is created; the CPU init only
    // defines the ops so that `find` sees them.)
    init();
    let d = Dispatcher::global();
    for name in [
        "aten::reshape",
        "aten::flatten.using_ints",
        "aten::narrow",
        "aten::chunk",
        "aten::contiguous",
        "aten::matmul",
        "aten::matmul.out",
        "aten::linear",
        "aten::one_hot",
    ] {
        let op = d.find(name).expect("defined by init");
        let keys = op.registered_keys();
        assert!(
            keys.contains(&DispatchKey::CompositeImplicitAutograd),
            "{name}: {keys:?}"
        );
        assert!(!keys.contains(&DispatchKey::CPU), "{name}: {keys:?}");
    }
}

#[test]
fn reshape_is_a_view_when_strides_allow_else_a_copy() -> Result<()> {
    init();
    let a = iota(&[2, 3, 4]);
    let r = ops::reshape(&a, &[6, -1])?;
    assert_eq!(r.sizes(), [6, 4]);
    assert!(same_storage(&a, &r), "dense input: a view");
    assert_eq!(f32s(&r), f32s(&a));

    let t = ops::transpose_int(&iota(&[2, 3]), 0, 1)?; // 3x2, strides [1, 3]
    let flat = ops::reshape(&t, &[-1])?;
    assert!(!same_storage(&t, &flat), "transposed input: a copy");
    assert_eq!(f32s(&flat), [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    // Splitting a dim of a transposed tensor is still a view.
    let split = ops::reshape(&t, &[3, 1, 2])?;
    assert!(same_storage(&t, &split));
    assert_eq!(f32s(&split), [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);

    assert_eq!(ops::reshape(&iota(&[0, 3]), &[3, 0, 5])?.sizes(), [3, 0, 5]);
    assert_eq!(ops::reshape(&iota(&[0, 3]), &[-1, 3])?.sizes(), [0, 3]);
    // With a 0 among the given sizes, -1 could be anything: PyTorch refuses.
    assert!(ops::reshape(&iota(&[0, 3]), &[3, 0, -1]).is_err());
    assert!(ops::reshape(&a, &[5, -1]).is_err());
    assert!(ops::reshape(&a, &[-1, -1]).is_err());
    assert!(ops::reshape(&iota(&[0]), &[0, -1]).is_err());
    Ok(())
}

#[test]
fn flatten_merges_a_dim_range() -> Result<()> {
    init();
    let a = iota(&[2, 3, 4]);
    assert_eq!(ops::flatten_using_ints(&a)?.sizes(), [24]);
    let f = ops::flatten_using_ints::call(&a, 1, -1)?;
    assert_eq!(f.sizes(), [2, 12]);
    assert!(same_storage(&a, &f));
    assert_eq!(ops::flatten_using_ints::call(&a, 0, 1)?.sizes(), [6, 4]);
    assert_eq!(ops::flatten_using_ints::call(&a, 1, 1)?.sizes(), [2, 3, 4]);
    let s = Tensor::from_slice(&[7.0f32], &[])?;
    assert_eq!(ops::flatten_using_ints(&s)?.sizes(), [1]);
    assert!(ops::flatten_using_ints::call(&a, 2, 1).is_err());
    assert!(ops::flatten_using_ints::call(&a, 0, 3).is_err());
    Ok(())
}

#[test]
fn narrow_is_a_slice_view() -> Result<()> {
    init();
    let a = iota(&[3, 4]);
    let n = ops::narrow(&a, 1, 1, 2)?;
    assert_eq!(n.sizes(), [3, 2]);
    assert!(same_storage(&a, &n));
    assert_eq!(f32s(&n), [1.0, 2.0, 5.0, 6.0, 9.0, 10.0]);
    // A negative start counts from the end.
    assert_eq!(f32s(&ops::narrow(&a, 0, -1, 1)?), [8.0, 9.0, 10.0, 11.0]);
    assert_eq!(ops::narrow(&a, 0, 3, 0)?.sizes(), [0, 4]);
    assert!(ops::narrow(&a, 1, 3, 2).is_err());
    assert!(ops::narrow(&a, 1, 0, -1).is_err());
    assert!(ops::narrow(&a, 1, -5, 1).is_err());
    assert!(ops::narrow(&a, 2, 0, 1).is_err());
    assert!(ops::narrow(&Tensor::from_slice(&[1.0f32], &[])?, 0, 0, 1).is_err());
    Ok(())
}

#[test]
fn chunk_cuts_ceil_sized_pieces() -> Result<()> {
    init();
    let a = iota(&[5, 2]);
    let pieces = ops::chunk(&a, 3)?;
    let sizes: Vec<Vec<i64>> = pieces.iter().map(|p| p.sizes().to_vec()).collect();
    assert_eq!(sizes, [vec![2, 2], vec![2, 2], vec![1, 2]]);
    assert_eq!(f32s(&pieces[2]), [8.0, 9.0]);
    assert!(pieces.iter().all(|p| same_storage(&a, p)));
    // ceil(6 / 4) = 2: three pieces, fewer than asked.
    assert_eq!(ops::chunk::call(&iota(&[6]), 4, 0)?.len(), 3);
    // Along dim 1.
    let cols = ops::chunk::call(&a, 2, 1)?;
    assert_eq!(f32s(&cols[1]), [1.0, 3.0, 5.0, 7.0, 9.0]);
    // An empty dim gives `chunks` empty pieces.
    let empty = ops::chunk::call(&iota(&[0, 2]), 3, 0)?;
    assert_eq!(empty.len(), 3);
    assert!(empty.iter().all(|p| p.sizes() == [0, 2]));
    assert!(ops::chunk(&a, 0).is_err());
    assert!(ops::chunk::call(&a, 2, 2).is_err());
    Ok(())
}

#[test]
fn contiguous_returns_self_or_a_dense_copy() -> Result<()> {
    init();
    let a = iota(&[2, 3]);
    let same = ops::contiguous(&a)?;
    assert!(same_storage(&a, &same));
    assert_eq!(same.storage_offset(), a.storage_offset());
    let t = ops::transpose_int(&a, 0, 1)?;
    let c = ops::contiguous(&t)?;
    assert!(c.is_contiguous());
    assert!(!same_storage(&t, &c));
    assert_eq!(c.strides(), [2, 1]);
    assert_eq!(f32s(&c), [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    assert!(ops::contiguous::call(&a, MemoryFormat::Preserve).is_err());
    assert!(ops::contiguous::call(&a, MemoryFormat::ChannelsLast).is_err());
    Ok(())
}

#[test]
fn matmul_follows_the_rank_rules() -> Result<()> {
    init();
    let v = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3])?;
    let m = iota(&[2, 3]); // [[0,1,2],[3,4,5]]
    let mt = ops::transpose_int(&m, 0, 1)?; // 3x2
                                            // 1-d . 1-d: a 0-d dot product.
    let d = ops::matmul(&v, &v)?;
    assert_eq!(d.sizes(), [] as [i64; 0]);
    assert_eq!(f32s(&d), [14.0]);
    // 2-d . 1-d and 1-d . 2-d.
    assert_eq!(f32s(&ops::matmul(&m, &v)?), [8.0, 26.0]);
    let vm = ops::matmul(&v, &mt)?;
    assert_eq!(vm.sizes(), [2]);
    assert_eq!(f32s(&vm), [8.0, 26.0]);
    // 2-d . 2-d.
    assert_eq!(f32s(&ops::matmul(&m, &mt)?), [5.0, 14.0, 14.0, 50.0]);
    // Batch . matrix and batch . vector: [2, 2, 3] . [3, 2] -> [2, 2, 2].
    let b = iota(&[2, 2, 3]);
    let bm = ops::matmul(&b, &mt)?;
    assert_eq!(bm.sizes(), [2, 2, 2]);
    assert_eq!(f32s(&bm), [5.0, 14.0, 14.0, 50.0, 23.0, 86.0, 32.0, 122.0]);
    assert_eq!(f32s(&ops::matmul(&b, &v)?), [8.0, 26.0, 44.0, 62.0]);
    // Vector . batch: [3] . [2, 3, 2] -> [2, 2].
    let bt = ops::transpose_int(&b, 1, 2)?;
    assert_eq!(f32s(&ops::matmul(&v, &bt)?), [8.0, 26.0, 44.0, 62.0]);
    // Broadcast batch dims: [2, 1, 2, 3] . [4, 3, 2] -> [2, 4, 2, 2].
    let lhs = ops::reshape(&b, &[2, 1, 2, 3])?;
    let rhs = ops::expand(&ops::unsqueeze(&mt, 0)?, &[4, 3, 2])?;
    let big = ops::matmul(&lhs, &rhs)?;
    assert_eq!(big.sizes(), [2, 4, 2, 2]);
    let got = f32s(&big);
    assert_eq!(&got[..4], [5.0, 14.0, 14.0, 50.0]);
    assert_eq!(&got[28..], [23.0, 86.0, 32.0, 122.0]);
    // Bad ranks and shapes are errors.
    let s = Tensor::from_slice(&[2.0f32], &[])?;
    assert!(ops::matmul(&s, &v).is_err());
    assert!(ops::matmul(&m, &m).is_err());
    assert!(ops::matmul(&b, &iota(&[3, 2, 2])).is_err());
    Ok(())
}

#[test]
fn matmul_out_writes_into_out() -> Result<()> {
    init();
    let m = iota(&[2, 3]);
    let mt = ops::transpose_int(&m, 0, 1)?;
    let out = Tensor::empty(&[0], DType::F32, Device::cpu())?;
    ops::matmul_out(&m, &mt, &out)?;
    assert_eq!(out.sizes(), [2, 2]);
    assert_eq!(f32s(&out), [5.0, 14.0, 14.0, 50.0]);
    // The batched case goes through a temporary.
    let b = iota(&[2, 2, 3]);
    let out3 = Tensor::empty(&[0], DType::F32, Device::cpu())?;
    let r = ops::matmul_out(&b, &mt, &out3)?;
    assert_eq!(out3.sizes(), [2, 2, 2]);
    assert_eq!(
        f32s(&out3),
        [5.0, 14.0, 14.0, 50.0, 23.0, 86.0, 32.0, 122.0]
    );
    assert!(same_storage(&r, &out3));
    // 1-d . 1-d.
    let v = Tensor::from_slice(&[1.0f32, 2.0], &[2])?;
    let o = Tensor::empty(&[], DType::F32, Device::cpu())?;
    ops::matmul_out(&v, &v, &o)?;
    assert_eq!(f32s(&o), [5.0]);
    Ok(())
}

#[test]
fn linear_is_input_times_weight_transposed_plus_bias() -> Result<()> {
    init();
    let x = iota(&[2, 3]);
    let w = Tensor::from_slice(&[1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0], &[2, 3])?;
    let bias = Tensor::from_slice(&[10.0f32, 20.0], &[2])?;
    assert_eq!(f32s(&ops::linear(&x, &w)?), [0.0, 3.0, 3.0, 12.0]);
    let y = ops::linear::call(&x, &w, Some(&bias))?;
    assert_eq!(f32s(&y), [10.0, 23.0, 13.0, 32.0]);
    // A 3-d input: matmul then add.
    let x3 = ops::reshape(&x, &[1, 2, 3])?;
    let y3 = ops::linear::call(&x3, &w, Some(&bias))?;
    assert_eq!(y3.sizes(), [1, 2, 2]);
    assert_eq!(f32s(&y3), [10.0, 23.0, 13.0, 32.0]);
    assert!(ops::linear(&x, &iota(&[2, 4])).is_err());
    Ok(())
}

#[test]
fn one_hot_marks_each_class() -> Result<()> {
    init();
    let idx = Tensor::from_slice(&[0i64, 2, 1], &[3])?;
    let oh = ops::one_hot(&idx)?;
    assert_eq!(oh.sizes(), [3, 3]);
    assert_eq!(oh.dtype(), DType::I64);
    assert_eq!(oh.to_vec::<i64>()?, [1, 0, 0, 0, 0, 1, 0, 1, 0]);
    let oh4 = ops::one_hot::call(&Tensor::from_slice(&[3i64, 0], &[2, 1])?, 4)?;
    assert_eq!(oh4.sizes(), [2, 1, 4]);
    assert_eq!(oh4.to_vec::<i64>()?, [0, 0, 0, 1, 1, 0, 0, 0]);
    let empty = Tensor::from_slice::<i64>(&[], &[0])?;
    assert_eq!(ops::one_hot::call(&empty, 5)?.sizes(), [0, 5]);
    assert!(
        ops::one_hot(&empty).is_err(),
        "cannot infer classes of nothing"
    );
    assert!(
        ops::one_hot::call(&idx, 2).is_err(),
        "class 2 needs 3 classes"
    );
    assert!(ops::one_hot(&Tensor::from_slice(&[-1i64], &[1])?).is_err());
    assert!(ops::one_hot(&Tensor::from_slice(&[1.0f32], &[1])?).is_err());
    Ok(())
}

/// The key at which the composite is the kernel even for meta tensors: Meta
/// registers its own kernels for these ops (they win on meta tensors), but no backend
/// claims PrivateUse3, so there the table holds the composite. The ops the composite
/// calls dispatch afresh on the meta tensors and run Meta's kernels.
fn composite_keys() -> DispatchKeySet {
    DispatchKeySet::from(DispatchKey::PrivateUse3)
}

#[test]
fn composites_compute_shapes_on_meta_tensors() -> Result<()> {
    init();
    opal_meta::init()?;
    let meta = |shape: &[i64]| Tensor::empty(shape, DType::F32, Device::meta()).expect("meta");
    let (a, b) = (meta(&[2, 1, 3, 4]), meta(&[5, 4, 6]));
    let p = ops::matmul::redispatch(composite_keys(), &a, &b)?;
    assert_eq!(p.sizes(), [2, 5, 3, 6]);
    assert_eq!(p.device(), Device::meta());
    // Agrees with the Meta backend's own kernel.
    assert_eq!(ops::matmul(&a, &b)?.sizes(), p.sizes());
    let v = meta(&[4]);
    assert_eq!(
        ops::matmul::redispatch(composite_keys(), &a, &v)?.sizes(),
        [2, 1, 3]
    );
    assert!(ops::matmul::redispatch(composite_keys(), &a, &meta(&[5, 3, 6])).is_err());

    let r = ops::reshape::redispatch(composite_keys(), &a, &[6, -1])?;
    assert_eq!(r.sizes(), [6, 4]);
    let x = meta(&[8, 3, 4]);
    let w = meta(&[7, 4]);
    let bias = meta(&[7]);
    let y = ops::linear::redispatch(composite_keys(), &x, &w, Some(&bias))?;
    assert_eq!(y.sizes(), [8, 3, 7]);
    Ok(())
}
