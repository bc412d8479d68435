//! One `native_functions.yaml` entry (a YAML mapping) into a [`NativeFunction`]
//! holding exactly what was written: typed keys, the parsed schema, the dispatch
//! table as written, and a location for every key.
//!
//! Owns: the set of keys and their value types. Must not: add implicit entries or
//! check rules between keys or entries (that is `crate::validate`).

use std::collections::BTreeMap;

use serde_yaml::{Mapping, Value};

use super::outline::{OutlineEntry, OutlineKey};
use super::schema::{edit_distance, parse_operator_name_at, parse_schema_at, split_namespace};
use crate::diagnostics::Diagnostic;
use crate::model::{BackendKernel, DeviceCheck, Loc, NativeFunction, Origin, Variants};

/// Every key a `native_functions.yaml` entry may have (PyTorch 1.13 through 2.15).
pub const KNOWN_KEYS: [&str; 18] = [
    "func",
    "variants",
    "dispatch",
    "structured",
    "structured_delegate",
    "structured_inherits",
    "precomputed",
    "autogen",
    "tags",
    "device_check",
    "device_guard",
    "manual_cpp_binding",
    "manual_kernel_registration",
    "use_const_ref_for_mutable_tensors",
    "python_module",
    "category_override",
    "cpp_no_default_args",
    "ufunc_inner_loop",
];

/// Where things of one entry are, as far as the outline found them.
struct Locs<'a> {
    entry: Loc,
    outline: Option<&'a OutlineEntry>,
}

impl<'a> Locs<'a> {
    fn key(&self, name: &str) -> Option<&'a OutlineKey> {
        self.outline.and_then(|o| o.key(name))
    }

    fn key_loc(&self, name: &str) -> Loc {
        self.key(name).map_or(self.entry, |k| k.loc)
    }

    fn value_loc(&self, name: &str) -> Loc {
        match self.key(name) {
            Some(k) if k.value.len > 0 => k.value,
            Some(k) => k.loc,
            None => self.entry,
        }
    }

    fn child_loc(&self, key: &str, child: &str) -> Loc {
        self.key(key)
            .and_then(|k| k.children.iter().find(|c| c.name == child))
            .map_or_else(|| self.key_loc(key), |c| c.loc)
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "nothing".into(),
        Value::Bool(b) => format!("the bool `{}`", if *b { "True" } else { "False" }),
        Value::Number(n) => format!("the number `{n}`"),
        Value::String(s) => format!("the string `{s}`"),
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Tagged(t) => format!("a value tagged `{}`", t.tag),
    }
}

fn type_error(key: &str, want: &str, v: &Value, loc: Loc, example: &str) -> Diagnostic {
    Diagnostic::new(
        "opal::key_type",
        loc,
        format!("`{key}` must be {want}, found {}", describe(v)),
    )
    .label(format!("expected {want}"))
    .hint(format!("write it like `{key}: {example}`"))
}

/// Parses one entry; problems go to `errs`. Returns `None` when the entry has no
/// usable schema.
pub(crate) fn parse_entry(
    map: &Mapping,
    outline: Option<&OutlineEntry>,
    entry_loc: Loc,
    src: &str,
    errs: &mut Vec<Diagnostic>,
) -> Option<NativeFunction> {
    let locs = Locs {
        entry: entry_loc,
        outline,
    };
    let mut key_locs = BTreeMap::new();
    let mut values: BTreeMap<&str, &Value> = BTreeMap::new();
    for (k, v) in map {
        let Some(name) = k.as_str() else {
            errs.push(
                Diagnostic::new(
                    "opal::unknown_key",
                    entry_loc,
                    format!("entry key {} is not a name", describe(k)),
                )
                .label("in this entry")
                .hint(format!("known keys: {}", KNOWN_KEYS.join(", "))),
            );
            continue;
        };
        match KNOWN_KEYS.iter().find(|known| **known == name) {
            Some(known) => {
                key_locs.insert(name.to_string(), locs.key_loc(name));
                values.insert(known, v);
            }
            None => errs.push(unknown_key(name, locs.key_loc(name))),
        }
    }

    let func_v = match values.get("func") {
        Some(v) => *v,
        None => {
            errs.push(
                Diagnostic::new("opal::missing_func", entry_loc, "entry has no `func:` key")
                    .label("this entry")
                    .hint("every entry starts with `- func: name.overload(args) -> returns`"),
            );
            return None;
        }
    };
    let Some(func_s) = func_v.as_str() else {
        errs.push(type_error(
            "func",
            "a schema string",
            func_v,
            locs.value_loc("func"),
            "abs(Tensor self) -> Tensor",
        ));
        return None;
    };
    let base = func_base(func_s, locs.key("func"), src, entry_loc);
    let (namespace, _) = split_namespace(func_s);
    let func = match parse_schema_at(func_s, base) {
        Ok(f) => f,
        Err(e) => {
            errs.push(e);
            return None;
        }
    };

    let n_before = errs.len();
    let mut nf = NativeFunction {
        namespace: namespace.to_string(),
        func,
        origin: Origin::Declared,
        loc: entry_loc,
        key_locs,
        variants: Variants {
            function: true,
            method: false,
        },
        dispatch: BTreeMap::new(),
        structured: false,
        structured_delegate: None,
        structured_inherits: None,
        precomputed: Vec::new(),
        autogen: Vec::new(),
        tags: Vec::new(),
        device_check: DeviceCheck::ExactSame,
        device_guard: true,
        manual_cpp_binding: false,
        manual_kernel_registration: false,
        use_const_ref_for_mutable_tensors: false,
        python_module: None,
        category_override: None,
        cpp_no_default_args: Vec::new(),
        ufunc_inner_loop: BTreeMap::new(),
        is_abstract: false,
        has_composite_implicit_autograd_kernel: false,
        has_composite_explicit_autograd_kernel: false,
    };

    for (&key, &v) in &values {
        let vloc = locs.value_loc(key);
        match key {
            "func" => {}
            "variants" => match v.as_str() {
                Some(s) => {
                    nf.variants = Variants::default();
                    for part in s.split(',').map(str::trim) {
                        match part {
                            "function" => nf.variants.function = true,
                            "method" => nf.variants.method = true,
                            other => errs.push(
                                Diagnostic::new(
                                    "opal::bad_variant",
                                    vloc,
                                    format!("unknown variant `{other}`"),
                                )
                                .label("not `function` or `method`")
                                .hint("write `variants: function`, `variants: method` or `variants: function, method`"),
                            ),
                        }
                    }
                }
                None => errs.push(type_error(key, "a string", v, vloc, "function, method")),
            },
            "dispatch" => match v {
                Value::Mapping(m) => {
                    for (k, kernel) in m {
                        let (Some(keys), Some(kernel)) = (k.as_str(), kernel.as_str()) else {
                            let at = k.as_str().map_or(vloc, |s| locs.child_loc("dispatch", s));
                            errs.push(type_error(
                                "dispatch",
                                "a mapping of dispatch keys to kernel names",
                                if k.as_str().is_some() { kernel } else { k },
                                at,
                                "\n    CPU, CUDA: my_kernel",
                            ));
                            continue;
                        };
                        let at = locs.child_loc("dispatch", keys);
                        for part in keys.split(',') {
                            let name = part.trim();
                            let mut loc = at;
                            // Point at this key inside a shared `CPU, CUDA:` line.
                            if at.len == keys.len() {
                                let off = part.as_ptr() as usize - keys.as_ptr() as usize
                                    + (part.len() - part.trim_start().len());
                                loc.offset += off;
                                loc.col += off as u32;
                                loc.len = name.len();
                            }
                            let entry = BackendKernel {
                                kernel: kernel.to_string(),
                                implicit: false,
                                loc,
                            };
                            if nf.dispatch.insert(name.to_string(), entry).is_some() {
                                errs.push(
                                    Diagnostic::new(
                                        "opal::duplicate_dispatch",
                                        loc,
                                        format!("dispatch key `{name}` is given twice"),
                                    )
                                    .label("second kernel for this key")
                                    .hint("give each dispatch key one kernel"),
                                );
                            }
                        }
                    }
                }
                _ => errs.push(type_error(
                    key,
                    "a mapping",
                    v,
                    vloc,
                    "\n    CPU, CUDA: my_kernel",
                )),
            },
            "structured" => flag(key, v, vloc, &mut nf.structured, errs),
            "device_guard" => flag(key, v, vloc, &mut nf.device_guard, errs),
            "manual_cpp_binding" => flag(key, v, vloc, &mut nf.manual_cpp_binding, errs),
            "manual_kernel_registration" => {
                flag(key, v, vloc, &mut nf.manual_kernel_registration, errs)
            }
            "use_const_ref_for_mutable_tensors" => flag(
                key,
                v,
                vloc,
                &mut nf.use_const_ref_for_mutable_tensors,
                errs,
            ),
            "structured_delegate" => {
                if let Some(s) = string(key, v, vloc, "add.out", errs) {
                    match parse_operator_name_at(s, vloc) {
                        Ok(n) => nf.structured_delegate = Some(n),
                        Err(e) => errs.push(e),
                    }
                }
            }
            "structured_inherits" => {
                nf.structured_inherits =
                    string(key, v, vloc, "TensorIteratorBase", errs).map(str::to_string)
            }
            "python_module" => {
                nf.python_module = string(key, v, vloc, "nn", errs).map(str::to_string)
            }
            "category_override" => {
                nf.category_override = string(key, v, vloc, "factory", errs).map(str::to_string)
            }
            "device_check" => {
                if let Some(s) = string(key, v, vloc, "NoCheck", errs) {
                    match s {
                        "ExactSame" => nf.device_check = DeviceCheck::ExactSame,
                        "NoCheck" => nf.device_check = DeviceCheck::NoCheck,
                        other => errs.push(
                            Diagnostic::new(
                                "opal::bad_device_check",
                                vloc,
                                format!("unknown device_check `{other}`"),
                            )
                            .label("not `ExactSame` or `NoCheck`")
                            .hint("write `device_check: NoCheck` (or leave it out for ExactSame)"),
                        ),
                    }
                }
            }
            "autogen" => {
                if let Some(s) = string(key, v, vloc, "foo.out", errs) {
                    let mut off = 0;
                    for part in s.split(',') {
                        let name = part.trim();
                        let lead = part.len() - part.trim_start().len();
                        let mut at = vloc;
                        if vloc.len == s.len() {
                            at.offset += off + lead;
                            at.col += (off + lead) as u32;
                            at.len = name.len();
                        }
                        off += part.len() + 1;
                        match parse_operator_name_at(name, at) {
                            Ok(n) => nf.autogen.push(n),
                            Err(e) => errs.push(e),
                        }
                    }
                }
            }
            "tags" => match v {
                Value::String(s) => nf.tags = vec![s.clone()],
                Value::Sequence(items) => {
                    for item in items {
                        match item.as_str() {
                            Some(s) => nf.tags.push(s.to_string()),
                            None => errs.push(type_error(
                                key,
                                "a tag name or a list of tag names",
                                item,
                                vloc,
                                "[core, pointwise]",
                            )),
                        }
                    }
                }
                _ => errs.push(type_error(
                    key,
                    "a tag name or a list of tag names",
                    v,
                    vloc,
                    "[core, pointwise]",
                )),
            },
            "precomputed" => {
                nf.precomputed = string_list(key, v, vloc, "\n  - dim -> int dim", errs)
            }
            "cpp_no_default_args" => {
                nf.cpp_no_default_args = string_list(key, v, vloc, "['dim']", errs)
            }
            "ufunc_inner_loop" => match v {
                Value::String(s) => {
                    nf.ufunc_inner_loop.insert("Generic".to_string(), s.clone());
                }
                Value::Mapping(m) => {
                    for (k, val) in m {
                        match (k.as_str(), val.as_str()) {
                            (Some(k), Some(val)) => {
                                nf.ufunc_inner_loop.insert(k.to_string(), val.to_string());
                            }
                            _ => errs.push(type_error(
                                key,
                                "a mapping of ufunc keys to loops",
                                val,
                                vloc,
                                "\n    Generic: add (AllAndComplex)",
                            )),
                        }
                    }
                }
                _ => errs.push(type_error(
                    key,
                    "a loop or a mapping of ufunc keys to loops",
                    v,
                    vloc,
                    "\n    Generic: add (AllAndComplex)",
                )),
            },
            _ => {}
        }
    }
    nf.tags.sort();
    nf.tags.dedup();
    (errs.len() == n_before).then_some(nf)
}

fn unknown_key(name: &str, loc: Loc) -> Diagnostic {
    let best = KNOWN_KEYS
        .iter()
        .map(|k| (edit_distance(name, k), *k))
        .min()
        .filter(|(d, _)| *d <= 3);
    let hint = match best {
        Some((_, k)) => format!("did you mean `{k}`?"),
        None => format!("known keys: {}", KNOWN_KEYS.join(", ")),
    };
    Diagnostic::new("opal::unknown_key", loc, format!("unknown key `{name}`"))
        .label("not a native_functions.yaml key")
        .hint(hint)
}

fn flag(key: &str, v: &Value, loc: Loc, out: &mut bool, errs: &mut Vec<Diagnostic>) {
    match v {
        Value::Bool(b) => *out = *b,
        _ => errs.push(type_error(key, "True or False", v, loc, "True")),
    }
}

fn string<'v>(
    key: &str,
    v: &'v Value,
    loc: Loc,
    example: &str,
    errs: &mut Vec<Diagnostic>,
) -> Option<&'v str> {
    let s = v.as_str();
    if s.is_none() {
        errs.push(type_error(key, "a string", v, loc, example));
    }
    s
}

fn string_list(
    key: &str,
    v: &Value,
    loc: Loc,
    example: &str,
    errs: &mut Vec<Diagnostic>,
) -> Vec<String> {
    match v {
        Value::Sequence(items) if items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(|i| i.as_str().map(str::to_string))
            .collect(),
        _ => {
            errs.push(type_error(key, "a list of strings", v, loc, example));
            Vec::new()
        }
    }
}

/// Where the schema string's first character is in the file: exact for plain or
/// simply quoted one-line scalars, the value's start otherwise.
fn func_base(func: &str, key: Option<&OutlineKey>, src: &str, entry: Loc) -> Loc {
    let Some(k) = key else { return entry };
    let v = k.value;
    let raw = src.get(v.offset..v.offset + v.len).unwrap_or("");
    let mut base = v;
    if raw.len() >= 2
        && (raw.starts_with('"') || raw.starts_with('\''))
        && &raw[1..raw.len() - 1] == func
    {
        base.offset += 1;
        base.col += 1;
    }
    base.len = func.len();
    base
}
