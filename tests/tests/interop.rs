//! `opal::interop`: `std::ops` operators on tensors, `Vec`/slice conversions and
//! the value-equality helpers `equal` / `allclose`. Expected values are computed
//! here in plain Rust from the same inputs.

use opal::{DType, Device, Tensor};

const A: [f32; 4] = [1.5, -2.0, 3.25, 8.0];
const B: [f32; 4] = [0.5, 4.0, -1.0, 2.0];

fn setup() -> opal::Result<(Tensor, Tensor)> {
    opal_cpu::init()?;
    opal_meta::init()?;
    Ok((Tensor::try_from(A.to_vec())?, Tensor::try_from(&B[..])?))
}

fn zip(f: impl Fn(f32, f32) -> f32) -> Vec<f32> {
    A.iter().zip(B.iter()).map(|(a, b)| f(*a, *b)).collect()
}

fn meta_zeros(n: i64) -> opal::Result<Tensor> {
    opal::ops::zeros::with(
        &[n],
        opal::ops::zeros::Options::default().device(Device::meta()),
    )
}

#[test]
fn tensor_tensor_operators_match_elementwise_rust() -> opal::Result<()> {
    let (a, b) = setup()?;
    assert_eq!((&a + &b)?.to_vec::<f32>()?, zip(|x, y| x + y));
    assert_eq!((&a - &b)?.to_vec::<f32>()?, zip(|x, y| x - y));
    assert_eq!((&a * &b)?.to_vec::<f32>()?, zip(|x, y| x * y));
    assert_eq!((&a / &b)?.to_vec::<f32>()?, zip(|x, y| x / y));
    // Owned and mixed forms call the same ops.
    assert_eq!((a.clone() + b.clone())?.to_vec::<f32>()?, zip(|x, y| x + y));
    assert_eq!((a.clone() - &b)?.to_vec::<f32>()?, zip(|x, y| x - y));
    assert_eq!((&a * b.clone())?.to_vec::<f32>()?, zip(|x, y| x * y));
    let neg: Vec<f32> = A.iter().map(|x| -x).collect();
    assert_eq!((-&a)?.to_vec::<f32>()?, neg);
    assert_eq!((-a.clone())?.to_vec::<f32>()?, neg);
    // Operators chain through `?` and leave their inputs alone.
    let chained = ((&a + &b)? * &a)?;
    assert_eq!(chained.to_vec::<f32>()?, zip(|x, y| (x + y) * x));
    assert_eq!(a.to_vec::<f32>()?, A.to_vec());
    Ok(())
}

#[test]
fn scalar_operators_keep_the_tensor_dtype() -> opal::Result<()> {
    let (a, _) = setup()?;
    let s = 2.5f64;
    let sf = s as f32;
    let map = |f: &dyn Fn(f32) -> f32| A.iter().map(|x| f(*x)).collect::<Vec<f32>>();
    for (t, want) in [
        ((&a + s)?, map(&|x| x + sf)),
        ((s + &a)?, map(&|x| sf + x)),
        ((&a - s)?, map(&|x| x - sf)),
        ((s - &a)?, map(&|x| sf - x)),
        ((&a * s)?, map(&|x| x * sf)),
        ((s * &a)?, map(&|x| sf * x)),
        ((&a / s)?, map(&|x| x / sf)),
        ((s / &a)?, map(&|x| sf / x)),
        ((a.clone() - s)?, map(&|x| x - sf)),
        ((s / a.clone())?, map(&|x| sf / x)),
    ] {
        // A Python-style number does not promote an f32 tensor to f64.
        assert_eq!(t.dtype(), DType::F32);
        assert_eq!(t.to_vec::<f32>()?, want);
    }
    // An integer tensor divided by a float scalar becomes the default float dtype.
    let i = Tensor::try_from(vec![1i64, 2, 3])?;
    let half = (&i / 2.0)?;
    assert_eq!(half.dtype(), DType::F32);
    let want: Vec<f32> = [1.0f32, 2.0, 3.0].iter().map(|x| x / 2.0).collect();
    assert_eq!(half.to_vec::<f32>()?, want);
    Ok(())
}

#[test]
fn operator_misuse_is_an_error_naming_the_op() -> opal::Result<()> {
    let (a, _) = setup()?;
    let c = Tensor::try_from(vec![1.0f32, 2.0, 3.0])?;
    let err = (&a + &c).unwrap_err().to_string();
    assert!(err.contains("add"), "{err}");
    let err = (&a / &c).unwrap_err().to_string();
    assert!(err.contains("div"), "{err}");
    let err = (&a * &meta_zeros(4)?).unwrap_err().to_string();
    assert!(err.contains("mul"), "{err}");
    assert!((-&Tensor::undefined()).is_err());
    assert!((Tensor::undefined() - 1.0).is_err());
    Ok(())
}

#[test]
fn conversions_round_trip() -> opal::Result<()> {
    opal_cpu::init()?;
    let v = vec![3i32, -1, 4, 1, -5];
    let t = Tensor::try_from(v.clone())?;
    assert_eq!((t.sizes(), t.dtype()), (&[5i64][..], DType::I32));
    assert_eq!(Vec::<i32>::try_from(&t)?, v);
    assert_eq!(Vec::<i32>::try_from(t.clone())?, v);
    let s: &[f64] = &[0.25, 0.5];
    let u = Tensor::try_from(s)?;
    assert_eq!(Vec::<f64>::try_from(&u)?, s.to_vec());
    // Any rank converts back in row-major order, views in logical order.
    let m = Tensor::from_slice(&[1u8, 2, 3, 4, 5, 6], &[2, 3])?;
    assert_eq!(Vec::<u8>::try_from(&m)?, vec![1, 2, 3, 4, 5, 6]);
    let col = m.as_strided(&[2], &[3], 1)?;
    assert_eq!(Vec::<u8>::try_from(&col)?, vec![2, 5]);
    // An empty vector gives a 1-d tensor of 0 elements.
    let e = Tensor::try_from(Vec::<f32>::new())?;
    assert_eq!(e.sizes(), &[0]);
    // A dtype mismatch is an error, not a reinterpretation.
    assert!(Vec::<f32>::try_from(&t).is_err());
    assert!(Vec::<f32>::try_from(&Tensor::undefined()).is_err());
    Ok(())
}

#[test]
fn equal_compares_shape_and_values_not_handles() -> opal::Result<()> {
    let (a, b) = setup()?;
    let a2 = Tensor::try_from(A.to_vec())?;
    assert!(a != a2, "`==` is handle identity");
    assert!(a.equal(&a2)?);
    assert!(!a.equal(&b)?);
    // Same values, different shape: not equal (no broadcasting).
    let a22 = Tensor::from_slice(&A, &[2, 2])?;
    assert!(!a.equal(&a22)?);
    // Different dtypes compare after promotion, as torch.equal does.
    let ints = Tensor::try_from(vec![1i64, 2])?;
    assert!(ints.equal(&Tensor::try_from(vec![1.0f32, 2.0])?)?);
    assert!(!ints.equal(&Tensor::try_from(vec![1.0f32, 2.5])?)?);
    // NaN equals nothing, itself included.
    let nan = Tensor::try_from(vec![f32::NAN, 1.0])?;
    assert!(!nan.equal(&nan)?);
    // Empty tensors of one shape are equal.
    let e = Tensor::try_from(Vec::<f32>::new())?;
    assert!(e.equal(&Tensor::try_from(Vec::<f32>::new())?)?);
    // Misuse is an error naming the helper.
    let err = a.equal(&Tensor::undefined()).unwrap_err().to_string();
    assert!(err.contains("equal"), "{err}");
    let m = meta_zeros(4)?;
    let err = m.equal(&m).unwrap_err().to_string();
    assert!(err.contains("equal"), "{err}");
    Ok(())
}

#[test]
fn allclose_follows_pytorch_tolerances() -> opal::Result<()> {
    opal_cpu::init()?;
    let t = |v: Vec<f64>| Tensor::try_from(v);
    let base = t(vec![1.0, 100.0, -3.0])?;
    let near = t(vec![1.0 + 1e-9, 100.0 + 1e-6, -3.0])?;
    assert!(base.allclose(&near, 1e-5, 1e-8)?);
    assert!(!base.allclose(&near, 0.0, 0.0)?);
    // atol alone, rtol alone (relative to `other`).
    let off = t(vec![1.5, 100.5, -2.5])?;
    assert!(base.allclose(&off, 0.0, 0.5)?);
    assert!(!base.allclose(&off, 0.0, 0.49)?);
    let ten = t(vec![10.0])?;
    let eleven = t(vec![11.0])?;
    assert!(eleven.allclose(&ten, 0.1, 0.0)?);
    // Not symmetric: the tolerance scales with |other| (0.095 * 11 > 1 > 0.095 * 10).
    assert!(ten.allclose(&eleven, 0.095, 0.0)?);
    assert!(!eleven.allclose(&ten, 0.095, 0.0)?);
    // Infinities are close only to the same infinity, even with huge tolerances.
    let inf = t(vec![f64::INFINITY])?;
    assert!(inf.allclose(&inf, 0.0, 0.0)?);
    assert!(!t(vec![1.0])?.allclose(&inf, 1.0, 1.0)?);
    assert!(!inf.allclose(&t(vec![f64::NEG_INFINITY])?, 1e300, 1e300)?);
    // NaN: close to NaN only with equal_nan.
    let nan = t(vec![f64::NAN, 2.0])?;
    assert!(!nan.allclose(&nan, 1e-5, 1e-8)?);
    assert!(nan.allclose_with(&nan, 1e-5, 1e-8, true)?);
    assert!(!nan.allclose_with(&t(vec![1.0, 2.0])?, 1e-5, 1e-8, true)?);
    // Broadcasting, as torch.allclose does.
    let row = Tensor::from_slice(&[1.0f64, 2.0], &[1, 2])?;
    let grid = Tensor::from_slice(&[1.0f64, 2.0, 1.0, 2.0], &[2, 2])?;
    assert!(grid.allclose(&row, 0.0, 0.0)?);
    // Integers compare too.
    let i = Tensor::try_from(vec![10i32, 20])?;
    assert!(i.allclose(&Tensor::try_from(vec![11i32, 20])?, 0.0, 1.0)?);
    assert!(!i.allclose(&Tensor::try_from(vec![12i32, 20])?, 0.0, 1.0)?);
    Ok(())
}

#[test]
fn allclose_misuse_is_an_error_naming_allclose() -> opal::Result<()> {
    opal_cpu::init()?;
    opal_meta::init()?;
    let f = Tensor::try_from(vec![1.0f32])?;
    let d = Tensor::try_from(vec![1.0f64])?;
    let three = Tensor::try_from(vec![1.0f32, 2.0, 3.0])?;
    let two = Tensor::try_from(vec![1.0f32, 2.0])?;
    let m = meta_zeros(1)?;
    for err in [
        f.allclose(&d, 0.0, 0.0),
        f.allclose(&f, -1.0, 0.0),
        f.allclose(&f, 0.0, f64::NAN),
        f.allclose(&Tensor::undefined(), 0.0, 0.0),
        three.allclose(&two, 0.0, 0.0),
        m.allclose(&m, 0.0, 0.0),
    ] {
        let msg = err.unwrap_err().to_string();
        assert!(msg.contains("allclose"), "{msg}");
    }
    Ok(())
}
