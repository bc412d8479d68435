//! The composite kernels `composites.yaml` lists are registered at their alias keys
//! by the dispatcher itself (no init call), and the runtime's own registrations
//! report no failure.

use opal::dispatch::{DispatchKey, Dispatcher};

/// `(op, key)` for every entry of the file, read as plain text (the codegen crate
/// owns the real loader; this only needs the names).
fn listed() -> Vec<(String, DispatchKey)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/composites.yaml");
    let text = std::fs::read_to_string(path).expect("composites.yaml ships with the crate");
    let mut key = None;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if let Some(k) = line.strip_suffix(':') {
            key = Some(DispatchKey::from_name(k).expect("an alias key"));
        } else if let Some(entry) = line.trim().strip_prefix("- ") {
            let op = entry.split(':').next().expect("op: kernel").trim();
            out.push((
                format!("aten::{op}"),
                key.expect("a key before its entries"),
            ));
        }
    }
    out
}

#[test]
fn every_listed_composite_is_registered_at_its_key() {
    let d = Dispatcher::global();
    d.startup_result()
        .expect("the runtime's registrations succeeded");
    opal::ops::init().expect("operators define");
    let listed = listed();
    assert!(listed.len() >= 17, "{listed:?}");
    for (op, key) in listed {
        let handle = d.find(&op).unwrap_or_else(|| panic!("{op} is defined"));
        assert!(
            handle.has_kernel_for(key),
            "{op} has no kernel at {key:?}: {}",
            handle.dump_table()
        );
    }
}

#[test]
fn a_composite_runs_on_the_cpu_without_a_backend_kernel() {
    opal_cpu::init().expect("cpu backend");
    let x = opal::Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let r = opal::ops::reshape(&x, &[3, 2]).unwrap();
    assert_eq!(r.sizes(), &[3, 2]);
    assert_eq!(
        Vec::<f32>::try_from(&r).unwrap(),
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
}
