//! Out entries (ABI 1.2): the host makes the result of a call that fits the
//! entry's `ELEMENTWISE` rule and the plugin writes it (counted by the test
//! plugin); calls outside the rule (broadcasting, a `Scalar` the dtype does not
//! take) take the typed entry with every argument; a declined out call runs the
//! fallback; a plugin built for ABI 1.1 keeps its typed entries; a panicking or
//! failing out entry is an `Err` and the result the host made is dropped. One key
//! per test: PrivateUse1..3.

use opal::plugin::{self, OpStatus};
use opal::{ops, DType, Device, Scalar, Tensor};
use opal_plugin_tests::{
    assert_mentions, cpu_f32, f32_tensor, load_test_plugin, op_status, test_plugin_calls,
    test_plugin_out_calls,
};
use std::path::Path;

fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

fn typed_active(info: &plugin::PluginInfo, op: &str) -> bool {
    op_status(info, op)
        == OpStatus::Active {
            adapted: false,
            typed: true,
        }
}

#[test]
fn calls_that_fit_the_rule_take_the_out_entry_the_others_the_typed_entry() {
    let (lib, info) = load_test_plugin(tmp(), "1.4", ("outcount", "outc", "PrivateUse1"), "count");
    assert_eq!(info.abi, Some((1, 4)));
    assert!(typed_active(&info, "aten::add.Tensor"));
    assert!(typed_active(&info, "aten::relu"));
    let dev = Device::parse("outc:0").unwrap();
    let x = f32_tensor(&[1.0, -2.0, 3.5]).to(dev).unwrap();
    let y = f32_tensor(&[0.5, 0.25, -1.0]).to(dev).unwrap();
    let calls = || (test_plugin_calls(&lib), test_plugin_out_calls(&lib));
    let ((b0, t0), o0) = calls();
    // One size, dtype and device: the host makes the result, the out entry writes it.
    let r = ops::add_tensor(&x, &y).unwrap();
    assert_eq!(
        (r.device(), r.dtype(), r.sizes()),
        (dev, DType::F32, &[3i64][..])
    );
    assert!(r.is_contiguous());
    assert_eq!(cpu_f32(&r), [1.5, -1.75, 2.5]);
    // Every argument reaches the out entry: a non-default alpha is not ignored.
    let a = ops::add_tensor::with(&x, &y, ops::add_tensor::Options::default().alpha(2.5));
    assert_eq!(cpu_f32(&a.unwrap()), [2.25, -1.375, 1.0]);
    let a = ops::add_tensor::with(&x, &y, ops::add_tensor::Options::default().alpha(-1));
    assert_eq!(cpu_f32(&a.unwrap()), [0.5, -2.25, 4.5]);
    assert_eq!(cpu_f32(&ops::relu(&x).unwrap()), [1.0, 0.0, 3.5]);
    assert_eq!(calls(), ((b0, t0 + 4), o0 + 4), "four out calls");
    // Broadcasting: outside the rule, the typed entry is asked (it declines other
    // sizes: the CPU fallback computes).
    let one = f32_tensor(&[10.0]).to(dev).unwrap();
    assert_eq!(
        cpu_f32(&ops::add_tensor(&x, &one).unwrap()),
        [11.0, 8.0, 13.5]
    );
    assert_eq!(
        calls(),
        ((b0, t0 + 5), o0 + 4),
        "the typed entry, not the out one"
    );
    // A complex alpha is a Scalar f32 does not take: the typed entry again (which
    // declines; the CPU fallback gives PyTorch's error or result).
    let c = ops::add_tensor::with(
        &x,
        &y,
        ops::add_tensor::Options::default().alpha(Scalar::Complex(1.0, 1.0)),
    );
    drop(c);
    assert_eq!(calls().1, o0 + 4, "no out call for a complex alpha");
    // f64 fits the rule; the out entry declines it and the CPU fallback computes.
    let before = opal::fallback::calls();
    let xd = Tensor::from_slice(&[1.0f64, 2.0], &[2])
        .unwrap()
        .to(dev)
        .unwrap();
    let r = ops::add_tensor(&xd, &xd).unwrap();
    assert_eq!(r.dtype(), DType::F64);
    assert_eq!(
        r.to(Device::cpu()).unwrap().to_vec::<f64>().unwrap(),
        [2.0, 4.0]
    );
    assert_eq!(calls().1, o0 + 5, "the out entry was asked");
    assert!(
        opal::fallback::calls() > before,
        "and declined to the fallback"
    );
    // A boxed call of the same op still goes to the boxed kernel.
    let ((b1, _), o1) = calls();
    let mut stack = vec![
        opal::IntoIValue::into_ivalue(x.clone()),
        opal::IntoIValue::into_ivalue(y.clone()),
        opal::IntoIValue::into_ivalue(Scalar::Int(1)),
    ];
    opal::dispatch::Dispatcher::global()
        .call_boxed("aten::add.Tensor", &mut stack)
        .unwrap();
    assert_eq!((calls().0 .0, calls().1), (b1 + 1, o1));
}

#[test]
fn a_plugin_built_for_abi_1_1_keeps_its_typed_entries() {
    let (lib, info) = load_test_plugin(tmp(), "1.1", ("abi11", "abi11", "PrivateUse2"), "count");
    assert_eq!(info.abi, Some((1, 1)));
    assert!(typed_active(&info, "aten::add.Tensor"));
    let dev = Device::parse("abi11:0").unwrap();
    let x = f32_tensor(&[1.0, -2.0]).to(dev).unwrap();
    let r = ops::add_tensor::with(&x, &x, ops::add_tensor::Options::default().alpha(3));
    assert_eq!(cpu_f32(&r.unwrap()), [4.0, -8.0]);
    assert_eq!(cpu_f32(&ops::relu(&x).unwrap()), [1.0, 0.0]);
    assert_eq!(test_plugin_calls(&lib), (0, 2), "typed entries");
    assert_eq!(test_plugin_out_calls(&lib), 0, "no out entry");
}

#[test]
fn a_panicking_out_entry_is_an_error() {
    let (lib, info) = load_test_plugin(
        tmp(),
        "1.4",
        ("outpanic", "opanic", "PrivateUse3"),
        "typed-panic,no-fallback,count",
    );
    assert!(typed_active(&info, "aten::relu"));
    let dev = Device::parse("opanic:0").unwrap();
    let x = Tensor::empty(&[2], DType::F32, dev).unwrap();
    let e = ops::relu(&x).unwrap_err().to_string();
    assert_mentions(
        &e,
        &["aten::relu", "'outpanic'", "panicked", "told to panic"],
    );
    assert_eq!(test_plugin_calls(&lib), (0, 1));
    // The process and the plugin still work: the boxed pinned sum runs.
    assert_eq!(ops::sum(&x).unwrap().device(), dev);
}
