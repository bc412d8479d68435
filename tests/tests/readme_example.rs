//! The "Using the operators" example of README.md, kept compiling and true.

use opal::ops::{self, TensorOps};
use opal::{DType, Device, Tensor};

#[test]
fn readme_example_runs() -> opal::Result<()> {
    opal_cpu::init()?;
    opal_meta::init()?;
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3])?;
    let b = Tensor::from_slice(&[10.0f32, 20.0, 30.0], &[3])?;
    let c = ops::add_tensor(&a, &b)?;
    let d = ops::add_tensor::with(&a, &b, ops::add_tensor::Options::default().alpha(2))?;
    let e = a.mul_tensor(&b)?;
    a.add_tensor_(&b)?;
    let z = ops::zeros::with(
        &[2, 3],
        ops::zeros::Options::default()
            .dtype(DType::F64)
            .device(Device::meta()),
    )?;
    assert_eq!(c.to_string(), "tensor([11., 22., 33.])");
    assert_eq!(d.to_vec::<f32>()?, vec![21.0, 42.0, 63.0]);
    assert_eq!(e.to_vec::<f32>()?, vec![10.0, 40.0, 90.0]);
    assert_eq!(a.to_vec::<f32>()?, vec![11.0, 22.0, 33.0]);
    assert_eq!((z.sizes(), z.dtype()), (&[2i64, 3][..], DType::F64));
    assert!(z.device().is_meta());

    let err = ops::add_tensor(&a, &z).unwrap_err().to_string();
    assert!(err.contains("add"), "{err}");
    Ok(())
}
