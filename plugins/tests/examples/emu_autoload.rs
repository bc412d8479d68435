//! A program that depends on `opal` and `opal-cpu` only and still runs on "emu":
//! the device comes from the emu plugin, autoloaded from `OPAL_PLUGIN_PATH`.
//!
//! ```sh
//! cargo build --release -p opal-emu-plugin
//! OPAL_PLUGIN_PATH=target/release cargo run --release -p opal-plugin-tests --example emu_autoload
//! ```

use opal::{ops, Device, Tensor};

fn main() -> opal::Result<()> {
    opal_cpu::init()?;
    let emu = Device::parse("emu")?; // unknown name: plugins are autoloaded here
    let a = Tensor::from_slice(&[1.0f32, -2.0, 3.0], &[3])?.to(emu)?;
    let b = ops::relu(&ops::add_tensor(&a, &a)?)?;
    println!(
        "relu(a + a) on {} = {:?}",
        b.device(),
        b.to(Device::cpu())?.to_vec::<f32>()?
    );
    for p in opal::plugins() {
        println!(
            "plugin {} from {}: {}",
            p.name,
            p.manifest.display(),
            match &p.result {
                Ok(()) => "loaded".to_string(),
                Err(e) => format!("failed: {e}"),
            }
        );
    }
    Ok(())
}
