//! The backend pipeline from files: load the backend YAML and the native YAML,
//! resolve, then generate code or a coverage report; shared by the CLI
//! (`opal-codegen backend|coverage`) and [`crate::BackendBuilder`].
//!
//! Owns: file reading and the order of the stages. Must not: print or exit.

use std::path::Path;
use std::sync::Arc;

use crate::model::NativeFunctions;

use super::coverage::{coverage, Coverage};
use super::emit::{generate, BackendCode, BackendEmitOptions};
use super::load::load_bytes;
use super::plan::resolve;
use super::report::{BackendErrors, SourceFile};
use super::spec::{BackendSpec, Located};

/// Both YAMLs, loaded.
#[derive(Clone, Debug)]
pub struct Inputs {
    pub spec: BackendSpec,
    pub natives: NativeFunctions,
    pub backend_file: SourceFile,
    pub native_file: SourceFile,
}

fn io_error(path: &Path, what: &str, e: std::io::Error) -> BackendErrors {
    BackendErrors {
        backend: SourceFile {
            path: path.display().to_string(),
            text: Arc::from(""),
        },
        native: None,
        items: vec![crate::diagnostics::Diagnostic::new(
            "opal::backend::io",
            crate::model::Loc::SYNTHETIC,
            format!("cannot read the {what}: {e}"),
        )
        .into()],
        native_errors: None,
    }
}

/// Loads `backend` and `native` (with a `tags.yaml` beside it when there is one).
/// `namespace` overrides the backend YAML's `namespace:`.
pub fn load_inputs(
    backend: &Path,
    native: &Path,
    namespace: Option<&str>,
) -> Result<Inputs, BackendErrors> {
    let bytes = std::fs::read(backend).map_err(|e| io_error(backend, "backend YAML", e))?;
    let shown = backend.display().to_string();
    let mut spec = load_bytes(&shown, &bytes)?;
    if let Some(ns) = namespace {
        spec.namespace = Located::new(ns.to_string(), crate::model::Loc::SYNTHETIC);
    }
    let backend_file = SourceFile {
        path: shown,
        text: String::from_utf8_lossy(&bytes).into(),
    };
    let native_bytes = std::fs::read(native).map_err(|e| io_error(native, "native YAML", e))?;
    let native_file = SourceFile {
        path: native.display().to_string(),
        text: String::from_utf8_lossy(&native_bytes).into(),
    };
    let natives = crate::load(native).map_err(|d| BackendErrors {
        backend: backend_file.clone(),
        native: Some(native_file.clone()),
        items: Vec::new(),
        native_errors: Some(Box::new(d)),
    })?;
    Ok(Inputs {
        spec,
        natives,
        backend_file,
        native_file,
    })
}

fn file_name(f: &SourceFile) -> String {
    Path::new(&f.path)
        .file_name()
        .map_or(f.path.clone(), |n| n.to_string_lossy().into_owned())
}

/// Resolves and generates; every problem is reported with both files at hand.
/// `with_skeleton_mod` declares `pub mod kernels;` and produces the starter
/// implementation; `ops_path` names where the per-op items already exist (see
/// [`BackendEmitOptions::ops_path`]).
pub fn generate_code(
    inputs: &Inputs,
    with_skeleton_mod: bool,
    ops_path: Option<&str>,
) -> Result<BackendCode, BackendErrors> {
    let fail = |items| BackendErrors {
        backend: inputs.backend_file.clone(),
        native: Some(inputs.native_file.clone()),
        items,
        native_errors: None,
    };
    let (plan, errors) = resolve(&inputs.spec, &inputs.natives);
    if !errors.is_empty() {
        return Err(fail(errors));
    }
    let opts = BackendEmitOptions {
        backend_source: file_name(&inputs.backend_file),
        native_source: file_name(&inputs.native_file),
        with_skeleton_mod,
        skeleton: with_skeleton_mod,
        ops_path: ops_path.map(str::to_string),
    };
    generate(&inputs.spec, &inputs.natives, &plan, &opts).map_err(fail)
}

/// The coverage report, and the problems found on the way (unknown ops,
/// incompatible pins), which the report lists as missing.
pub fn coverage_of(inputs: &Inputs) -> (Coverage, Option<BackendErrors>) {
    let (plan, errors) = resolve(&inputs.spec, &inputs.natives);
    let report = coverage(&inputs.spec, &inputs.natives, &plan);
    let errors = (!errors.is_empty()).then(|| BackendErrors {
        backend: inputs.backend_file.clone(),
        native: Some(inputs.native_file.clone()),
        items: errors,
        native_errors: None,
    });
    (report, errors)
}

/// Writes `contents` to `path` unless the file already has exactly these bytes (so
/// a no-op build does not touch timestamps). Returns whether it wrote.
pub fn write_if_changed(path: &Path, contents: &str) -> std::io::Result<bool> {
    if std::fs::read(path).is_ok_and(|old| old == contents.as_bytes()) {
        return Ok(false);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, contents)?;
    Ok(true)
}
