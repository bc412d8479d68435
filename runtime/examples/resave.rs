//! Loads a safetensors file and saves it again (every tensor and the file's
//! metadata), as a check that Opal reads and writes the format:
//!
//! ```text
//! cargo run --release -p opal --example resave -- IN OUT
//! ```
//!
//! (The workspace package `opal`, in `examples/`, builds this file; `opal-runtime`
//! does not list it as an example, so the two never build one output twice.)
//!
//! Exits with status 1 and a message naming the problem on bad arguments or a file
//! it cannot read or write. `tests/resave.rs` runs [`run`] on a temporary file.

use std::process::ExitCode;

use opal::Tensor;

/// Resaves `args[0]` as `args[1]`; returns how many tensors were written.
pub fn run(args: &[String]) -> Result<usize, String> {
    let [input, output] = args else {
        return Err(format!(
            "expected 2 arguments (IN OUT), got {}: usage: resave IN.safetensors OUT.safetensors",
            args.len()
        ));
    };
    let loaded = opal::serialize::load_file(input, None).map_err(|e| e.to_string())?;
    let tensors: Vec<(&str, &Tensor)> = loaded
        .tensors
        .iter()
        .map(|(name, t)| (name.as_str(), t))
        .collect();
    opal::serialize::save_file(&tensors, &loaded.metadata, output).map_err(|e| e.to_string())?;
    Ok(tensors.len())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(n) => {
            println!("resaved {n} tensors from {} to {}", args[0], args[1]);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("resave: {e}");
            ExitCode::FAILURE
        }
    }
}
