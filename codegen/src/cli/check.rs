//! `opal-codegen check <native_functions.yaml> [--tags <tags.yaml>]`: load,
//! validate and check the Rust names (what `generate` would refuse), then print a
//! one-line summary (exit 0) or every problem (exit 1).

use std::path::PathBuf;
use std::process::ExitCode;

use opal_codegen::model::Origin;

use super::{fail, Run};

/// Check a native_functions.yaml: parse, apply torchgen's rules, report all errors.
#[derive(clap::Args, Debug)]
pub struct Check {
    /// The native_functions.yaml to check.
    pub yaml: PathBuf,
    /// The tags.yaml defining valid tags (default: tags.yaml beside the YAML, if any).
    #[arg(long)]
    pub tags: Option<PathBuf>,
}

impl Run for Check {
    fn run(self) -> ExitCode {
        let beside = self.yaml.with_file_name("tags.yaml");
        let tags = self.tags.or_else(|| beside.is_file().then_some(beside));
        match opal_codegen::load_with_tags(&self.yaml, tags.as_deref()) {
            Ok(model) => {
                // What `generate` would refuse (Rust names that collide) is an error
                // here too, so a file that passes `check` generates.
                if let Err(errs) = opal_codegen::emit::check_names(&model) {
                    return fail(&opal_codegen::builder::emit_diagnostics(&self.yaml, &errs));
                }
                let generated = model
                    .functions
                    .iter()
                    .filter(|f| matches!(f.origin, Origin::Autogen { .. }))
                    .count();
                let declared = model.functions.len() - generated;
                let tags = match &tags {
                    Some(t) => format!("tags from {}", t.display()),
                    None => "tags unchecked (no tags.yaml)".to_string(),
                };
                println!(
                    "{}: ok, {declared} entries, {} functions ({generated} from autogen), {tags}",
                    self.yaml.display(),
                    model.functions.len(),
                );
                // The process ends here: its memory goes back at once, without
                // visiting every function's allocations one by one.
                std::mem::forget(model);
                ExitCode::SUCCESS
            }
            Err(d) => fail(&d),
        }
    }
}
