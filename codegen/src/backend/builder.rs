//! [`BackendBuilder`]: backend generation from a backend crate's `build.rs`, in the
//! spirit of prost-build. It writes one file into `OUT_DIR` for `include!`, prints
//! `cargo:rerun-if-changed` for exactly the YAML files it reads, writes only when the
//! bytes change, and fails the build with the same `path:line:col` diagnostics as
//! the CLI.
//!
//! In the `main` of a backend crate's `build.rs` (the crate depends on `opal-runtime`
//! in `[dependencies]`, whose build script publishes the path of the YAML it was
//! generated from; see [`opal_native_yaml`]):
//!
//! ```no_run
//! opal_codegen::BackendBuilder::new("backend.yaml")
//!     .native_from_opal()
//!     .ops_path("::opal::ops") // the YAML opal itself was generated from
//!     .generate_or_exit();
//! // and in src/lib.rs:
//! // pub mod generated { include!(concat!(env!("OUT_DIR"), "/backend_emu.rs")); }
//! ```
//!
//! Owns: the build.rs-facing API. Must not: contain generation logic (`run`, `emit`).

use std::path::{Path, PathBuf};

use super::report::BackendErrors;
use super::run::{load_inputs, resolve_inputs, write_if_changed};

/// The environment variable that carries the path of `opal`'s own
/// `native_functions.yaml` to build scripts. The `opal-runtime` package declares
/// `links = "opal"` and its build script prints `cargo:native_yaml=<absolute path>`
/// (a file inside that package, `tags.yaml` beside it), so cargo sets this variable
/// for the build script of every package that depends on `opal-runtime` directly
/// (in `[dependencies]`).
pub(crate) const OPAL_NATIVE_YAML_VAR: &str = "DEP_OPAL_NATIVE_YAML";

/// The `native_functions.yaml` that the `opal` crate of this build was generated
/// from, as its build script published it (in `DEP_OPAL_NATIVE_YAML`); an error
/// naming the fix when the variable is not set (outside a build script, or in a
/// crate that does not depend on `opal-runtime` directly).
pub fn opal_native_yaml() -> Result<PathBuf, String> {
    std::env::var_os(OPAL_NATIVE_YAML_VAR)
        .map(PathBuf::from)
        .ok_or_else(|| {
            format!(
                "{OPAL_NATIVE_YAML_VAR} is not set: call this from the build script of a crate \
                 that lists opal-runtime under [dependencies] (not only [build-dependencies])"
            )
        })
}

/// Generates a backend module from `build.rs`.
#[derive(Clone, Debug)]
pub struct BackendBuilder {
    backend: PathBuf,
    /// `Err` when [`BackendBuilder::native_from_opal`] found no path.
    native: Option<Result<PathBuf, String>>,
    /// Whether `native` came from [`OPAL_NATIVE_YAML_VAR`].
    from_opal: bool,
    out_dir: Option<PathBuf>,
    file_name: Option<String>,
    namespace: Option<String>,
    ops_path: Option<String>,
    cargo_directives: bool,
    plugin_library: Option<String>,
    skip_unknown_ops: bool,
    carry_entry_points: bool,
}

impl BackendBuilder {
    /// A builder for the backend YAML at `backend` (relative paths are relative to
    /// the crate root, where cargo runs build scripts).
    pub fn new(backend: impl AsRef<Path>) -> Self {
        BackendBuilder {
            backend: backend.as_ref().to_path_buf(),
            native: None,
            from_opal: false,
            out_dir: None,
            file_name: None,
            namespace: None,
            ops_path: None,
            cargo_directives: true,
            plugin_library: None,
            skip_unknown_ops: false,
            carry_entry_points: false,
        }
    }

    /// The native_functions.yaml to generate against (this or
    /// [`BackendBuilder::native_from_opal`] is required).
    pub fn native_yaml(mut self, path: impl AsRef<Path>) -> Self {
        self.native = Some(Ok(path.as_ref().to_path_buf()));
        self.from_opal = false;
        self
    }

    /// Generate against the `native_functions.yaml` that `opal` itself was generated
    /// from ([`opal_native_yaml`]): what an out-of-tree backend wants, with
    /// `.ops_path("::opal::ops")`. [`BackendBuilder::generate`] fails with the reason when
    /// the path is not available.
    pub fn native_from_opal(mut self) -> Self {
        self.from_opal = true;
        self.native = Some(opal_native_yaml());
        self
    }

    setters! {
        /// Where to write (default: `$OUT_DIR`).
        out_dir(dir: impl AsRef<Path>) => out_dir = Some(dir.as_ref().to_path_buf());

        /// The output file name (default: `backend_<device>.rs`).
        file_name(name: impl Into<String>) => file_name = Some(name.into());

        /// Overrides the backend YAML's `namespace:` (e.g. to register a modified copy
        /// of a native YAML beside the real operators).
        namespace(ns: impl Into<String>) => namespace = Some(ns.into());

        /// Refer to existing per-op items at `path` instead of carrying a copy: use
        /// `"::opal::ops"` when the native YAML is the one `opal` was generated from
        /// (much smaller output). Without it the output compiles for any native YAML.
        ops_path(path: impl Into<String>) => ops_path = Some(path.into());

        /// Without [`BackendBuilder::ops_path`]: carry the entry points (`call`,
        /// `redispatch`) of every op, so code of the crate can call ops the runtime
        /// lacks (a native YAML newer than the runtime's). By default the carried items
        /// are those registration needs.
        carry_entry_points(yes: bool) => carry_entry_points = yes;

        /// Generates the plugin side instead (see `backend::plugin`): the module for a
        /// crate depending on `opal-plugin-sdk`, and `<device>.opal-plugin.json` naming
        /// `library` beside it in the output directory.
        plugin(library: impl Into<String>) => plugin_library = Some(library.into());

        /// Skip ops the native YAML lacks (a `cargo:warning` each) instead of failing:
        /// for a vendor's backend YAML written for another PyTorch version.
        skip_unknown_ops(on: bool) => skip_unknown_ops = on;

        /// Whether to print `cargo:` lines (`rerun-if-changed`, warnings; default: true).
        cargo_directives(on: bool) => cargo_directives = on;
    }

    /// Generates; returns the path written (or left as it was).
    pub fn generate(&self) -> Result<PathBuf, Box<dyn std::error::Error>> {
        if self.cargo_directives {
            println!("cargo:rerun-if-changed={}", self.backend.display());
            if self.from_opal {
                println!("cargo:rerun-if-env-changed={OPAL_NATIVE_YAML_VAR}");
            }
        }
        let native = match &self.native {
            Some(Ok(path)) => path,
            Some(Err(e)) => return Err(format!("BackendBuilder: {e}").into()),
            None => return Err(
                "BackendBuilder: call .native_yaml(<native_functions.yaml>) or .native_from_opal()"
                    .into(),
            ),
        };
        if self.cargo_directives {
            println!("cargo:rerun-if-changed={}", native.display());
            let tags = native.with_file_name("tags.yaml");
            if tags.is_file() {
                println!("cargo:rerun-if-changed={}", tags.display());
            }
        }
        let mut inputs = load_inputs(&self.backend, native, self.namespace.as_deref())
            .map_err(Box::<BackendErrors>::new)?;
        inputs.skip_unknown_ops = self.skip_unknown_ops;
        inputs.carry_entry_points = self.carry_entry_points;
        // One resolution for the warnings and the code.
        let resolved = resolve_inputs(&inputs);
        if self.cargo_directives {
            for w in resolved.warnings() {
                println!("cargo:warning={w}");
            }
        }
        let dir = match &self.out_dir {
            Some(d) => d.clone(),
            None => PathBuf::from(
                std::env::var_os("OUT_DIR").ok_or("BackendBuilder: OUT_DIR is not set")?,
            ),
        };
        let code = match &self.plugin_library {
            Some(lib) => {
                let p = resolved
                    .generate_plugin(lib)
                    .map_err(Box::<BackendErrors>::new)?;
                let manifest = dir.join(format!("{}.opal-plugin.json", inputs.spec.device.value));
                write_if_changed(&manifest, &p.manifest)?;
                super::emit::BackendCode {
                    module: p.module,
                    skeleton: None,
                }
            }
            None => resolved
                .generate(false, self.ops_path.as_deref())
                .map_err(Box::<BackendErrors>::new)?,
        };
        let name = self
            .file_name
            .clone()
            .unwrap_or_else(|| format!("backend_{}.rs", inputs.spec.device.value));
        let path = dir.join(name);
        write_if_changed(&path, &code.module)?;
        Ok(path)
    }

    /// [`BackendBuilder::generate`], printing the diagnostics and exiting with status 1 on
    /// failure (what a build script wants).
    pub fn generate_or_exit(&self) -> PathBuf {
        match self.generate() {
            Ok(p) => p,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outside a build script of a crate depending on `opal-runtime` (as in this
    /// test), `native_from_opal` fails the run with the variable's name and the fix.
    /// The path itself is read by every Opal backend's build (cpu, meta, emu).
    #[test]
    fn native_from_opal_without_the_variable_names_the_fix() {
        assert!(std::env::var_os(OPAL_NATIVE_YAML_VAR).is_none());
        let err = BackendBuilder::new("backend.yaml")
            .native_from_opal()
            .cargo_directives(false)
            .generate()
            .expect_err("no DEP_OPAL_NATIVE_YAML here")
            .to_string();
        assert!(
            err.contains("DEP_OPAL_NATIVE_YAML is not set")
                && err.contains("opal-runtime under [dependencies]"),
            "{err}"
        );
        // A path given later wins over the missing one.
        let err = BackendBuilder::new("missing-backend.yaml")
            .native_from_opal()
            .native_yaml("missing-native.yaml")
            .cargo_directives(false)
            .generate()
            .expect_err("the files do not exist")
            .to_string();
        assert!(!err.contains("DEP_OPAL_NATIVE_YAML"), "{err}");
    }
}
