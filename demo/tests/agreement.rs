//! The demo's core run: the CPU and `emu` agree, outputs are proper distributions,
//! a seed reproduces the same numbers, and emu's dispatch path is what `emu.yaml`
//! promises (relu native, convolution through the CPU fallback).

use opal::{ops, Device};
use opal_demo::{init, max_abs_diff, run, Demo};

#[test]
fn cpu_and_emu_agree_and_emu_reports_its_dispatch_path() {
    init().unwrap();
    let demo = Demo::new(0).unwrap();
    let cpu = run(&demo, Device::cpu(), 1).unwrap();
    let emu = run(&demo, Device::parse("emu").unwrap(), 1).unwrap();
    let (a, b) = (&cpu.outputs, &emu.outputs);
    assert!(a.probs.device().is_cpu() && b.probs.device().is_cpu());
    for (x, y) in [
        (&a.log_probs, &b.log_probs),
        (&a.loss, &b.loss),
        (&a.probs, &b.probs),
    ] {
        assert_eq!(x.sizes(), y.sizes());
        let d = max_abs_diff(x, y).unwrap();
        assert!(d < 1e-5, "cpu and emu differ by {d}");
    }
    assert_eq!(a.log_probs.sizes(), &[64, 10]);
    assert_eq!(a.probs.sizes(), &[16, 10]);

    // Each CNN row is a distribution; the MLP loss of an untrained 10-class model
    // is near ln(10) = 2.3.
    let row_sums = ops::sum_dim_intlist(&a.probs, Some(&[1][..])).unwrap();
    for s in row_sums.to_vec::<f32>().unwrap() {
        assert!((s - 1.0).abs() < 1e-5, "row sums to {s}");
    }
    let loss = a.loss.item().unwrap().to_f64();
    assert!(
        loss.is_finite() && (0.5..10.0).contains(&loss),
        "loss {loss}"
    );

    // The CPU path has no fallback calls; on emu, relu runs natively and
    // convolution (not in emu.yaml) through the CPU fallback.
    assert!(cpu.steps.iter().all(|s| s.native == 0 && s.fallback == 0));
    let step = |name: &str| emu.steps.iter().find(|s| s.name == name).unwrap();
    assert!(step("relu").native > 0 && step("relu").fallback == 0);
    assert!(step("convolution").fallback > 0 && step("convolution").native == 0);
    assert_eq!(emu.steps.len(), cpu.steps.len());
}

#[test]
fn a_seed_reproduces_the_run_and_another_seed_changes_it() {
    init().unwrap();
    let loss = |seed| {
        let r = run(&Demo::new(seed).unwrap(), Device::cpu(), 1).unwrap();
        r.outputs.loss.item().unwrap().to_f64()
    };
    assert_eq!(loss(7), loss(7));
    assert_ne!(loss(7), loss(8));
}
