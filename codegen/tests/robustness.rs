//! Bad input never panics: mutated, truncated and garbage variants of a valid file
//! all come back as `Ok` or located diagnostics.

const VALID: &str = "\
- func: add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)
  structured: True
  dispatch:
    CPU, CUDA: add_out
  tags: [core, pointwise]

- func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
  structured_delegate: add.out
  variants: function, method
  autogen: add.foo
  ufunc_inner_loop:
    Generic: add (AllAndComplex)
";

/// Small deterministic generator so failures reproduce.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }
}

fn check(bytes: &[u8]) {
    match opal_codegen::load_bytes(bytes, "fuzz.yaml", Some(&["core".into()])) {
        Ok(_) => {}
        Err(d) => {
            assert!(!d.is_empty());
            let text = d.render(false, 80);
            assert!(text.contains("fuzz.yaml"));
        }
    }
}

#[test]
fn mutations_never_panic() {
    let mut rng = Lcg(42);
    let alphabet = b" -:,()[]{}*?!|.=>#'\"\n\tab_19\xff\xc3&*";
    for _ in 0..3000 {
        let mut b = VALID.as_bytes().to_vec();
        for _ in 0..1 + rng.next() % 4 {
            let at = rng.next() % b.len();
            match rng.next() % 3 {
                0 => b[at] = alphabet[rng.next() % alphabet.len()],
                1 => {
                    b.remove(at);
                }
                _ => b.insert(at, alphabet[rng.next() % alphabet.len()]),
            }
        }
        check(&b);
    }
}

#[test]
fn truncations_never_panic() {
    for n in 0..VALID.len() {
        check(&VALID.as_bytes()[..n]);
    }
}

#[test]
fn odd_documents_never_panic() {
    for doc in [
        "",
        "~",
        "42",
        "[]",
        "[1, 2]",
        "- 1",
        "- []",
        "- {}",
        "- {func: 1}",
        "- func:",
        "- func: []",
        "- func: f() -> ()\n  dispatch: 3",
        "- func: f() -> ()\n  dispatch:\n    1: 2",
        "- func: f() -> ()\n  tags: {a: b}",
        "--- \n- func: f() -> ()\n...\n",
        "- ? [a]\n  : b",
        "- !tag {func: 'f() -> ()'}",
        "- func: \"f(\\u00e9 x) -> ()\"",
    ] {
        check(doc.as_bytes());
    }
}
