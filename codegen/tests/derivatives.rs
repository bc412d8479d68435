//! `derivatives.yaml` as codegen input: PyTorch 2.15's whole file and Opal's
//! file load and validate without errors, formulas parse into the expected trees
//! and point at their text, and each kind of mistake is reported at its
//! `line:col` with a useful hint (fixtures in `tests/fixtures/derivatives/`).

use std::sync::OnceLock;

use opal_codegen::derivatives::expr::{self, BinOp, Expr, ExprKind, UnOp};
use opal_codegen::derivatives::{
    load_derivatives, load_derivatives_str, Body, Derivatives, Mode, OutputDifferentiable,
};
use opal_codegen::model::NativeFunctions;

const PYTORCH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/fixtures/pytorch-2.15/"
);
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../");
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/derivatives/");

fn pytorch_native() -> &'static NativeFunctions {
    static N: OnceLock<NativeFunctions> = OnceLock::new();
    N.get_or_init(|| {
        opal_codegen::load(format!("{PYTORCH}native_functions.yaml"))
            .unwrap_or_else(|d| panic!("{d}"))
    })
}

fn opal_native() -> &'static NativeFunctions {
    static N: OnceLock<NativeFunctions> = OnceLock::new();
    N.get_or_init(|| {
        opal_codegen::load(format!("{ROOT}runtime/native_functions.yaml"))
            .unwrap_or_else(|d| panic!("{d}"))
    })
}

fn pytorch() -> &'static Derivatives {
    static D: OnceLock<Derivatives> = OnceLock::new();
    D.get_or_init(|| {
        load_derivatives(format!("{PYTORCH}derivatives.yaml"), pytorch_native())
            .unwrap_or_else(|d| panic!("{d}"))
    })
}

fn ident(e: &Expr) -> &str {
    e.as_ident().unwrap_or_else(|| panic!("not a name: {e}"))
}

/// The callee name and arguments of a call.
fn call(e: &Expr) -> (String, &[Expr]) {
    match &e.kind {
        ExprKind::Call { callee, args } => (callee.to_string(), args),
        _ => panic!("not a call: {e}"),
    }
}

/// The receiver, method name and arguments of a method call.
fn method(e: &Expr) -> (&Expr, &str, &[Expr]) {
    match &e.kind {
        ExprKind::Member {
            receiver,
            name,
            args: Some(args),
            ..
        } => (receiver, name, args),
        _ => panic!("not a method call: {e}"),
    }
}

#[test]
fn pytorch_2_15_loads_and_validates_without_errors() {
    let d = pytorch();
    assert_eq!(d.entries.len(), 688);
    let formulas: Vec<_> = d.formulas().collect();
    assert_eq!(formulas.len(), 1388);
    let forward = formulas.iter().filter(|f| f.mode == Mode::Forward).count();
    let exprs = formulas.iter().filter(|f| f.expr().is_some()).count();
    assert_eq!(forward, 477);
    assert_eq!(exprs, 1047);
    let with_dispatch = d
        .entries
        .iter()
        .filter(|e| e.sections.iter().any(|s| s.dispatch_key.is_some()))
        .count();
    assert_eq!(with_dispatch, 14);
    let several = formulas.iter().filter(|f| f.keys.len() > 1).count();
    assert_eq!(several, 95);
    let masked = formulas.iter().filter(|f| f.uses_grad_input_mask()).count();
    assert_eq!(masked, 66);
}

#[test]
fn pytorch_2_15_formulas_parse_into_the_expected_trees() {
    let d = pytorch();
    // mul.Tensor: self is mul_tensor_backward(grad, other, self.scalar_type()).
    let mul = d.entry("mul.Tensor").expect("mul.Tensor");
    let section = mul.section(None).expect("no dispatch");
    let f = section.formula_for("self").expect("self formula");
    assert_eq!(f.mode, Mode::Backward);
    let (callee, args) = call(f.expr().expect("an expression"));
    assert_eq!(callee, "mul_tensor_backward");
    assert_eq!(args.len(), 3);
    assert_eq!((ident(&args[0]), ident(&args[1])), ("grad", "other"));
    let (recv, name, margs) = method(&args[2]);
    assert_eq!((ident(recv), name, margs.len()), ("self", "scalar_type", 0));
    let result = section.formula_for("result").expect("forward formula");
    assert_eq!(result.mode, Mode::Forward);

    // atan2: one formula for two inputs, reading grad_input_mask.
    let atan2 = d
        .entry("atan2")
        .expect("atan2")
        .section(None)
        .expect("section");
    let both = atan2.formula_for("other").expect("self, other");
    let keys: Vec<_> = both.keys.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(keys, ["self", "other"]);
    assert!(both.uses_grad_input_mask());

    // convolution: `c ? f(..., bias->sym_sizes(), ...) : std::tuple<Tensor, Tensor, Tensor>()`.
    let conv = d
        .entry("convolution")
        .expect("convolution")
        .section(None)
        .expect("s");
    let f = conv.formula_for("bias").expect("input, weight, bias");
    let ExprKind::Ternary {
        cond,
        then,
        otherwise,
    } = &f.expr().expect("expr").kind
    else {
        panic!("not a ternary: {}", f.text)
    };
    let (recv, name, _) = method(cond);
    assert_eq!((ident(recv), name), ("grad", "defined"));
    let (callee, args) = call(then);
    assert_eq!(callee, "convolution_backward_symint");
    assert!(
        matches!(&args[3].kind, ExprKind::Member { arrow: true, name, .. } if name == "sym_sizes")
    );
    let (callee, args) = call(otherwise);
    assert_eq!(
        (callee.as_str(), args.len()),
        ("std::tuple<Tensor, Tensor, Tensor>", 0)
    );

    // chunk: per-dispatch-key sections.
    let chunk = d.entry("chunk").expect("chunk");
    let keys: Vec<_> = chunk
        .sections
        .iter()
        .map(|s| s.dispatch_key.as_deref())
        .collect();
    assert_eq!(keys, [Some("Default"), Some("AutogradNestedTensor")]);
    let nested = chunk.section(Some("AutogradNestedTensor")).expect("nested");
    let (callee, _) = call(nested.formula_for("self").expect("self").expr().expect("e"));
    assert_eq!(callee, "chunk_backward_nested");

    // roll: a lambda negating its SymInt parameter.
    let roll = d.entry("roll").expect("roll").section(None).expect("s");
    let mut lambdas = Vec::new();
    roll.formula_for("self")
        .and_then(|f| f.expr())
        .expect("roll self")
        .walk(&mut |e| {
            if let ExprKind::Lambda { params, body, .. } = &e.kind {
                lambdas.push((params[0].ty.to_string(), params[0].name.clone(), body));
            }
        });
    assert_eq!(lambdas.len(), 1);
    let (ty, name, body) = &lambdas[0];
    assert_eq!((ty.as_str(), name.as_str()), ("c10::SymInt", "i"));
    assert!(
        matches!(&body.kind, ExprKind::Unary { op: UnOp::Neg, operand } if ident(operand) == "i")
    );

    // Keywords: auto_element_wise, non_differentiable, output_differentiability.
    let ceil = d.entry("ceil").expect("ceil").section(None).expect("s");
    assert_eq!(
        ceil.formula_for("result").expect("r").body,
        Body::AutoElementWise
    );
    let masked = d
        .entry("masked_fill.Scalar")
        .expect("masked_fill")
        .section(None)
        .expect("s");
    assert_eq!(
        masked.formula_for("mask").expect("mask").body,
        Body::NonDifferentiable
    );
    let copy = d.entry("_to_copy").expect("_to_copy");
    let od = copy.output_differentiability.as_ref().expect("condition");
    let [OutputDifferentiable::When(cond)] = od.values.as_slice() else {
        panic!("{od:?}")
    };
    let ExprKind::Binary { op, lhs, .. } = &cond.expr().expect("e").kind else {
        panic!("{}", cond.text)
    };
    assert_eq!(*op, BinOp::Or);
    assert!(matches!(&lhs.kind, ExprKind::Unary { op: UnOp::Not, .. }));
    let max_pool = d.entry("max_pool2d_with_indices").expect("max_pool");
    let od = &max_pool
        .output_differentiability
        .as_ref()
        .expect("od")
        .values;
    assert_eq!(
        od,
        &[
            OutputDifferentiable::Always(true),
            OutputDifferentiable::Always(false)
        ]
    );
}

#[test]
fn pytorch_2_15_formulas_point_at_their_text_and_print_back() {
    let src = std::fs::read_to_string(format!("{PYTORCH}derivatives.yaml")).unwrap();
    let mut exact = 0;
    for f in pytorch().formulas() {
        if f.exact {
            exact += 1;
            assert_eq!(&src[f.loc.offset..f.loc.offset + f.loc.len], f.text);
            let line = src.lines().nth(f.loc.line as usize - 1).unwrap();
            assert_eq!(&line[f.loc.col as usize - 1..][..f.text.len()], f.text);
        } else {
            // A formula folded over several lines is located at its key.
            assert_eq!(f.loc.offset, f.keys[0].loc.offset);
        }
        for k in &f.keys {
            assert_eq!(&src[k.loc.offset..k.loc.offset + k.loc.len], k.name);
        }
        // The canonical text parses back to itself.
        if let Some(e) = f.expr() {
            let printed = e.to_string();
            let again = expr::parse(&printed).unwrap_or_else(|err| panic!("{printed}: {err:?}"));
            assert_eq!(again.to_string(), printed);
        }
    }
    // All but the 14 formulas written over several lines.
    assert_eq!(exact, 1388 - 14);
    // Every node's span lies inside its formula and sub-spans nest.
    let e = pytorch()
        .entry("mul.Tensor")
        .unwrap()
        .section(None)
        .unwrap();
    let f = e.formula_for("self").unwrap();
    let (_, args) = call(f.expr().unwrap());
    let at = f.loc_of(args[2].span.start as usize, args[2].span.end as usize);
    assert_eq!(&src[at.offset..at.offset + at.len], "self.scalar_type()");
}

#[test]
fn opal_root_derivatives_validate_against_the_root_native_functions() {
    let d = load_derivatives(format!("{ROOT}runtime/derivatives.yaml"), opal_native())
        .unwrap_or_else(|d| panic!("{d}"));
    // The operators a training loop differentiates through.
    let needed = [
        "add.Tensor",
        "add.Scalar",
        "sub.Tensor",
        "mul.Tensor",
        "mul.Scalar",
        "div.Tensor",
        "neg",
        "exp",
        "log",
        "tanh",
        "sigmoid",
        "relu",
        "threshold_backward",
        "pow.Tensor_Tensor",
        "pow.Tensor_Scalar",
        "sqrt",
        "sum",
        "sum.dim_IntList",
        "mean.dim",
        "mm",
        "addmm",
        "bmm",
        "t",
        "transpose.int",
        "permute",
        "view",
        "unsqueeze",
        "squeeze.dim",
        "expand",
        "convolution",
        "max_pool2d_with_indices",
        "native_layer_norm",
        "_softmax",
        "_log_softmax",
        "nll_loss_forward",
        "mse_loss",
        "embedding",
        "gelu",
        "cat",
        "select.int",
        "slice.Tensor",
        "index_select",
        "where.self",
        "masked_fill.Scalar",
    ];
    for op in needed {
        let e = d.entry(op).unwrap_or_else(|| panic!("no entry for {op}"));
        let backward = e.formulas().filter(|f| f.mode == Mode::Backward).count();
        assert!(backward > 0, "{op} has no backward formula");
    }
    // Every differentiable tensor input of every entry has a backward formula.
    for e in &d.entries {
        for a in e.schema.arguments.all().filter(|a| a.ty.is_tensor_like()) {
            assert!(
                e.formulas()
                    .any(|f| f.mode == Mode::Backward && f.keys.iter().any(|k| k.name == a.name)),
                "{}: no formula for `{}`",
                e.schema.name,
                a.name
            );
        }
    }
}

/// Loads a fixture against Opal's runtime/native_functions.yaml and checks that a
/// problem of kind `code` is reported at `line:col` with a hint containing
/// `hint`, in the value and in the rendering.
fn reports(file: &str, code: &str, line: u32, col: u32, hint: &str) {
    let path = format!("{FIXTURES}{file}");
    let d = match load_derivatives(&path, opal_native()) {
        Ok(_) => panic!("{file}: loaded without errors"),
        Err(d) => d,
    };
    let found = d
        .items
        .iter()
        .find(|i| i.code == code)
        .unwrap_or_else(|| panic!("{file}: no {code} in\n{d}"));
    assert_eq!(
        (found.loc.line, found.loc.col),
        (line, col),
        "{file}: {found:?}"
    );
    let h = found.hint.as_deref().unwrap_or_default();
    assert!(h.contains(hint), "{file}: hint `{h}` lacks `{hint}`");
    // Wide enough that miette does not wrap the hint.
    let text = d.render(false, 400);
    assert!(text.contains(&format!("{path}:{line}:{col}: ")), "{text}");
    assert!(text.contains(hint), "{text}");
}

#[test]
fn each_kind_of_mistake_is_located_with_a_hint() {
    reports(
        "unknown_op.yaml",
        "opal::deriv_unknown_op",
        2,
        9,
        "did you mean `mul.Tensor`?",
    );
    reports(
        "schema_mismatch.yaml",
        "opal::deriv_schema_mismatch",
        2,
        9,
        "mul.Tensor(Tensor self, Tensor other) -> Tensor",
    );
    reports(
        "unknown_input.yaml",
        "opal::deriv_unknown_input",
        2,
        9,
        "did you mean `other`?",
    );
    reports(
        "unknown_output.yaml",
        "opal::deriv_unknown_output",
        3,
        3,
        "did you mean `result`?",
    );
    reports(
        "unknown_name.yaml",
        "opal::deriv_unknown_name",
        2,
        16,
        "did you mean `other`?",
    );
    reports(
        "unknown_function.yaml",
        "opal::deriv_unknown_function",
        2,
        9,
        "did you mean `mul_tensor_backward`?",
    );
    reports(
        "unknown_method.yaml",
        "opal::deriv_unknown_method",
        2,
        47,
        "did you mean `scalar_type`?",
    );
    reports(
        "unknown_type.yaml",
        "opal::deriv_unknown_type",
        2,
        32,
        "did you mean `Tensor`?",
    );
    reports(
        "formula_syntax.yaml",
        "opal::formula_syntax",
        2,
        26,
        "parentheses",
    );
    reports(
        "dispatch_key.yaml",
        "opal::deriv_unknown_dispatch_key",
        3,
        5,
        "did you mean `Default`?",
    );
    reports(
        "output_differentiability.yaml",
        "opal::deriv_output_differentiability",
        3,
        3,
        "returns 2 values",
    );
    reports(
        "duplicate_entry.yaml",
        "opal::deriv_duplicate_entry",
        4,
        9,
        "on line 1",
    );
    reports(
        "misplaced_keyword.yaml",
        "opal::deriv_misplaced_keyword",
        2,
        9,
        "result: auto_linear",
    );
    reports(
        "not_a_formula.yaml",
        "opal::key_type",
        2,
        10,
        "write the formula as text",
    );
    reports("yaml_syntax.yaml", "opal::yaml", 3, 2, "indentation");
    reports(
        "missing_name.yaml",
        "opal::missing_name",
        4,
        1,
        "- name: op.overload",
    );
}

#[test]
fn an_entry_with_a_bad_formula_still_has_its_other_formulas_checked() {
    let src = "- name: mul.Tensor(Tensor self, Tensor other) -> Tensor\n  self: grad * (other\n  other: grad * slf\n";
    let d = load_derivatives_str(src, "t.yaml", opal_native()).unwrap_err();
    let codes: Vec<_> = d.items.iter().map(|i| (i.code, i.loc.line)).collect();
    assert_eq!(
        codes,
        [("opal::formula_syntax", 2), ("opal::deriv_unknown_name", 3)]
    );
}

#[test]
fn many_mistakes_are_all_counted_and_the_rendering_is_bounded() {
    let mut src = String::new();
    for i in 0..120 {
        src.push_str(&format!(
            "- name: neg(Tensor self) -> Tensor\n  self: grad * unknown_{i}\n"
        ));
    }
    let d = load_derivatives_str(&src, "many.yaml", opal_native()).unwrap_err();
    // 120 unknown names and 119 duplicate entries.
    assert_eq!(d.len(), 239);
    let text = d.render(false, 100);
    assert!(
        text.contains("many.yaml: ... and 189 more errors not shown"),
        "{text}"
    );
    assert!(text.ends_with("many.yaml: 239 errors\n"), "{text}");
}

#[test]
fn truncated_formulas_give_errors_inside_the_text() {
    // Every prefix of one formula in eight: parsed or refused with a span inside
    // the text, never a panic.
    let mut refused = 0;
    for f in pytorch()
        .formulas()
        .filter(|f| f.expr().is_some())
        .step_by(8)
    {
        for cut in (0..f.text.len()).filter(|&i| f.text.is_char_boundary(i)) {
            if let Err(e) = expr::parse(&f.text[..cut]) {
                assert!(
                    e.start <= e.end && e.end <= cut,
                    "{:?}: {e:?}",
                    &f.text[..cut]
                );
                assert!(!e.message.is_empty() && !e.hint.is_empty());
                refused += 1;
            }
        }
    }
    assert!(refused > 1000, "{refused}");
}

#[test]
fn pytorch_2_15_loads_well_under_a_second_even_unoptimized() {
    let src = std::fs::read_to_string(format!("{PYTORCH}derivatives.yaml")).unwrap();
    let native = pytorch_native();
    let start = std::time::Instant::now();
    let d =
        load_derivatives_str(&src, "derivatives.yaml", native).unwrap_or_else(|d| panic!("{d}"));
    let took = start.elapsed();
    assert_eq!(d.entries.len(), 688);
    // About 0.15 s in a debug build; the bound leaves room for a busy machine.
    assert!(took.as_secs_f64() < 1.0, "took {took:?}");
}

#[test]
fn a_missing_file_is_a_located_io_error() {
    let d = load_derivatives(format!("{FIXTURES}no_such_file.yaml"), opal_native()).unwrap_err();
    assert_eq!(d.items[0].code, "opal::io");
}
