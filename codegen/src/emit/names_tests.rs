//! The names the operator plan gives the adversarial fixture's operators and
//! arguments (`tests/fixtures/adversarial/`): colliding ones are mangled, none is
//! dropped. A unit test, since the plan is internal; `tests/names.rs` checks the
//! errors through the public API.

use std::collections::BTreeMap;

use super::plan::plan;

fn fixture() -> String {
    format!(
        "{}/tests/fixtures/adversarial/native_functions.yaml",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn adversarial_names_are_mangled_not_dropped() {
    let nf = crate::load(fixture()).unwrap_or_else(|d| panic!("{d}"));
    let p = plan(&nf, "aten").unwrap_or_else(|e| panic!("{e:?}"));
    assert!(p.unsupported.is_empty(), "{:?}", p.unsupported);
    assert_eq!(p.ops.len(), nf.functions.len());
    let idents: BTreeMap<&str, &str> = p
        .ops
        .iter()
        .map(|o| (o.op_name.as_str(), o.ident_str.as_str()))
        .collect();
    for (op, ident) in [
        ("prelude", "prelude_op"),
        ("support", "support_op"),
        ("init", "init_op"),
        ("TensorOps", "TensorOps_op"),
        ("Tensor", "Tensor_op"),
        ("None", "None_op"),
        ("i64", "i64_op"),
        ("std", "std_op"),
        // Items inside each operator's own module do not clash with operators.
        ("DEF", "DEF"),
        ("call", "call"),
        ("Sig", "Sig"),
        ("prelude_", "prelude_"),
        ("Self", "Self_"),
        ("where", "where"),
    ] {
        assert_eq!(idents.get(op).copied(), Some(ident), "operator `{op}`");
    }
    let args = p.ops.iter().find(|o| o.op_name == "arg_names").unwrap();
    let names: BTreeMap<&str, &str> = args
        .args
        .iter()
        .map(|a| (a.arg.name.as_str(), a.name.as_str()))
        .collect();
    for (arg, ident) in [
        ("DEF", "DEF_"),
        ("SLOT", "SLOT_"),
        ("ks", "ks_"),
        ("opts", "opts_"),
        ("None", "None_"),
        ("Tensor", "Tensor_"),
        ("default", "default_"),
        ("Sig", "Sig"),
        ("call", "call"),
        ("type", "type"),
    ] {
        assert_eq!(names.get(arg).copied(), Some(ident), "argument `{arg}`");
    }
}
