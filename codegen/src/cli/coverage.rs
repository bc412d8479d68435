//! `opal-codegen coverage <backend.yaml> --native <native_functions.yaml>
//! [--cpu <cpu backend.yaml>] [--format text|markdown|json]`: how the backend runs
//! each op (native, adapter, composite, fallback, missing), with totals. Composites
//! are those of the `composites.yaml` beside the native YAML when there is one, and
//! the fallback runs what `--cpu` lists. Problems in the backend YAML (unknown
//! ops, incompatible pins) are printed to stderr and make the exit status 1; the
//! report still lists those ops as missing.

use std::path::PathBuf;
use std::process::ExitCode;

use opal_codegen::backend::run::{coverage_of, load_inputs, with_cpu_backend};
use opal_codegen::backend::Format;

use super::backend::fail_backend;
use super::Run;

/// Output format of the coverage report.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum CoverageFormat {
    Text,
    Markdown,
    Json,
}

/// Report, op by op, how a backend runs the operators of a native YAML.
#[derive(clap::Args, Debug)]
pub struct Coverage {
    /// The backend YAML.
    pub backend: PathBuf,
    /// The native_functions.yaml to report against.
    #[arg(long)]
    pub native: PathBuf,
    /// The CPU backend's YAML: the CPU fallback is counted as running only the ops
    /// it has kernels for (without it, the native YAML's `CPU:` entries are trusted).
    #[arg(long)]
    pub cpu: Option<PathBuf>,
    /// text (default), markdown or json.
    #[arg(long, value_enum, default_value = "text")]
    pub format: CoverageFormat,
}

impl Run for Coverage {
    fn run(self) -> ExitCode {
        let mut inputs = match load_inputs(&self.backend, &self.native, None) {
            Ok(i) => i,
            Err(e) => return fail_backend(&e),
        };
        if let Some(cpu) = &self.cpu {
            if let Err(e) = with_cpu_backend(&mut inputs, cpu) {
                return fail_backend(&e);
            }
        }
        let (report, errors) = coverage_of(&inputs);
        let format = match self.format {
            CoverageFormat::Text => Format::Text,
            CoverageFormat::Markdown => Format::Markdown,
            CoverageFormat::Json => Format::Json,
        };
        print!("{}", report.render(format));
        match errors {
            Some(e) => fail_backend(&e),
            None => ExitCode::SUCCESS,
        }
    }
}
