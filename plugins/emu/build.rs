//! Puts `emu.opal-plugin.json` beside the library cargo builds (`target/<profile>/`),
//! so that `OPAL_PLUGIN_PATH=target/<profile>` finds the plugin after a plain
//! `cargo build -p opal-emu-plugin`. (OUT_DIR is `target/<profile>/build/<pkg>-<hash>/out`.)

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=emu.opal-plugin.json");
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        return;
    };
    let Some(profile_dir) = out.ancestors().nth(3) else {
        return;
    };
    let dst = profile_dir.join("emu.opal-plugin.json");
    if let Err(e) = std::fs::copy("emu.opal-plugin.json", &dst) {
        println!(
            "cargo:warning=could not copy the plugin manifest to {}: {e}",
            dst.display()
        );
    }
}
