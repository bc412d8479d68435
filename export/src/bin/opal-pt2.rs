//! The `opal-pt2` command: runs or inspects a PyTorch `.pt2` export with Opal.
//!
//! ```text
//! opal-pt2 run model.pt2 --inputs in.safetensors [--device cpu|meta|emu] [--output out.safetensors]
//! opal-pt2 inspect model.pt2 [--device emu]
//! opal-pt2 profile model.pt2 --inputs in.safetensors [--device cpu] [--runs 100]
//! ```
//!
//! Inputs are the tensors `input.0`, `input.1`, ... of the safetensors file;
//! outputs are written as `output.0`, ... Errors are printed and exit with 1.
//!
//! Owns: argument parsing and printing. Must not: implement loading or running
//! (the library does).

use clap::{Parser, Subcommand};
use opal_export::{device, io, ExportedProgram, LoadLimits};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "opal-pt2",
    version,
    about = "Run PyTorch .pt2 exports with Opal"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Runs the program on the inputs and prints (or writes) its outputs.
    Run {
        /// The .pt2 archive.
        model: PathBuf,
        /// A safetensors file with `input.0`, `input.1`, ...
        #[arg(long)]
        inputs: PathBuf,
        /// cpu, meta, emu, or a plugin device.
        #[arg(long, default_value = "cpu")]
        device: String,
        /// Where to write `output.0`, ... (safetensors); not with --device meta.
        #[arg(long)]
        output: Option<PathBuf>,
    },
    /// Runs the program repeatedly and prints where its time goes, by kind of
    /// step and slowest steps first.
    Profile {
        /// The .pt2 archive.
        model: PathBuf,
        /// A safetensors file with `input.0`, `input.1`, ...
        #[arg(long)]
        inputs: PathBuf,
        /// cpu, meta, emu, or a plugin device.
        #[arg(long, default_value = "cpu")]
        device: String,
        /// How many timed runs to average (after one warm-up run).
        #[arg(long, default_value_t = 100)]
        runs: usize,
    },
    /// Lists the operators the program uses and how each runs on the device.
    Inspect {
        /// The .pt2 archive.
        model: PathBuf,
        /// cpu, meta, emu, or a plugin device.
        #[arg(long, default_value = "cpu")]
        device: String,
    },
}

fn run(cli: Cli) -> opal_export::Result<()> {
    match cli.cmd {
        Cmd::Run {
            model,
            inputs,
            device: dev,
            output,
        } => {
            let dev = device(&dev)?;
            let program = ExportedProgram::load(&model)?;
            let runner = program.to_device(dev)?;
            let inputs = io::read_indexed(&inputs, "input")?;
            let outputs = runner.run(&inputs)?;
            for (i, t) in outputs.iter().enumerate() {
                println!(
                    "output.{i}: {} {:?} on {}",
                    t.dtype(),
                    t.sizes(),
                    t.device()
                );
            }
            if let Some(out) = output {
                io::write_indexed(&out, "output", &outputs)?;
                println!("wrote {}", out.display());
            }
            Ok(())
        }
        Cmd::Profile {
            model,
            inputs,
            device: dev,
            runs,
        } => {
            let runner = ExportedProgram::load(&model)?.to_device(device(&dev)?)?;
            let inputs = io::read_indexed(&inputs, "input")?;
            print!("{}", runner.profile(&inputs, runs)?);
            Ok(())
        }
        Cmd::Inspect { model, device: dev } => {
            let dev = device(&dev)?;
            let program = ExportedProgram::open(&model, &LoadLimits::default())?;
            println!("{}", program.inspect(dev));
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 1 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
