//! A plugin device's communicator in one process (`ProcessGroup::single_process`,
//! no MPI): the emu plugin's registered through the C ABI is picked up by the
//! registry and runs all_reduce itself; a copy registering none is staged.

mod plugin_common;

use opal::{DType, Device, DeviceType, Tensor};
use opal_distributed::{registry, ProcessGroup, ReduceOp};
use plugin_common::{load_emu_plugins, native_all_reduces};
use std::path::PathBuf;
use std::sync::OnceLock;

fn libs() -> &'static (PathBuf, PathBuf) {
    static L: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    L.get_or_init(|| {
        opal_cpu::init().unwrap();
        load_emu_plugins("plugin-comm-single")
    })
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to_device_dtype(Device::cpu(), DType::F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap()
}

#[test]
fn the_plugins_communicator_runs_all_reduce_and_a_plugin_without_one_is_staged() {
    let (emu_lib, nc_lib) = libs();
    let pg = ProcessGroup::single_process();
    assert!(opal::plugin::communicator(DeviceType::PrivateUse1).is_some());
    assert!(opal::plugin::communicator(DeviceType::PrivateUse2).is_none());
    let d = registry::describe(&pg, DeviceType::PrivateUse1);
    assert!(
        d.starts_with("plugin 'emu' communicator (all_reduce)"),
        "{d}"
    );
    let d = registry::describe(&pg, DeviceType::PrivateUse2);
    assert!(d.starts_with("host staging"), "{d}");

    let emu = Device::parse("emu:1").unwrap();
    let before = native_all_reduces(emu_lib);
    let x = Tensor::from_slice(&[1.5f32, -2.0, 4.0], &[3])
        .unwrap()
        .to(emu)
        .unwrap();
    pg.all_reduce(&x, ReduceOp::Avg).unwrap();
    assert_eq!(values(&x), [1.5, -2.0, 4.0]);
    assert_eq!(x.device(), emu);
    let i = Tensor::from_slice(&[7i64, -3], &[2])
        .unwrap()
        .to(emu)
        .unwrap();
    pg.all_reduce(&i, ReduceOp::Max).unwrap();
    assert_eq!(values(&i), [7.0, -3.0]);
    assert_eq!(native_all_reduces(emu_lib), before + 2);

    // A non-contiguous tensor is declined by the plugin: staged, same values.
    let m = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0], &[2, 2])
        .unwrap()
        .to(emu)
        .unwrap();
    // (A view made directly: emu's transpose runs through the CPU fallback, a copy.)
    let mt = m.as_strided(&[2, 2], &[1, 2], 0).unwrap();
    assert!(!mt.is_contiguous());
    pg.all_reduce(&mt, ReduceOp::Sum).unwrap();
    assert_eq!(values(&mt), [1.0, 3.0, 2.0, 4.0]);
    assert_eq!(native_all_reduces(emu_lib), before + 2);

    // The argument checks stay the group's: Avg of integers is refused before
    // the plugin is called.
    let e = pg.all_reduce(&i, ReduceOp::Avg).unwrap_err().to_string();
    assert!(e.contains("all_reduce") && e.contains("avg"), "{e}");
    assert_eq!(native_all_reduces(emu_lib), before + 2);

    let nc = Device::parse("emunc:0").unwrap();
    let y = Tensor::from_slice(&[5.0f32, 6.0], &[2])
        .unwrap()
        .to(nc)
        .unwrap();
    pg.all_reduce(&y, ReduceOp::Sum).unwrap();
    assert_eq!(values(&y), [5.0, 6.0]);
    assert_eq!(native_all_reduces(nc_lib), 0);
}

/// A plugin built for ABI 1.3 (before device runtimes and communicators) loads
/// as before, has no communicator, and its tensors' all_reduce is staged.
#[test]
fn a_plugin_built_for_an_older_abi_loads_and_is_staged() {
    use opal_plugin_tests::{built_test_plugin_abi_1_3, install_test_plugin, Spec};
    libs();
    let tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let mut old = Spec::test_plugin("tp13comm", "tpold", "PrivateUse3");
    old.abi = "1.3";
    let (_, info) = install_test_plugin(tmp, &built_test_plugin_abi_1_3(tmp), &old);
    assert!(info.loaded(), "{info:?}");
    assert!(opal::plugin::communicator(DeviceType::PrivateUse3).is_none());
    let pg = ProcessGroup::single_process();
    let d = registry::describe(&pg, DeviceType::PrivateUse3);
    assert!(d.starts_with("host staging"), "{d}");
    let dev = Device::parse("tpold").unwrap();
    let x = Tensor::from_slice(&[2.0f32, -1.0], &[2])
        .unwrap()
        .to(dev)
        .unwrap();
    pg.all_reduce(&x, ReduceOp::Sum).unwrap();
    assert_eq!(values(&x), [2.0, -1.0]);
}
