//! Autoload in a program that depends on `opal` and `opal-cpu` only and never
//! names an emu crate: each test runs itself again as a child process with the
//! environment it needs (autoloading happens once per process).

use opal::plugin::{self, OpStatus};
use opal::{ops, Device};
use opal_plugin_tests::{
    built_plugins, init_cpu, install, install_emu, is_child, private_dir, run_child, Spec,
};
use std::path::{Path, PathBuf};

fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

/// A directory with the emu plugin (PrivateUse1) and the test plugin as `tp`
/// (PrivateUse2); `broken` adds a third whose init fails.
fn plugin_dir(test: &str, broken: bool) -> PathBuf {
    let built = built_plugins(tmp());
    let dir = private_dir(tmp(), &format!("{test}-plugins"));
    install_emu(&built, &dir);
    install(
        &built,
        "libopal_test_plugin.so",
        &dir,
        &Spec::test_plugin("tp", "tp", "PrivateUse2"),
    );
    if broken {
        let mut s = Spec::test_plugin("broken", "brokendev", "PrivateUse3");
        s.config = "fail";
        install(&built, "libopal_test_plugin.so", &dir, &s);
    }
    dir
}

fn parent(test: &str, dir: Option<&Path>, env: &[(&str, &str)]) -> String {
    let home = private_dir(tmp(), &format!("{test}-home"));
    let mut all: Vec<(&str, &str)> = env.to_vec();
    let d = dir.map(|d| d.to_str().unwrap().to_string());
    if let Some(d) = &d {
        all.push(("OPAL_PLUGIN_PATH", d));
    }
    let (ok, out) = run_child(test, &home, &all);
    assert!(ok, "child {test} failed:\n{out}");
    out
}

#[test]
fn emu_and_a_second_plugin_autoload_at_the_first_unknown_device_name() {
    const T: &str = "emu_and_a_second_plugin_autoload_at_the_first_unknown_device_name";
    if !is_child(T) {
        parent(T, Some(&plugin_dir(T, false)), &[]);
        return;
    }
    init_cpu();
    let emu = Device::parse("emu").expect("autoloaded");
    let tp = Device::parse("tp:0").expect("the second plugin too");
    let a = opal::Tensor::from_slice(&[1.0f32, -2.0, 3.0], &[3]).unwrap();
    let on_emu = a.to(emu).unwrap();
    let r = ops::relu(&ops::add_tensor(&on_emu, &on_emu).unwrap()).unwrap();
    // `emu` without an index is the current emu device.
    assert_eq!(r.device(), Device::parse("emu:0").unwrap());
    assert_eq!(
        r.to(Device::cpu()).unwrap().to_vec::<f32>().unwrap(),
        vec![2.0, 0.0, 6.0]
    );
    let on_tp = a.to(tp).unwrap();
    let s = ops::sum(&on_tp).unwrap();
    assert_eq!(
        s.to(Device::cpu()).unwrap().to_vec::<f32>().unwrap(),
        vec![2.0]
    );
    let list = plugin::plugins();
    assert_eq!(list.len(), 2, "{list:?}");
    for (p, key) in list.iter().zip([
        opal::dispatch::DispatchKey::PrivateUse1,
        opal::dispatch::DispatchKey::PrivateUse2,
    ]) {
        assert!(p.loaded(), "{p:?}");
        assert_eq!(p.key, Some(key));
        assert!(p
            .manifest
            .starts_with(std::env::var("OPAL_PLUGIN_PATH").unwrap()));
        assert!(p.library.as_ref().unwrap().exists());
    }
    let emu_ops = &list[0].ops;
    assert!(emu_ops
        .iter()
        .any(|(o, s)| o == "aten::sum" && matches!(s, OpStatus::Active { adapted: true, .. })));
}

#[test]
fn autoload_off_switch() {
    const T: &str = "autoload_off_switch";
    if !is_child(T) {
        parent(
            T,
            Some(&plugin_dir(T, false)),
            &[("OPAL_DEVICE_BACKEND_AUTOLOAD", "0")],
        );
        return;
    }
    let e = Device::parse("emu").unwrap_err().to_string();
    assert!(e.contains("unknown device type 'emu'"), "{e}");
    assert!(plugin::plugins().is_empty());
}

#[test]
fn a_broken_plugin_does_not_stop_the_others() {
    const T: &str = "a_broken_plugin_does_not_stop_the_others";
    if !is_child(T) {
        let out = parent(T, Some(&plugin_dir(T, true)), &[]);
        assert!(
            out.contains("'broken'") && out.contains("OPAL_DEVICE_BACKEND_AUTOLOAD=0"),
            "{out}"
        );
        return;
    }
    init_cpu();
    Device::parse("emu").expect("emu still loads");
    // Printed for the parent (warnings go to stderr, or to `tracing` when a
    // crate of the build enables that feature).
    println!("{}", plugin::autoload_warnings().join("\n"));
    let list = plugin::plugins();
    let broken = list.iter().find(|p| p.name == "broken").unwrap();
    assert!(broken
        .result
        .as_ref()
        .is_err_and(|e| e.contains("init told to fail")));
    assert_eq!(list.iter().filter(|p| p.loaded()).count(), 2);
}

#[test]
fn strict_mode_makes_a_failure_an_error() {
    const T: &str = "strict_mode_makes_a_failure_an_error";
    if !is_child(T) {
        parent(
            T,
            Some(&plugin_dir(T, true)),
            &[("OPAL_PLUGIN_STRICT", "1")],
        );
        return;
    }
    // "broken" sorts before "emu" and "tp": strict mode stops at it.
    let e = Device::parse("emu").unwrap_err().to_string();
    assert!(
        e.contains("'broken'") && e.contains("init told to fail"),
        "{e}"
    );
    assert!(e.contains("OPAL_DEVICE_BACKEND_AUTOLOAD=0"), "{e}");
}

#[test]
fn a_writable_plugin_directory_is_skipped() {
    use std::os::unix::fs::PermissionsExt;
    const T: &str = "a_writable_plugin_directory_is_skipped";
    if !is_child(T) {
        let dir = plugin_dir(T, false);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let out = parent(T, Some(&dir), &[]);
        assert!(out.contains("group- or world-writable"), "{out}");
        return;
    }
    assert!(Device::parse("emu").is_err());
    println!("{}", plugin::autoload_warnings().join("\n"));
    assert!(plugin::plugins().is_empty());
}

/// The per-user directory is searched when `OPAL_PLUGIN_PATH` is unset.
#[test]
fn the_per_user_directory_is_searched() {
    const T: &str = "the_per_user_directory_is_searched";
    if !is_child(T) {
        let home = private_dir(tmp(), &format!("{T}-xdg"));
        let user_dir = home.join("opal");
        std::fs::create_dir(&user_dir).unwrap();
        std::fs::rename(plugin_dir(T, false), user_dir.join("plugins")).unwrap();
        let (ok, out) = run_child(T, &home, &[]);
        assert!(ok, "{out}");
        return;
    }
    init_cpu();
    Device::parse("emu").expect("found in $XDG_DATA_HOME/opal/plugins");
}
