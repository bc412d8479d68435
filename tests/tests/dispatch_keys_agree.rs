//! The runtime's dispatch keys (`opal::dispatch::DispatchKey`, the one list the
//! dispatcher uses) and the key names the code generator knows or emits agree:
//! every key generated code names exists in the runtime, and every backend,
//! autograd and alias key of the runtime is a name codegen accepts in
//! `native_functions.yaml`. (How to add a key: `docs/design.md`, "Dispatch keys".)

use opal::dispatch::DispatchKey;
use opal_codegen::backend::BackendKey;
use opal_codegen::dispatch_keys as keys;

fn runtime_key(name: &str) -> DispatchKey {
    DispatchKey::from_name(name)
        .unwrap_or_else(|| panic!("codegen names key `{name}`, which the runtime lacks"))
}

#[test]
fn every_key_codegen_emits_exists_in_the_runtime() {
    for k in BackendKey::ALL {
        let key = runtime_key(k.as_str());
        assert!(key.is_backend(), "{} is not a backend key", k.as_str());
        let autograd = runtime_key(k.autograd_key());
        assert!(
            autograd.is_autograd(),
            "{} is not an autograd key",
            k.autograd_key()
        );
    }
    for name in opal_codegen::composite::KEYS
        .iter()
        .chain(&keys::COMPOSITES)
    {
        assert!(runtime_key(name).is_alias(), "{name} is not an alias key");
    }
}

#[test]
fn every_registrable_runtime_key_is_a_name_codegen_accepts() {
    let registrable = DispatchKey::RUNTIME
        .iter()
        .chain(DispatchKey::ALIASES)
        .filter(|k| k.is_backend() || k.is_autograd() || k.is_alias());
    let mut checked = 0;
    let mut unknown = Vec::new();
    for k in registrable {
        if !keys::is_known(k.name()) {
            unknown.push(k.name());
        }
        checked += 1;
    }
    assert!(
        unknown.is_empty(),
        "runtime keys unknown to codegen (validate::keys): {unknown:?}"
    );
    assert!(checked > 20, "only {checked} keys checked");
}
