//! `opal-codegen schemas <native_functions.yaml>`: the canonical schema of every
//! `func:` entry, one per line, in file order.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use opal_codegen::diagnostics::{Diagnostic, Diagnostics};
use opal_codegen::model::Loc;

use super::{fail, Run};

/// Print the canonical schema of each `func:` entry, in file order.
#[derive(clap::Args, Debug)]
pub struct Schemas {
    /// The native_functions.yaml to read.
    pub yaml: PathBuf,
}

impl Run for Schemas {
    fn run(self) -> ExitCode {
        let path = self.yaml.display().to_string();
        let bytes = match std::fs::read(&self.yaml) {
            Ok(b) => b,
            Err(e) => {
                let mut d = Diagnostics::new(path, "");
                d.push(Diagnostic::new(
                    "opal::io",
                    Loc::SYNTHETIC,
                    format!("cannot read the file: {e}"),
                ));
                return fail(&d);
            }
        };
        let src = match opal_codegen::parse::decode(&bytes) {
            Ok(s) => s,
            Err(e) => {
                let mut d = Diagnostics::new(path, String::from_utf8_lossy(&bytes).into_owned());
                d.push(e);
                return fail(&d);
            }
        };
        let parsed = opal_codegen::parse::parse_native_yaml(src);
        if !parsed.errors.is_empty() {
            let d = Diagnostics::sorted(path, src, parsed.errors);
            return fail(&d);
        }
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        for f in &parsed.functions {
            if writeln!(out, "{}", f.func).is_err() {
                // stdout closed (e.g. piped into `head`): stop quietly.
                return ExitCode::SUCCESS;
            }
        }
        if out.flush().is_err() {
            return ExitCode::SUCCESS;
        }
        ExitCode::SUCCESS
    }
}
