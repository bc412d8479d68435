//! `opal-codegen generate <native_functions.yaml> --out <dir> [--namespace ns]
//! [--tags <tags.yaml>]`: writes the operator layer to `<dir>/mod.rs` plus the files
//! it includes, naming the runtime only by absolute paths (`::opal::…`), so the
//! directory compiles as a module of any crate that depends on `opal`.
//!
//! Owns: argument handling and printing for this subcommand. Must not: generate or
//! write anything itself (that is `opal_codegen::Builder`).

use std::path::PathBuf;
use std::process::ExitCode;

use opal_codegen::builder::{Builder, Error};

use super::{fail, Run};

/// Generate the typed operator layer (mod.rs + included files) from a native_functions.yaml.
#[derive(clap::Args, Debug)]
pub struct Generate {
    /// The native_functions.yaml to generate from.
    pub yaml: PathBuf,
    /// Output directory (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Operator namespace.
    #[arg(long, default_value = "aten")]
    pub namespace: String,
    /// The tags.yaml defining valid tags (default: tags.yaml beside the YAML, if any).
    #[arg(long)]
    pub tags: Option<PathBuf>,
}

impl Run for Generate {
    fn run(self) -> ExitCode {
        let mut b = Builder::new()
            .native_yaml(&self.yaml)
            .namespace(&self.namespace)
            .out_dir(&self.out)
            .cargo_directives(false);
        if let Some(t) = &self.tags {
            b = b.tags(t);
        }
        match b.generate() {
            Ok(report) => {
                for u in &report.unsupported {
                    eprintln!(
                        "{}:{}:{}: note: operator `{}` is not generated: {}",
                        self.yaml.display(),
                        u.loc.line,
                        u.loc.col,
                        u.op,
                        u.reason
                    );
                }
                println!(
                    "{}: wrote {} of {} files to {} ({} operators not expressible)",
                    self.yaml.display(),
                    report.written.len(),
                    report.files.len(),
                    self.out.display(),
                    report.unsupported.len()
                );
                ExitCode::SUCCESS
            }
            Err(Error::Load(d)) => fail(&d),
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(1)
            }
        }
    }
}
