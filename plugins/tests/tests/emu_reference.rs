//! The emu plugin gives results identical, bit for bit, to the linked `opal-emu`:
//! the same program runs in two child processes, one with the plugin autoloaded
//! (this binary never calls `opal_emu` there) and one with `opal_emu::init()`.

use opal_plugin_tests::{
    built_plugins, emu_program, init_cpu, install_emu, is_child, private_dir, result_lines,
    run_child,
};
use std::path::Path;

fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

fn print_program() {
    init_cpu();
    for line in emu_program("emu").expect("program") {
        println!("RESULT {line}");
    }
}

#[test]
fn child_plugin() {
    if is_child("child_plugin") {
        print_program();
        assert!(opal::plugin::plugins()
            .iter()
            .any(|p| p.name == "emu" && p.loaded()));
    }
}

#[test]
fn child_linked() {
    if is_child("child_linked") {
        opal_emu::init().expect("linked emu");
        print_program();
        assert!(opal::plugin::plugins().is_empty());
    }
}

#[test]
fn emu_plugin_matches_linked_emu_bit_for_bit() {
    let built = built_plugins(tmp());
    let dir = private_dir(tmp(), "emu");
    install_emu(&built, &dir);
    let home = private_dir(tmp(), "home");
    let (ok, plugin_out) = run_child(
        "child_plugin",
        &home,
        &[("OPAL_PLUGIN_PATH", dir.to_str().unwrap())],
    );
    assert!(ok, "{plugin_out}");
    let (ok, linked_out) = run_child(
        "child_linked",
        &home,
        &[("OPAL_DEVICE_BACKEND_AUTOLOAD", "0")],
    );
    assert!(ok, "{linked_out}");
    let (p, l) = (result_lines(&plugin_out), result_lines(&linked_out));
    assert_eq!(p.len(), 17, "{plugin_out}");
    for (i, (a, b)) in p.iter().zip(&l).enumerate() {
        assert_eq!(
            a, b,
            "result {i} differs between the plugin and the linked emu"
        );
    }
    assert_eq!(p.len(), l.len());
}
