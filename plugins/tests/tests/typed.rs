//! Typed entries (ABI 1.1): the host binds a plugin's typed entry when the op's
//! schema is the host's and calls it for typed calls (counted by the test plugin);
//! a plugin built for ABI 1.0 (boxed kernels only) keeps working; an argument the
//! plugin's schema lacks still goes to the fallback or is an `Err` at its
//! non-default value; a declined typed call runs the fallback; a panic in a typed
//! entry is an `Err`. One key per test: PrivateUse1..3.

use opal::plugin::OpStatus;
use opal::{ops, DType, Device, IntoIValue, Tensor};
use opal_plugin_tests::{
    assert_mentions, cpu_f32, f32_tensor, load_test_plugin, op_status as status, test_plugin_calls,
};
use std::path::Path;

fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

#[test]
fn typed_calls_take_the_typed_entry_and_keep_every_argument() {
    let (lib, info) = load_test_plugin(tmp(), "1.4", ("typedcount", "ty", "PrivateUse1"), "count");
    let active = |typed| OpStatus::Active {
        adapted: false,
        typed,
    };
    assert_eq!(status(&info, "aten::add.Tensor"), active(true));
    assert_eq!(status(&info, "aten::relu"), active(true));
    // The pinned sum's typed entry has the old schema: the boxed adapter serves it.
    assert_eq!(
        status(&info, "aten::sum"),
        OpStatus::Active {
            adapted: true,
            typed: false
        }
    );
    let dev = Device::parse("ty:0").unwrap();
    let x = f32_tensor(&[1.0, -2.0, 3.5]).to(dev).unwrap();
    let y = f32_tensor(&[0.5, 0.25, -1.0]).to(dev).unwrap();
    let (b0, t0) = test_plugin_calls(&lib);
    let fallbacks = opal::fallback::calls();
    assert_eq!(
        cpu_f32(&ops::add_tensor(&x, &y).unwrap()),
        [1.5, -1.75, 2.5]
    );
    // A non-default alpha reaches the typed entry (the schemas agree): not ignored.
    let a = ops::add_tensor::with(&x, &y, ops::add_tensor::Options::default().alpha(2.5));
    assert_eq!(cpu_f32(&a.unwrap()), [2.25, -1.375, 1.0]);
    assert_eq!(cpu_f32(&ops::relu(&x).unwrap()), [1.0, 0.0, 3.5]);
    let (b1, t1) = test_plugin_calls(&lib);
    assert_eq!(
        (b1 - b0, t1 - t0),
        (0, 3),
        "three typed calls, no boxed one"
    );
    // (No check of the CPU fallback's counter here: moving results to the CPU
    // goes through it; the plugin's own counters show which kernel ran.)
    // A boxed call of the same op goes to the boxed kernel.
    let mut stack = vec![
        x.clone().into_ivalue(),
        y.clone().into_ivalue(),
        opal::Scalar::Int(1).into_ivalue(),
    ];
    opal::dispatch::Dispatcher::global()
        .call_boxed("aten::add.Tensor", &mut stack)
        .unwrap();
    assert_eq!(test_plugin_calls(&lib), (b1 + 1, t1));
    // The pinned sum: boxed kernel at the default, CPU fallback otherwise.
    assert_eq!(cpu_f32(&ops::sum(&x).unwrap()), [2.5]);
    assert_eq!(test_plugin_calls(&lib), (b1 + 2, t1));
    let s64 = ops::sum::with(&x, ops::sum::Options::default().dtype(DType::F64)).unwrap();
    assert_eq!(s64.dtype(), DType::F64);
    assert_eq!(
        test_plugin_calls(&lib),
        (b1 + 2, t1),
        "the plugin did not run"
    );
    assert!(opal::fallback::calls() > fallbacks, "the CPU fallback ran");
    // A typed call the entry declines (f64) runs the CPU fallback.
    let before = opal::fallback::calls();
    let xd = Tensor::from_slice(&[1.0f64, 2.0], &[2])
        .unwrap()
        .to(dev)
        .unwrap();
    let r = ops::add_tensor(&xd, &xd).unwrap();
    assert_eq!(
        r.to(Device::cpu()).unwrap().to_vec::<f64>().unwrap(),
        [2.0, 4.0]
    );
    assert_eq!(
        test_plugin_calls(&lib).1,
        t1 + 1,
        "the typed entry was asked"
    );
    assert!(
        opal::fallback::calls() > before,
        "and declined to the fallback"
    );
}

#[test]
fn a_plugin_built_for_abi_1_0_keeps_its_boxed_kernels() {
    let (lib, info) = load_test_plugin(tmp(), "1.0", ("oldabi", "oldabi", "PrivateUse2"), "count");
    assert_eq!(info.abi, Some((1, 0)));
    assert_eq!(
        status(&info, "aten::add.Tensor"),
        OpStatus::Active {
            adapted: false,
            typed: false
        }
    );
    let dev = Device::parse("oldabi:0").unwrap();
    let x = f32_tensor(&[1.0, -2.0]).to(dev).unwrap();
    let r = ops::add_tensor::with(&x, &x, ops::add_tensor::Options::default().alpha(3));
    assert_eq!(cpu_f32(&r.unwrap()), [4.0, -8.0]);
    assert_eq!(cpu_f32(&ops::relu(&x).unwrap()), [1.0, 0.0]);
    assert_eq!(test_plugin_calls(&lib), (2, 0), "boxed kernels only");
}

#[test]
fn a_panicking_typed_entry_is_an_error_and_missing_arguments_still_err() {
    let (lib, info) = load_test_plugin(
        tmp(),
        "1.4",
        ("typedpanic", "tpanic", "PrivateUse3"),
        "typed-panic,no-fallback,count",
    );
    assert!(matches!(
        status(&info, "aten::add.Tensor"),
        OpStatus::Active { typed: true, .. }
    ));
    let dev = Device::parse("tpanic:0").unwrap();
    let x = Tensor::empty(&[2], DType::F32, dev).unwrap();
    let e = ops::add_tensor(&x, &x).unwrap_err().to_string();
    assert_mentions(
        &e,
        &[
            "aten::add.Tensor",
            "'typedpanic'",
            "panicked",
            "told to panic",
        ],
    );
    assert_eq!(test_plugin_calls(&lib), (0, 1));
    // The process and the plugin still work: the boxed pinned sum runs.
    let total = ops::sum(&x).unwrap();
    assert_eq!(total.device(), dev);
    // dtype= is not in the plugin's schema and there is no fallback: an Err naming
    // op, argument, value and plugin; the plugin's kernels did not run.
    let e = ops::sum::with(&x, ops::sum::Options::default().dtype(DType::F64))
        .unwrap_err()
        .to_string();
    assert_mentions(&e, &["aten::sum", "'dtype'", "F64", "'typedpanic'"]);
    assert_eq!(test_plugin_calls(&lib), (1, 1));
}
