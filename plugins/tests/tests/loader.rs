//! Loading plugins explicitly (`opal::plugin::load_manifest`): every refusal names
//! the plugin and the reason and leaves the runtime unchanged; a plugin built
//! against an older schema runs through a load-time adapter; incompatible ops are
//! disabled and reported. Failures use PrivateUse1 (never loaded in this process);
//! the successful loads use PrivateUse2 and PrivateUse3.

use opal::plugin::{self, OpStatus};
use opal::{ops, DType, Device};
use opal_plugin_tests::{
    built_plugins, f32_tensor, init_cpu, install, private_dir, set_mode, Spec,
};
use std::path::{Path, PathBuf};

fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

/// Installs the test plugin under `spec` in a new private directory.
fn test_plugin(spec: &Spec) -> PathBuf {
    let built = built_plugins(tmp());
    let dir = private_dir(tmp(), spec.name);
    install(&built, "libopal_test_plugin.so", &dir, spec)
}

fn load_err(spec: &Spec) -> String {
    let m = test_plugin(spec);
    let e = plugin::load_manifest(&m)
        .expect_err("the load must fail")
        .to_string();
    assert!(
        e.contains(&format!("'{}'", spec.name)),
        "names the plugin: {e}"
    );
    assert!(
        opal::device::privateuse_backend_name(opal::dispatch::DispatchKey::PrivateUse1).is_none()
    );
    e
}

#[test]
fn abi_major_mismatch_is_refused_naming_both_versions() {
    let mut s = Spec::test_plugin("abi_two", "abitwo", "PrivateUse1");
    s.abi = "2.0";
    let e = load_err(&s);
    assert!(e.contains("ABI 2.0") && e.contains("ABI 1.4"), "{e}");
}

#[test]
fn a_missing_entry_symbol_is_an_error() {
    let mut s = Spec::test_plugin("no_entry", "noentry", "PrivateUse1");
    s.entry = Some("opal_plugin_init_missing");
    let e = load_err(&s);
    assert!(
        e.contains("no entry symbol 'opal_plugin_init_missing'"),
        "{e}"
    );
}

#[test]
fn an_init_that_panics_is_caught_and_reported() {
    let mut s = Spec::test_plugin("panics", "panicdev", "PrivateUse1");
    s.config = "panic";
    let e = load_err(&s);
    assert!(
        e.contains("panicked") && e.contains("init told to panic"),
        "{e}"
    );
    assert!(Device::parse("panicdev").is_err(), "nothing was registered");
}

#[test]
fn an_init_that_fails_is_reported() {
    let mut s = Spec::test_plugin("fails", "faildev", "PrivateUse1");
    s.config = "fail";
    let e = load_err(&s);
    assert!(e.contains("init told to fail"), "{e}");
    let rec = plugin::plugins();
    let r = rec.iter().find(|r| r.name == "fails").expect("recorded");
    assert!(r
        .result
        .as_ref()
        .is_err_and(|e| e.contains("init told to fail")));
}

#[test]
fn bad_manifests_are_refused_before_any_code_runs() {
    let s = Spec::test_plugin("badjson", "badjson", "PrivateUse1");
    let m = test_plugin(&s);
    std::fs::write(&m, "{\"name\": \"badjson\", \"surprise\": 1}").unwrap();
    set_mode(&m, 0o644);
    let e = plugin::load_manifest(&m).unwrap_err().to_string();
    assert!(e.contains("unknown field \"surprise\""), "{e}");
    std::fs::write(&m, "not json").unwrap();
    set_mode(&m, 0o644);
    let e = plugin::load_manifest(&m).unwrap_err().to_string();
    assert!(e.contains("not valid JSON"), "{e}");
    let mut s = Spec::test_plugin("badkey", "badkey", "CPU");
    s.name = "badkey";
    assert!(load_err(&s).contains("dispatch_key 'CPU'"));
}

#[test]
fn writable_files_and_directories_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    let s = Spec::test_plugin("writable", "writable", "PrivateUse1");
    let m = test_plugin(&s);
    let dir = m.parent().unwrap().to_path_buf();
    std::fs::set_permissions(&m, std::fs::Permissions::from_mode(0o666)).unwrap();
    let e = plugin::load_manifest(&m).unwrap_err().to_string();
    assert!(
        e.contains("group- or world-writable") && e.contains("plugin manifest"),
        "{e}"
    );
    std::fs::set_permissions(&m, std::fs::Permissions::from_mode(0o644)).unwrap();
    let lib = dir.join("libwritable.so");
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o775)).unwrap();
    let e = plugin::load_manifest(&m).unwrap_err().to_string();
    assert!(
        e.contains("plugin library") && e.contains("writable"),
        "{e}"
    );
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = plugin::load_manifest(&m).unwrap_err().to_string();
    assert!(e.contains("directory of the plugin manifest"), "{e}");
}

/// PrivateUse2, no fallback: the pinned `sum` runs for dtype=None and is an error
/// naming op, argument, value and plugin otherwise; an incompatible `relu` is
/// disabled and reported.
#[test]
fn older_schemas_run_through_adapters_and_incompatible_ops_are_disabled() {
    init_cpu();
    let mut s = Spec::test_plugin("oldschemas", "tp", "PrivateUse2");
    s.config = "no-fallback";
    s.ops[1] = ("aten::relu", "relu(Tensor self, int extra) -> Tensor");
    let m = test_plugin(&s);
    let info = plugin::load_manifest(&m).expect("loads");
    assert_eq!(info.device.as_deref(), Some("tp"));
    let st = |op: &str| info.ops.iter().find(|o| o.0 == op).unwrap().1.clone();
    assert_eq!(
        st("aten::sum"),
        OpStatus::Active {
            adapted: true,
            typed: false
        }
    );
    assert_eq!(
        st("aten::add.Tensor"),
        OpStatus::Active {
            adapted: false,
            typed: true
        }
    );
    assert!(matches!(st("aten::relu"), OpStatus::Disabled(w) if w.contains("'extra'")));

    let dev = Device::parse("tp:0").unwrap();
    let x = f32_tensor(&[1.0, -2.0, 3.5]).to(dev);
    // No fallback: moving data to the device needs one (the CPU fallback's copy).
    let e = x.unwrap_err().to_string();
    assert!(e.contains("tp") || e.contains("PrivateUse2"), "{e}");
    let x = opal::Tensor::empty(&[3], DType::F32, dev).unwrap();
    let total = ops::sum(&x).unwrap();
    assert_eq!(total.device(), dev);
    let e = ops::sum::with(&x, ops::sum::Options::default().dtype(DType::F64))
        .unwrap_err()
        .to_string();
    for part in ["aten::sum", "'dtype'", "F64", "'oldschemas'"] {
        assert!(e.contains(part), "{part} missing in: {e}");
    }
    let e = ops::relu(&x).unwrap_err().to_string();
    assert!(e.contains("aten::relu"), "{e}");
}

/// PrivateUse3 with the CPU fallback: the same non-default call runs on the CPU.
#[test]
fn a_non_default_argument_goes_to_the_fallback() {
    init_cpu();
    let s = Spec::test_plugin("withfallback", "tq", "PrivateUse3");
    let m = test_plugin(&s);
    plugin::load_manifest(&m).expect("loads");
    let dev = Device::parse("tq:0").unwrap();
    let x = f32_tensor(&[1.0, -2.0, 3.5]).to(dev).unwrap();
    let before = opal::fallback::calls();
    let s32 = ops::sum(&x).unwrap();
    assert_eq!(
        opal::fallback::calls(),
        before,
        "the plugin's own kernel ran"
    );
    assert_eq!(
        s32.to(Device::cpu()).unwrap().to_vec::<f32>().unwrap(),
        vec![2.5]
    );
    let s64 = ops::sum::with(&x, ops::sum::Options::default().dtype(DType::F64)).unwrap();
    assert!(opal::fallback::calls() > before, "the CPU fallback ran");
    assert_eq!(s64.dtype(), DType::F64);
    assert_eq!(s64.device(), dev);
    assert_eq!(
        s64.to(Device::cpu()).unwrap().to_vec::<f64>().unwrap(),
        vec![2.5]
    );
    let r = ops::relu(&x).unwrap().to(Device::cpu()).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.0, 0.0, 3.5]);
    // An op the plugin lacks, through the fallback; and a declined call (f64).
    let e = ops::exp(&x)
        .unwrap()
        .to(Device::cpu())
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(e, vec![1f32.exp(), (-2f32).exp(), 3.5f32.exp()]);
    let listed = plugin::plugins();
    let me = listed.iter().find(|p| p.name == "withfallback").unwrap();
    assert!(me.loaded());
    assert_eq!(me.manifest, m);
}
