//! Every entry, key, dispatch key and schema token of a loaded file points at the
//! right `line:col`, including in PyTorch 2.15's own file.

use opal_codegen::model::Origin;

const SRC: &str = "\
# leading comment
- func: add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)
  structured: True   # trailing comment
  dispatch:
    CPU, CUDA: add_out
    Meta: add_out_meta

-   func: 'add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor'
    structured_delegate: add.out
    variants: function, method
";

#[test]
fn entries_keys_and_tokens_are_located() {
    let m = opal_codegen::load_str(SRC, "t.yaml", None).unwrap_or_else(|d| panic!("{d}"));
    let out = &m.functions[0];
    assert_eq!((out.loc.line, out.loc.col), (2, 1));
    let k = out.key_locs["structured"];
    assert_eq!((k.line, k.col, k.len), (3, 3, "structured".len()));
    let cpu = &out.dispatch["CPU"].loc;
    let cuda = &out.dispatch["CUDA"].loc;
    assert_eq!((cpu.line, cpu.col, cpu.len), (5, 5, 3));
    assert_eq!((cuda.line, cuda.col, cuda.len), (5, 10, 4));
    assert_eq!(&SRC[cuda.offset..cuda.offset + cuda.len], "CUDA");
    let alpha = &out.func.arguments.kwarg_only[0];
    assert_eq!(
        &SRC[alpha.loc.offset..alpha.loc.offset + alpha.loc.len],
        "Scalar alpha=1"
    );
    assert_eq!((alpha.loc.line, alpha.loc.col), (2, 47));

    // A quoted schema and a wider indentation still map exactly.
    let f = &m.functions[1];
    assert_eq!((f.loc.line, f.loc.col), (8, 1));
    assert_eq!(f.key_locs["variants"].line, 10);
    assert_eq!(f.key_locs["variants"].col, 5);
    let other = &f.func.arguments.positional[1];
    assert_eq!(
        &SRC[other.loc.offset..other.loc.offset + other.loc.len],
        "Tensor other"
    );
}

#[test]
fn pytorch_2_15_locations_point_at_their_text() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fixtures/pytorch-2.15/native_functions.yaml"
    );
    let src = std::fs::read_to_string(path).unwrap();
    let m = opal_codegen::load(path).unwrap_or_else(|d| panic!("{d}"));
    let mut checked = 0;
    for f in m.functions.iter().filter(|f| f.origin == Origin::Declared) {
        assert!(
            src[f.loc.offset..].starts_with("- func:"),
            "{}",
            f.func.name
        );
        for (key, loc) in &f.key_locs {
            assert!(src[loc.offset..].starts_with(*key), "{} {key}", f.func.name);
        }
        for (key, k) in f.dispatch.iter().filter(|(_, k)| !k.implicit) {
            assert_eq!(
                &src[k.loc.offset..k.loc.offset + k.loc.len],
                key,
                "{}",
                f.func.name
            );
        }
        for a in f.func.arguments.all() {
            assert!(
                src[a.loc.offset..a.loc.offset + a.loc.len].ends_with(&a.name)
                    || a.default.is_some()
            );
            checked += 1;
        }
        let line_start = src[..f.func.loc.offset].rfind('\n').map_or(0, |i| i + 1);
        assert_eq!(f.func.loc.col as usize, f.func.loc.offset - line_start + 1);
    }
    assert!(checked > 9_000, "{checked}");
}

#[test]
fn flow_style_and_quoted_entries_are_located_too() {
    let src =
        "- {func: \"neg(Tensor self) -> Tensor\", variants: method, dispatch: {CPU: neg_cpu}}\n";
    let m = opal_codegen::load_str(src, "flow.yaml", None).unwrap_or_else(|d| panic!("{d}"));
    let f = &m.functions[0];
    assert_eq!((f.loc.line, f.loc.col), (1, 1));
    let v = f.key_locs["variants"];
    assert_eq!(&src[v.offset..v.offset + v.len], "variants");
    let cpu = f.dispatch["CPU"].loc;
    assert_eq!(&src[cpu.offset..cpu.offset + cpu.len], "CPU");
    let a = &f.func.arguments.positional[0];
    assert_eq!(&src[a.loc.offset..a.loc.offset + a.loc.len], "Tensor self");
    // An error inside the flow entry points at the token.
    let bad = src.replace("Tensor self", "Tensr self");
    let d = opal_codegen::load_str(&bad, "flow.yaml", None).unwrap_err();
    let at = d.items[0].loc;
    assert_eq!(&bad[at.offset..at.offset + at.len], "Tensr");
}
