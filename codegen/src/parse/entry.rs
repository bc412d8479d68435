//! One `native_functions.yaml` entry (a YAML mapping) into a [`NativeFunction`]
//! holding exactly what was written: typed keys, the parsed schema, the dispatch
//! table as written, and a location for every key.
//!
//! Owns: the set of keys and their value types. Must not: add implicit entries or
//! check rules between keys or entries (that is `crate::validate`).

use super::node::Node;
use super::outline::{comma_parts, LineIndex};
use super::schema::{parse_operator_name_at, parse_schema_at, split_namespace};
use crate::diagnostics::Diagnostic;
use crate::model::{
    BackendKernel, DeviceCheck, FunctionSchema, Loc, NativeFunction, Origin, SmallMap, Variants,
};

/// Every key a `native_functions.yaml` entry may have (PyTorch 1.13 through 2.15).
pub(crate) const KNOWN_KEYS: [&str; 18] = [
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

/// [`KNOWN_KEYS`] in alphabetical order, the order an entry's keys are read in (so
/// one entry's problems are reported in that order).
const KEYS_SORTED: [&str; 18] = [
    "autogen",
    "category_override",
    "cpp_no_default_args",
    "device_check",
    "device_guard",
    "dispatch",
    "func",
    "manual_cpp_binding",
    "manual_kernel_registration",
    "precomputed",
    "python_module",
    "structured",
    "structured_delegate",
    "structured_inherits",
    "tags",
    "ufunc_inner_loop",
    "use_const_ref_for_mutable_tensors",
    "variants",
];

/// Locates the scalars of one entry in the file.
struct Locs<'s> {
    entry: Loc,
    src: &'s str,
    idx: &'s LineIndex<'s>,
}

impl Locs<'_> {
    /// Where `node` is, when yaml_serde handed it over as a slice of the file.
    fn of(&self, node: &Node<'_>) -> Option<Loc> {
        node.span_in(self.src).map(|(o, l)| self.idx.loc(o, l))
    }

    fn key_loc(&self, key: &Node<'_>) -> Loc {
        self.of(key).unwrap_or(self.entry)
    }

    /// The value's own span, else its first located scalar, else the key's.
    fn value_loc(&self, key: &Node<'_>, value: &Node<'_>) -> Loc {
        self.of(value)
            .or_else(|| {
                value
                    .first_span_in(self.src)
                    .map(|(o, l)| self.idx.loc(o, l))
            })
            .unwrap_or_else(|| self.key_loc(key))
    }
}

fn type_error(key: &str, want: &str, v: &Node<'_>, loc: Loc, example: &str) -> Diagnostic {
    Diagnostic::new(
        "opal::key_type",
        loc,
        format!("`{key}` must be {want}, found {}", v.describe()),
    )
    .label(format!("expected {want}"))
    .hint(format!("write it like `{key}: {example}`"))
}

/// Parses one entry; problems go to `errs`. Returns `None` when the entry has no
/// usable schema.
pub(crate) fn parse_entry(
    map: &[(Node<'_>, Node<'_>)],
    entry_loc: Loc,
    src: &str,
    idx: &LineIndex<'_>,
    errs: &mut Vec<Diagnostic>,
) -> Option<NativeFunction> {
    let locs = Locs {
        entry: entry_loc,
        src,
        idx,
    };
    let (key_locs, values) = key_table(map, &locs, errs);
    let (namespace, func) = read_func(&values, &locs, errs)?;
    let n_before = errs.len();
    let mut nf = NativeFunction::new(namespace.to_string(), func, Origin::Declared, entry_loc);
    nf.key_locs = key_locs;
    for (&key, &(knode, v)) in KEYS_SORTED
        .iter()
        .zip(&values)
        .filter_map(|(k, kv)| Some((k, kv.as_ref()?)))
    {
        read_key(&mut nf, key, v, locs.value_loc(knode, v), &locs, errs);
    }
    nf.tags.sort();
    nf.tags.dedup();
    (errs.len() == n_before).then_some(nf)
}

/// An entry's keys by index in [`KEYS_SORTED`] (a key given twice keeps its last
/// value, and is reported), with where each is; unknown keys are reported.
type KeyValues<'m, 'n> = [Option<(&'m Node<'n>, &'m Node<'n>)>; KEYS_SORTED.len()];

/// The entry's key table: where each known key is, and its key and value nodes.
fn key_table<'m, 'n>(
    map: &'m [(Node<'n>, Node<'n>)],
    locs: &Locs<'_>,
    errs: &mut Vec<Diagnostic>,
) -> (SmallMap<&'static str, Loc>, KeyValues<'m, 'n>) {
    let entry_loc = locs.entry;
    let mut key_locs = SmallMap::with_capacity(map.len());
    let mut values: KeyValues<'m, 'n> = Default::default();
    for (k, v) in map {
        let Some(name) = k.as_str() else {
            errs.push(
                Diagnostic::new(
                    "opal::unknown_key",
                    entry_loc,
                    format!("entry key {} is not a name", k.describe()),
                )
                .label("in this entry")
                .hint(format!("known keys: {}", KNOWN_KEYS.join(", "))),
            );
            continue;
        };
        let at = locs.key_loc(k);
        match KEYS_SORTED.iter().position(|known| *known == name) {
            Some(known) => {
                if let Some(first) = key_locs.insert(KEYS_SORTED[known], at) {
                    errs.push(
                        Diagnostic::new(
                            "opal::duplicate_key",
                            at,
                            format!("key `{name}` is given twice in this entry"),
                        )
                        .label("second occurrence")
                        .hint(format!(
                            "merge it with the `{name}:` on line {}",
                            first.line
                        )),
                    );
                }
                values[known] = Some((k, v));
            }
            None => errs.push(unknown_key(name, at)),
        }
    }

    (key_locs, values)
}

/// The entry's `func:` schema and its namespace; `None` (reported) when it is
/// missing, not a string or does not parse.
fn read_func<'m, 'n>(
    values: &KeyValues<'m, 'n>,
    locs: &Locs<'_>,
    errs: &mut Vec<Diagnostic>,
) -> Option<(&'m str, FunctionSchema)> {
    let entry_loc = locs.entry;
    let func_at = KEYS_SORTED.iter().position(|k| *k == "func");
    let (func_k, func_v) = match func_at.and_then(|i| values[i]) {
        Some(kv) => kv,
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
            locs.value_loc(func_k, func_v),
            "abs(Tensor self) -> Tensor",
        ));
        return None;
    };
    // Exact when yaml_serde lent the scalar (plain, or quoted without escapes);
    // otherwise token positions are relative to the key.
    let mut base = locs.value_loc(func_k, func_v);
    base.len = func_s.len();
    let (namespace, _) = split_namespace(func_s);
    let func = match parse_schema_at(func_s, base) {
        Ok(f) => f,
        Err(e) => {
            errs.push(e);
            return None;
        }
    };
    Some((namespace, func))
}

/// Reads the value `v` (located at `vloc`) of the known key `key` into `nf`.
fn read_key(
    nf: &mut NativeFunction,
    key: &str,
    v: &Node<'_>,
    vloc: Loc,
    locs: &Locs<'_>,
    errs: &mut Vec<Diagnostic>,
) {
    match key {
        "func" => {}
        "variants" => read_variants(nf, key, v, vloc, errs),
        "dispatch" => nf.dispatch = read_dispatch(v, vloc, locs, errs),
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
        "python_module" => nf.python_module = string(key, v, vloc, "nn", errs).map(str::to_string),
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
        "autogen" => read_autogen(nf, key, v, vloc, errs),
        "tags" => match v {
            Node::Str(s) => nf.tags = vec![s.to_string()],
            Node::Seq(items) => {
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
        "precomputed" => nf.precomputed = string_list(key, v, vloc, "\n  - dim -> int dim", errs),
        "cpp_no_default_args" => {
            nf.cpp_no_default_args = string_list(key, v, vloc, "['dim']", errs)
        }
        "ufunc_inner_loop" => read_ufunc_inner_loop(nf, key, v, vloc, errs),
        _ => {}
    }
}

/// `variants:`: `function`, `method` or both.
fn read_variants(
    nf: &mut NativeFunction,
    key: &str,
    v: &Node<'_>,
    vloc: Loc,
    errs: &mut Vec<Diagnostic>,
) {
    match v.as_str() {
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
    }
}

/// `dispatch:`: each key (or comma-separated keys) to its kernel, each located.
fn read_dispatch(
    v: &Node<'_>,
    vloc: Loc,
    locs: &Locs<'_>,
    errs: &mut Vec<Diagnostic>,
) -> SmallMap<String, BackendKernel> {
    let mut dispatch = SmallMap::new();
    match v {
        Node::Map(m) => {
            dispatch = SmallMap::with_capacity(m.len());
            for (k, kernel) in m {
                let (Some(keys), Some(kernel)) = (k.as_str(), kernel.as_str()) else {
                    let at = locs.of(k).unwrap_or(vloc);
                    errs.push(type_error(
                        "dispatch",
                        "a mapping of dispatch keys to kernel names",
                        if k.as_str().is_some() { kernel } else { k },
                        at,
                        "\n    CPU, CUDA: my_kernel",
                    ));
                    continue;
                };
                let at = locs.of(k).unwrap_or(vloc);
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
                    if dispatch.insert(name.to_string(), entry).is_some() {
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
            "dispatch",
            "a mapping",
            v,
            vloc,
            "\n    CPU, CUDA: my_kernel",
        )),
    }
    dispatch
}

/// `autogen:`: the comma-separated operator names, each located.
fn read_autogen(
    nf: &mut NativeFunction,
    key: &str,
    v: &Node<'_>,
    vloc: Loc,
    errs: &mut Vec<Diagnostic>,
) {
    let Some(s) = string(key, v, vloc, "foo.out", errs) else {
        return;
    };
    for (name, at) in comma_parts(s, vloc) {
        match parse_operator_name_at(name, at) {
            Ok(n) => nf.autogen.push(n),
            Err(e) => errs.push(e),
        }
    }
}

/// `ufunc_inner_loop:`: one loop, or a mapping of ufunc keys to loops.
fn read_ufunc_inner_loop(
    nf: &mut NativeFunction,
    key: &str,
    v: &Node<'_>,
    vloc: Loc,
    errs: &mut Vec<Diagnostic>,
) {
    match v {
        Node::Str(s) => {
            nf.ufunc_inner_loop
                .insert("Generic".to_string(), s.to_string());
        }
        Node::Map(m) => {
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
    }
}

fn unknown_key(name: &str, loc: Loc) -> Diagnostic {
    let hint = crate::suggest::did_you_mean(name, KNOWN_KEYS)
        .unwrap_or_else(|| format!("known keys: {}", KNOWN_KEYS.join(", ")));
    Diagnostic::new("opal::unknown_key", loc, format!("unknown key `{name}`"))
        .label("not a native_functions.yaml key")
        .hint(hint)
}

fn flag(key: &str, v: &Node<'_>, loc: Loc, out: &mut bool, errs: &mut Vec<Diagnostic>) {
    match v {
        Node::Bool(b) => *out = *b,
        _ => errs.push(type_error(key, "True or False", v, loc, "True")),
    }
}

fn string<'v>(
    key: &str,
    v: &'v Node<'_>,
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
    v: &Node<'_>,
    loc: Loc,
    example: &str,
    errs: &mut Vec<Diagnostic>,
) -> Vec<String> {
    match v {
        Node::Seq(items) if items.iter().all(|i| i.as_str().is_some()) => items
            .iter()
            .filter_map(|i| i.as_str().map(str::to_string))
            .collect(),
        _ => {
            errs.push(type_error(key, "a list of strings", v, loc, example));
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{KEYS_SORTED, KNOWN_KEYS};

    #[test]
    fn sorted_keys_are_the_known_keys() {
        let mut known = KNOWN_KEYS;
        known.sort();
        assert_eq!(known, KEYS_SORTED);
    }
}
