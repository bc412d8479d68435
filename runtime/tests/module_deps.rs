//! The runtime core's import rules (docs/design.md, "Module layers").
//!
//! Two checks. First, every top-level module of `src/` has a layer in [`LAYERS`]
//! and imports only modules of its own layer or below: a `crate::<module>::...`
//! path (or a crate-root re-export such as `crate::Tensor`, read as the module it
//! re-exports) pointing up fails, naming file, line and path, unless
//! [`BACK_ARROWS`] lists it with why. Since every arrow points down, the modules
//! form no import cycle; the test also looks for cycles directly, to be sure.
//! Second, [`RULES`] keeps the finer rule inside the core: `tensor` is built on
//! the dispatch keys only, `dispatch` on tensors' op-call interface, `autograd` on
//! both, and the backward formulas (`derivatives`) on operators only.
//!
//! Comments are not scanned. Generated code (in `OUT_DIR`) is scanned as part of
//! the module that `include!`s it.

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
            "transfer",
        ],
        allowed: &[],
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

/// The top-level modules of `src/` by layer, lowest first, as in docs/design.md's
/// table; a module may import its own layer and the layers before it (without
/// forming a cycle, outside layer 0). Each layer says what it holds.
const LAYERS: &[(&[&str], &str)] = &[
    (
        &["error", "dtype", "scalar", "keys", "device_type"],
        "the value vocabulary, which names itself: an error carries a dtype or a \
         dispatch key, their parsers return errors, elements convert to scalars \
         and back, a key knows its device type",
    ),
    (
        &["warning", "types"],
        "the warning channel; schema value types",
    ),
    (
        &["device_runtime", "device"],
        "vendor hooks, streams, memory stats, the allocator trait; the public device path",
    ),
    (
        &["serde_impls", "generator"],
        "serde for devices; random generators",
    ),
    (
        &["tensor"],
        "tensors, storage, the allocator registry, the op-call interface",
    ),
    (
        &["rules", "ivalue"],
        "shape and dtype rules of the kernels; boxed values",
    ),
    (
        &["dispatch"],
        "the dispatcher, kernels, tables, TLS key state",
    ),
    (
        &["ops", "transfer"],
        "generated operators; `Tensor::to` and printing",
    ),
    (&["derivatives"], "backward formulas"),
    (
        &["autograd"],
        "the engine, nodes, recording and the generated kernels",
    ),
    (
        &[
            "composite",
            "autocast",
            "fallback",
            "interop",
            "serialize",
            "plugin",
            "startup",
        ],
        "kernels and services on everything below",
    ),
];

/// Imports that point up a layer, each with why it stays: both are lazy global
/// set-ups that must reach the top once, whoever asks first.
const BACK_ARROWS: &[(&str, &str, &str)] = &[
    (
        "dispatch",
        "startup::register_runtime_kernels",
        "the global dispatcher is filled once, when it is created, by the layer above",
    ),
    (
        "device_type",
        "plugin::autoload_for_unknown_device",
        "an unknown device name loads the plugin that provides it, whoever parses it first",
    ),
];

/// The layer of a top-level module.
fn layer(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(ms, _)| ms.contains(&module))
}

/// The top-level modules of `src/` (files and folders beside `lib.rs`).
fn top_modules() -> Vec<String> {
    let mut out: Vec<String> = fs::read_dir(src())
        .expect("src/ is readable")
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            let name = p.file_stem()?.to_str()?.to_string();
            let is_module = p.is_dir() || p.extension().is_some_and(|x| x == "rs");
            (is_module && name != "lib").then_some(name)
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A module's source files, generated files it `include!`s from `OUT_DIR`
/// included.
fn module_files(module: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&src().join(module), &mut files);
    let single = src().join(format!("{module}.rs"));
    if single.is_file() {
        files.push(single);
    }
    let mut i = 0;
    while i < files.len() {
        let text = fs::read_to_string(&files[i]).unwrap_or_default();
        for gen in generated_includes(&text) {
            if !files.contains(&gen) {
                files.push(gen);
            }
        }
        i += 1;
    }
    files
}

/// The `OUT_DIR` files `code` includes (`include!(concat!(env!("OUT_DIR"), "/x.rs"))`).
fn generated_includes(code: &str) -> Vec<PathBuf> {
    let marker = "env!(\"OUT_DIR\"), \"";
    code.match_indices(marker)
        .filter_map(|(at, _)| {
            let rest = &code[at + marker.len()..];
            let rel = &rest[..rest.find('"')?];
            Some(Path::new(env!("OUT_DIR")).join(rel.trim_start_matches('/')))
        })
        .collect()
}

/// The crate root's re-exports (`pub use tensor::{Storage, Tensor}`): name to the
/// module it comes from.
fn root_reexports() -> Vec<(String, String)> {
    let lib = fs::read_to_string(src().join("lib.rs")).expect("lib.rs is readable");
    let mut out = Vec::new();
    for (_, path) in crate_paths(&lib.replace("pub use ", "pub use crate::")) {
        if let (Some((module, _)), Some((_, name))) =
            (path.split_once("::"), path.rsplit_once("::"))
        {
            out.push((name.to_string(), module.to_string()));
        }
    }
    out
}

/// Every import of one top-level module by another: (from, to, file:line, path).
fn module_imports() -> Vec<(String, String, String, String)> {
    let modules = top_modules();
    let reexports = root_reexports();
    let mut out = Vec::new();
    for from in &modules {
        for f in module_files(from) {
            let text = fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            for (line, path) in crate_paths(&text) {
                let first = path.split("::").next().unwrap_or("");
                let to = if modules.iter().any(|m| m == first) {
                    first.to_string()
                } else if let Some((_, m)) = reexports.iter().find(|(n, _)| n == first) {
                    m.clone()
                } else {
                    continue;
                };
                if &to != from {
                    let shown = f
                        .strip_prefix(env!("CARGO_MANIFEST_DIR"))
                        .or_else(|_| f.strip_prefix(env!("OUT_DIR")))
                        .unwrap_or(&f)
                        .display()
                        .to_string();
                    out.push((from.clone(), to, format!("{shown}:{line}"), path));
                }
            }
        }
    }
    out
}

/// Whether [`BACK_ARROWS`] lists the import of `path` by `from`.
fn listed_back_arrow(from: &str, path: &str) -> bool {
    BACK_ARROWS
        .iter()
        .any(|(m, p, _)| *m == from && (path == *p || path.starts_with(&format!("{p}::"))))
}

/// The imports that point up a layer and are not listed in [`BACK_ARROWS`].
fn upward_imports(imports: &[(String, String, String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (from, to, at, path) in imports {
        let (Some(lf), Some(lt)) = (layer(from), layer(to)) else {
            continue;
        };
        if lt > lf && !listed_back_arrow(from, path) {
            found.push(format!(
                "{at}: `crate::{path}`: `{from}` (layer {lf}) imports `{to}` (layer {lt}); \
                 a back-arrow (docs/design.md, \"Module layers\")"
            ));
        }
    }
    found
}

/// The import cycles between top-level modules, layer-0 modules taken as one and
/// the listed back-arrows left out: each cycle's modules, in order.
fn import_cycles(imports: &[(String, String, String, String)]) -> Vec<Vec<String>> {
    let node = |m: &str| -> String {
        if layer(m) == Some(0) {
            "<layer 0>".to_string()
        } else {
            m.to_string()
        }
    };
    let mut edges: Vec<(String, String)> = imports
        .iter()
        .filter(|(from, _, _, path)| !listed_back_arrow(from, path))
        .map(|(a, b, _, _)| (node(a), node(b)))
        .filter(|(a, b)| a != b)
        .collect();
    edges.sort();
    edges.dedup();
    let mut nodes: Vec<String> = edges
        .iter()
        .flat_map(|(a, b)| [a.clone(), b.clone()])
        .collect();
    nodes.sort();
    nodes.dedup();
    // A cycle through `start`: a path from one of its successors back to it.
    let mut cycles: Vec<Vec<String>> = Vec::new();
    for start in &nodes {
        let mut stack = vec![vec![start.clone()]];
        let mut seen = vec![start.clone()];
        while let Some(path) = stack.pop() {
            let last = path.last().expect("paths are not empty");
            for (_, next) in edges.iter().filter(|(a, _)| a == last) {
                if next == start {
                    let mut c = path.clone();
                    let lowest = (0..c.len()).min_by_key(|&i| &c[i]).unwrap_or(0);
                    c.rotate_left(lowest);
                    if !cycles.contains(&c) {
                        cycles.push(c);
                    }
                } else if !seen.contains(next) {
                    seen.push(next.clone());
                    let mut p = path.clone();
                    p.push(next.clone());
                    stack.push(p);
                }
            }
        }
    }
    cycles
}

#[test]
fn every_module_has_a_layer() {
    let missing: Vec<String> = top_modules()
        .into_iter()
        .filter(|m| layer(m).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "modules of src/ without a layer in LAYERS (tests/module_deps.rs): {missing:?}"
    );
    for (m, p, _) in BACK_ARROWS {
        assert!(
            layer(m).is_some(),
            "BACK_ARROWS names `{m}`, which has no layer"
        );
        assert!(
            module_imports()
                .iter()
                .any(|(f, _, _, path)| f == m && path.starts_with(p)),
            "BACK_ARROWS lists `{m}` -> `{p}`, which no longer exists: remove it"
        );
    }
}

#[test]
fn no_module_imports_a_layer_above_it() {
    let up = upward_imports(&module_imports());
    assert!(
        up.is_empty(),
        "imports against the layers:\n{}",
        up.join("\n")
    );
}

#[test]
fn the_modules_form_no_import_cycle() {
    let cycles = import_cycles(&module_imports());
    assert!(
        cycles.is_empty(),
        "import cycles between the runtime's modules:\n{}",
        cycles
            .iter()
            .map(|c| format!("{} -> {}", c.join(" -> "), c[0]))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_layer_check_sees_root_reexports_and_generated_code() {
    let imports = module_imports();
    // `crate::Tensor` is the tensor module's.
    assert!(root_reexports().contains(&("Tensor".to_string(), "tensor".to_string())));
    // The generated operators call the dispatcher.
    assert!(imports
        .iter()
        .any(|(f, t, at, _)| f == "ops" && t == "dispatch" && at.contains("opal_ops")));
    // A made-up arrow from the tensor up to autograd would be reported.
    let fake = vec![(
        "tensor".to_string(),
        "autograd".to_string(),
        "src/tensor/mod.rs:1".to_string(),
        "autograd::AutogradMeta".to_string(),
    )];
    assert_eq!(upward_imports(&fake).len(), 1);
    let mut looped = imports.clone();
    looped.extend(fake);
    assert!(import_cycles(&looped)
        .iter()
        .any(|c| c.contains(&"tensor".to_string()) && c.contains(&"autograd".to_string())));
}

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
        // The generated kernels in `autograd` call `derivatives` by design: this
        // rule reads the hand-written sources only.
        let files: Vec<PathBuf> = module_files(rule.module)
            .into_iter()
            .filter(|f| f.starts_with(src()))
            .collect();
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
    assert!(breaks(rule("tensor"), "dispatch::DispatchKeySet"));
    assert!(breaks(rule("tensor"), "ops::_to_copy"));
    // The interfaces they go through instead.
    assert!(!breaks(rule("tensor"), "keys::DispatchKeySet"));
    assert!(!breaks(rule("dispatch"), "tensor::OpChecks"));
    assert!(!breaks(
        rule("dispatch"),
        "startup::register_runtime_kernels"
    ));
    assert!(!breaks(rule("derivatives"), "ops::sum_dim_IntList"));
}
