//! PyTorch's device rule at every op entry: all tensor arguments on one
//! device, or an `Err` naming the op and both devices, before any kernel runs. The
//! exceptions: zero-dim CPU tensors act as scalars for element-wise ops
//! (`device_check: NoCheck`), and ops that move data (`_to_copy`) take any device.

use opal::{ops, Device, Scalar, Tensor};

fn devices() -> (Device, Device) {
    opal_cpu::init().expect("cpu");
    opal_emu::init().expect("emu");
    (
        Device::cpu(),
        Device::parse("emu:0").expect("emu registered"),
    )
}

fn on(values: &[f32], device: Device) -> Tensor {
    let t = Tensor::from_slice(values, &[values.len() as i64]).unwrap();
    ops::_to_copy::with(&t, ops::_to_copy::Options::default().device(device)).unwrap()
}

fn assert_device_err<T: std::fmt::Debug>(r: opal::Result<T>, op: &str) {
    let msg = r.expect_err("mixed devices must be refused").to_string();
    for part in [op, "same device", "cpu", "emu"] {
        assert!(msg.contains(part), "{msg:?} does not mention {part:?}");
    }
}

#[test]
fn binary_ops_refuse_mixed_devices_either_way() {
    let (cpu, emu) = devices();
    let (c, e) = (on(&[1.0, 2.0], cpu), on(&[3.0, 4.0], emu));
    assert_device_err(ops::add_tensor(&c, &e), "aten::add.Tensor");
    assert_device_err(ops::add_tensor(&e, &c), "aten::add.Tensor");
    assert_device_err(
        ops::mm(
            &on(&[1.0], cpu).reshape_to(&[1, 1]),
            &on(&[1.0], emu).reshape_to(&[1, 1]),
        ),
        "aten::mm",
    );
}

#[test]
fn in_place_and_out_refuse_mixed_devices_and_write_nothing() {
    let (cpu, emu) = devices();
    let (c, e) = (on(&[1.0, 2.0], cpu), on(&[3.0, 4.0], emu));
    assert_device_err(ops::add_tensor_(&c, &e), "aten::add_.Tensor");
    assert_eq!(c.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
    let out = on(&[0.0, 0.0], cpu);
    assert_device_err(ops::add_out(&e, &e, &out), "aten::add.out");
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![0.0, 0.0]);
}

#[test]
fn tensor_lists_refuse_mixed_devices() {
    let (cpu, emu) = devices();
    let list = [on(&[1.0], cpu), on(&[2.0], emu)];
    assert_device_err(ops::cat(&list), "aten::cat");
}

#[test]
fn zero_dim_cpu_tensors_act_as_scalars_for_element_wise_ops() {
    let (_, emu) = devices();
    let e = on(&[3.0, 4.0], emu);
    let two = Tensor::from_slice(&[2.0f32], &[]).unwrap();
    let r = ops::mul_tensor(&e, &two).unwrap();
    assert_eq!(r.device(), emu);
    assert_eq!(
        ops::_to_copy::with(&r, ops::_to_copy::Options::default().device(Device::cpu()))
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![6.0, 8.0]
    );
    let w = Tensor::wrapped_number(&Scalar::Float(1.0)).unwrap();
    assert_eq!(ops::add_tensor(&e, &w).unwrap().device(), emu);
}

#[test]
fn ops_that_move_data_take_any_device() {
    let (cpu, emu) = devices();
    let e = on(&[5.0, 6.0], emu);
    let back = ops::_to_copy::with(&e, ops::_to_copy::Options::default().device(cpu)).unwrap();
    assert_eq!(back.device(), cpu);
    assert_eq!(back.to_vec::<f32>().unwrap(), vec![5.0, 6.0]);
}

trait ReshapeTo {
    fn reshape_to(&self, shape: &[i64]) -> Tensor;
}

impl ReshapeTo for Tensor {
    fn reshape_to(&self, shape: &[i64]) -> Tensor {
        ops::reshape(self, shape).unwrap()
    }
}
