//! Broken plugins cannot break the host: the broken test plugin
//! (`plugins/tests/broken`) returns, one way per test, what a buggy plugin could
//! (a null handle, a borrowed or foreign or released handle, a result on the
//! wrong device, a view past its storage, a panic), and the host refuses each,
//! from the typed entry and from the boxed kernel, with an `Err` naming the
//! plugin and the op; the process keeps working. A panic that escapes an
//! `extern "C"` kernel without a guard aborts the process: no host can catch
//! that, so it is shown in a child process. Each test runs in its own child
//! process (a process has three plugin keys).

use opal::dispatch::Dispatcher;
use opal::{ops, DType, Device, IValue, Tensor};
use opal_plugin_tests::{
    assert_mentions, built_broken_plugin, init_cpu, install, is_child, private_dir, run_child, Spec,
};
use std::path::Path;

fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

/// Loads the broken plugin as `broken` (device `broken`, PrivateUse1) in `mode`.
fn load(mode: &str) {
    init_cpu();
    let built = built_broken_plugin(tmp());
    let name = format!("broken{}", mode.replace('-', ""));
    let dir = private_dir(tmp(), &name);
    let spec = Spec {
        name: &name,
        device: "broken",
        key: "PrivateUse1",
        abi: "1.4",
        entry: None,
        config: mode,
        ops: vec![("aten::relu", "relu(Tensor self) -> Tensor")],
    };
    let m = install(&built, "libopal_broken_plugin.so", &dir, &spec);
    opal::plugin::load_manifest(&m).expect("the broken plugin loads");
}

/// An input on the plugin's device (its allocator's memory).
fn input() -> Tensor {
    Tensor::empty(&[3], DType::F32, Device::parse("broken:0").unwrap()).unwrap()
}

/// `relu` on the plugin's device, typed and boxed: both must be `Err`s naming
/// the op, the plugin and each of `what`; afterwards the input and the CPU
/// still work.
fn refused(mode: &str, what: &[&str]) {
    load(mode);
    let plugin = format!("broken{}", mode.replace('-', ""));
    let x = input();
    let e = ops::relu(&x)
        .expect_err("the typed call is refused")
        .to_string();
    assert_mentions(&e, &["relu", &format!("plugin '{plugin}'")]);
    assert_mentions(&e, what);
    let mut stack = vec![IValue::Tensor(x.clone())];
    let e = Dispatcher::global()
        .call_boxed("aten::relu", &mut stack)
        .expect_err("the boxed call is refused")
        .to_string();
    assert_mentions(&e, &["relu", &format!("plugin '{plugin}'")]);
    assert_mentions(&e, what);
    // The argument is intact (a refused borrowed handle was not taken over) and
    // the process computes on.
    assert_eq!(x.sizes(), [3]);
    assert_eq!(x.device(), Device::parse("broken:0").unwrap());
    let y = Tensor::from_slice(&[-1f32, 2.0], &[2]).unwrap();
    assert_eq!(ops::relu(&y).unwrap().to_vec::<f32>().unwrap(), [0.0, 2.0]);
    drop(x);
}

/// Runs `test` of this binary in a child process and asserts it passed.
fn in_child(test: &str) {
    let home = private_dir(tmp(), &format!("home-{test}"));
    let (ok, out) = run_child(test, &home, &[]);
    assert!(ok, "{test} failed in its child process:\n{out}");
}

macro_rules! broken_cases {
    ($($test:ident: $mode:literal => [$($what:literal),*];)*) => {$(
        #[test]
        fn $test() {
            if is_child(stringify!($test)) {
                refused($mode, &[$($what),*]);
            } else {
                in_child(stringify!($test));
            }
        }
    )*};
}

broken_cases! {
    a_null_handle_is_refused: "null" => ["null tensor handle"];
    a_borrowed_handle_returned_without_retain_is_refused: "borrowed" => ["did not issue"];
    a_foreign_handle_is_refused: "foreign" => ["did not issue"];
    a_released_handle_is_refused: "released" => ["already released"];
    a_result_on_the_wrong_device_is_refused:
        "wrong-device" => ["a tensor on cpu", "plugin's device type (broken)"];
    a_view_past_the_storage_cannot_be_made:
        "lying-view" => ["view of sizes [1003]", "bytes but the storage has 12"];
    a_panic_in_a_kernel_is_an_error: "panic" => ["panicked", "the kernel panics"];
}

/// A panic escaping an unguarded `extern "C"` kernel aborts the process (Rust
/// does not unwind across `extern "C"`): the child dies with the panic's
/// message instead of running on with a broken stack; the parent is unaffected.
#[test]
fn a_panic_escaping_an_unguarded_kernel_aborts_only_its_process() {
    const TEST: &str = "a_panic_escaping_an_unguarded_kernel_aborts_only_its_process";
    if is_child(TEST) {
        load("abort");
        let _ = ops::relu(&input());
        println!("UNREACHABLE: the host ran on after the abort");
        return;
    }
    let home = private_dir(tmp(), "home-abort");
    let (ok, out) = run_child(TEST, &home, &[]);
    assert!(!ok, "the child must not pass:\n{out}");
    assert_mentions(&out, &["a panic escapes an extern"]);
    assert!(!out.contains("UNREACHABLE"), "{out}");
}
