//! Scratch crates for tests that compile generated code: a throwaway package outside
//! the workspace that depends on `opal` by path, checked with the same `cargo`.
//!
//! Owns: creating such a package and running `cargo check` on it. Must not: generate
//! code itself (callers use `opal_codegen`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root (parent of this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// One target directory under the tests' `CARGO_TARGET_TMPDIR` shared by every
/// scratch crate, so `opal` is built once.
pub fn shared_target(tmpdir: &str) -> PathBuf {
    PathBuf::from(tmpdir).join("scratch-target")
}

/// A package at `dir` named `name` whose `src/lib.rs` is `lib_rs`, depending on
/// `opal` by path, with the workspace's `Cargo.lock` so versions match and no
/// network is needed.
pub fn create(dir: &Path, name: &str, lib_rs: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("src"))?;
    let runtime = workspace_root().join("runtime");
    let manifest = format!(
        "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
         [dependencies]\nopal = {{ path = {:?}, package = \"opal-runtime\" }}\n\n[workspace]\n",
        runtime.display().to_string()
    );
    std::fs::write(dir.join("Cargo.toml"), manifest)?;
    std::fs::write(dir.join("src/lib.rs"), lib_rs)?;
    let lock = workspace_root().join("Cargo.lock");
    if lock.is_file() {
        std::fs::copy(lock, dir.join("Cargo.lock"))?;
    }
    Ok(())
}

/// A scratch package `name` under `tmpdir` (made by [`create`]) for the generated
/// code of the fixture directory `fixture` (relative to the workspace root, holding
/// `native_functions.yaml`): returns the package directory, its (emptied) `src/ops`
/// output directory and the fixture's YAML.
pub fn fixture_crate(
    tmpdir: &str,
    fixture: &str,
    name: &str,
) -> std::io::Result<(PathBuf, PathBuf, PathBuf)> {
    let yaml = workspace_root().join(fixture).join("native_functions.yaml");
    let dir = PathBuf::from(tmpdir).join(name);
    let out = dir.join("src/ops");
    let _ = std::fs::remove_dir_all(&out);
    let lib_rs = format!("//! Generated from {fixture} by the opal-tests suite.\npub mod ops;\n");
    create(&dir, name, &lib_rs)?;
    Ok((dir, out, yaml))
}

/// Runs `cargo <args>` in `dir` with `target` as target directory; returns whether
/// it succeeded and its stderr.
pub fn cargo(dir: &Path, target: &Path, args: &[&str]) -> std::io::Result<(bool, String)> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .output()?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}
