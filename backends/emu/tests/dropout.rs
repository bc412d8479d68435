//! Dropout on the example `emu` device: it has no dropout kernel, so
//! `native_dropout` runs on the CPU through the fallback (drawing from emu's default
//! generator, which stands in for the CPU's meanwhile) and the results come back to
//! the device; the runtime's `dropout` composite works on top of it. Seeding emu's
//! generator as the CPU's was seeded gives the same mask as on the CPU.

use opal::{ops, DType, Device, DeviceType, Generator, Scalar, Tensor};

fn to_cpu(t: &Tensor) -> Tensor {
    ops::_to_copy::call(t, None, None, Some(Device::cpu()), None, false, None).expect("to cpu")
}

fn ramp(device: Device) -> Tensor {
    let x = ops::arange_start_step::call(
        &Scalar::Int(0),
        &Scalar::Int(4096),
        &Scalar::Int(1),
        Some(DType::F32),
        None,
        Some(device),
        None,
    )
    .expect("arange");
    ops::view::call(&x, &[64, 64]).expect("view")
}

#[test]
fn native_dropout_and_dropout_run_through_the_cpu_fallback() {
    opal_cpu::init().expect("cpu backend");
    opal_emu::init().expect("emu backend");
    let emu = Device::parse("emu:0").expect("emu device");
    let cpu_gen = Generator::default_for(DeviceType::Cpu);
    let emu_gen = Generator::default_for_device(emu);
    // This test binary is the only user of the default generators.
    cpu_gen.manual_seed(99);
    let (want_y, want_m) = ops::native_dropout(&ramp(Device::cpu()), 0.5, Some(true)).unwrap();
    emu_gen.manual_seed(99);
    cpu_gen.manual_seed(1);
    let before = opal::fallback::calls();
    let (y, m) = ops::native_dropout(&ramp(emu), 0.5, Some(true)).unwrap();
    assert!(
        opal::fallback::calls() > before,
        "served by the CPU fallback"
    );
    assert_eq!((y.device(), m.device()), (emu, emu));
    assert_eq!(m.dtype(), DType::Bool);
    assert_eq!(
        to_cpu(&y).to_vec::<f32>().unwrap(),
        want_y.to_vec::<f32>().unwrap()
    );
    assert_eq!(
        to_cpu(&m).to_vec::<bool>().unwrap(),
        want_m.to_vec::<bool>().unwrap()
    );
    // The composite over it, same seed, same values; eval mode returns the input.
    emu_gen.manual_seed(99);
    let d = ops::dropout(&ramp(emu), 0.5, true).unwrap();
    assert_eq!(d.device(), emu);
    assert_eq!(
        to_cpu(&d).to_vec::<f32>().unwrap(),
        want_y.to_vec::<f32>().unwrap()
    );
    let x = ramp(emu);
    assert!(ops::dropout(&x, 0.5, false).unwrap().is_same(&x));
    assert!(ops::native_dropout(&x, 1.5, Some(true)).is_err());
}
