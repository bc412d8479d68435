//! The prost-build-like [`Builder`] used from `build.rs` (and by the `generate`
//! subcommand): load a `native_functions.yaml`, generate the operator layer, write
//! the files whose bytes changed, and print `cargo:rerun-if-changed` for exactly the
//! YAML files read.
//!
//! Owns: file I/O of generation and turning load/emit problems into the same located
//! diagnostics the CLI prints; its [`Error`] is also `autocast::Builder`'s. Must not: contain naming or emission logic (see
//! `crate::ident`, `crate::emit`) or loading rules (see `crate::load`).
//!
//! In `build.rs` (then `mod ops { include!(concat!(env!("OUT_DIR"), "/ops/mod.rs")); }`
//! in `src/lib.rs`):
//!
//! ```no_run
//! let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").unwrap()).join("ops");
//! if let Err(e) = opal_codegen::Builder::new()
//!     .native_yaml("native_functions.yaml")
//!     .namespace("aten")
//!     .out_dir(&out)
//!     .generate()
//! {
//!     eprintln!("{e}");
//!     std::process::exit(1);
//! }
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::emit::{self, EmitError, EmitOptions, RuntimePath, Unsupported};

/// Configures and runs one generation.
#[derive(Clone, Debug)]
pub struct Builder {
    native_yaml: Option<PathBuf>,
    tags: Option<PathBuf>,
    derivatives: Option<PathBuf>,
    composites: Option<PathBuf>,
    namespace: String,
    out_dir: Option<PathBuf>,
    runtime: RuntimePath,
    cargo_directives: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

/// What a generation produced.
#[derive(Clone, Debug)]
pub struct Report {
    /// Every file of the output, relative to the output directory.
    pub files: Vec<PathBuf>,
    /// The files actually (re)written because their bytes changed.
    pub written: Vec<PathBuf>,
    /// Operators that could not be expressed in Rust, with the reason.
    pub unsupported: Vec<Unsupported>,
}

/// Why a generation failed.
#[derive(Debug)]
pub enum Error {
    /// A required setting is missing.
    Config(String),
    /// The YAML did not load: every problem, located.
    Load(Diagnostics),
    /// Writing the output failed.
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(m) => write!(f, "opal-codegen: {m}"),
            Error::Load(d) => write!(f, "{d}"),
            Error::Io { path, error } => {
                write!(f, "opal-codegen: cannot write {}: {error}", path.display())
            }
        }
    }
}

impl std::error::Error for Error {}

impl Builder {
    /// Namespace `aten`, output referring to the runtime as `::opal`, cargo
    /// directives on.
    pub fn new() -> Self {
        Builder {
            native_yaml: None,
            tags: None,
            derivatives: None,
            composites: None,
            namespace: "aten".to_string(),
            out_dir: None,
            runtime: RuntimePath::Opal,
            cargo_directives: true,
        }
    }

    setters! {
        /// The `native_functions.yaml` to generate from (required).
        native_yaml(path: impl AsRef<Path>) => native_yaml = Some(path.as_ref().to_path_buf());

        /// The `tags.yaml` that defines valid tags (default: `tags.yaml` beside the
        /// native YAML when there is one; else tags are not checked).
        tags(path: impl AsRef<Path>) => tags = Some(path.as_ref().to_path_buf());

        /// The operator namespace (`aten` by default): operators are defined as
        /// `<namespace>::<name>.<overload>`.
        namespace(ns: impl Into<String>) => namespace = ns.into();

        /// Where `mod.rs` and the files it includes are written (default: `$OUT_DIR`).
        out_dir(dir: impl AsRef<Path>) => out_dir = Some(dir.as_ref().to_path_buf());
    }

    /// Generate for inclusion into the `opal` crate itself (paths `crate::…`
    /// instead of `::opal::…`).
    pub fn runtime_crate(mut self) -> Self {
        self.runtime = RuntimePath::Crate;
        self
    }

    setters! {
        /// Whether to print `cargo:rerun-if-changed` / `cargo:warning` lines (default
        /// true; the CLI turns them off).
        cargo_directives(on: bool) => cargo_directives = on;

        /// Also generates autograd kernels (`autograd.rs`) from the `derivatives.yaml`
        /// at `path`, checked against the native YAML.
        derivatives_yaml(path: impl AsRef<Path>) => derivatives = Some(path.as_ref().to_path_buf());

        /// Also generates the composite kernel table (`composites.rs`) from the
        /// `composites.yaml` at `path` (see [`crate::composite`]), checked against the
        /// native YAML.
        composites_yaml(path: impl AsRef<Path>) => composites = Some(path.as_ref().to_path_buf());
    }

    /// [`Builder::generate`], printing the diagnostics and exiting with status 1 on
    /// failure (what a build script wants).
    pub fn generate_or_exit(self) -> Report {
        match self.generate() {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1)
            }
        }
    }

    /// Loads, generates and writes. Files whose bytes are unchanged are not touched;
    /// `ops_NNN.rs` files left over from a larger earlier output are removed.
    pub fn generate(self) -> Result<Report, Error> {
        let yaml = self
            .native_yaml
            .clone()
            .ok_or_else(|| Error::Config("no native_functions.yaml given".to_string()))?;
        let out_dir = match &self.out_dir {
            Some(d) => d.clone(),
            None => std::env::var_os("OUT_DIR")
                .map(PathBuf::from)
                .ok_or_else(|| {
                    Error::Config("no output directory given and OUT_DIR is not set".to_string())
                })?,
        };
        let tags = self.tags.clone().or_else(|| {
            let beside = yaml.with_file_name("tags.yaml");
            beside.is_file().then_some(beside)
        });
        self.rerun_if_changed(&yaml);
        if let Some(t) = &tags {
            self.rerun_if_changed(t);
        }
        let model = crate::load_with_tags(&yaml, tags.as_deref()).map_err(Error::Load)?;
        let opts = EmitOptions {
            namespace: self.namespace.clone(),
            runtime: self.runtime.clone(),
            source: yaml
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        let mut generated = emit::generate(&model, &opts)
            .map_err(|errs| Error::Load(emit_diagnostics(&yaml, &errs)))?;
        if let Some(dpath) = &self.derivatives {
            let text = self.autograd_file(dpath, &model, &opts.source)?;
            generated.files.push(("autograd.rs".to_string(), text));
        }
        if let Some(cpath) = &self.composites {
            let text = self.composites_file(cpath, &model, &yaml)?;
            generated.files.push(("composites.rs".to_string(), text));
        }
        if self.cargo_directives {
            for u in &generated.unsupported {
                println!(
                    "cargo:warning={}:{}:{}: operator `{}` is not generated: {}",
                    yaml.display(),
                    u.loc.line,
                    u.loc.col,
                    u.op,
                    u.reason
                );
            }
        }
        let (files, written) = write_files(&out_dir, &generated.files)?;
        Ok(Report {
            files,
            written,
            unsupported: generated.unsupported,
        })
    }
    fn rerun_if_changed(&self, path: &Path) {
        if self.cargo_directives {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }

    /// `autograd.rs` from the `derivatives.yaml` at `dpath`, checked against `model`.
    fn autograd_file(
        &self,
        dpath: &Path,
        model: &crate::model::NativeFunctions,
        source: &str,
    ) -> Result<String, Error> {
        self.rerun_if_changed(dpath);
        let derivs = crate::derivatives::load_derivatives(dpath, model).map_err(Error::Load)?;
        emit::autograd::generate(model, &derivs, &self.namespace, &self.runtime, source).map_err(
            |errs| {
                let src = std::fs::read_to_string(dpath).unwrap_or_default();
                Error::Load(Diagnostics::sorted(dpath.display().to_string(), src, errs))
            },
        )
    }

    /// `composites.rs` from the `composites.yaml` at `cpath`, checked against
    /// `model` (loaded from `yaml`).
    fn composites_file(
        &self,
        cpath: &Path,
        model: &crate::model::NativeFunctions,
        yaml: &Path,
    ) -> Result<String, Error> {
        self.rerun_if_changed(cpath);
        let kernels = crate::composite::load(cpath, model).map_err(Error::Load)?;
        let plan = emit::plan::plan(model, &self.namespace)
            .map_err(|errs| Error::Load(emit_diagnostics(yaml, &errs)))?;
        let source = cpath
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        emit::composites::generate(&kernels, &plan.ops, &source).map_err(Error::Config)
    }
}

/// Writes the files whose bytes changed into `out_dir` and removes stale
/// `ops_NNN.rs` files: every file's name and the names of those written.
fn write_files(
    out_dir: &Path,
    generated: &[(String, String)],
) -> Result<(Vec<PathBuf>, Vec<PathBuf>), Error> {
    let io = |path: &Path, error| Error::Io {
        path: path.to_path_buf(),
        error,
    };
    std::fs::create_dir_all(out_dir).map_err(|e| io(out_dir, e))?;
    let mut files = Vec::new();
    let mut written = Vec::new();
    for (name, text) in generated {
        let path = out_dir.join(name);
        let same = std::fs::read(&path).is_ok_and(|old| old == text.as_bytes());
        if !same {
            std::fs::write(&path, text).map_err(|e| io(&path, e))?;
            written.push(PathBuf::from(name));
        }
        files.push(PathBuf::from(name));
    }
    remove_stale(out_dir, &files).map_err(|e| io(out_dir, e))?;
    Ok((files, written))
}

/// Removes `ops_NNN.rs` files of an earlier run that the new output does not have.
fn remove_stale(dir: &Path, keep: &[PathBuf]) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let chunk = name
            .strip_prefix("ops_")
            .and_then(|r| r.strip_suffix(".rs"))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if chunk && !keep.iter().any(|k| k.as_os_str() == entry.file_name()) {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// Located diagnostics for emission errors, against the YAML's text.
pub fn emit_diagnostics(yaml: &Path, errs: &[EmitError]) -> Diagnostics {
    let source = std::fs::read(yaml)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let mut d = Diagnostics::new(yaml.display().to_string(), source);
    for e in errs {
        let diag = Diagnostic::new("opal::codegen", e.loc, e.message.clone());
        let diag = match e.other {
            Some(other) => diag.hint(format!(
                "the other operator is at line {}, column {}; rename one overload",
                other.line, other.col
            )),
            None => diag.hint("rename one of the operators or its overload"),
        };
        d.push(diag);
    }
    d
}
