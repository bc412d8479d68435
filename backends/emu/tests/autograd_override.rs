//! emu's own autograd kernel (`autograd: [sigmoid]` in emu.yaml): on emu tensors
//! sigmoid records emu's backward node `EmuSigmoidBackward`, registered at
//! AutogradPrivateUse1 ahead of the kernels generated from derivatives.yaml; CPU
//! tensors keep the generated `SigmoidBackward0`. Both give the same gradient.

use opal::dispatch::{DispatchKey, Dispatcher};
use opal::{ops, Device, Tensor};

fn grad_of_sigmoid(device: Device) -> (String, Vec<f32>) {
    opal_cpu::init().unwrap();
    opal_emu::init().unwrap();
    let x = Tensor::from_slice(&[-1.0f32, 2.0, -3.0, 4.0], &[4])
        .unwrap()
        .to(device)
        .unwrap();
    x.set_requires_grad(true).unwrap();
    let y = ops::sigmoid(&x).unwrap();
    let name = y.grad_fn().unwrap().name().to_string();
    ops::sum(&y).unwrap().backward().unwrap();
    let g = x
        .grad()
        .unwrap()
        .to(Device::cpu())
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    (name, g)
}

#[test]
fn emu_differentiates_sigmoid_itself() {
    opal_emu::init().unwrap();
    let (emu_node, emu_grad) = grad_of_sigmoid(Device::parse("emu").unwrap());
    let (cpu_node, cpu_grad) = grad_of_sigmoid(Device::cpu());
    assert_eq!(emu_node, "EmuSigmoidBackward");
    assert_eq!(cpu_node, "SigmoidBackward0");
    // d/dx sigmoid(x) = s (1 - s)
    for (i, x) in [-1.0f32, 2.0, -3.0, 4.0].iter().enumerate() {
        let s = 1.0 / (1.0 + (-x).exp());
        assert!((emu_grad[i] - s * (1.0 - s)).abs() < 1e-6);
    }
    assert_eq!(emu_grad, cpu_grad);
    let sigmoid = Dispatcher::global().find("aten::sigmoid").unwrap();
    assert!(sigmoid.has_kernel_for(DispatchKey::AutogradPrivateUse1));
}
