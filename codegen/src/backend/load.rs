//! Loading a backend YAML into a [`BackendSpec`]: every key checked (unknown keys are
//! typos, with a suggestion), every value typed, every problem located
//! (`path:line:col`, snippet, hint) and all of them reported in one run.
//!
//! Owns: backend YAML keys and their meaning. Must not: know the native YAML's
//! contents (matching ops is `plan`), or parse `func:` strings itself (it calls
//! `crate::parse`).

use std::sync::Arc;

use crate::diagnostics::Diagnostic;
use crate::model::{Loc, OperatorName};
use crate::parse::parse_schema_at;

use super::report::{BackendDiagnostic, BackendErrors, SourceFile};
use super::spec::{BackendKey, BackendSpec, FallbackPolicy, Located, SupportedOp};
use super::yaml::{self, Node};

/// Every key a backend YAML may have: Opal's, then torchgen's (the format of the
/// backend YAMLs of torch-xla, Intel's XPU ops or torch_npu).
pub(crate) const KEYS: [&str; 15] = [
    "backend",
    "dispatch_key",
    "device",
    "namespace",
    "fallback",
    "out_copy",
    "supported",
    "autograd",
    "cpp_namespace",
    "class_name",
    "full_codegen",
    "ir_gen",
    "symint",
    "use_out_as_primary",
    "device_guard",
];

/// Loads and checks a backend YAML given its bytes. `path` is used in messages only.
pub fn load_bytes(path: &str, bytes: &[u8]) -> Result<BackendSpec, BackendErrors> {
    let text: Arc<str> = String::from_utf8_lossy(bytes).into();
    let file = SourceFile {
        path: path.to_string(),
        text: Arc::clone(&text),
    };
    let fail = |items: Vec<BackendDiagnostic>| BackendErrors {
        backend: file.clone(),
        native: None,
        items,
        native_errors: None,
    };
    if std::str::from_utf8(bytes).is_err() {
        let at = std::str::from_utf8(bytes)
            .err()
            .map_or(0, |e| e.valid_up_to());
        return Err(fail(vec![Diagnostic::new(
            "opal::backend::not_utf8",
            loc_of_offset(&text, at.min(text.len())),
            "the backend YAML is not valid UTF-8",
        )
        .label("invalid byte here")
        .hint("save the file as UTF-8")
        .into()]));
    }
    let root = yaml::parse(&text).map_err(|d| fail(vec![d.into()]))?;
    let mut errs = Vec::new();
    let mut warns = Vec::new();
    let spec = from_node(&root, &mut errs, &mut warns);
    match spec {
        Some(mut s) if errs.is_empty() => {
            s.warnings = warns;
            Ok(s)
        }
        _ => Err(fail(errs.into_iter().map(Into::into).collect())),
    }
}

fn loc_of_offset(text: &str, offset: usize) -> Loc {
    let before = &text[..offset];
    let line = before.matches('\n').count() as u32 + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) as u32 + 1;
    Loc {
        offset,
        len: 1,
        line,
        col,
    }
}

fn suggest(word: &str, candidates: &[&str]) -> Option<String> {
    crate::suggest::closest(word, candidates.iter().copied()).map(str::to_string)
}

/// A scalar value or an error saying a scalar was expected.
fn scalar<'a>(key: &str, node: &'a Node, errs: &mut Vec<Diagnostic>) -> Option<(&'a str, Loc)> {
    match node {
        Node::Scalar { text, loc, .. } => Some((text.as_str(), *loc)),
        other => {
            errs.push(
                Diagnostic::new(
                    "opal::backend::bad_value",
                    other.loc(),
                    format!(
                        "`{key}:` must be a single value, found {}",
                        other.describe()
                    ),
                )
                .label("expected a value"),
            );
            None
        }
    }
}

fn is_ident(s: &str) -> bool {
    crate::ident::is_identifier(s)
}

fn from_node(
    root: &Node,
    errs: &mut Vec<Diagnostic>,
    warns: &mut Vec<Diagnostic>,
) -> Option<BackendSpec> {
    let Node::Map { entries, loc } = root else {
        errs.push(
            Diagnostic::new(
                "opal::backend::not_a_mapping",
                root.loc(),
                format!(
                    "a backend YAML is a mapping of keys, found {}",
                    root.describe()
                ),
            )
            .label("expected `backend:`, `dispatch_key:`, `supported:` ...")
            .hint("start with `backend: MyBackend`, `dispatch_key: PrivateUse1`, `device: mydev`, `supported: [...]`"),
        );
        return None;
    };
    // torchgen's format (no `dispatch_key:`, a `cpp_namespace:`): vendor keys are
    // reported and ignored rather than refused.
    let torchgen = !entries.iter().any(|e| e.key == "dispatch_key")
        && entries.iter().any(|e| e.key == "cpp_namespace");
    let mut keys = Keys {
        torchgen,
        ..Keys::default()
    };
    for e in entries {
        keys.read(e, errs, warns);
    }
    if torchgen {
        keys.torchgen_dispatch_key(warns);
    }
    keys.check_required(*loc, errs);
    keys.into_spec(errs)
}

/// The keys of a backend YAML as read one at a time, before the checks that need
/// several of them.
#[derive(Default)]
struct Keys<'n> {
    torchgen: bool,
    backend: Option<Located<String>>,
    dispatch_key: Option<Located<BackendKey>>,
    device: Option<Located<String>>,
    namespace: Option<Located<String>>,
    fallback: Option<Located<FallbackPolicy>>,
    supported: Option<Vec<SupportedOp>>,
    autograd: Option<Vec<SupportedOp>>,
    out_copy: Option<Located<String>>,
    full_codegen: Vec<SupportedOp>,
    /// Every key read, with its place (a key given twice is reported).
    seen: Vec<(&'n str, Loc)>,
    /// Required keys an unknown key was taken for (no second "missing" error).
    suggested: Vec<String>,
}

impl<'n> Keys<'n> {
    fn was_given(&self, key: &str) -> bool {
        self.seen.iter().any(|(k, _)| *k == key)
    }

    /// Reads one key: its value typed and checked, or the problem reported.
    fn read(
        &mut self,
        e: &'n yaml::Entry,
        errs: &mut Vec<Diagnostic>,
        warns: &mut Vec<Diagnostic>,
    ) {
        let key = e.key.as_str();
        if let Some((_, first)) = self.seen.iter().find(|(k, _)| *k == key) {
            errs.push(
                Diagnostic::new(
                    "opal::backend::duplicate_key",
                    e.key_loc,
                    format!("`{key}:` is given twice"),
                )
                .label("again here")
                .hint(format!("keep one (the first is at line {})", first.line)),
            );
            return;
        }
        self.seen.push((key, e.key_loc));
        let torchgen = self.torchgen;
        let value = |errs: &mut Vec<Diagnostic>| scalar(key, &e.value, errs);
        match key {
            "backend" => self.backend = value(errs).and_then(|(v, l)| backend_name(v, l, errs)),
            "dispatch_key" => {
                self.dispatch_key = value(errs).and_then(|(v, l)| dispatch_key(v, l, errs));
            }
            "device" => self.device = value(errs).and_then(|(v, l)| device_name(v, l, errs)),
            "namespace" => {
                self.namespace = value(errs).and_then(|(v, l)| namespace_name(v, l, errs));
            }
            "fallback" => self.fallback = value(errs).and_then(|(v, l)| fallback(v, l, errs)),
            "out_copy" => self.out_copy = value(errs).and_then(|(v, l)| kernel_path(v, l, errs)),
            "supported" => self.supported = Some(supported_list(&e.value, torchgen, errs, warns)),
            "autograd" => self.autograd = Some(supported_list(&e.value, torchgen, errs, warns)),
            // Ops whose kernels torchgen's lazy-tensor codegen writes: for Opal they
            // are kernels the backend has, like `supported:`.
            "full_codegen" => self.full_codegen = supported_list(&e.value, torchgen, errs, warns),
            // C++ names of the generated code: nothing to name in Rust.
            "cpp_namespace" | "class_name" => {
                let _ = value(errs);
            }
            "use_out_as_primary" | "device_guard" => {
                if let Some((v, l)) = value(errs) {
                    boolean(key, v, l, errs);
                }
            }
            // Kernels taking SymInt: Opal passes SymInt as i64 either way.
            "symint" => {
                let _ = supported_list(&e.value, torchgen, errs, warns);
            }
            "ir_gen" => {
                let n = match &e.value {
                    Node::Seq { items, .. } => items.len(),
                    _ => 0,
                };
                warns.push(
                    Diagnostic::new(
                        "opal::backend::ignored_key",
                        e.key_loc,
                        format!("`ir_gen:` ({n} ops) is ignored: Opal generates no IR classes"),
                    )
                    .label("ignored")
                    .hint("list ops whose kernels the backend has under `supported:`"),
                );
            }
            other if torchgen => {
                warns.push(
                    Diagnostic::new(
                        "opal::backend::ignored_key",
                        e.key_loc,
                        format!("`{other}:` is not a key Opal uses; ignored"),
                    )
                    .label("vendor key, ignored")
                    .hint(format!("a backend YAML has the keys {}", KEYS.join(", "))),
                );
            }
            other => errs.push(self.unknown_key(other, e.key_loc)),
        }
    }

    /// An unknown key, with the key it most likely meant.
    fn unknown_key(&mut self, key: &str, loc: Loc) -> Diagnostic {
        let hint = match suggest(key, &KEYS) {
            Some(s) => {
                let h = format!("did you mean `{s}`?");
                self.suggested.push(s);
                h
            }
            None => format!("a backend YAML has the keys {}", KEYS.join(", ")),
        };
        Diagnostic::new(
            "opal::backend::unknown_key",
            loc,
            format!("unknown key `{key}`"),
        )
        .label("not a backend YAML key")
        .hint(hint)
    }

    /// torchgen's format names the key by `backend:`; a key Opal lacks (XLA, NPU,
    /// ...) becomes PrivateUse1 with the backend's name, lower-cased, as its device.
    fn torchgen_dispatch_key(&mut self, warns: &mut Vec<Diagnostic>) {
        let (None, Some(b)) = (&self.dispatch_key, &self.backend) else {
            return;
        };
        let known = BackendKey::from_name(&b.value);
        let key = known.unwrap_or(BackendKey::PrivateUse1);
        if known.is_none() {
            let dev = self
                .device
                .as_ref()
                .map_or_else(|| b.value.to_lowercase(), |d| d.value.clone());
            warns.push(
                Diagnostic::new(
                    "opal::backend::privateuse",
                    b.loc,
                    format!(
                        "Opal has no dispatch key `{}`: the backend registers under PrivateUse1 as device `{dev}`",
                        b.value
                    ),
                )
                .label("not an Opal dispatch key")
                .hint("write `dispatch_key:` (CPU, Meta, PrivateUse1..3) and `device:` to choose"),
            );
            self.device.get_or_insert(Located::new(dev, b.loc));
        } else if key.is_private_use() && self.device.is_none() {
            self.device = Some(Located::new("privateuseone".to_string(), b.loc));
        }
        self.dispatch_key = Some(Located::new(key, b.loc));
    }

    /// Reports the required keys that are missing (not those given with a bad value,
    /// nor those an unknown key was taken for).
    fn check_required(&self, map: Loc, errs: &mut Vec<Diagnostic>) {
        let required = [
            (
                "backend",
                self.backend.is_none(),
                "add `backend: MyBackend` (names the generated trait)",
            ),
            (
                "dispatch_key",
                self.dispatch_key.is_none(),
                "add `dispatch_key: PrivateUse1` (or CPU, Meta, PrivateUse2, PrivateUse3)",
            ),
            (
                "supported",
                self.supported.is_none(),
                "add `supported:` listing the ops with native kernels (it may be empty: `supported: []`)",
            ),
        ];
        for (what, absent, hint) in required {
            if !absent || self.was_given(what) || self.suggested.iter().any(|s| s == what) {
                continue;
            }
            errs.push(
                Diagnostic::new(
                    "opal::backend::missing_key",
                    Loc { len: 0, ..map },
                    format!("the backend YAML has no `{what}:`"),
                )
                .label(format!("`{what}:` is required"))
                .hint(hint.to_string()),
            );
        }
    }

    /// The spec, once the keys that depend on each other agree.
    fn into_spec(self, errs: &mut Vec<Diagnostic>) -> Option<BackendSpec> {
        let device_given = self.was_given("device");
        let dispatch_key = self.dispatch_key?;
        let device = device_of_key(&dispatch_key, self.device, device_given, errs)?;
        let fallback = self
            .fallback
            .unwrap_or(Located::new(FallbackPolicy::None, Loc::SYNTHETIC));
        if fallback.value == FallbackPolicy::Cpu && dispatch_key.value == BackendKey::Cpu {
            errs.push(
                Diagnostic::new(
                    "opal::backend::bad_fallback",
                    fallback.loc,
                    "the CPU backend cannot fall back to itself",
                )
                .label("`fallback: cpu` on dispatch key CPU")
                .hint("use `fallback: none` for the CPU backend"),
            );
            return None;
        }
        let mut supported = self.supported?;
        supported.extend(self.full_codegen);
        Some(BackendSpec {
            backend: self.backend?,
            dispatch_key,
            device,
            namespace: self
                .namespace
                .unwrap_or(Located::new("aten".to_string(), Loc::SYNTHETIC)),
            fallback,
            supported,
            autograd: self.autograd.unwrap_or_default(),
            out_copy: self.out_copy,
            warnings: Vec::new(),
        })
    }
}

/// The device name: required for PrivateUse keys (`given`: a `device:` was written,
/// its bad value already reported), fixed for CPU and Meta.
fn device_of_key(
    key: &Located<BackendKey>,
    device: Option<Located<String>>,
    given: bool,
    errs: &mut Vec<Diagnostic>,
) -> Option<Located<String>> {
    match (key.value.builtin_device(), device) {
        (None, Some(d)) => Some(d),
        (None, None) => {
            if !given {
                errs.push(
                    Diagnostic::new(
                        "opal::backend::missing_key",
                        key.loc,
                        format!(
                            "`dispatch_key: {}` needs a `device:` name",
                            key.value.as_str()
                        ),
                    )
                    .label("PrivateUse keys are renamed to their device")
                    .hint("add `device: <name>`: the name users write, as in \"emu\" or \"emu:1\""),
                );
            }
            None
        }
        (Some(fixed), Some(d)) if d.value != fixed => {
            errs.push(
                Diagnostic::new(
                    "opal::backend::bad_device",
                    d.loc,
                    format!(
                        "the device of dispatch key {} is `{fixed}`, not `{}`",
                        key.value.as_str(),
                        d.value
                    ),
                )
                .label("fixed by the dispatch key")
                .hint(format!("write `device: {fixed}` or leave `device:` out")),
            );
            None
        }
        (Some(_), Some(d)) => Some(d),
        (Some(fixed), None) => Some(Located::new(fixed.to_string(), Loc::SYNTHETIC)),
    }
}

/// `backend:`: a CamelCase Rust identifier (it names the trait `<backend>Kernels`).
fn backend_name(v: &str, l: Loc, errs: &mut Vec<Diagnostic>) -> Option<Located<String>> {
    if is_ident(v) && v.starts_with(|c: char| c.is_ascii_uppercase()) {
        return Some(Located::new(v.to_string(), l));
    }
    errs.push(
        Diagnostic::new(
            "opal::backend::bad_backend_name",
            l,
            format!("backend name `{v}` is not a CamelCase Rust identifier"),
        )
        .label("names the generated trait `<backend>Kernels`")
        .hint("use letters, digits and `_`, starting with an uppercase letter, e.g. `Emu`"),
    );
    None
}

/// `dispatch_key:`: one of the keys a backend can register under.
fn dispatch_key(v: &str, l: Loc, errs: &mut Vec<Diagnostic>) -> Option<Located<BackendKey>> {
    if let Some(k) = BackendKey::from_name(v) {
        return Some(Located::new(k, l));
    }
    let names: Vec<&str> = BackendKey::ALL.iter().map(|k| k.as_str()).collect();
    let hint = match suggest(v, &names) {
        Some(s) => format!("did you mean `{s}`?"),
        None => format!(
            "an external backend registers under one of: {}",
            names.join(", ")
        ),
    };
    errs.push(
        Diagnostic::new(
            "opal::backend::bad_dispatch_key",
            l,
            format!("`{v}` is not a dispatch key a backend can use"),
        )
        .label("unknown dispatch key")
        .hint(hint),
    );
    None
}

/// `device:`: a lowercase identifier, the name users write in device strings.
fn device_name(v: &str, l: Loc, errs: &mut Vec<Diagnostic>) -> Option<Located<String>> {
    let ok = v.starts_with(|c: char| c.is_ascii_lowercase())
        && v.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        return Some(Located::new(v.to_string(), l));
    }
    errs.push(
        Diagnostic::new(
            "opal::backend::bad_device",
            l,
            format!("device name `{v}` is not a lowercase identifier"),
        )
        .label("users write this in device strings (`emu`, `emu:1`)")
        .hint("use lowercase letters, digits and `_`, starting with a letter; the index (`:1`) is not part of the name"),
    );
    None
}

/// `namespace:`: an identifier (operators are `<namespace>::<op>`).
fn namespace_name(v: &str, l: Loc, errs: &mut Vec<Diagnostic>) -> Option<Located<String>> {
    if is_ident(v) {
        return Some(Located::new(v.to_string(), l));
    }
    errs.push(
        Diagnostic::new(
            "opal::backend::bad_namespace",
            l,
            format!("namespace `{v}` is not an identifier"),
        )
        .label("operators are named `<namespace>::<op>`")
        .hint("the default is `aten`"),
    );
    None
}

/// `fallback:`: `cpu` or `none`.
fn fallback(v: &str, l: Loc, errs: &mut Vec<Diagnostic>) -> Option<Located<FallbackPolicy>> {
    match v {
        "cpu" => Some(Located::new(FallbackPolicy::Cpu, l)),
        "none" => Some(Located::new(FallbackPolicy::None, l)),
        _ => {
            errs.push(
                Diagnostic::new(
                    "opal::backend::bad_fallback",
                    l,
                    format!("`{v}` is not a fallback"),
                )
                .label("expected `cpu` or `none`")
                .hint("`cpu` runs unsupported ops (and argument values a pinned kernel predates) on the CPU with copies; `none` makes them errors"),
            );
            None
        }
    }
}

/// torchgen's boolean keys (`use_out_as_primary:`, `device_guard:`): checked, unused.
fn boolean(key: &str, v: &str, l: Loc, errs: &mut Vec<Diagnostic>) {
    if !matches!(v, "true" | "false" | "True" | "False") {
        errs.push(
            Diagnostic::new(
                "opal::backend::bad_value",
                l,
                format!("`{key}:` is `true` or `false`, not `{v}`"),
            )
            .label("expected a boolean"),
        );
    }
}

/// A list of ops (`supported:`, `autograd:`, `full_codegen:`, `symint:`). In
/// torchgen's format an entry's vendor keys (`op_api:`, ...) are reported and
/// ignored; in Opal's they are errors (most likely typos).
fn supported_list(
    node: &Node,
    torchgen: bool,
    errs: &mut Vec<Diagnostic>,
    warns: &mut Vec<Diagnostic>,
) -> Vec<SupportedOp> {
    let items: &[Node] = match node {
        Node::Seq { items, .. } => items,
        Node::Null { .. } => &[],
        other => {
            errs.push(
                Diagnostic::new(
                    "opal::backend::bad_value",
                    other.loc(),
                    format!("`supported:` must be a list, found {}", other.describe()),
                )
                .label("expected a list of ops")
                .hint("write one op per line: `  - add.Tensor` or `  - func: add.Tensor(...) -> Tensor`"),
            );
            return Vec::new();
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Node::Scalar { text, loc, .. } => {
                if let Some(name) = op_name(text, *loc, errs) {
                    out.push(SupportedOp::Current {
                        name,
                        loc: *loc,
                        kernel: None,
                    });
                }
            }
            // `- add.Tensor: kernels::add`: an op and the kernel function it runs (a
            // schema as the value is a mistyped `func:`, reported as an unknown key).
            Node::Map { entries, loc }
                if entries.len() == 1
                    && !matches!(entries[0].key.as_str(), "func" | "kernel")
                    && !matches!(&entries[0].value, Node::Scalar { text, .. } if text.contains('(')) =>
            {
                let e = &entries[0];
                let name = op_name(&e.key, e.key_loc, errs);
                let kernel =
                    scalar(&e.key, &e.value, errs).and_then(|(v, l)| kernel_path(v, l, errs));
                if let (Some(name), Some(kernel)) = (name, kernel) {
                    out.push(SupportedOp::Current {
                        name,
                        loc: *loc,
                        kernel: Some(kernel),
                    });
                }
            }
            Node::Map { entries, loc } => {
                out.extend(func_entry(entries, *loc, torchgen, errs, warns));
            }
            other => errs.push(
                Diagnostic::new(
                    "opal::backend::bad_value",
                    other.loc(),
                    format!(
                        "a `supported:` entry must be an op name or `func:`, found {}",
                        other.describe()
                    ),
                )
                .label("expected `name.overload` or `func: <schema>`"),
            ),
        }
    }
    out
}

/// A `supported:` entry written as a map: `func:` (a schema the kernel was
/// written against, or an op name) with an optional `kernel:`; other keys are
/// vendor keys in torchgen's format (ignored) and typos in Opal's.
fn func_entry(
    entries: &[yaml::Entry],
    loc: Loc,
    torchgen: bool,
    errs: &mut Vec<Diagnostic>,
    warns: &mut Vec<Diagnostic>,
) -> Option<SupportedOp> {
    let mut func = None;
    let mut kernel = None;
    for e in entries {
        match e.key.as_str() {
                "func" => func = Some(e),
                "kernel" => {
                    kernel = scalar("kernel", &e.value, errs)
                        .and_then(|(v, l)| kernel_path(v, l, errs));
                }
                other if torchgen => warns.push(
                    Diagnostic::new(
                        "opal::backend::ignored_key",
                        e.key_loc,
                        format!("`{other}:` in a `supported:` entry is not a key Opal uses; ignored"),
                    )
                    .label("vendor key, ignored")
                    .hint("an entry is `- name.overload`, `- name.overload: kernel_path` or `- func: <schema or name>` with an optional `kernel:`"),
                ),
                _ => errs.push(
                    Diagnostic::new(
                        "opal::backend::unknown_key",
                        e.key_loc,
                        format!("unknown key `{}` in a `supported:` entry", e.key),
                    )
                    .label("not a key of a supported op")
                    .hint("an entry is `- name.overload`, `- name.overload: kernel_path` or `- func: <schema the kernel was written against>` with an optional `kernel: kernel_path`"),
                ),
            }
    }
    let Some(f) = func else {
        if entries.iter().any(|e| e.key != "func" && e.key != "kernel") {
            return None; // already reported as unknown (or ignored) keys
        }
        errs.push(
            Diagnostic::new(
                "opal::backend::missing_key",
                loc,
                "this `supported:` entry has no `func:`",
            )
            .label("expected `func: <schema>`")
            .hint("pin a kernel with `- func: mul.Tensor(Tensor self, Tensor other) -> Tensor`"),
        );
        return None;
    };
    let (src, sloc) = scalar("func", &f.value, errs)?;
    // `func: abs` (torch_npu's form) names the op: its current schema.
    if !src.contains('(') {
        return op_name(src, sloc, errs).map(|name| SupportedOp::Current { name, loc, kernel });
    }
    match parse_schema_at(src, sloc) {
        Ok(schema) => Some(SupportedOp::Pinned {
            schema,
            loc,
            kernel,
        }),
        Err(d) => {
            errs.push(d);
            None
        }
    }
}

/// A kernel function's Rust path (`elementwise::add`, `crate::kernels::add`), or a
/// shared rule's and a kernel's, `rule | kernel`.
fn kernel_path(text: &str, loc: Loc, errs: &mut Vec<Diagnostic>) -> Option<Located<String>> {
    // `rule | kernel`: the shared rule takes the op's arguments, the kernel its result.
    let is_path = |t: &str| {
        syn::parse_str::<syn::Path>(t.trim())
            .is_ok_and(|p| p.segments.iter().all(|s| s.arguments.is_none()))
    };
    let ok = match text.split_once('|') {
        Some((rule, kernel)) => is_path(rule) && is_path(kernel),
        None => is_path(text),
    };
    if ok {
        Some(Located::new(text.to_string(), loc))
    } else {
        errs.push(
            Diagnostic::new(
                "opal::backend::bad_kernel_path",
                loc,
                format!("`{text}` is not the path of a Rust function"),
            )
            .label("expected a path such as `kernels::add_tensor`")
            .hint("name the kernel function relative to the crate root (`module::function`), or start the path with `crate::`"),
        );
        None
    }
}

/// Parses `name.overload` with the schema grammar's name rules.
fn op_name(text: &str, loc: Loc, errs: &mut Vec<Diagnostic>) -> Option<OperatorName> {
    let ok = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    if !ok {
        let hint = if text.contains('(') {
            "to pin the schema a kernel was written against, write `- func: <schema>`"
        } else {
            "write the operator as in the native YAML: `name.overload` (`add.Tensor`, `relu`)"
        };
        errs.push(
            Diagnostic::new(
                "opal::backend::bad_op_name",
                loc,
                format!("`{text}` is not an operator name"),
            )
            .label("expected `name.overload`")
            .hint(hint),
        );
        return None;
    }
    // The schema grammar owns the name rules; give it a schema around the name so
    // its locations still point at the name.
    match parse_schema_at(&format!("{text}() -> ()"), loc) {
        Ok(s) => Some(s.name),
        Err(mut d) => {
            d.loc.len = d.loc.len.min(text.len());
            errs.push(d);
            None
        }
    }
}
