//! Pinned-schema compatibility: which differences between the schema a kernel was
//! written against and the current one an adapter can bridge, and the precise error
//! for everything else.

use opal_codegen::backend::{classify, Compat, Incompatibility};
use opal_codegen::parse::parse_schema;

fn check(pinned: &str, current: &str) -> Result<Compat, Incompatibility> {
    let p = parse_schema(pinned).expect("pinned parses");
    let c = parse_schema(current).expect("current parses");
    classify(&p, &c)
}

fn added(pinned: &str, current: &str) -> Vec<(usize, String, String)> {
    match check(pinned, current) {
        Ok(Compat::Adapter { added }) => added
            .into_iter()
            .map(|a| (a.index, a.name, a.default))
            .collect(),
        other => panic!("expected an adapter, got {other:?}"),
    }
}

fn error(pinned: &str, current: &str) -> Incompatibility {
    match check(pinned, current) {
        Err(e) => e,
        Ok(c) => panic!("expected an error, got {c:?}"),
    }
}

#[test]
fn same_schema_and_identical_representations() {
    let s = "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor";
    assert_eq!(check(s, s), Ok(Compat::Identical));
    // int/SymInt, int[]/SymInt[], fixed sizes, and a changed default keep the Rust
    // signature the kernel was written for.
    assert_eq!(
        check(
            "view(Tensor(a) self, int[] size) -> Tensor(a)",
            "view(Tensor(a) self, SymInt[] size) -> Tensor(a)"
        ),
        Ok(Compat::Identical)
    );
    assert_eq!(
        check(
            "narrow(Tensor(a) self, int dim, int start, int length) -> Tensor(a)",
            "narrow(Tensor(a) self, int dim, SymInt start, SymInt length) -> Tensor(a)"
        ),
        Ok(Compat::Identical)
    );
    assert_eq!(
        check(
            "max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[]) -> Tensor",
            "max_pool2d(Tensor self, SymInt[2] kernel_size, SymInt[] stride=[1, 1]) -> Tensor"
        ),
        Ok(Compat::Identical)
    );
}

#[test]
fn added_defaulted_arguments_anywhere_get_an_adapter() {
    assert_eq!(
        added(
            "sum(Tensor self) -> Tensor",
            "sum(Tensor self, *, ScalarType? dtype=None) -> Tensor"
        ),
        vec![(1, "dtype".to_string(), "None".to_string())]
    );
    // In the middle of the positional arguments, and several at once.
    assert_eq!(
        added(
            "gelu(Tensor self, Tensor other) -> Tensor",
            "gelu(Tensor self, str approximate='none', Tensor other, *, bool fast=False, int[] dims=[0, 1]) -> Tensor"
        ),
        vec![
            (1, "approximate".to_string(), "'none'".to_string()),
            (3, "fast".to_string(), "False".to_string()),
            (4, "dims".to_string(), "[0, 1]".to_string()),
        ]
    );
    // Before an out argument.
    assert_eq!(
        added(
            "mul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
            "mul.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)"
        ),
        vec![(2, "alpha".to_string(), "1".to_string())]
    );
}

#[test]
fn a_new_required_argument_is_an_error() {
    let e = error(
        "relu(Tensor self) -> Tensor",
        "relu(Tensor self, float slope) -> Tensor",
    );
    assert!(
        e.message.contains("new required argument 'float slope'"),
        "{}",
        e.message
    );
    assert!(e.hint.contains("update the kernel"), "{}", e.hint);
    // A new out argument can never be defaulted.
    let e = error(
        "relu(Tensor self) -> Tensor",
        "relu(Tensor self, *, Tensor(a!) out) -> Tensor",
    );
    assert!(e.message.contains("new required argument"), "{}", e.message);
}

#[test]
fn retyped_removed_renamed_reordered_arguments_are_errors() {
    let e = error(
        "std(Tensor self, int? correction=None) -> Tensor",
        "std(Tensor self, Scalar? correction=None) -> Tensor",
    );
    assert_eq!(
        e.message,
        "argument 'correction' of 'std' was retyped: pinned int? -> current Scalar?"
    );
    let e = error(
        "foo(Tensor self, float scale) -> Tensor",
        "foo(Tensor self) -> Tensor",
    );
    assert!(
        e.message
            .contains("'float scale' of the pinned schema is not in the current 'foo'"),
        "{}",
        e.message
    );
    let e = error(
        "foo(Tensor input, int dim) -> Tensor",
        "foo(Tensor self, int dim) -> Tensor",
    );
    assert!(
        e.message.contains("was 'input' renamed to 'self'?"),
        "{}",
        e.message
    );
    assert!(
        e.hint.contains("write 'Tensor self' in the pinned `func:`"),
        "{}",
        e.hint
    );
    let e = error(
        "foo(Tensor self, int a, int b) -> Tensor",
        "foo(Tensor self, int b, int a) -> Tensor",
    );
    assert!(e.message.contains("reordered"), "{}", e.message);
}

#[test]
fn changed_returns_and_annotations_are_errors() {
    let e = error(
        "max.dim(Tensor self, int dim) -> Tensor",
        "max.dim(Tensor self, int dim) -> (Tensor values, Tensor indices)",
    );
    assert_eq!(
        e.message,
        "the returns of 'max.dim' changed: pinned Tensor -> current (Tensor, Tensor)"
    );
    let e = error(
        "foo(Tensor self) -> Tensor",
        "foo(Tensor(a!) self) -> Tensor",
    );
    assert!(
        e.message.contains("alias annotation of argument 'self'"),
        "{}",
        e.message
    );
}

#[test]
fn errors_point_at_both_schemas() {
    let p = parse_schema("sum(Tensor self, *, int? dtype=None) -> Tensor").unwrap();
    let c = parse_schema("sum(Tensor self, *, ScalarType? dtype=None) -> Tensor").unwrap();
    let e = classify(&p, &c).unwrap_err();
    let dtype_p = &p.arguments.kwarg_only[0];
    let dtype_c = &c.arguments.kwarg_only[0];
    assert_eq!(e.pinned_loc, dtype_p.loc);
    assert_eq!(e.current_loc, dtype_c.loc);
}
