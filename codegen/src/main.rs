//! The `opal-codegen` command line.

fn main() {
    eprintln!("opal-codegen: no subcommands yet");
    std::process::exit(2);
}
