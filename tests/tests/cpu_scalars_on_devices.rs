//! A zero-dim CPU tensor beside device tensors acts as a scalar (an exported
//! `1 - x` passes the 1 as such a tensor): accepted in either position, the result
//! on the device, as in PyTorch; a CPU tensor with elements is still refused.
//!
//! Owns: the device of results computed from mixed scalar and device operands.

use opal::{ops, DType, Device, Scalar, Tensor};

fn emu() -> Device {
    opal_cpu::init().expect("registering the CPU backend");
    opal_emu::init().expect("registering emu");
    Device::parse("emu:0").expect("emu device")
}

fn values(t: &Tensor) -> Vec<f32> {
    ops::_to_copy::call(t, None, None, Some(Device::cpu()), None, false, None)
        .and_then(|c| c.to_vec::<f32>())
        .expect("f32 values")
}

#[test]
fn a_zero_dim_cpu_tensor_is_a_scalar_beside_device_tensors() {
    let dev = emu();
    let host = Tensor::from_slice(&[0.0f32, 1., 2., 3.], &[4]).unwrap();
    let x = ops::_to_copy::call(&host, None, None, Some(dev), None, false, None).unwrap();
    let one = Tensor::from_slice(&[1.0f32], &[]).unwrap();
    assert_eq!(one.dtype(), DType::F32);
    let r = ops::sub_tensor::call(&one, &x, &Scalar::Int(1)).unwrap();
    assert_eq!(r.device(), dev);
    assert_eq!(values(&r), vec![1.0, 0.0, -1.0, -2.0]);
    let r = ops::sub_tensor::call(&x, &one, &Scalar::Int(1)).unwrap();
    assert_eq!(r.device(), dev);
    assert_eq!(values(&r), vec![-1.0, 0.0, 1.0, 2.0]);
    let r = ops::mul_tensor(&one, &x).unwrap();
    assert_eq!(r.device(), dev);
    let e = ops::sub_tensor::call(&host, &x, &Scalar::Int(1)).unwrap_err();
    assert!(e.to_string().contains("same device"), "{e}");
}
