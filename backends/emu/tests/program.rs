//! One program, two devices: the same code runs on `"cpu"` and on `"emu"` by
//! changing only the device string, with the same results. On emu it mixes native
//! kernels (factories, view, mm and add derived from out= kernels, sub, relu), the
//! pinned `sum` behind its adapter, and ops emu lacks (exp, mean.dim) through the
//! CPU fallback.

use opal::ops;
use opal::{DType, Device, Scalar, Tensor};

fn program(device: &str) -> (Vec<f32>, Vec<f64>, Vec<f32>) {
    opal_cpu::init().expect("cpu backend");
    opal_emu::init().expect("emu backend");
    let dev = Device::parse(device).expect("device");
    let f32_ = Some(DType::F32);
    let x = ops::arange_start_step::call(
        &Scalar::Int(0),
        &Scalar::Int(12),
        &Scalar::Int(1),
        f32_,
        None,
        Some(dev),
        None,
    )
    .unwrap();
    let x = ops::view::call(&x, &[3, 4]).unwrap();
    let w = ops::full::call(&[4, 2], &Scalar::Float(0.5), f32_, None, Some(dev), None).unwrap();
    let y = ops::mm::call(&x, &w).unwrap();
    let z = ops::add_tensor::call(&y, &y, &Scalar::Int(2)).unwrap();
    let ten = ops::full::call(&[3, 2], &Scalar::Float(10.0), f32_, None, Some(dev), None).unwrap();
    let r = ops::relu::call(&ops::sub_tensor::call(&z, &ten, &Scalar::Int(1)).unwrap()).unwrap();
    let scaled = ops::mul_tensor::call(
        &r,
        &ops::full::call(&[3, 2], &Scalar::Float(0.01), f32_, None, Some(dev), None).unwrap(),
    )
    .unwrap();
    let e = ops::exp::call(&scaled).unwrap();
    let m = ops::mean_dim::call(&e, Some(&[1]), false, None).unwrap();
    let total = ops::sum::call(&r, Some(DType::F64)).unwrap();
    for t in [&x, &y, &z, &r, &e, &m, &total] {
        assert_eq!(t.device(), dev, "results stay on the device");
    }
    let cpu = |t: &Tensor| {
        ops::_to_copy::call(t, None, None, Some(Device::cpu()), None, false, None).unwrap()
    };
    (
        cpu(&r).to_vec::<f32>().unwrap(),
        cpu(&total).to_vec::<f64>().unwrap(),
        cpu(&m).to_vec::<f32>().unwrap(),
    )
}

#[test]
fn the_same_program_on_cpu_and_emu() {
    let on_cpu = program("cpu");
    let calls = opal::fallback::calls();
    let on_emu = program("emu:0");
    assert!(
        opal::fallback::calls() > calls,
        "emu used the CPU fallback for exp and mean"
    );
    assert_eq!(on_cpu.0, vec![0.0, 0.0, 23.0, 23.0, 47.0, 47.0]);
    assert_eq!(on_emu.0, on_cpu.0);
    assert_eq!(on_emu.1, on_cpu.1);
    assert_eq!(on_cpu.1, vec![140.0]);
    for (a, b) in on_emu.2.iter().zip(&on_cpu.2) {
        assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{a} vs {b}");
    }
}
