//! Subcommands of the `opal-codegen` binary, one module each. A subcommand is a
//! clap `Args` struct implementing [`Run`]; `main.rs` lists it with one line.
//!
//! Owns: argument handling, printing and exit codes. Must not: contain loading or
//! generation logic (that lives in the library).

pub mod backend;
pub mod check;
pub mod coverage;
pub mod derivatives;
pub mod generate;
pub mod schemas;

use std::io::IsTerminal;
use std::process::ExitCode;

use opal_codegen::diagnostics::Diagnostics;

/// A runnable subcommand.
pub trait Run {
    /// Runs the subcommand, printing its own output and diagnostics.
    fn run(self) -> ExitCode;
}

/// Prints diagnostics to stderr (colored on a terminal) and returns exit code 1.
pub fn fail(d: &Diagnostics) -> ExitCode {
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    eprint!("{}", d.render(color, 100));
    ExitCode::from(1)
}
