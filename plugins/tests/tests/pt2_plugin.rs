//! An exported program (`.pt2`) runs on a plugin device: `opal_export::device`
//! autoloads the emu plugin for `emu` (the linked emu backend is never
//! initialized), and the outputs match PyTorch's. A child process per test, as
//! autoloading happens once per process.

use opal_plugin_tests::{built_plugins, install_emu, is_child, private_dir, run_child};
use std::path::Path;

fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

/// Runs test `t` again in a child process whose plugin path has the emu plugin
/// (strict: a failing plugin fails the child).
fn parent(t: &str) {
    let built = built_plugins(tmp());
    let dir = private_dir(tmp(), &format!("{t}-plugins"));
    install_emu(&built, &dir);
    let home = private_dir(tmp(), &format!("{t}-home"));
    let d = dir.to_str().unwrap();
    let (ok, out) = run_child(
        t,
        &home,
        &[("OPAL_PLUGIN_PATH", d), ("OPAL_PLUGIN_STRICT", "1")],
    );
    assert!(ok, "child failed:\n{out}");
}

#[test]
fn an_exported_program_runs_on_the_autoloaded_emu_plugin() {
    const T: &str = "an_exported_program_runs_on_the_autoloaded_emu_plugin";
    if !is_child(T) {
        parent(T);
        return;
    }
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../export/tests/fixtures/models");
    let dev = opal_export::device("emu").unwrap();
    let plugins = opal::plugin::plugins();
    assert!(
        plugins.iter().any(|p| p.name == "emu" && p.loaded()),
        "the emu plugin is loaded: {plugins:?}"
    );
    let program = opal_export::ExportedProgram::load(models.join("tied_mlp_dynamic.pt2")).unwrap();
    let report = program.inspect(dev);
    assert!(report.runnable(), "{report}");
    let io = models.join("tied_mlp_dynamic.io.safetensors");
    let inputs = opal_export::io::read_indexed(&io, "input").unwrap();
    let expected = opal_export::io::read_indexed(&io, "output").unwrap();
    let outs = program.to_device(dev).unwrap().run(&inputs).unwrap();
    assert_eq!(outs.len(), expected.len());
    for (o, e) in outs.iter().zip(&expected) {
        assert_eq!(o.device().device_type(), dev.device_type());
        let (o, e) = (o.to(opal::Device::cpu()).unwrap(), e.clone());
        let (o, e) = (o.to_vec::<f32>().unwrap(), e.to_vec::<f32>().unwrap());
        for (a, b) in o.iter().zip(&e) {
            assert!((a - b).abs() <= 1e-3 + 1e-4 * b.abs(), "{a} vs {b}");
        }
    }
}

/// An exported program calling the emu plugin's own operator
/// (`torch.ops.emu.fused_add_relu.default`, exported by
/// `fixtures/make_fused_add_relu.py` with PyTorch's custom op of the same schema)
/// runs on the autoloaded plugin, the operator resolved by name.
#[test]
fn an_exported_program_calls_the_plugins_own_operator() {
    const T: &str = "an_exported_program_calls_the_plugins_own_operator";
    if !is_child(T) {
        parent(T);
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fused_add_relu.pt2");
    let dev = opal_export::device("emu").unwrap();
    let program = opal_export::ExportedProgram::load(&path).unwrap();
    let report = program.inspect(dev);
    assert!(report.runnable(), "{report}");
    let x = opal::Tensor::from_slice(&[1.0f32, -2.0, 3.0, -0.5], &[4]).unwrap();
    let y = opal::Tensor::from_slice(&[0.5f32, 1.0, -4.0, 0.25], &[4]).unwrap();
    let outs = program.to_device(dev).unwrap().run(&[x, y]).unwrap();
    assert_eq!(outs.len(), 1);
    assert_eq!(outs[0].device().device_type(), dev.device_type());
    let v = outs[0]
        .to(opal::Device::cpu())
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(v, [3.0, 0.0, 0.0, 0.0]);
}
