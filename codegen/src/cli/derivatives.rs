//! `opal-codegen derivatives check [--native <native_functions.yaml>] <derivatives.yaml>`:
//! load a derivatives.yaml, check it against a native model, then print a
//! one-line summary (exit 0) or every problem (exit 1).

use std::path::PathBuf;
use std::process::ExitCode;

use opal_codegen::derivatives::{load_derivatives, Mode};

use super::{fail, Run};

/// Work with derivatives.yaml files (derivative formulas of native operators).
#[derive(clap::Args, Debug)]
pub struct Derivatives {
    #[command(subcommand)]
    pub command: Command,
}

/// The `derivatives` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Check a derivatives.yaml: parse every formula, check names against a native_functions.yaml.
    Check(Check),
}

/// Arguments of `derivatives check`.
#[derive(clap::Args, Debug)]
pub struct Check {
    /// The derivatives.yaml to check.
    pub yaml: PathBuf,
    /// The native_functions.yaml its operators come from (default: the one beside
    /// the derivatives.yaml).
    #[arg(long)]
    pub native: Option<PathBuf>,
}

impl Run for Derivatives {
    fn run(self) -> ExitCode {
        match self.command {
            Command::Check(c) => c.run(),
        }
    }
}

impl Run for Check {
    fn run(self) -> ExitCode {
        let native_path = self
            .native
            .unwrap_or_else(|| self.yaml.with_file_name("native_functions.yaml"));
        let native = match opal_codegen::load(&native_path) {
            Ok(n) => n,
            Err(d) => return fail(&d),
        };
        match load_derivatives(&self.yaml, &native) {
            Ok(d) => {
                let (mut backward, mut forward) = (0, 0);
                for f in d.formulas() {
                    match f.mode {
                        Mode::Backward => backward += 1,
                        Mode::Forward => forward += 1,
                    }
                }
                println!(
                    "{}: ok, {} entries, {} formulas ({backward} backward, {forward} forward), checked against {}",
                    self.yaml.display(),
                    d.entries.len(),
                    backward + forward,
                    native_path.display(),
                );
                ExitCode::SUCCESS
            }
            Err(d) => fail(&d),
        }
    }
}
