//! The in-place view ops `transpose_`, `t_`, `squeeze_.dim` and `unsqueeze_`
//! (runtime composites under CompositeExplicitAutograd, over `Tensor::set_geometry_`):
//! they restride `self` — storage and offset unchanged — so every handle of the tensor
//! sees the new sizes and strides, views made before keep theirs, and the elements
//! read through the tensor are those of the matching functional view op. On CPU and
//! meta tensors, typed and boxed by name.

use opal::dispatch::{DispatchKey, Dispatcher};
use opal::{ops, DType, Device, ErrorKind, IValue, Result, Scalar, Tensor};

fn init() {
    opal_cpu::init().expect("CPU backend registers");
    opal_meta::init().expect("Meta backend registers");
}

/// 0, 1, 2, ... as f32 in `shape`.
fn iota(shape: &[i64]) -> Tensor {
    let n: i64 = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|v| v as f32).collect();
    Tensor::from_slice(&data, shape).expect("tensor")
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().expect("f32 tensor")
}

fn meta(shape: &[i64]) -> Tensor {
    Tensor::empty(shape, DType::F32, Device::meta()).expect("meta tensor")
}

/// `t` has exactly the geometry of `want` and reads the same elements from the
/// same storage.
fn assert_same_view(t: &Tensor, want: &Tensor) {
    assert_eq!(t.sizes(), want.sizes());
    assert_eq!(t.strides(), want.strides());
    assert_eq!(t.storage_offset(), want.storage_offset());
    assert_eq!(t.is_contiguous(), want.is_contiguous());
    assert!(t.shares_storage(want));
    assert_eq!(f32s(t), f32s(want));
}

/// The error's message, checked to mention every one of `parts`.
fn assert_err_mentions(r: Result<Tensor>, parts: &[&str]) {
    let e = r.expect_err("expected an error");
    let msg = e.to_string();
    for p in parts {
        assert!(msg.contains(p), "{msg:?} does not mention {p:?}");
    }
}

#[test]
fn registered_once_under_composite_explicit_autograd() {
    init();
    let d = Dispatcher::global();
    for name in [
        "aten::transpose_",
        "aten::t_",
        "aten::squeeze_.dim",
        "aten::unsqueeze_",
    ] {
        let keys = d.find(name).expect("defined by init").registered_keys();
        // Once for every backend (CompositeExplicitAutograd), and no backend key;
        // `t_`, `squeeze_.dim` and `unsqueeze_` also get the autograd kernel
        // generated from their functional op's derivatives.yaml entry.
        assert!(
            keys.contains(&DispatchKey::CompositeExplicitAutograd)
                && keys.iter().all(|k| matches!(
                    k,
                    DispatchKey::CompositeExplicitAutograd | DispatchKey::Autograd
                )),
            "{name}: {keys:?}"
        );
    }
}

#[test]
fn transpose_restrides_self_like_transpose_int() -> Result<()> {
    init();
    let a = iota(&[2, 3, 4]);
    let want = ops::transpose_int(&a, 0, 2)?;
    let alias = a.clone();
    let earlier = ops::select_int(&a, 0, 1)?; // sizes [3, 4], offset 12
    let sizes_before = a.sizes();

    let r = ops::transpose_(&a, 0, -1)?;
    assert!(r.is_same(&a));
    assert_eq!(a.sizes(), [4, 3, 2]);
    assert_eq!(a.strides(), [1, 4, 12]);
    assert_eq!(a.storage_offset(), 0);
    assert!(!a.is_contiguous());
    assert_same_view(&a, &want);
    // Every handle is the same tensor; a `&[i64]` taken before stays readable.
    assert_eq!(alias.sizes(), [4, 3, 2]);
    assert_eq!(alias.strides(), [1, 4, 12]);
    assert_eq!(sizes_before, [2, 3, 4]);
    // A view made before keeps its own geometry and elements.
    assert_eq!(earlier.sizes(), [3, 4]);
    assert_eq!(earlier.strides(), [4, 1]);
    assert_eq!(
        f32s(&earlier),
        (12..24).map(|v| v as f32).collect::<Vec<_>>()
    );

    // Swapping back restores the original layout; the same dim twice changes nothing.
    ops::transpose_(&a, 2, 0)?;
    assert_eq!((a.sizes(), a.strides()), (&[2, 3, 4][..], &[12, 4, 1][..]));
    assert!(a.is_contiguous());
    ops::transpose_(&a, 1, -2)?;
    assert_eq!((a.sizes(), a.strides()), (&[2, 3, 4][..], &[12, 4, 1][..]));
    Ok(())
}

#[test]
fn transpose_keeps_the_storage_offset_of_a_view() -> Result<()> {
    init();
    let base = iota(&[3, 2, 4]);
    let v = ops::select_int(&base, 0, 2)?; // [2, 4] at offset 16
    let want = ops::transpose_int(&v, 0, 1)?;
    ops::transpose_(&v, 0, 1)?;
    assert_eq!(v.storage_offset(), 16);
    assert_same_view(&v, &want);
    // The base is another tensor: untouched.
    assert_eq!(
        (base.sizes(), base.strides()),
        (&[3, 2, 4][..], &[8, 4, 1][..])
    );
    Ok(())
}

#[test]
fn kernels_and_writes_follow_the_new_geometry() -> Result<()> {
    init();
    let a = iota(&[2, 3]);
    let original = ops::view(&a, &[2, 3])?; // a second tensor with a's old layout
    ops::t_(&a)?;
    // A CPU kernel reads `a` as the 3x2 transpose.
    let doubled = ops::mul_scalar(&a, &Scalar::Int(2))?;
    assert_eq!(doubled.sizes(), [3, 2]);
    assert_eq!(f32s(&doubled), [0.0, 6.0, 2.0, 8.0, 4.0, 10.0]);
    // Writing a[2][0] lands in storage element 2, which `original` sees at [0][2].
    assert!(a.write::<f32>()?.set(&[2, 0], 100.0));
    assert_eq!(original.read::<f32>()?.get(&[0, 2]), Some(100.0));
    Ok(())
}

#[test]
fn transpose_dim_errors_name_the_op_and_range() -> Result<()> {
    init();
    let a = iota(&[2, 3]);
    assert_err_mentions(
        ops::transpose_(&a, 2, 0),
        &["transpose_", "[-2, 1]", "got 2"],
    );
    assert_err_mentions(
        ops::transpose_(&a, 0, -3),
        &["transpose_", "[-2, 1]", "got -3"],
    );
    // A failed call leaves the tensor as it was.
    assert_eq!((a.sizes(), a.strides()), (&[2, 3][..], &[3, 1][..]));
    // A 0-dim tensor takes dims 0 and -1 (and stays 0-dim), nothing else.
    let s = Tensor::from_slice(&[7.0f32], &[])?;
    assert!(ops::transpose_(&s, 0, -1)?.is_same(&s));
    assert_eq!(s.dim(), 0);
    assert_err_mentions(ops::transpose_(&s, 1, 0), &["transpose_", "[-1, 0]"]);
    Ok(())
}

#[test]
fn t_transposes_2d_and_keeps_smaller_tensors() -> Result<()> {
    init();
    let a = iota(&[2, 3]);
    let want = ops::t(&a)?;
    let alias = a.clone();
    assert!(ops::t_(&a)?.is_same(&a));
    assert_eq!((a.sizes(), a.strides()), (&[3, 2][..], &[1, 3][..]));
    assert_same_view(&a, &want);
    assert_eq!(alias.sizes(), [3, 2]);

    let v = iota(&[4]);
    ops::t_(&v)?;
    assert_eq!((v.sizes(), v.strides()), (&[4][..], &[1][..]));
    let s = Tensor::from_slice(&[1.0f32], &[])?;
    ops::t_(&s)?;
    assert_eq!(s.dim(), 0);

    let c = iota(&[2, 3, 4]);
    assert_err_mentions(
        ops::t_(&c),
        &["t_() expects a tensor with <= 2 dimensions, but self is 3D"],
    );
    assert_eq!(c.sizes(), [2, 3, 4]);
    Ok(())
}

#[test]
fn squeeze_dim_removes_only_a_size_one_dim() -> Result<()> {
    init();
    // A non-contiguous input: the transpose of a 3x1x2 tensor.
    let a = ops::transpose_int(&iota(&[3, 1, 2]), 0, 2)?; // [2, 1, 3], strides [1, 2, 2]
    let want = ops::squeeze_dim(&a, 1)?;
    let alias = a.clone();
    let earlier = ops::unsqueeze(&a, 0)?;
    assert!(ops::squeeze_dim_(&a, -2)?.is_same(&a));
    assert_eq!((a.sizes(), a.strides()), (&[2, 3][..], &[1, 2][..]));
    assert_same_view(&a, &want);
    assert_eq!(alias.sizes(), [2, 3]);
    assert_eq!(earlier.sizes(), [1, 2, 1, 3]);

    // Not size 1: no change.
    ops::squeeze_dim_(&a, 0)?;
    assert_eq!((a.sizes(), a.strides()), (&[2, 3][..], &[1, 2][..]));
    assert_err_mentions(ops::squeeze_dim_(&a, 2), &["squeeze_", "[-2, 1]", "got 2"]);

    // 0-dim: dims 0 and -1 are accepted and change nothing.
    let s = Tensor::from_slice(&[3.0f32], &[])?;
    ops::squeeze_dim_(&s, 0)?;
    ops::squeeze_dim_(&s, -1)?;
    assert_eq!(s.dim(), 0);
    assert_err_mentions(ops::squeeze_dim_(&s, 1), &["squeeze_", "[-1, 0]"]);
    Ok(())
}

#[test]
fn unsqueeze_inserts_a_dim_with_pytorchs_stride() -> Result<()> {
    init();
    let base = iota(&[3, 2]);
    for (dim, sizes, strides) in [
        (0, [1, 2, 3], [2, 1, 2]),
        (1, [2, 1, 3], [1, 6, 2]),
        (2, [2, 3, 1], [1, 2, 1]),
        (-1, [2, 3, 1], [1, 2, 1]),
        (-3, [1, 2, 3], [2, 1, 2]),
    ] {
        let t = ops::transpose_int(&base, 0, 1)?; // [2, 3], strides [1, 2]
        let want = ops::unsqueeze(&t, dim)?;
        let alias = t.clone();
        assert!(ops::unsqueeze_(&t, dim)?.is_same(&t));
        assert_eq!(t.sizes(), sizes, "dim {dim}");
        assert_eq!(t.strides(), strides, "dim {dim}");
        assert_same_view(&t, &want);
        assert_eq!(alias.strides(), strides);
    }
    // Restriding a view leaves the tensor it was made from alone.
    assert_eq!((base.sizes(), base.strides()), (&[3, 2][..], &[2, 1][..]));

    let c = iota(&[2, 3]);
    ops::unsqueeze_(&c, 1)?;
    assert_eq!((c.sizes(), c.strides()), (&[2, 1, 3][..], &[3, 3, 1][..]));
    assert!(c.is_contiguous());
    assert_err_mentions(ops::unsqueeze_(&c, 4), &["unsqueeze_", "[-4, 3]", "got 4"]);
    assert_err_mentions(ops::unsqueeze_(&c, -5), &["unsqueeze_", "[-4, 3]"]);

    let s = Tensor::from_slice(&[5.0f32], &[])?;
    ops::unsqueeze_(&s, -1)?;
    assert_eq!((s.sizes(), s.strides()), (&[1][..], &[1][..]));
    assert_eq!(f32s(&s), [5.0]);
    Ok(())
}

#[test]
fn meta_tensors_are_restrided_too() -> Result<()> {
    init();
    let m = meta(&[2, 1, 3]);
    let alias = m.clone();
    ops::transpose_(&m, 0, 2)?;
    assert_eq!((m.sizes(), m.strides()), (&[3, 1, 2][..], &[1, 3, 3][..]));
    ops::squeeze_dim_(&m, 1)?;
    assert_eq!((m.sizes(), m.strides()), (&[3, 2][..], &[1, 3][..]));
    ops::t_(&m)?;
    assert_eq!((m.sizes(), m.strides()), (&[2, 3][..], &[3, 1][..]));
    ops::unsqueeze_(&m, 2)?;
    assert_eq!((m.sizes(), m.strides()), (&[2, 3, 1][..], &[3, 1, 1][..]));
    assert_eq!(alias.sizes(), [2, 3, 1]);
    assert_eq!(m.device(), Device::meta());
    // Same geometry as the Meta backend's functional kernels give.
    let f = ops::unsqueeze(
        &ops::t(&ops::squeeze_dim(
            &ops::transpose_int(&meta(&[2, 1, 3]), 0, 2)?,
            1,
        )?)?,
        2,
    )?;
    assert_eq!((f.sizes(), f.strides()), (m.sizes(), m.strides()));

    assert_err_mentions(ops::t_(&meta(&[1, 2, 3])), &["t_()", "3D"]);
    assert_err_mentions(ops::transpose_(&m, 0, 3), &["transpose_", "[-3, 2]"]);
    Ok(())
}

/// Calls `op` by name with `self_` and `ints`, returning the stack's one tensor.
fn call_boxed(op: &str, self_: &Tensor, ints: &[i64]) -> Result<Tensor> {
    let mut stack = vec![IValue::Tensor(self_.clone())];
    stack.extend(ints.iter().map(|&i| IValue::Int(i)));
    Dispatcher::global().call_boxed(op, &mut stack)?;
    match stack.as_slice() {
        [IValue::Tensor(t)] => Ok(t.clone()),
        other => panic!("{op}: expected one tensor on the stack, got {other:?}"),
    }
}

#[test]
fn boxed_calls_by_name_restride_self() -> Result<()> {
    init();
    for device in [Device::cpu(), Device::meta()] {
        let a = Tensor::empty(&[2, 1, 3], DType::F32, device)?;
        assert!(call_boxed("aten::transpose_", &a, &[0, 2])?.is_same(&a));
        assert_eq!((a.sizes(), a.strides()), (&[3, 1, 2][..], &[1, 3, 3][..]));
        assert!(call_boxed("aten::squeeze_.dim", &a, &[1])?.is_same(&a));
        assert_eq!((a.sizes(), a.strides()), (&[3, 2][..], &[1, 3][..]));
        assert!(call_boxed("aten::t_", &a, &[])?.is_same(&a));
        assert_eq!((a.sizes(), a.strides()), (&[2, 3][..], &[3, 1][..]));
        assert!(call_boxed("aten::unsqueeze_", &a, &[0])?.is_same(&a));
        assert_eq!((a.sizes(), a.strides()), (&[1, 2, 3][..], &[6, 3, 1][..]));
        assert_err_mentions(
            call_boxed("aten::unsqueeze_", &a, &[9]),
            &["unsqueeze_", "[-4, 3]"],
        );
    }
    Ok(())
}

#[test]
fn set_geometry_validates_and_refuses_undefined_tensors() -> Result<()> {
    init();
    let v = ops::select_int(&iota(&[2, 6]), 0, 1)?; // 6 elements at offset 6 of 12
    v.set_geometry_(&[2, 3], &[1, 2])?;
    assert_eq!(
        (v.sizes(), v.strides(), v.storage_offset()),
        (&[2, 3][..], &[1, 2][..], 6)
    );
    assert_eq!(f32s(&v), [6.0, 8.0, 10.0, 7.0, 9.0, 11.0]);

    let shape_err = |r: Result<()>, parts: &[&str]| {
        let e = r.expect_err("expected an error");
        assert!(matches!(e.kind(), ErrorKind::Shape(_)), "{e:?}");
        for p in parts {
            assert!(e.to_string().contains(p), "{e} does not mention {p:?}");
        }
    };
    shape_err(
        v.set_geometry_(&[6], &[1, 1]),
        &["set_geometry_", "different lengths"],
    );
    shape_err(
        v.set_geometry_(&[-1, 6], &[6, 1]),
        &["set_geometry_", "negative dimension"],
    );
    shape_err(
        v.set_geometry_(&[6], &[-1]),
        &["set_geometry_", "negative stride"],
    );
    // Offset 6 + 7 elements > the 12 the storage holds: never grows the storage.
    shape_err(
        v.set_geometry_(&[7], &[1]),
        &["set_geometry_", "needs 52 bytes", "has 48"],
    );
    assert_eq!((v.sizes(), v.strides()), (&[2, 3][..], &[1, 2][..]));

    let e = Tensor::undefined()
        .set_geometry_(&[0], &[1])
        .expect_err("undefined tensors are refused");
    assert!(
        e.to_string()
            .contains("set_geometry_: the tensor is undefined"),
        "{e}"
    );
    Ok(())
}
