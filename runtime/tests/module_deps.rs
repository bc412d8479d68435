//! The runtime core's import rule (docs/design.md, "Module layers"): `tensor` is
//! built on the dispatch keys only, `dispatch` on tensors' key sets and their
//! op-call interface, `autograd` on both, and the backward formulas
//! (`derivatives`) on operators only. A path `crate::<module>::...` in a file of
//! a module that may not use it fails this test, naming the file, line and path.
//! Comments are not scanned; generated code (in `OUT_DIR`) is not either.

use std::fs;
use std::path::{Path, PathBuf};

/// A module, the modules it may not name, and the paths into those it still may
/// (each with why).
struct Rule {
    module: &'static str,
    forbidden: &'static [&'static str],
    allowed: &'static [(&'static str, &'static str)],
}

const RULES: &[Rule] = &[
    Rule {
        module: "tensor",
        forbidden: &[
            "autograd",
            "derivatives",
            "dispatch",
            "ivalue",
            "composite",
            "plugin",
            "startup",
            "ops",
        ],
        allowed: &[
            ("dispatch::DispatchKey", "a tensor carries its key set"),
            ("dispatch::DispatchKeySet", "a tensor carries its key set"),
            (
                "ops::_to_copy",
                "printing a tensor off the host copies it to the CPU first",
            ),
        ],
    },
    Rule {
        module: "dispatch",
        forbidden: &[
            "autograd",
            "derivatives",
            "composite",
            "ops",
            "plugin",
            "tensor",
            "startup",
        ],
        allowed: &[
            (
                "tensor::with_op_holds_dyn",
                "the tensor module's op-call interface",
            ),
            ("tensor::OpArg", "the tensor module's op-call interface"),
            ("tensor::OpChecks", "the tensor module's op-call interface"),
            (
                "startup::register_runtime_kernels",
                "the global dispatcher is filled once, by the layer above",
            ),
        ],
    },
    Rule {
        module: "autograd",
        forbidden: &["derivatives", "composite", "plugin", "startup"],
        allowed: &[],
    },
    Rule {
        module: "derivatives",
        forbidden: &[
            "autograd",
            "dispatch",
            "tensor",
            "composite",
            "plugin",
            "startup",
        ],
        allowed: &[("tensor::wrap_dim", "dims wrap by the one rule")],
    },
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The line without its `//` comment (a `//` inside a string literal is rare in
/// import lines and only shortens what is scanned).
fn code_of(line: &str) -> &str {
    line.find("//").map_or(line, |i| &line[..i])
}

/// The full paths of a use tree starting at `s` (after `crate::`): `a::b`,
/// `a::{b, c::d}` -> `a::b`, `a::c::d`. Returns the paths and the bytes read.
fn use_tree(s: &str) -> (Vec<String>, usize) {
    let b = s.as_bytes();
    let mut i = 0;
    let mut prefix = String::new();
    loop {
        if b.get(i) == Some(&b'{') {
            i += 1;
            let mut paths = Vec::new();
            loop {
                while matches!(b.get(i), Some(b' ' | b',' | b'\n' | b'\t')) {
                    i += 1;
                }
                match b.get(i) {
                    None => return (paths, i),
                    Some(b'}') => return (paths, i + 1),
                    _ => {}
                }
                let (inner, n) = use_tree(&s[i..]);
                paths.extend(inner.into_iter().map(|p| format!("{prefix}{p}")));
                i += n.max(1);
                // An `as` rename does not change the path: skip to the next item.
                while b.get(i).is_some_and(|&c| c != b',' && c != b'}') {
                    i += 1;
                }
            }
        }
        let start = i;
        while b
            .get(i)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            i += 1;
        }
        prefix.push_str(&s[start..i]);
        if i > start && s[i..].starts_with("::") {
            i += 2;
            prefix.push_str("::");
            continue;
        }
        return (
            if prefix.is_empty() {
                vec![]
            } else {
                vec![prefix]
            },
            i,
        );
    }
}

/// Every `crate::` path in `code`, with the 1-based line it starts on.
fn crate_paths(code: &str) -> Vec<(usize, String)> {
    let stripped: String = code.lines().map(|l| format!("{}\n", code_of(l))).collect();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(k) = stripped[from..].find("crate::") {
        let at = from + k;
        let before = stripped[..at].chars().next_back();
        from = at + "crate::".len();
        // `opal_crate::x` or `$crate::x` are not this crate's paths.
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let line = stripped[..at].matches('\n').count() + 1;
        let (paths, _) = use_tree(&stripped[from..]);
        out.extend(paths.into_iter().map(|p| (line, p)));
    }
    out
}

/// Whether `path` (after `crate::`) is one `rule` forbids.
fn breaks(rule: &Rule, path: &str) -> bool {
    let first = path.split("::").next().unwrap_or("");
    rule.forbidden.contains(&first)
        && !rule
            .allowed
            .iter()
            .any(|(a, _)| path == *a || path.starts_with(&format!("{a}::")))
}

fn violations() -> Vec<String> {
    let mut found = Vec::new();
    for rule in RULES {
        let mut files = Vec::new();
        rust_files(&src().join(rule.module), &mut files);
        let single = src().join(format!("{}.rs", rule.module));
        if single.is_file() {
            files.push(single);
        }
        assert!(
            !files.is_empty(),
            "module `{}` has no source files",
            rule.module
        );
        for f in files {
            let text = fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            for (line, path) in crate_paths(&text)
                .into_iter()
                .filter(|(_, p)| breaks(rule, p))
            {
                found.push(format!(
                    "{}:{line}: `crate::{path}`: module `{}` may not use this (docs/design.md, \"Module layers\")",
                    f.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap_or(&f).display(),
                    rule.module,
                ));
            }
        }
    }
    found
}

#[test]
fn runtime_core_has_no_back_arrows() {
    let v = violations();
    assert!(
        v.is_empty(),
        "imports against the layer rule:\n{}",
        v.join("\n")
    );
}

#[test]
fn the_scanner_reads_use_trees_and_skips_comments() {
    let code = "use crate::tensor::{with_op_holds_dyn, OpArg as A};\n\
                // crate::autograd::x in a comment\n\
                let x = crate::ops::_to_copy::call(a);\n\
                use crate::{dispatch::{DispatchKey, DispatchKeySet}, error::Result};\n\
                macro_rules! m { () => { $crate::autograd::y } }\n";
    let got = crate_paths(code);
    let want: Vec<(usize, String)> = [
        (1, "tensor::with_op_holds_dyn"),
        (1, "tensor::OpArg"),
        (3, "ops::_to_copy::call"),
        (4, "dispatch::DispatchKey"),
        (4, "dispatch::DispatchKeySet"),
        (4, "error::Result"),
    ]
    .into_iter()
    .map(|(l, p)| (l, p.to_string()))
    .collect();
    assert_eq!(got, want);
}

#[test]
fn the_rules_forbid_the_old_back_arrows_and_allow_the_interfaces() {
    let rule = |m: &str| {
        RULES
            .iter()
            .find(|r| r.module == m)
            .expect("a rule for the module")
    };
    // The arrows this rule removed.
    assert!(breaks(rule("tensor"), "autograd::AutogradMeta"));
    assert!(breaks(rule("tensor"), "dispatch::ArgDef"));
    assert!(breaks(rule("tensor"), "ivalue::Stack"));
    assert!(breaks(rule("dispatch"), "tensor::with_op_holds"));
    assert!(breaks(rule("dispatch"), "autograd::register_fallback"));
    assert!(breaks(rule("autograd"), "derivatives::sum_backward"));
    assert!(breaks(
        rule("derivatives"),
        "autograd::grad_mode::is_grad_enabled"
    ));
    // The interfaces they go through instead.
    assert!(!breaks(rule("tensor"), "dispatch::DispatchKeySet"));
    assert!(!breaks(rule("dispatch"), "tensor::OpChecks"));
    assert!(!breaks(
        rule("dispatch"),
        "startup::register_runtime_kernels"
    ));
    assert!(!breaks(rule("derivatives"), "ops::sum_dim_IntList"));
}
