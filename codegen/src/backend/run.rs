//! The backend pipeline from files: load the backend YAML and the native YAML,
//! resolve, then generate code or a coverage report; shared by the CLI
//! (`opal-codegen backend|coverage`) and [`crate::BackendBuilder`].
//!
//! Owns: file reading and the order of the stages. Must not: print or exit.

use std::path::Path;
use std::sync::Arc;

use crate::diagnostics::Diagnostic;
use crate::model::NativeFunctions;

use super::coverage::{coverage, Coverage, RuntimeOps};
use super::emit::{generate, BackendCode, BackendEmitOptions};
use super::load::load_bytes;
use super::plan::{resolve, resolve_with, Plan};
use super::plugin::{generate_plugin, PluginCode};
use super::report::{BackendDiagnostic, BackendErrors, SourceFile};
use super::spec::{BackendSpec, Located};

/// Both YAMLs, loaded.
#[derive(Clone, Debug)]
pub struct Inputs {
    pub spec: BackendSpec,
    pub natives: NativeFunctions,
    pub backend_file: SourceFile,
    pub native_file: SourceFile,
    /// What the runtime has (composites, the CPU backend's ops), for coverage.
    pub runtime: Option<RuntimeOps>,
    /// Ops the native YAML lacks are skipped with a warning instead of failing
    /// (`--skip-unknown-ops`).
    pub skip_unknown_ops: bool,
    /// Without an ops path, carry every op's entry points (`call`, `redispatch`),
    /// not only those derivations call (`--carry-entry-points`).
    pub carry_entry_points: bool,
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
    // A runtime's composite kernels are listed beside its native YAML.
    let composites_path = native.with_file_name("composites.yaml");
    let runtime = if composites_path.is_file() {
        let kernels =
            crate::composite::load(&composites_path, &natives).map_err(|d| BackendErrors {
                backend: backend_file.clone(),
                native: Some(native_file.clone()),
                items: Vec::new(),
                native_errors: Some(Box::new(d)),
            })?;
        Some(RuntimeOps {
            composites: kernels
                .into_iter()
                .map(|k| (k.op, k.key.to_string()))
                .collect(),
            cpu: None,
        })
    } else {
        None
    };
    Ok(Inputs {
        spec,
        natives,
        backend_file,
        native_file,
        runtime,
        skip_unknown_ops: false,
        carry_entry_points: false,
    })
}

fn file_name(f: &SourceFile) -> String {
    Path::new(&f.path)
        .file_name()
        .map_or(f.path.clone(), |n| n.to_string_lossy().into_owned())
}

/// A backend resolved against its native YAML once: the warnings, the code and
/// the plugin all come from this one resolution.
pub struct Resolved<'a> {
    inputs: &'a Inputs,
    plan: Plan<'a>,
    errors: Vec<BackendDiagnostic>,
}

/// Resolves `inputs` (skipping unknown ops when they ask for it).
pub fn resolve_inputs(inputs: &Inputs) -> Resolved<'_> {
    let (plan, errors) = resolve_with(&inputs.spec, &inputs.natives, inputs.skip_unknown_ops);
    Resolved {
        inputs,
        plan,
        errors,
    }
}

impl<'a> Resolved<'a> {
    /// The plan, or every resolution problem with both files at hand.
    pub(crate) fn plan(&self) -> Result<&Plan<'a>, BackendErrors> {
        if self.errors.is_empty() {
            Ok(&self.plan)
        } else {
            Err(self.fail(self.errors.clone()))
        }
    }

    fn fail(&self, items: Vec<BackendDiagnostic>) -> BackendErrors {
        BackendErrors {
            backend: self.inputs.backend_file.clone(),
            native: Some(self.inputs.native_file.clone()),
            items,
            native_errors: None,
        }
    }

    /// The warnings of loading and resolving the backend (ignored vendor keys, an
    /// op listed twice, skipped unknown ops), one line each:
    /// `warning: path:line:col: message (hint)`.
    pub fn warnings(&self) -> Vec<String> {
        let inputs = self.inputs;
        let line = |d: &Diagnostic| {
            let hint = d
                .hint
                .as_deref()
                .map(|h| format!(" ({h})"))
                .unwrap_or_default();
            format!(
                "warning: {}:{}:{}: {}{hint}",
                inputs.backend_file.path, d.loc.line, d.loc.col, d.message
            )
        };
        inputs
            .spec
            .warnings
            .iter()
            .chain(self.plan.warnings.iter().map(|w| &w.diag))
            .map(line)
            .collect()
    }

    /// The backend module. `with_skeleton_mod` declares `pub mod kernels;` and
    /// produces the starter implementation; `ops_path` names where the per-op
    /// items already exist (`None`: the module carries its own copy).
    pub fn generate(
        &self,
        with_skeleton_mod: bool,
        ops_path: Option<&str>,
    ) -> Result<BackendCode, BackendErrors> {
        let plan = self.plan()?;
        let inputs = self.inputs;
        let opts = BackendEmitOptions {
            backend_source: file_name(&inputs.backend_file),
            native_source: file_name(&inputs.native_file),
            with_skeleton_mod,
            skeleton: with_skeleton_mod,
            ops_path: ops_path.map(str::to_string),
            carry_entry_points: inputs.carry_entry_points,
        };
        generate(&inputs.spec, &inputs.natives, plan, &opts).map_err(|e| self.fail(e))
    }

    /// The plugin crate's module and manifest, for the shared library `library`.
    pub fn generate_plugin(&self, library: &str) -> Result<PluginCode, BackendErrors> {
        Ok(generate_plugin(&self.inputs.spec, self.plan()?, library))
    }
}

/// Resolves and generates (see [`Resolved::generate`]).
pub fn generate_code(
    inputs: &Inputs,
    with_skeleton_mod: bool,
    ops_path: Option<&str>,
) -> Result<BackendCode, BackendErrors> {
    resolve_inputs(inputs).generate(with_skeleton_mod, ops_path)
}

/// The coverage report, and the problems found on the way (unknown ops,
/// incompatible pins), which the report lists as missing.
pub fn coverage_of(inputs: &Inputs) -> (Coverage, Option<BackendErrors>) {
    let resolved = resolve_inputs(inputs);
    let report = coverage(
        &inputs.spec,
        &inputs.natives,
        &resolved.plan,
        inputs.runtime.as_ref(),
    );
    let errors = resolved.plan().err();
    (report, errors)
}

/// Resolves and lists the warnings (see [`Resolved::warnings`]).
pub fn warnings_of(inputs: &Inputs) -> Vec<String> {
    resolve_inputs(inputs).warnings()
}

/// Tells coverage which ops the fallback can run: those the CPU backend of
/// `cpu_backend` (a backend YAML for dispatch key CPU, resolved against the same
/// native YAML) has kernels for, plus the runtime's composites.
pub fn with_cpu_backend(inputs: &mut Inputs, cpu_backend: &Path) -> Result<(), BackendErrors> {
    let cpu = load_inputs(cpu_backend, Path::new(&inputs.native_file.path), None)?;
    let (plan, errors) = resolve(&cpu.spec, &inputs.natives);
    if !errors.is_empty() {
        return Err(BackendErrors {
            backend: cpu.backend_file.clone(),
            native: Some(cpu.native_file.clone()),
            items: errors,
            native_errors: None,
        });
    }
    let mut ops = RuntimeOps::backend_ops(&plan);
    // Autogen out= ops the CPU backend lists are in its plan already; composites
    // run on the CPU too.
    let runtime = inputs.runtime.get_or_insert_with(RuntimeOps::default);
    ops.extend(runtime.composites.keys().cloned());
    runtime.cpu = Some(ops);
    Ok(())
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
