//! Unit tests of the `func:` grammar: structure of parsed schemas, locations, and
//! the errors for malformed schema strings.

use opal_codegen::model::{BaseTy, Loc, SchemaKind, Type};
use opal_codegen::parse::{parse_schema, parse_schema_at};

fn err(src: &str) -> String {
    match parse_schema(src) {
        Ok(s) => panic!("`{src}` parsed as {s}"),
        Err(d) => format!("{}:{} {} [{}]", d.loc.line, d.loc.col, d.message, d.code),
    }
}

#[test]
fn splits_positional_kwarg_and_out() {
    let s = parse_schema(
        "add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
    )
    .unwrap();
    assert_eq!(s.name.name.base, "add");
    assert_eq!(s.name.overload_name, "out");
    let names =
        |v: &[opal_codegen::model::Argument]| v.iter().map(|a| a.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&s.arguments.positional), ["self", "other"]);
    assert_eq!(names(&s.arguments.kwarg_only), ["alpha"]);
    assert_eq!(names(&s.arguments.out), ["out"]);
    assert_eq!(s.arguments.kwarg_only[0].default.as_deref(), Some("1"));
    assert!(s.arguments.out[0].is_write());
    assert_eq!(s.kind(), SchemaKind::Out);
    assert_eq!(s.returns.len(), 1);
    assert_eq!(s.returns[0].annotation.as_ref().unwrap().alias_set, ["a"]);
}

#[test]
fn operator_name_forms() {
    let inplace = parse_schema("add_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)").unwrap();
    assert!(inplace.name.name.inplace);
    assert_eq!(inplace.kind(), SchemaKind::Inplace);
    let dunder =
        parse_schema("__iand__.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)").unwrap();
    assert!(dunder.name.name.dunder_method && dunder.name.name.inplace);
    assert_eq!(dunder.name.name.base, "and");
    assert_eq!(dunder.name.to_string(), "__iand__.Tensor");
    let plain_dunder = parse_schema("__and__.Tensor(Tensor self, Tensor other) -> Tensor").unwrap();
    assert!(plain_dunder.name.name.dunder_method && !plain_dunder.name.name.inplace);
    let functional = parse_schema("_fused_functional(Tensor self) -> Tensor").unwrap();
    assert!(functional.name.name.functional_overload);
    assert_eq!(functional.name.name.base, "_fused");
    assert_eq!(functional.name.to_string(), "_fused_functional");
}

#[test]
fn types_optionals_lists_and_sizes() {
    let s = parse_schema(
        "f(Tensor?[] a, int[2] b, SymInt[]? c, Tensor(a!)[] d, Tensor(b)? e, Dimname[1]? f) -> ()",
    )
    .unwrap();
    let a = &s.arguments.positional;
    assert_eq!(
        a[0].ty,
        Type::List {
            elem: Box::new(Type::Optional(Box::new(Type::Base(BaseTy::Tensor)))),
            size: None
        }
    );
    assert_eq!(
        a[1].ty,
        Type::List {
            elem: Box::new(Type::Base(BaseTy::Int)),
            size: Some(2)
        }
    );
    assert!(a[2].ty.is_optional());
    assert!(a[3].is_write());
    assert_eq!(a[3].ty.to_string(), "Tensor[]");
    assert_eq!(a[4].ty.to_string(), "Tensor?");
    assert_eq!(a[5].ty.base(), BaseTy::Dimname);
    assert!(s.returns.is_empty());
    assert_eq!(s.kind(), SchemaKind::Mutable);
    assert_eq!(
        s.to_string(),
        "f(Tensor?[] a, int[2] b, SymInt[]? c, Tensor(a!)[] d, Tensor(b)? e, Dimname[1]? f) -> ()"
    );
}

#[test]
fn annotations_with_wildcards_and_sets() {
    let s = parse_schema("split(Tensor(a -> *) self, int n) -> Tensor(a)[]").unwrap();
    let ann = s.arguments.positional[0].annotation.as_ref().unwrap();
    assert_eq!(ann.alias_set, ["a"]);
    assert_eq!(ann.alias_set_after, ["*"]);
    assert!(!ann.is_write);
    let s = parse_schema("g(Tensor(a|b!) x) -> ()").unwrap();
    assert_eq!(
        s.arguments.positional[0]
            .annotation
            .as_ref()
            .unwrap()
            .alias_set,
        ["a", "b"]
    );
    assert_eq!(s.to_string(), "g(Tensor(a|b!) x) -> ()");
}

#[test]
fn defaults_keep_their_literal_form() {
    let src = "f(int a=-1, int[] b=[0,1], str c=\"mean\", int d=Mean, MemoryFormat e=contiguous_format, ScalarType? f=long, float g=1e-05, bool h=True, Tensor? i=None, str j='fro', Scalar k=0.5) -> Tensor";
    let s = parse_schema(src).unwrap();
    let d: Vec<_> = s
        .arguments
        .positional
        .iter()
        .map(|a| a.default.clone().unwrap())
        .collect();
    assert_eq!(
        d,
        [
            "-1",
            "[0,1]",
            "\"mean\"",
            "Mean",
            "contiguous_format",
            "long",
            "1e-05",
            "True",
            "None",
            "'fro'",
            "0.5"
        ]
    );
    assert_eq!(s.to_string(), src);
}

#[test]
fn returns_named_single_and_tuple() {
    let s = parse_schema("f(Tensor x) -> Tensor output").unwrap();
    assert_eq!(s.returns[0].name.as_deref(), Some("output"));
    assert_eq!(s.to_string(), "f(Tensor x) -> Tensor output");
    let s = parse_schema("f(Tensor x) -> (Tensor values, Tensor indices)").unwrap();
    assert_eq!(s.returns.len(), 2);
    // one return in parentheses prints without them, as torchgen does
    assert_eq!(
        parse_schema("f(Tensor x) -> (Tensor)").unwrap().to_string(),
        "f(Tensor x) -> Tensor"
    );
}

#[test]
fn namespace_prefix_is_dropped() {
    let s = parse_schema("quantized::f(Tensor x) -> Tensor").unwrap();
    assert_eq!(s.to_string(), "f(Tensor x) -> Tensor");
    assert_eq!(
        opal_codegen::parse::split_namespace("quantized::f(Tensor x) -> Tensor").0,
        "quantized"
    );
    assert_eq!(
        opal_codegen::parse::split_namespace("f(Tensor x) -> Tensor").0,
        "aten"
    );
}

#[test]
fn token_locations_are_shifted_by_the_base() {
    let base = Loc {
        offset: 100,
        len: 0,
        line: 7,
        col: 9,
    };
    let s = parse_schema_at("abs(Tensor self, int dim) -> Tensor", base).unwrap();
    let dim = &s.arguments.positional[1];
    assert_eq!(
        (dim.loc.line, dim.loc.col, dim.loc.offset),
        (7, 9 + 17, 117)
    );
    assert_eq!(dim.loc.len, "int dim".len());
    let e = parse_schema_at("abs(Tensr self) -> Tensor", base).unwrap_err();
    assert_eq!(
        (e.loc.line, e.loc.col, e.loc.offset, e.loc.len),
        (7, 13, 104, 5)
    );
    assert_eq!(e.hint.as_deref(), Some("did you mean `Tensor`?"));
}

#[test]
fn rejects_malformed_schemas() {
    assert_eq!(
        err("f(Tensr x) -> Tensor"),
        "1:3 unknown type `Tensr` [opal::unknown_type]"
    );
    assert_eq!(
        err("f(Tensor x=1) -> Tensor"),
        "1:12 default `1` cannot be a value of type `Tensor` [opal::bad_default]"
    );
    assert_eq!(
        err("f(int x=1.5) -> Tensor"),
        "1:9 default `1.5` cannot be a value of type `int` [opal::bad_default]"
    );
    assert_eq!(
        err("f(bool x=1) -> Tensor"),
        "1:10 default `1` cannot be a value of type `bool` [opal::bad_default]"
    );
    assert_eq!(
        err("f(int x=None) -> Tensor"),
        "1:9 default `None` cannot be a value of type `int` [opal::bad_default]"
    );
    assert_eq!(
        err("f(str x=mean) -> Tensor"),
        "1:9 default `mean` cannot be a value of type `str` [opal::bad_default]"
    );
    assert_eq!(
        err("f(Tensor x, int x) -> Tensor"),
        "1:17 argument `x` is declared twice [opal::duplicate_argument]"
    );
    assert_eq!(
        err("f(Tensor x) Tensor"),
        "1:13 expected ` -> ` and the returns, found `Tensor` [opal::schema_syntax]"
    );
    assert_eq!(
        err("f(Tensor x -> Tensor"),
        "1:12 expected `,` or `)` after an argument, found `->` [opal::schema_syntax]"
    );
    assert_eq!(
        err("f.2x(Tensor x) -> Tensor"),
        "1:3 expected an overload name after `.`, found `2` [opal::schema_syntax]"
    );
    assert_eq!(
        err("f(Tensor 2x) -> Tensor"),
        "1:10 expected an argument name, found `2` [opal::schema_syntax]"
    );
    assert_eq!(
        err("f(Tensor x-y) -> Tensor"),
        "1:11 expected `,` or `)` after an argument, found `-` [opal::schema_syntax]"
    );
    assert_eq!(
        err("f(Tensor é) -> Tensor"),
        "1:10 unexpected character `é` in schema [opal::schema_syntax]"
    );
    assert_eq!(
        err("f(int(a) x) -> Tensor"),
        "1:6 alias annotation on `int` [opal::schema_syntax]"
    );
    assert_eq!(
        err("f(Tensor(A) x) -> Tensor"),
        "1:10 alias set `A` is not lowercase [opal::schema_syntax]"
    );
    assert_eq!(
        err("f(*, *, Tensor x) -> Tensor"),
        "1:6 second `*` in the arguments [opal::schema_syntax]"
    );
    assert_eq!(
        err("f(Tensor x, *) -> Tensor"),
        "1:13 `*` is not followed by any argument [opal::schema_syntax]"
    );
    assert_eq!(
        err("f_out(Tensor x) -> Tensor"),
        "1:1 operator name `f_out` ends in `_out` [opal::reserved_name]"
    );
    assert_eq!(
        err("f(*, Tensor(a!) out, int n) -> Tensor(a!)"),
        "1:22 keyword-only argument `n` comes after the out arguments [opal::out_order]"
    );
    assert_eq!(
        err("f(str s=\"abc) -> Tensor"),
        "1:9 unterminated string literal [opal::schema_syntax]"
    );
    assert_eq!(
        err("f(Tensor x) -> Tensor a b"),
        "1:25 expected the end of the schema, found `b` [opal::schema_syntax]"
    );
    assert_eq!(
        err(""),
        "1:1 expected an operator name, found the end of the schema [opal::schema_syntax]"
    );
}
