//! Structured derivation (functional op = Meta kernel for the output + the backend's
//! out= kernel) must promote exactly like the op itself. A wrapped number (a Scalar
//! passed as a tensor) takes part in promotion by category only, so `int tensor +
//! wrapped 2.5` is f32 — the derived path must keep that flag when it builds the
//! meta inputs.

use opal::dispatch::{DispatchKey, DispatchKeySet};
use opal::ops;
use opal::{DType, Scalar, Tensor};

#[test]
fn derived_add_promotes_a_wrapped_float_like_a_scalar() -> opal::Result<()> {
    opal_cpu::init()?;
    opal_meta::init()?;
    let ints = Tensor::from_slice(&[1i64, 2, 3], &[3])?;
    let wrapped = Tensor::wrapped_number(&Scalar::Float(2.5))?;
    let ks = DispatchKeySet::from(DispatchKey::CPU);

    let derived = ops::add_tensor::structured(ks, &ints, &wrapped, &Scalar::Int(1))?;
    let direct = ops::add_tensor(&ints, &wrapped)?;

    assert_eq!(derived.dtype(), DType::F32);
    assert_eq!(derived.dtype(), direct.dtype());
    assert_eq!(derived.to_vec::<f32>()?, vec![3.5, 4.5, 5.5]);
    assert_eq!(direct.to_vec::<f32>()?, vec![3.5, 4.5, 5.5]);
    Ok(())
}
