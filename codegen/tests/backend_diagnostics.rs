//! Bad backend YAMLs: each file under `fixtures/backend/bad/` has one fault; its
//! rendered diagnostics (path:line:col, snippet, hint) are snapshotted, and every
//! file must fail without panicking.

use std::path::Path;

use opal_codegen::backend::load_bytes;

fn render(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/backend/bad")
        .join(name);
    let bytes = std::fs::read(&path).expect("fixture exists");
    let shown = format!("bad/{name}");
    match load_bytes(&shown, &bytes) {
        Ok(spec) => panic!("{name} loaded: {spec:?}"),
        Err(e) => e.render(false, 100),
    }
}

macro_rules! bad {
    ($($test:ident => $file:literal, $expect:literal;)*) => {$(
        #[test]
        fn $test() {
            let out = render($file);
            assert!(out.contains($expect), "{} does not mention {:?}:\n{out}", $file, $expect);
            assert!(out.contains(concat!("bad/", $file)), "no path in:\n{out}");
            insta::assert_snapshot!(stringify!($test), out);
        }
    )*};
}

bad! {
    unknown_key => "unknown_key.yaml", "did you mean `supported`?";
    bad_dispatch_key => "bad_dispatch_key.yaml", "did you mean `PrivateUse1`?";
    missing_device => "missing_device.yaml", "needs a `device:` name";
    schema_as_name => "schema_as_name.yaml", "- func: <schema>";
    bad_pinned_schema => "bad_pinned_schema.yaml", "Tensr";
    not_a_mapping => "not_a_mapping.yaml", "a backend YAML is a mapping";
    bad_fallback => "bad_fallback.yaml", "`gpu` is not a fallback";
    unknown_alias => "unknown_alias.yaml", "unknown anchor";
    cpu_falls_back_to_cpu => "cpu_falls_back_to_cpu.yaml", "cannot fall back to itself";
    bad_names => "bad_names.yaml", "not a CamelCase Rust identifier";
    wrong_shapes => "wrong_shapes.yaml", "`supported:` must be a list";
    entry_without_func => "entry_without_func.yaml", "`- func: <schema";
    duplicate_key => "duplicate_key.yaml", "backend";
    not_utf8 => "not_utf8.yaml", "UTF-8";
    bad_kernel_path => "bad_kernel_path.yaml", "is not the path of a Rust function";
}

#[test]
fn every_bad_kernel_path_is_located() {
    let out = render("bad_kernel_path.yaml");
    for at in ["4:11", "6:14", "8:14", "9:17"] {
        assert!(
            out.contains(&format!("bad/bad_kernel_path.yaml:{at}")),
            "{at}: {out}"
        );
    }
    assert!(out.contains("4 errors"), "{out}");
}

#[test]
fn all_problems_of_a_file_in_one_run() {
    let out = render("bad_names.yaml");
    assert!(out.contains("bad/bad_names.yaml:1:10"), "{out}");
    assert!(out.contains("bad/bad_names.yaml:3:9"), "{out}");
    assert!(out.contains("bad/bad_names.yaml:4:12"), "{out}");
    assert!(out.contains("3 errors"), "{out}");
}

#[test]
fn hostile_inputs_do_not_panic() {
    let inputs: [&[u8]; 8] = [
        b"",
        b"- a\n- b\n",
        b"just a string",
        b"a: &a [*a, *a]\n",
        b"backend: Emu\nsupported:\n  - func:\n",
        b"backend: Emu\ndispatch_key: PrivateUse1\ndevice: emu\nsupported:\n  - 42\n  - func: ()\n  -\n",
        b"lol: &a [1,1,1,1,1,1,1,1,1]\nlol2: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nlol3: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nlol4: [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n",
        b"\t- x\n",
    ];
    for i in inputs {
        let r = load_bytes("x.yaml", i);
        assert!(r.is_err(), "{:?} loaded", String::from_utf8_lossy(i));
        let _ = r.unwrap_err().render(false, 80);
    }
}

#[test]
fn a_good_file_loads_with_locations() {
    let src = "backend: Emu\ndispatch_key: PrivateUse1\ndevice: emu\nnamespace: aten\nfallback: cpu\nsupported:\n  - add.Tensor\n  - func: mul.Tensor(Tensor self, Tensor other) -> Tensor\n";
    let spec = load_bytes("ok.yaml", src.as_bytes()).expect("loads");
    assert_eq!(spec.backend.value, "Emu");
    assert_eq!(spec.device.value, "emu");
    assert_eq!(spec.dispatch_key.loc.line, 2);
    assert_eq!(spec.supported.len(), 2);
    assert_eq!(spec.supported[0].name().to_string(), "add.Tensor");
    let pinned = spec.supported[1].pinned().expect("pinned");
    assert_eq!(
        pinned.to_string(),
        "mul.Tensor(Tensor self, Tensor other) -> Tensor"
    );
    // The pinned schema's locations point into the backend YAML.
    let other = &pinned.arguments.positional[1];
    assert_eq!((other.loc.line, other.loc.col), (8, 35));
    // CPU and Meta have fixed device names; fallback defaults to none.
    let cpu = load_bytes(
        "cpu.yaml",
        b"backend: Cpu\ndispatch_key: CPU\nsupported: []\n",
    )
    .unwrap();
    assert_eq!(cpu.device.value, "cpu");
    assert_eq!(
        cpu.fallback.value,
        opal_codegen::backend::FallbackPolicy::None
    );
}
