//! Undefined outputs through the CPU fallback: emu has no backward kernels, so
//! `native_layer_norm_backward` and `convolution_backward` run on the CPU; a gradient
//! `output_mask` did not request comes back undefined (boxed as `None` on the way),
//! the others come back to the device with the CPU's values.

use opal::dispatch::Dispatcher;
use opal::{ops, Device, IValue, Tensor};

fn setup() -> Device {
    opal_cpu::init().expect("cpu backend");
    opal_emu::init().expect("emu backend");
    Device::parse("emu:0").expect("emu device")
}

fn to(t: &Tensor, device: Device) -> Tensor {
    ops::_to_copy::call(t, None, None, Some(device), None, false, None).expect("copy")
}

fn ramp(n: i64, scale: f32, sizes: &[i64]) -> Tensor {
    Tensor::from_vec((0..n).map(|i| (i as f32 * scale).sin()).collect(), sizes).expect("ramp")
}

/// `on_emu` is the CPU result moved to emu: defined and on emu exactly where `cpu`
/// is defined, with the same values.
fn same_results(cpu: [&Tensor; 3], on_emu: [&Tensor; 3], emu: Device) {
    for (i, (c, e)) in cpu.into_iter().zip(on_emu).enumerate() {
        assert_eq!(e.is_defined(), c.is_defined(), "output {i}");
        if c.is_defined() {
            assert_eq!(e.device(), emu, "output {i}");
            assert_eq!(
                to(e, Device::cpu()).to_vec::<f32>().unwrap(),
                c.to_vec::<f32>().unwrap(),
                "output {i}"
            );
        }
    }
}

#[test]
fn layer_norm_backward_leaves_the_unrequested_gradient_undefined() {
    let emu = setup();
    let x = ramp(24, 0.3, &[2, 3, 4]);
    let g = ramp(24, 0.7, &[2, 3, 4]);
    let w = Tensor::from_slice(&[1.0f32, 0.5, -1.0, 2.0], &[4]).unwrap();
    let b = Tensor::from_slice(&[0.1f32, 0.2, 0.3, 0.4], &[4]).unwrap();
    let (_, mean, rstd) = ops::native_layer_norm(&x, &[4], Some(&w), Some(&b), 1e-5).unwrap();
    let mask = [true, false, true];
    let cpu =
        ops::native_layer_norm_backward(&g, &x, &[4], &mean, &rstd, Some(&w), Some(&b), &mask)
            .unwrap();
    assert!(!cpu.1.is_defined());
    let e = |t: &Tensor| to(t, emu);
    let on_emu = ops::native_layer_norm_backward(
        &e(&g),
        &e(&x),
        &[4],
        &e(&mean),
        &e(&rstd),
        Some(&e(&w)),
        Some(&e(&b)),
        &mask,
    )
    .unwrap();
    same_results(
        [&cpu.0, &cpu.1, &cpu.2],
        [&on_emu.0, &on_emu.1, &on_emu.2],
        emu,
    );

    // Boxed, the unrequested gradient is `None`.
    let mut stack = vec![
        IValue::Tensor(e(&g)),
        IValue::Tensor(e(&x)),
        IValue::IntList(vec![4]),
        IValue::Tensor(e(&mean)),
        IValue::Tensor(e(&rstd)),
        IValue::Tensor(e(&w)),
        IValue::Tensor(e(&b)),
        IValue::BoolList(mask.to_vec()),
    ];
    Dispatcher::global()
        .call_boxed("aten::native_layer_norm_backward", &mut stack)
        .unwrap();
    assert!(
        matches!(
            stack.as_slice(),
            [IValue::Tensor(a), IValue::None, IValue::Tensor(c)] if a.device() == emu && c.device() == emu
        ),
        "{stack:?}"
    );
}

#[test]
fn convolution_backward_leaves_unrequested_gradients_undefined() {
    let emu = setup();
    let x = ramp(2 * 2 * 5 * 5, 0.3, &[2, 2, 5, 5]);
    let w = ramp(3 * 2 * 3 * 3, 0.5, &[3, 2, 3, 3]);
    let gy = ramp(2 * 3 * 3 * 3, 0.9, &[2, 3, 3, 3]);
    for mask in [[true, false, true], [false, true, false]] {
        let run = |gy: &Tensor, x: &Tensor, w: &Tensor| {
            ops::convolution_backward(
                gy,
                x,
                w,
                Some(&[3]),
                &[1, 1],
                &[0, 0],
                &[1, 1],
                false,
                &[0, 0],
                1,
                &mask,
            )
            .unwrap()
        };
        let cpu = run(&gy, &x, &w);
        for (i, m) in mask.iter().enumerate() {
            let t = [&cpu.0, &cpu.1, &cpu.2][i];
            assert_eq!(t.is_defined(), *m, "{mask:?}: output {i}");
        }
        let on_emu = run(&to(&gy, emu), &to(&x, emu), &to(&w, emu));
        same_results(
            [&cpu.0, &cpu.1, &cpu.2],
            [&on_emu.0, &on_emu.1, &on_emu.2],
            emu,
        );
    }
}
