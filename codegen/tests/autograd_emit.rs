//! The autograd kernel generator on small inputs: what a kernel saves and records,
//! in-place variants, determinism, and a formula it cannot translate being a located
//! error that names the formula.

use opal_codegen::derivatives::load_derivatives_str;
use opal_codegen::emit::autograd::generate;
use opal_codegen::emit::RuntimePath;

const NATIVE: &str = "\
- func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
  variants: function, method
  dispatch:
    CPU: add

- func: add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)
  variants: method
  dispatch:
    CPU: add_

- func: mul.Tensor(Tensor self, Tensor other) -> Tensor
  variants: function, method
  dispatch:
    CPU: mul

- func: exp(Tensor self) -> Tensor
  variants: function, method
  dispatch:
    CPU: exp
";

fn gen(derivs: &str) -> Result<String, String> {
    let native = opal_codegen::load_str(NATIVE, "native.yaml", None).expect("native loads");
    let d = load_derivatives_str(derivs, "derivatives.yaml", &native)
        .map_err(|d| d.render(false, 200))?;
    generate(&native, &d, "aten", &RuntimePath::Opal, "native.yaml").map_err(|errs| {
        errs.iter()
            .map(|e| format!("{}:{}: {}", e.loc.line, e.loc.col, e.message))
            .collect::<Vec<_>>()
            .join("\n")
    })
}

const GOOD: &str = "\
- name: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
  self: grad
  other: maybe_multiply(grad, alpha)
  result: self_t + maybe_multiply(other_t, alpha)

- name: mul.Tensor(Tensor self, Tensor other) -> Tensor
  self: mul_tensor_backward(grad, other, self.scalar_type())
  other: mul_tensor_backward(grad, self, other.scalar_type())
  result: other_p * self_t + self_p * other_t

- name: exp(Tensor self) -> Tensor
  self: grad * result
  result: auto_element_wise
";

#[test]
fn kernels_save_what_formulas_read_and_cover_in_place_variants() {
    let code = gen(GOOD).expect("generates");
    // add: nothing saved but alpha; the in-place variant is generated too.
    assert!(code.contains("pub(crate) fn add_tensor("), "{code}");
    assert!(code.contains("pub(crate) fn add_tensor_("), "{code}");
    assert!(
        !code.contains("__saved_self = SavedTensor::input(self_, \"AddBackward0\""),
        "{code}"
    );
    assert!(code.contains("let alpha = alpha.to_owned();"), "{code}");
    // mul saves both inputs; exp saves its result.
    assert!(
        code.contains("SavedTensor::input(self_, \"MulBackward0\", \"self\")"),
        "{code}"
    );
    assert!(
        code.contains("SavedTensor::output(&result, \"ExpBackward0\", \"result\")"),
        "{code}"
    );
    // Only the gradients that are needed, and registration at the Autograd alias.
    assert!(code.contains("if __needs[1] {"), "{code}");
    assert!(code.contains("DispatchKey::Autograd"), "{code}");
    // Each kernel carries its schema.
    assert!(
        code.contains("/// Schema: `mul.Tensor(Tensor self, Tensor other) -> Tensor`"),
        "{code}"
    );
    assert_eq!(code, gen(GOOD).unwrap(), "deterministic");
}

#[test]
fn an_untranslatable_formula_is_a_located_error_naming_it() {
    // `cholesky_backward` is a PyTorch helper (so the file validates) that Opal's
    // runtime does not implement: the generator must refuse, at its place.
    let bad = "\
- name: exp(Tensor self) -> Tensor
  self: cholesky_backward(grad, false, result)
";
    let e = gen(bad).unwrap_err();
    assert!(e.starts_with("2:9: "), "{e}");
    assert!(
        e.contains("cannot translate the formula of `exp` for self"),
        "{e}"
    );
    assert!(e.contains("`cholesky_backward`"), "{e}");
}
