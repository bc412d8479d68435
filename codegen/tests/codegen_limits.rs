//! Inputs built to be slow, huge or deep: each is a located error or a
//! bounded result, never a panic, and stays fast. The time bounds are loose (debug
//! builds on a shared machine); the cases they guard took 5–75 s in a release build
//! before the limits existed.

use std::time::{Duration, Instant};

use opal_codegen::diagnostics::{Diagnostics, MAX_RENDERED};
use opal_codegen::emit::{generate, EmitOptions};

/// Loads `src` (no tags), checking it fails within `secs` seconds.
fn load_err(src: &str, secs: u64) -> Diagnostics {
    let t = Instant::now();
    let r = opal_codegen::load_str(src, "limits.yaml", None);
    let took = t.elapsed();
    assert!(took < Duration::from_secs(secs), "took {took:?}");
    match r {
        Ok(_) => panic!("loaded"),
        Err(d) => d,
    }
}

/// The first diagnostic has `code` at `line`, and the rendering names the place.
fn located(d: &Diagnostics, code: &str, line: u32) {
    let first = &d.items[0];
    assert_eq!(first.code, code, "{d}");
    assert_eq!(first.loc.line, line, "{d}");
    assert!(first.hint.is_some(), "{d}");
    let text = d.render(false, 100);
    let at = format!("limits.yaml:{line}:{}", first.loc.col);
    assert!(text.contains(&at), "no {at} in:\n{text}");
}

#[test]
fn a_column_past_65535_renders() {
    let src = format!(
        "- func: f(Tensor self) -> Tensor\n  variants: {}bogus\n",
        " ".repeat(70_000)
    );
    let d = load_err(&src, 10);
    located(&d, "opal::bad_variant", 2);
    let text = d.render(false, 100);
    assert!(text.contains("limits.yaml:2:70013"), "{text}");
    assert!(text.contains("bogus"), "{text}");
    // The snippet is a window of the line, not 70,000 spaces.
    assert!(text.len() < 4_000, "{} bytes", text.len());
}

#[test]
fn deep_flow_nesting_is_refused_fast() {
    let n = 40_000;
    let src = format!(
        "- func: f() -> ()\n  x: {}{}\n",
        "[".repeat(n),
        "]".repeat(n)
    );
    let d = load_err(&src, 10);
    located(&d, "opal::yaml_too_deep", 2);
}

#[test]
fn deep_flow_nesting_in_tags_and_backend_yaml_is_refused() {
    let deep = format!("- tag: {}\n", "{".repeat(5_000));
    let errs = opal_codegen::parse::parse_tags(&deep).unwrap_err();
    assert_eq!(errs[0].code, "opal::yaml_too_deep");
    let backend = format!("backend: Emu\nsupported: {}\n", "[".repeat(5_000));
    let e = opal_codegen::backend::load_bytes("b.yaml", backend.as_bytes()).unwrap_err();
    assert!(e.render(false, 100).contains("b.yaml:2:"), "{e}");
}

#[test]
fn balanced_brackets_are_not_nesting() {
    // Many bracket pairs in a row are fine: only open ones count.
    let list = "[1]".repeat(5_000);
    let src = format!("- func: f(int[] a) -> ()\n  tags: [core]\n# {list}\n");
    if let Err(d) = opal_codegen::load_str(&src, "limits.yaml", None) {
        panic!("{d}");
    }
}

#[test]
fn sixty_four_thousand_arguments_are_refused_fast() {
    let args: Vec<String> = (0..65_536).map(|i| format!("Tensor a{i}")).collect();
    let src = format!("- func: f({}) -> Tensor\n", args.join(", "));
    let d = load_err(&src, 10);
    located(&d, "opal::schema_too_large", 1);
}

#[test]
fn too_many_arguments_point_at_the_first_one_past_the_limit() {
    let args: Vec<String> = (0..300).map(|i| format!("int a{i}")).collect();
    let schema = format!("f({}) -> ()", args.join(", "));
    let e = opal_codegen::parse::parse_schema(&schema).unwrap_err();
    assert_eq!(e.code, "opal::schema_too_large");
    assert_eq!(e.loc.offset, schema.find("int a256").unwrap(), "{e}");
    // The limit itself is fine.
    let args: Vec<String> = (0..256).map(|i| format!("int a{i}")).collect();
    assert!(opal_codegen::parse::parse_schema(&format!("f({}) -> ()", args.join(", "))).is_ok());
}

#[test]
fn many_returns_long_schemas_deep_types_and_deep_defaults_are_refused() {
    let rets = vec!["Tensor"; 300].join(", ");
    let cases = [
        format!("f() -> ({rets})"),
        format!("f(str a=\"{}\") -> ()", "x".repeat(20_000)),
        format!("f(Tensor{} a) -> ()", "?".repeat(10_000)),
        format!(
            "f(int[] a={}1{}) -> ()",
            "[".repeat(10_000),
            "]".repeat(10_000)
        ),
    ];
    for schema in &cases {
        let e = opal_codegen::parse::parse_schema(schema).unwrap_err();
        assert_eq!(e.code, "opal::schema_too_large", "{e}");
        assert!(e.hint.is_some());
    }
}

#[test]
fn two_thousand_errors_after_a_ten_megabyte_line_render_fast_and_capped() {
    let mut src = format!("- func: f() -> ()\n  doc: \"{}\"\n", "x".repeat(10_000_000));
    for i in 0..2000 {
        src.push_str(&format!("- func: g{i}(Tensr a) -> Tensor\n"));
    }
    let t = Instant::now();
    let d = load_err(&src, 30);
    // Every error is counted, the first MAX_RENDERED are shown.
    assert!(d.len() >= 2000, "{}", d.len());
    let text = d.render(false, 100);
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    let more = d.len() - MAX_RENDERED;
    assert!(
        text.contains(&format!("and {more} more errors not shown")),
        "{}",
        &text[text.len().saturating_sub(500)..]
    );
    assert!(text.contains(&format!("limits.yaml: {} errors", d.len())));
    assert_eq!(text.matches("\n  × ").count(), MAX_RENDERED);
    assert!(text.len() < 200_000, "{} bytes", text.len());
}

#[test]
fn eight_thousand_defaulted_arguments_are_refused_before_generation() {
    let args: Vec<String> = (0..8000).map(|i| format!("int a{i}=1")).collect();
    let src = format!("- func: f(Tensor self, *, {}) -> Tensor\n", args.join(", "));
    let d = load_err(&src, 10);
    located(&d, "opal::schema_too_large", 1);
}

#[test]
fn generated_code_at_the_limits_stays_small() {
    // As many defaulted arguments as allowed, in a schema as long as allowed.
    let per = opal_codegen::parse::limits::SCHEMA_LEN / opal_codegen::parse::limits::ARGS;
    let args: Vec<String> = (0..opal_codegen::parse::limits::ARGS - 1)
        .map(|i| format!("str a{i:03}=\"{}\"", "x".repeat(per - 16)))
        .collect();
    let src = format!("- func: f(Tensor self, *, {}) -> Tensor\n", args.join(", "));
    let nf = opal_codegen::load_str(&src, "limits.yaml", None).unwrap_or_else(|d| panic!("{d}"));
    let t = Instant::now();
    let out = generate(&nf, &EmitOptions::default()).expect("generates");
    let bytes: usize = out.files.iter().map(|(_, s)| s.len()).sum();
    assert!(bytes < 64 << 20, "{bytes} bytes");
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
}

#[test]
fn backend_yaml_with_two_documents_is_located() {
    let src = "backend: Emu\ndispatch_key: PrivateUse1\n---\nbackend: X\n";
    let e = opal_codegen::backend::load_bytes("two.yaml", src.as_bytes()).unwrap_err();
    let text = e.render(false, 100);
    assert!(text.contains("two.yaml:3:1"), "{text}");
    assert!(text.contains("help:"), "{text}");
}

#[test]
fn backend_yaml_alias_bomb_is_located() {
    let mut src =
        String::from("backend: Emu\ndispatch_key: PrivateUse1\na: &a [x,x,x,x,x,x,x,x,x]\n");
    let mut prev = 'a';
    for c in "bcdefghi".chars() {
        src.push_str(&format!(
            "{c}: &{c} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
        ));
        prev = c;
    }
    let e = opal_codegen::backend::load_bytes("bomb.yaml", src.as_bytes()).unwrap_err();
    let text = e.render(false, 100);
    assert!(text.contains("bomb.yaml:4:"), "{text}");
}

#[test]
fn native_yaml_with_two_documents_is_located() {
    let d = load_err("- func: f() -> ()\n---\n- func: g() -> ()\n", 10);
    located(&d, "opal::yaml", 2);
}
