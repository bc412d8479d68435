//! Shared helpers of the plugin tests: building the plugin libraries (a separate
//! `cargo build` into the test's own target directory), private plugin directories
//! with manifests, child processes with a chosen environment, and the program whose
//! results must be identical on the emu plugin and on the linked emu.
//!
//! Owns: test fixtures only. Must not: be used outside `plugins/tests`.

use opal::ops::{self, TensorOps};
use opal::{DType, Device, Result, Tensor};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Builds `packages` (debug, with `features`) of the workspace into `target` and
/// returns the directory holding the libraries.
fn cargo_build(target: &Path, packages: &[&str], features: &[&str]) -> PathBuf {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let mut c = Command::new(env!("CARGO"));
    c.args(["build", "--quiet", "--locked", "--offline"]);
    for p in packages {
        c.args(["-p", p]);
    }
    for f in features {
        c.args(["--features", f]);
    }
    let out = c
        .arg("--manifest-path")
        .arg(&ws)
        .arg("--target-dir")
        .arg(target)
        .output()
        .expect("run cargo build for the plugins");
    assert!(
        out.status.success(),
        "building {packages:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join("debug")
}

/// Builds `opal-emu-plugin` and `opal-test-plugin` (debug) into
/// `<tmp>/plugin-build` once per process and returns the directory holding the
/// libraries.
pub fn built_plugins(tmp: &Path) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        cargo_build(
            &tmp.join("plugin-build"),
            &["opal-emu-plugin", "opal-test-plugin"],
            &[],
        )
    })
    .clone()
}

/// Builds `opal-broken-plugin` (debug) into `<tmp>/plugin-build-broken` once per
/// process and returns the directory holding `libopal_broken_plugin.so`.
pub fn built_broken_plugin(tmp: &Path) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        cargo_build(
            &tmp.join("plugin-build-broken"),
            &["opal-broken-plugin"],
            &[],
        )
    })
    .clone()
}

/// Builds the test plugin with `feature` (`abi-1-x`) into
/// `<tmp>/plugin-build-1-x` once per `dir` (one cell per feature).
fn built_test_plugin_with(dir: &OnceLock<PathBuf>, tmp: &Path, feature: &str) -> PathBuf {
    dir.get_or_init(|| {
        let version = feature.trim_start_matches("abi-");
        cargo_build(
            &tmp.join(format!("plugin-build-{version}")),
            &["opal-test-plugin"],
            &[feature],
        )
    })
    .clone()
}

/// Builds the test plugin with its feature `abi-1-0` (declaring ABI 1.0, boxed
/// kernels only) into `<tmp>/plugin-build-1-0` once per process and returns the
/// directory holding `libopal_test_plugin.so`.
pub fn built_test_plugin_abi_1_0(tmp: &Path) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    built_test_plugin_with(&DIR, tmp, "abi-1-0")
}

/// Builds the test plugin with its feature `abi-1-1` (declaring ABI 1.1, no out
/// entries) into `<tmp>/plugin-build-1-1` once per process and returns the
/// directory holding `libopal_test_plugin.so`.
pub fn built_test_plugin_abi_1_1(tmp: &Path) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    built_test_plugin_with(&DIR, tmp, "abi-1-1")
}

/// Builds the test plugin with its feature `abi-1-3` (declaring ABI 1.3, as
/// built before device runtimes) into `<tmp>/plugin-build-1-3` once per process
/// and returns the directory holding `libopal_test_plugin.so`.
pub fn built_test_plugin_abi_1_3(tmp: &Path) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    built_test_plugin_with(&DIR, tmp, "abi-1-3")
}

/// The test plugin's out-entry calls (config word `count`) of the copy loaded from
/// `lib` (ABI 1.2; [`test_plugin_calls`] counts them with the typed entries too).
pub fn test_plugin_out_calls(lib: &Path) -> u64 {
    calls_of(lib)(2)
}

/// The test plugin's call counters (config word `count`) of the copy loaded from
/// `lib`: `(boxed kernel calls, typed entry calls)`, read through its exported
/// `opal_test_plugin_calls` (the library must be loaded already).
pub fn test_plugin_calls(lib: &Path) -> (u64, u64) {
    let f = calls_of(lib);
    (f(0), f(1))
}

/// The exported `opal_test_plugin_calls` of the loaded library `lib`.
fn calls_of(lib: &Path) -> extern "C" fn(u32) -> u64 {
    let f = loaded_symbol(lib, "opal_test_plugin_calls");
    // SAFETY: the test plugin defines the symbol as `extern "C" fn(u32) -> u64`.
    unsafe { std::mem::transmute::<*mut std::ffi::c_void, extern "C" fn(u32) -> u64>(f) }
}

/// The address of symbol `name` in the already loaded library `lib` (panics when
/// it is not loaded or lacks the symbol).
pub fn loaded_symbol(lib: &Path, name: &str) -> *mut std::ffi::c_void {
    use std::ffi::{c_char, c_int, c_void, CString};
    use std::os::unix::ffi::OsStrExt;
    extern "C" {
        fn dlopen(file: *const c_char, flags: c_int) -> *mut c_void;
        fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
    }
    const RTLD_NOW: c_int = 2;
    const RTLD_NOLOAD: c_int = 4;
    let path = CString::new(lib.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path; RTLD_NOLOAD only finds the already loaded
    // library (it runs no initialisers).
    let h = unsafe { dlopen(path.as_ptr(), RTLD_NOW | RTLD_NOLOAD) };
    assert!(!h.is_null(), "{} is not loaded", lib.display());
    let sym = CString::new(name).unwrap();
    // SAFETY: a live handle and a NUL-terminated name.
    let f = unsafe { dlsym(h, sym.as_ptr()) };
    assert!(!f.is_null(), "no {name} in {}", lib.display());
    f
}

/// A new empty directory (mode 0700) under `tmp`, replacing one of the same name
/// (callers running at once use different names).
pub fn private_dir(tmp: &Path, name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    // Named after the test binary (stable across runs), so a rerun replaces its
    // directories instead of adding more.
    let exe = std::env::current_exe().ok();
    let bin = exe
        .as_ref()
        .and_then(|e| e.file_name())
        .map_or("tests".into(), |n| n.to_string_lossy());
    let d = tmp.join(format!("plugins-{bin}-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    d
}

/// Sets `path`'s mode (copies keep the source's mode and new files get the umask's,
/// which may be group-writable; the loader refuses those).
pub fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A manifest to write.
pub struct Spec<'a> {
    /// Plugin name (also the manifest's file stem and the library copy's name).
    pub name: &'a str,
    /// Device name.
    pub device: &'a str,
    /// `PrivateUse1`..3.
    pub key: &'a str,
    /// `"1.4"` (`"1.0"` for the library of [`built_test_plugin_abi_1_0`], `"1.1"`
    /// for [`built_test_plugin_abi_1_1`]'s).
    pub abi: &'a str,
    /// The entry symbol, when not the default.
    pub entry: Option<&'a str>,
    /// The `config` string.
    pub config: &'a str,
    /// `(op, schema)` pairs.
    pub ops: Vec<(&'a str, &'a str)>,
}

impl<'a> Spec<'a> {
    /// The test plugin's usual manifest for `name` on `device`/`key`.
    pub fn test_plugin(name: &'a str, device: &'a str, key: &'a str) -> Self {
        Spec {
            name,
            device,
            key,
            abi: "1.4",
            entry: None,
            config: "",
            ops: vec![
                (
                    "aten::add.Tensor",
                    "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
                ),
                ("aten::relu", "relu(Tensor self) -> Tensor"),
                ("aten::sum", "sum(Tensor self) -> Tensor"),
            ],
        }
    }
}

/// Installs the test plugin (from `built`) into a private directory under `tmp`
/// under `spec` and loads it; returns the library copy's path and what loaded.
pub fn install_test_plugin(
    tmp: &Path,
    built: &Path,
    spec: &Spec,
) -> (PathBuf, opal::plugin::PluginInfo) {
    let dir = private_dir(tmp, spec.name);
    let m = install(built, "libopal_test_plugin.so", &dir, spec);
    let info = opal::plugin::load_manifest(&m).expect("loads");
    (dir.join(format!("lib{}.so", spec.name)), info)
}

/// Registers the CPU backend, then installs and loads the test plugin built for
/// manifest ABI `abi` (`"1.4"`, the current build, or an older one: `"1.0"`,
/// `"1.1"`, `"1.3"`) under `tmp` as plugin `name` on `device`/`key` with the config
/// words `config`; returns the library copy's path and what loaded.
pub fn load_test_plugin(
    tmp: &Path,
    abi: &str,
    (name, device, key): (&str, &str, &str),
    config: &str,
) -> (PathBuf, opal::plugin::PluginInfo) {
    init_cpu();
    let built = match abi {
        "1.0" => built_test_plugin_abi_1_0(tmp),
        "1.1" => built_test_plugin_abi_1_1(tmp),
        "1.3" => built_test_plugin_abi_1_3(tmp),
        "1.4" => built_plugins(tmp),
        other => panic!("no build of the test plugin for ABI {other}"),
    };
    let mut spec = Spec::test_plugin(name, device, key);
    spec.abi = abi;
    spec.config = config;
    install_test_plugin(tmp, &built, &spec)
}

/// The status `info` gives `op` (which must be among its ops).
pub fn op_status(info: &opal::plugin::PluginInfo, op: &str) -> opal::plugin::OpStatus {
    info.ops.iter().find(|o| o.0 == op).unwrap().1.clone()
}

/// Asserts that the message `e` names every one of `parts`.
pub fn assert_mentions(e: &str, parts: &[&str]) {
    for part in parts {
        assert!(e.contains(part), "{part} missing in: {e}");
    }
}

/// `t`'s elements as f32, read on the CPU.
pub fn cpu_f32(t: &Tensor) -> Vec<f32> {
    t.to(Device::cpu()).unwrap().to_vec::<f32>().unwrap()
}

/// Copies library `lib` (a file name in `built`) into `dir` as `lib<name>.so` and
/// writes `<name>.opal-plugin.json` for it; returns the manifest's path. Each copy
/// is a separate library image (its own statics).
pub fn install(built: &Path, lib: &str, dir: &Path, spec: &Spec) -> PathBuf {
    let lib_name = format!("lib{}.so", spec.name);
    std::fs::copy(built.join(lib), dir.join(&lib_name)).unwrap();
    set_mode(&dir.join(&lib_name), 0o755);
    let ops: Vec<String> = spec
        .ops
        .iter()
        .map(|(n, s)| format!("{{\"name\": \"{n}\", \"schema\": \"{s}\"}}"))
        .collect();
    let entry = spec
        .entry
        .map_or(String::new(), |e| format!("\"entry\": \"{e}\", "));
    let text = format!(
        "{{\"name\": \"{}\", \"library\": \"{lib_name}\", \"device\": \"{}\", \"dispatch_key\": \"{}\", \
         \"abi\": \"{}\", {entry}\"config\": \"{}\", \"ops\": [{}]}}",
        spec.name,
        spec.device,
        spec.key,
        spec.abi,
        spec.config,
        ops.join(", ")
    );
    let path = dir.join(format!("{}.opal-plugin.json", spec.name));
    std::fs::write(&path, text).unwrap();
    set_mode(&path, 0o644);
    path
}

/// Copies the emu plugin's library and manifest from `built` into `dir`.
pub fn install_emu(built: &Path, dir: &Path) {
    for (f, mode) in [
        ("libopal_emu_plugin.so", 0o755),
        ("emu.opal-plugin.json", 0o644),
    ] {
        std::fs::copy(built.join(f), dir.join(f)).unwrap();
        set_mode(&dir.join(f), mode);
    }
}

/// Runs the test `test` of the current test binary alone in a child process with
/// `env` set (and `HOME`/`XDG_DATA_HOME` pointed at an empty directory); returns
/// whether it passed and its output.
pub fn run_child(test: &str, home: &Path, env: &[(&str, &str)]) -> (bool, String) {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("OPAL_PLUGIN_TEST_CHILD", test)
        .env("HOME", home)
        .env("XDG_DATA_HOME", home)
        .env_remove("OPAL_PLUGIN_PATH")
        .env_remove("OPAL_DEVICE_BACKEND_AUTOLOAD")
        .env_remove("OPAL_PLUGIN_STRICT");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// True inside the child process started for `test` by [`run_child`].
pub fn is_child(test: &str) -> bool {
    std::env::var("OPAL_PLUGIN_TEST_CHILD").is_ok_and(|v| v == test)
}

fn bits(t: &Tensor) -> Result<String> {
    let cpu = t.to(Device::cpu())?;
    Ok(match cpu.dtype() {
        DType::F32 => format!(
            "{:?}",
            cpu.to_vec::<f32>()?
                .iter()
                .map(|x| x.to_bits())
                .collect::<Vec<_>>()
        ),
        DType::F64 => format!(
            "{:?}",
            cpu.to_vec::<f64>()?
                .iter()
                .map(|x| x.to_bits())
                .collect::<Vec<_>>()
        ),
        DType::I64 => format!("{:?}", cpu.to_vec::<i64>()?),
        d => format!("{d}: {cpu}"),
    })
}

/// One program on `device`: the ops the emu plugin computes itself (add, sub, mul
/// with alpha and broadcasting, relu, mm, the pinned sum, in f32, f64, i64 and i32) and
/// ops it runs through the CPU fallback (mixed dtypes, sum with dtype=, exp,
/// mean.dim). Each result as one line: its device, dtype, sizes and exact bits.
pub fn emu_program(device: &str) -> Result<Vec<String>> {
    let dev = Device::parse(device)?;
    let mut out = Vec::new();
    let mk = |v: &[f32], s: &[i64]| -> Result<Tensor> { Tensor::from_slice(v, s)?.to(dev) };
    let vals: Vec<f32> = (0..12).map(|i| (i as f32 - 5.5) * 0.37).collect();
    let x = mk(&vals, &[3, 4])?;
    let w = mk(&[0.1, -0.2, 0.3, 1.7], &[4])?;
    let xd = Tensor::from_slice(
        &vals.iter().map(|v| f64::from(*v) / 3.0).collect::<Vec<_>>(),
        &[3, 4],
    )?
    .to(dev)?;
    let xi = Tensor::from_slice(&(0..12i64).map(|i| i * 7 - 30).collect::<Vec<_>>(), &[3, 4])?
        .to(dev)?;
    let results = vec![
        ops::add_tensor(&x, &w)?,
        ops::add_tensor::with(&x, &w, ops::add_tensor::Options::default().alpha(2.5))?,
        ops::sub_tensor::with(&x, &x, ops::sub_tensor::Options::default().alpha(3))?,
        ops::mul_tensor(&x, &w)?,
        ops::relu(&ops::mul_tensor(&x, &x)?)?,
        ops::relu(&x)?,
        ops::sum(&x)?,
        ops::add_tensor(&xd, &xd)?,
        ops::sum(&xd)?,
        ops::mul_tensor(&xi, &xi)?,
        ops::sum(&xi)?,
        ops::sub_tensor(&xi.to_dtype(DType::I32)?, &xi.to_dtype(DType::I32)?.relu()?)?,
        ops::add_tensor(&x, &xd)?,
        ops::sum::with(&x, ops::sum::Options::default().dtype(DType::F64))?,
        ops::exp(&x)?,
        ops::mm(&x, &mk(&vals, &[4, 3])?)?,
        ops::mean_dim::call(&x, Some(&[1]), false, None)?,
    ];
    for r in &results {
        out.push(format!(
            "{} {} {:?} {}",
            r.device(),
            r.dtype(),
            r.sizes(),
            bits(r)?
        ));
    }
    Ok(out)
}

/// The lines of a child's output that [`emu_program`] printed (prefix `RESULT `).
pub fn result_lines(output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|l| l.find("RESULT ").map(|i| l[i + 7..].to_string()))
        .collect()
}

/// `opal_cpu::init()` for the tests (they depend on opal and opal-cpu only).
pub fn init_cpu() {
    opal_cpu::init().expect("cpu backend");
}

/// A CPU f32 tensor.
pub fn f32_tensor(v: &[f32]) -> Tensor {
    Tensor::from_slice(v, &[v.len() as i64]).unwrap()
}

/// Installs a copy of the emu plugin (from `built`) in `dir` as plugin and
/// device `name` at dispatch key `key` with config words `config` (a separate
/// library image: its own statics); returns the manifest's path.
pub fn install_emu_copy(built: &Path, dir: &Path, name: &str, key: &str, config: &str) -> PathBuf {
    let lib = format!("lib{name}_plugin.so");
    std::fs::copy(built.join("libopal_emu_plugin.so"), dir.join(&lib)).unwrap();
    set_mode(&dir.join(&lib), 0o755);
    let manifest = std::fs::read_to_string(built.join("emu.opal-plugin.json"))
        .unwrap()
        .replacen(
            "\"name\": \"emu\"",
            &format!("\"name\": \"{name}\", \"config\": \"{config}\""),
            1,
        )
        .replacen("\"device\": \"emu\"", &format!("\"device\": \"{name}\""), 1)
        .replacen("\"PrivateUse1\"", &format!("\"{key}\""), 1)
        .replacen("libopal_emu_plugin.so", &lib, 1);
    let path = dir.join(format!("{name}.opal-plugin.json"));
    std::fs::write(&path, manifest).unwrap();
    set_mode(&path, 0o644);
    path
}
