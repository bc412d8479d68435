//! Plugin keys (opt-in: `opal-bench --json --only plugin`, after
//! `cargo build --release -p opal-test-plugin`, which puts the test plugin beside
//! `opal-bench`; or point `OPAL_BENCH_PLUGIN_DIR` at the directory holding
//! `libopal_test_plugin.so`):
//!
//! - `plugin_load_3_ms`: loading three plugins from one directory with
//!   `opal::plugin::load_dir` (what autoload does per directory: scan, checks,
//!   manifest validation, `dlopen`, entry), each a fresh copy of the library;
//! - `plugin_add_1elem_ns` / `static_add_1elem_ns` / `plugin_overhead_ns`: a
//!   one-element f32 `add.Tensor` on a plugin device, served by the plugin's
//!   kernel through the C ABI, against the same arithmetic registered as a typed
//!   Rust kernel on another plugin device (same allocator: the plugin's), timed
//!   alternately ([`median_pair_ns`]); the overhead is the difference. The plugin's
//!   `add` is its out entry (ABI 1.2: the host makes the result, the entry writes
//!   it), bound with its typed entry (ABI 1.1; the group fails when the host did
//!   not bind it typed).
//!
//! The three PrivateUse keys are taken by the copies (`pba`, `pbb`, `pbc`), so the
//! group runs once per process.

use crate::harness::{median_pair_ns, Config, Results, Unit};
use opal::dispatch::{DispatchKey, DispatchKeySet, Library};
use opal::{ops, DType, Device, OpalError, Result, Scalar, Tensor};
use std::hint::black_box;
use std::path::PathBuf;

fn plugin_lib() -> Result<PathBuf> {
    let name = "libopal_test_plugin.so";
    let mut dirs: Vec<PathBuf> = std::env::var_os("OPAL_BENCH_PLUGIN_DIR")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    if let Ok(exe) = std::env::current_exe() {
        dirs.extend(exe.ancestors().skip(1).take(2).map(PathBuf::from));
    }
    dirs.iter()
        .map(|d| d.join(name))
        .find(|p| p.exists())
        .ok_or_else(|| {
            OpalError::msg(format!(
                "{name} not found beside opal-bench or in OPAL_BENCH_PLUGIN_DIR: \
             run `cargo build --release -p opal-test-plugin` first"
            ))
        })
}

/// The test plugin's `add` kernel, as a typed kernel linked into this binary.
fn static_add(_ks: DispatchKeySet, a: &Tensor, b: &Tensor, alpha: &Scalar) -> Result<Tensor> {
    let out = Tensor::empty(a.sizes(), DType::F32, a.device())?;
    let al = alpha.to_f64() as f32;
    let n = a.numel() as usize;
    let acc = opal::tensor::KernelAccess::new(&[a, b], &[&out])?;
    let (pa, pb, po) = (
        acc.read_ptr::<f32>(a)?,
        acc.read_ptr::<f32>(b)?,
        acc.write_ptr::<f32>(&out)?,
    );
    for i in 0..n {
        // SAFETY: contiguous f32 tensors of `n` elements (the bench makes them so),
        // borrowed by `acc`; `out` is new.
        unsafe { *po.add(i) = *pa.add(i) + al * *pb.add(i) };
    }
    drop(acc);
    Ok(out)
}

/// The plugin bench's setup: three copies of the test plugin loaded from one
/// directory (`pba`, `pbb`, `pbc`; how long that took in `load_ms`), `pbc`'s `add`
/// replaced by `static_add` (kept registered while `lib` lives), and one-element
/// f32 operands on `pba` (`a`, `b`: the plugin's typed path) and on `pbc` (`c`,
/// `d`: the static kernel). Also what `bench/examples/plugin_add_loop.rs` runs.
pub struct Setup {
    /// Milliseconds `load_dir` took.
    pub load_ms: f64,
    /// Operands served by the plugin's kernel.
    pub a: Tensor,
    /// See `a`.
    pub b: Tensor,
    /// Operands served by the static kernel.
    pub c: Tensor,
    /// See `c`.
    pub d: Tensor,
    /// Keeps the static kernel registered.
    pub lib: Library,
}

/// Makes the [`Setup`] (once per process: it takes the three PrivateUse keys).
pub fn setup() -> Result<Setup> {
    use std::os::unix::fs::PermissionsExt;
    let lib = plugin_lib()?;
    let dir = std::env::temp_dir().join(format!("opal-bench-plugins-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| OpalError::msg(e.to_string()))?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| OpalError::msg(e.to_string()))?;
    let ops_json = r#"[{"name": "aten::add.Tensor", "schema": "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"},
        {"name": "aten::relu", "schema": "relu(Tensor self) -> Tensor"},
        {"name": "aten::sum", "schema": "sum(Tensor self) -> Tensor"}]"#;
    for (name, key) in [
        ("pba", "PrivateUse1"),
        ("pbb", "PrivateUse2"),
        ("pbc", "PrivateUse3"),
    ] {
        let so = format!("lib{name}.so");
        std::fs::copy(&lib, dir.join(&so)).map_err(|e| OpalError::msg(e.to_string()))?;
        std::fs::set_permissions(dir.join(&so), std::fs::Permissions::from_mode(0o755))
            .map_err(|e| OpalError::msg(e.to_string()))?;
        let m = format!(
            r#"{{"name": "{name}", "library": "{so}", "device": "{name}", "dispatch_key": "{key}", "abi": "1.4", "ops": {ops_json}}}"#
        );
        let mp = dir.join(format!("{name}.opal-plugin.json"));
        std::fs::write(&mp, m).map_err(|e| OpalError::msg(e.to_string()))?;
        std::fs::set_permissions(&mp, std::fs::Permissions::from_mode(0o644))
            .map_err(|e| OpalError::msg(e.to_string()))?;
    }
    let t0 = std::time::Instant::now();
    let failures = opal::plugin::load_dir(&dir);
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let _ = std::fs::remove_dir_all(&dir);
    if let Some(e) = failures.into_iter().next() {
        return Err(e);
    }

    // pbc's add becomes a static kernel (the latest registration wins).
    let mut lib = Library::new("aten", DispatchKey::PrivateUse3);
    lib.impl_("add.Tensor", ops::add_tensor::kernel(static_add))?;
    let (pd, sd) = (Device::parse("pba")?, Device::parse("pbc")?);
    let one = |d: Device| -> Result<Tensor> { Tensor::from_slice(&[1.0f32], &[1])?.to(d) };
    let (a, b, c, d) = (one(pd)?, one(pd)?, one(sd)?, one(sd)?);
    let typed = opal::plugin::plugins().iter().any(|p| {
        p.name == "pba"
            && p.ops.iter().any(|(o, s)| {
                o == "aten::add.Tensor"
                    && *s
                        == opal::plugin::OpStatus::Active {
                            adapted: false,
                            typed: true,
                        }
            })
    });
    if !typed {
        return Err(OpalError::msg(
            "plugin bench: pba's add.Tensor is not served by its typed entry",
        ));
    }
    Ok(Setup {
        load_ms: ms,
        a,
        b,
        c,
        d,
        lib,
    })
}

/// Records the plugin keys.
pub fn run(cfg: &Config, out: &mut Results) -> Result<()> {
    let Setup {
        load_ms,
        a,
        b,
        c,
        d,
        lib,
    } = setup()?;
    out.put("plugin_load_3_ms", load_ms, Unit::Other("ms"));
    let fallbacks = opal::fallback::calls();
    ops::add_tensor(&a, &b)?;
    ops::add_tensor(&c, &d)?;
    if opal::fallback::calls() != fallbacks {
        return Err(OpalError::msg(
            "plugin bench: an add ran through the CPU fallback",
        ));
    }
    let (p, s) = median_pair_ns(
        cfg,
        300_000,
        || ops::add_tensor(black_box(&a), black_box(&b)),
        || ops::add_tensor(black_box(&c), black_box(&d)),
    );
    out.put("plugin_add_1elem_ns", p, Unit::Ns);
    out.put("static_add_1elem_ns", s, Unit::Ns);
    out.put("plugin_overhead_ns", p - s, Unit::Ns);
    drop(lib);
    Ok(())
}
