//! The `opal-codegen` command line. Each subcommand lives in `cli/<name>.rs`; add
//! one by writing that module and one line in `commands!` below.

mod cli;

#[global_allocator]
static ALLOC: opal_codegen::BuildAllocator = opal_codegen::BuildAllocator;

use std::process::ExitCode;

use clap::Parser;

/// Declares the subcommand enum and its dispatch from one list.
macro_rules! commands {
    ($($(#[$meta:meta])* $name:ident($args:ty),)*) => {
        #[derive(clap::Subcommand, Debug)]
        enum Command {
            $($(#[$meta])* $name($args),)*
        }

        impl Command {
            fn run(self) -> ExitCode {
                match self {
                    $(Command::$name(a) => cli::Run::run(a),)*
                }
            }
        }
    };
}

commands! {
    /// Check a native_functions.yaml: parse, apply torchgen's rules, report all errors.
    Check(cli::check::Check),
    /// Print the canonical schema of each `func:` entry, in file order.
    Schemas(cli::schemas::Schemas),
    /// Generate the typed operator layer (mod.rs + included files) from a native_functions.yaml.
    Generate(cli::generate::Generate),
    /// Generate a backend's kernel trait, adapters and registration from a backend YAML.
    Backend(cli::backend::Backend),
    /// Report how a backend runs each op: native, adapter, composite, fallback or missing.
    Coverage(cli::coverage::Coverage),
    /// Work with derivatives.yaml files: `derivatives check` loads one and checks it against a native model.
    Derivatives(cli::derivatives::Derivatives),
}

/// Opal's operator code generator: reads PyTorch-style native_functions.yaml files.
#[derive(Parser, Debug)]
#[command(name = "opal-codegen", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

fn main() -> ExitCode {
    opal_codegen::use_small_pages();
    Cli::parse().command.run()
}
