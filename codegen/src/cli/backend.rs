//! `opal-codegen backend <backend.yaml> --native <native_functions.yaml> --out <dir>
//! [--init-skeleton] [--namespace ns] [--skip-unknown-ops]`: writes the backend
//! module to `<dir>/mod.rs`
//! and, with `--init-skeleton`, a starter `<dir>/kernels.rs` (never over an
//! existing file). With `--plugin`, the plugin side instead (see
//! `opal_codegen::backend::plugin`).

use std::path::PathBuf;
use std::process::ExitCode;

use opal_codegen::backend::run::{load_inputs, resolve_inputs, write_if_changed, Inputs, Resolved};
use opal_codegen::backend::SKELETON_FILE;

use std::io::IsTerminal;

use opal_codegen::backend::BackendErrors;

use super::Run;

/// Generate a backend's kernel trait, adapters and registration from a backend YAML.
#[derive(clap::Args, Debug)]
pub struct Backend {
    /// The backend YAML (backend, dispatch_key, device, supported, fallback).
    pub backend: PathBuf,
    /// The native_functions.yaml the backend is generated against.
    #[arg(long)]
    pub native: PathBuf,
    /// Output directory: receives mod.rs (and kernels.rs with --init-skeleton).
    #[arg(long)]
    pub out: PathBuf,
    /// Also write a starter implementation (kernels.rs) whose kernels return
    /// NotImplemented errors; an existing kernels.rs is never overwritten.
    #[arg(long)]
    pub init_skeleton: bool,
    /// Override the backend YAML's `namespace:`.
    #[arg(long)]
    pub namespace: Option<String>,
    /// Refer to the per-op items at this path (e.g. `::opal::ops`, when the native
    /// YAML is the one opal was generated from) instead of carrying a copy.
    #[arg(long)]
    pub ops_path: Option<String>,
    /// Without --ops-path: carry every op's entry points (`call`, `redispatch`), not
    /// only those derivations call, for code calling ops the runtime lacks.
    #[arg(long)]
    pub carry_entry_points: bool,
    /// Generate the plugin side instead (a crate depending on opal-plugin-sdk):
    /// the typed kernel trait, the C-ABI shims and `<dir>/<device>.opal-plugin.json`.
    #[arg(long)]
    pub plugin: bool,
    /// With --plugin: the library file the manifest names (default lib<device>.so).
    #[arg(long)]
    pub plugin_library: Option<String>,
    /// Skip ops the native YAML lacks (a warning each) instead of failing.
    #[arg(long)]
    pub skip_unknown_ops: bool,
}

impl Run for Backend {
    fn run(self) -> ExitCode {
        let mut inputs = match load_inputs(&self.backend, &self.native, self.namespace.as_deref()) {
            Ok(i) => i,
            Err(e) => return fail_backend(&e),
        };
        inputs.skip_unknown_ops = self.skip_unknown_ops;
        inputs.carry_entry_points = self.carry_entry_points;
        // One resolution for the warnings and the code.
        let resolved = resolve_inputs(&inputs);
        for w in resolved.warnings() {
            eprintln!("{w}");
        }
        if self.plugin {
            return write_plugin(&self, &inputs, &resolved);
        }
        let skeleton_path = self.out.join(SKELETON_FILE);
        let skeleton_exists = skeleton_path.exists();
        let code = match resolved.generate(
            self.init_skeleton || skeleton_exists,
            self.ops_path.as_deref(),
        ) {
            Ok(c) => c,
            Err(e) => return fail_backend(&e),
        };
        let module = self.out.join("mod.rs");
        match write_if_changed(&module, &code.module) {
            Ok(true) => println!("wrote {}", module.display()),
            Ok(false) => println!("{} is up to date", module.display()),
            Err(e) => {
                eprintln!("error: cannot write {}: {e}", module.display());
                return ExitCode::from(1);
            }
        }
        if self.init_skeleton {
            if skeleton_exists {
                println!(
                    "kept {} (an existing skeleton is never overwritten)",
                    skeleton_path.display()
                );
            } else if let Err(e) = std::fs::write(&skeleton_path, code.skeleton.unwrap_or_default())
            {
                eprintln!("error: cannot write {}: {e}", skeleton_path.display());
                return ExitCode::from(1);
            } else {
                println!("wrote {}", skeleton_path.display());
            }
        }
        ExitCode::SUCCESS
    }
}

/// `--plugin`: writes `<out>/mod.rs` and `<out>/<device>.opal-plugin.json`.
fn write_plugin(b: &Backend, inputs: &Inputs, resolved: &Resolved<'_>) -> ExitCode {
    let device = &inputs.spec.device.value;
    let library = b
        .plugin_library
        .clone()
        .unwrap_or_else(|| format!("lib{device}.so"));
    let code = match resolved.generate_plugin(&library) {
        Ok(c) => c,
        Err(e) => return fail_backend(&e),
    };
    for (op, why) in &code.not_generated {
        println!("not generated for the plugin: {op}: {why}");
    }
    let files = [
        (b.out.join("mod.rs"), &code.module),
        (
            b.out.join(format!("{device}.opal-plugin.json")),
            &code.manifest,
        ),
    ];
    for (path, text) in files {
        match write_if_changed(&path, text) {
            Ok(true) => println!("wrote {}", path.display()),
            Ok(false) => println!("{} is up to date", path.display()),
            Err(e) => {
                eprintln!("error: cannot write {}: {e}", path.display());
                return ExitCode::from(1);
            }
        }
    }
    ExitCode::SUCCESS
}

/// Prints backend diagnostics to stderr (colored on a terminal) and returns exit
/// code 1.
pub fn fail_backend(e: &BackendErrors) -> ExitCode {
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    eprint!("{}", e.render(color, 100));
    ExitCode::from(1)
}
