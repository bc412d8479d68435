//! Device runtimes through the ABI (1.4), beyond the device-runtime suite the emu
//! plugin runs (`emu_device_runtime.rs`): the plugin's backend-metadata hooks and
//! their errors; a 1.4 plugin that registers none gets the default runtime (one
//! synchronous device, its default stream); a plugin built for 1.3 has no device
//! runtime, as before 1.4.
//!
//! The emu plugin is loaded at PrivateUse1, the test plugin built for 1.4 at
//! PrivateUse2 and built for 1.3 at PrivateUse3, once per process.

use opal::device;
use opal::{ops, DType, Device, DeviceType, Generator, Tensor};
use opal_plugin_tests::{
    built_plugins, built_test_plugin_abi_1_3, init_cpu, install_emu, install_test_plugin,
    loaded_symbol, private_dir, Spec,
};
use std::path::{Path, PathBuf};
use std::sync::{Once, OnceLock};

fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

/// The loaded emu plugin's directory.
static EMU_DIR: OnceLock<PathBuf> = OnceLock::new();

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        init_cpu();
        let built = built_plugins(tmp());
        let dir = EMU_DIR.get_or_init(|| private_dir(tmp(), "emu-hooks"));
        install_emu(&built, dir);
        let info = opal::plugin::load_manifest(&dir.join("emu.opal-plugin.json")).expect("emu");
        assert_eq!(info.abi, Some((1, 4)));
        install_test_plugin(
            tmp(),
            &built,
            &Spec::test_plugin("tp14", "tp", "PrivateUse2"),
        );
        let mut old = Spec::test_plugin("tp13", "tpold", "PrivateUse3");
        old.abi = "1.3";
        install_test_plugin(tmp(), &built_test_plugin_abi_1_3(tmp()), &old);
    });
}

fn msg<T: std::fmt::Debug>(r: opal::Result<T>) -> String {
    r.expect_err("expected an error").to_string()
}

fn floats(v: &[f32]) -> Tensor {
    Tensor::from_slice(v, &[v.len() as i64]).unwrap()
}

#[test]
fn backend_metadata_goes_through_the_plugins_encoding() {
    setup();
    let h = device::hooks(DeviceType::PrivateUse1).unwrap();
    assert_eq!(
        h.serialize_backend_meta("layout", "tiled").as_deref(),
        Some("emu-v1;tiled")
    );
    assert_eq!(h.serialize_backend_meta("transient.x", "1"), None);
    assert_eq!(
        h.deserialize_backend_meta("layout", "emu-v1;tiled")
            .unwrap(),
        "tiled"
    );
    let m = msg(h.deserialize_backend_meta("layout", "v0;tiled"));
    assert!(
        m.contains("plugin 'emu'") && m.contains("expected the 'emu-v1;' encoding"),
        "{m}"
    );
}

/// A 1.4 plugin without a device runtime gets the default: one synchronous
/// device with its default stream only.
#[test]
fn a_plugin_without_hooks_is_one_synchronous_device() {
    setup();
    let tp = DeviceType::PrivateUse2;
    assert_eq!(device::device_count(tp).unwrap(), 1);
    let d = Device::new(tp, Some(0));
    let m = msg(device::new_stream(d));
    assert!(m.contains("only the default stream"), "{m}");
    let e = device::default_stream(d)
        .unwrap()
        .record_event(true)
        .unwrap();
    assert!(e.query().unwrap());
    let m = msg(device::memory_stats(d));
    assert!(m.contains("does not report memory statistics"), "{m}");
    assert!(device::set_device(Device::new(tp, Some(1))).is_err());
}

/// A plugin built for ABI 1.3 loads and has no device runtime, as before 1.4.
#[test]
fn a_plugin_built_for_1_3_has_no_device_runtime() {
    setup();
    let info = opal::plugin::plugins();
    let old = info.iter().find(|p| p.name == "tp13").expect("tp13");
    assert!(old.loaded(), "{old:?}");
    assert_eq!(old.abi, Some((1, 3)));
    let m = msg(device::device_count(DeviceType::PrivateUse3));
    assert!(m.contains("no device runtime registered"), "{m}");
    let x = floats(&[1.0, -2.0])
        .to(Device::new(DeviceType::PrivateUse3, Some(0)))
        .unwrap();
    let r = ops::relu(&x).unwrap();
    assert_eq!(
        r.to(Device::cpu()).unwrap().to_vec::<f32>().unwrap(),
        [1.0, 0.0]
    );
}

/// The emu plugin's probe `what` (3: native random kernel calls, 4: native
/// backward calls, 5: native custom-op calls).
fn probe(what: u32) -> u64 {
    setup();
    let dir = EMU_DIR.get().expect("set up");
    let f = loaded_symbol(&dir.join("libopal_emu_plugin.so"), "opal_emu_plugin_probe");
    // SAFETY: the emu plugin defines the symbol with this type.
    let f = unsafe {
        std::mem::transmute::<*mut std::ffi::c_void, extern "C" fn(u32, i32, i64, u64) -> u64>(f)
    };
    f(what, 0, 0, 0)
}

fn native_random_calls() -> u64 {
    probe(3)
}

/// `rand` and `randn` run natively in the emu plugin, drawing from the host's
/// default generator of the target index: a seed gives the numbers the host's
/// CPU kernels give for it, and each index keeps its own stream.
#[test]
fn random_factories_are_native_and_draw_the_devices_generator() {
    setup();
    let (e0, e1) = (
        Device::new(DeviceType::PrivateUse1, Some(0)),
        Device::new(DeviceType::PrivateUse1, Some(1)),
    );
    let on = |d, dt, normal: bool| {
        let t = if normal {
            ops::randn::call(&[7], Some(dt), None, Some(d), None)
        } else {
            ops::rand::call(&[7], Some(dt), None, Some(d), None)
        }
        .unwrap();
        assert_eq!((t.device(), t.dtype()), (d, dt));
        t.to(Device::cpu()).unwrap()
    };
    let before = native_random_calls();
    let (g0, g1) = (
        Generator::default_for_device(e0),
        Generator::default_for_device(e1),
    );
    g1.manual_seed(42);
    let a = on(e1, DType::F32, false).to_vec::<f32>().unwrap();
    let n = on(e1, DType::F64, true).to_vec::<f64>().unwrap();
    assert_eq!(native_random_calls(), before + 2, "both ran in the plugin");
    // The same draws from a generator seeded alike, as the host's kernels take them.
    let r = Generator::new(Device::cpu());
    r.manual_seed(42);
    let want_a: Vec<f32> = r.with_state(|st| (0..7).map(|_| st.next_f32()).collect());
    let want_n: Vec<f64> = r.with_state(|st| (0..7).map(|_| st.next_normal()).collect());
    assert_eq!((a.clone(), n), (want_a, want_n));
    // emu:0 keeps its own stream.
    g0.manual_seed(5);
    let first = on(e0, DType::F32, false).to_vec::<f32>().unwrap();
    g1.manual_seed(42);
    assert_eq!(on(e1, DType::F32, false).to_vec::<f32>().unwrap(), a);
    g0.manual_seed(5);
    assert_eq!(on(e0, DType::F32, false).to_vec::<f32>().unwrap(), first);
    // Without a dtype the plugin declines: the CPU fallback answers, on emu.
    let calls = native_random_calls();
    let t = ops::rand::call(&[3], None, None, Some(e1), None).unwrap();
    assert_eq!((t.device(), native_random_calls()), (e1, calls));
}

fn sigmoid_grad(device: Device) -> (String, Vec<f32>) {
    let x = floats(&[-1.0, 2.0, -3.0, 4.0]).to(device).unwrap();
    x.set_requires_grad(true).unwrap();
    let y = ops::sigmoid(&x).unwrap();
    let name = y.grad_fn().unwrap().name().to_string();
    ops::sum(&y).unwrap().backward().unwrap();
    let g = x.grad().unwrap().to(Device::cpu()).unwrap();
    (name, g.to_vec::<f32>().unwrap())
}

/// The emu plugin differentiates `sigmoid` itself: its node, its backward kernel,
/// registered at AutogradPrivateUse1; CPU tensors keep the generated node, and
/// both give the same gradient.
#[test]
fn the_plugin_differentiates_sigmoid_itself() {
    setup();
    let before = probe(4);
    let (emu_node, emu_grad) = sigmoid_grad(Device::new(DeviceType::PrivateUse1, Some(0)));
    let (cpu_node, cpu_grad) = sigmoid_grad(Device::cpu());
    assert_eq!(
        (emu_node.as_str(), cpu_node.as_str()),
        ("EmuSigmoidBackward", "SigmoidBackward0")
    );
    assert_eq!(emu_grad, cpu_grad);
    assert_eq!(probe(4), before + 1, "the plugin's backward ran");
    let sigmoid = opal::dispatch::Dispatcher::global()
        .find("aten::sigmoid")
        .unwrap();
    assert!(sigmoid.has_kernel_for(opal::dispatch::DispatchKey::AutogradPrivateUse1));
}

/// The plugin's own operator `emu::fused_add_relu` is defined with its schema and
/// callable by name; its kernel computes on emu tensors.
#[test]
fn the_plugins_own_operator_is_callable_by_name() {
    setup();
    let op = opal::dispatch::Dispatcher::global()
        .find("emu::fused_add_relu")
        .expect("defined");
    assert_eq!(
        op.schema(),
        Some("fused_add_relu(Tensor self, Tensor other) -> Tensor")
    );
    let e = Device::new(DeviceType::PrivateUse1, Some(1));
    let a = floats(&[1.0, -2.0, 3.0]).to(e).unwrap();
    let b = floats(&[0.5, 1.0, -4.0]).to(e).unwrap();
    let before = probe(5);
    let mut stack = vec![opal::IValue::Tensor(a), opal::IValue::Tensor(b)];
    opal::dispatch::Dispatcher::global()
        .call_boxed("emu::fused_add_relu", &mut stack)
        .unwrap();
    let [opal::IValue::Tensor(r)] = stack.as_slice() else {
        panic!("one tensor back, got {stack:?}");
    };
    assert_eq!(r.device(), e);
    assert_eq!(
        r.to(Device::cpu()).unwrap().to_vec::<f32>().unwrap(),
        [1.5, 0.0, 0.0]
    );
    assert_eq!(probe(5), before + 1);
}
