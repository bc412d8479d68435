//! Semantics and validation: torchgen's implicit rules applied to the parsed
//! entries, the checks PyTorch makes, and the ones Rust generation needs.
//!
//! Owns: turning parsed [`NativeFunction`]s into the final model (implicit
//! dispatch, flags, tags, autogen functions) and every rule between keys and
//! between functions. Must not: parse text or read files.

pub mod autogen;
pub mod keys;
mod rules;

use std::collections::HashMap;

use crate::diagnostics::Diagnostic;
use crate::model::{NativeFunction, NativeFunctions, OperatorName};

pub(crate) use crate::hash::FastHash;

/// The rules on one function alone, then its autogen grouping key (which depends
/// on the resolved function only). The loader runs this on each function as soon
/// as it is parsed (see [`crate::parse::parse_native_yaml_checked`]).
pub(crate) fn check_function(
    f: &mut NativeFunction,
    known_tags: Option<&[String]>,
    errs: &mut Vec<Diagnostic>,
) -> String {
    rules::check_schema(f, errs);
    rules::check_keys(f, known_tags, errs);
    rules::resolve(f, known_tags, errs);
    autogen::signature_key(f)
}

/// What loading does after [`check_function`] ran on every function
/// (`keys[i]` is its result for `fns[i]`): the rules between functions and the
/// functions `autogen:` adds.
pub(crate) fn complete(
    mut fns: Vec<NativeFunction>,
    keys: &[String],
    known_tags: Option<&[String]>,
    errs: &mut Vec<Diagnostic>,
) -> NativeFunctions {
    // Rules between functions and autogen read the functions only: run them side by
    // side, reporting in the same order as one after the other.
    let (between, (mut generated, auto_errs)) = rayon::join(
        || {
            let mut e = Vec::new();
            check_all(&fns, &mut e);
            e
        },
        || {
            let mut e = Vec::new();
            let generated = autogen::generate_with_keys(&fns, keys, &mut e);
            (generated, e)
        },
    );
    errs.extend(between);
    errs.extend(auto_errs);
    for g in &mut generated {
        rules::auto_tags(g, known_tags);
    }
    // Generated names may collide with declared ones only through a wrong autogen.
    check_duplicates(&fns, &generated, errs);
    fns.extend(generated);
    NativeFunctions {
        functions: fns,
        known_tags: known_tags.map(<[String]>::to_vec).unwrap_or_default(),
    }
}

fn check_duplicates(
    fns: &[NativeFunction],
    generated: &[NativeFunction],
    errs: &mut Vec<Diagnostic>,
) {
    let mut seen: HashMap<(&str, &OperatorName), &NativeFunction, FastHash> =
        HashMap::with_capacity_and_hasher(fns.len() + generated.len(), FastHash::default());
    for f in fns.iter().chain(generated) {
        let key = (f.namespace.as_str(), &f.func.name);
        if let Some(first) = seen.get(&key) {
            let (loc, label) = match &f.origin {
                crate::model::Origin::Declared => (f.func.loc, "declared again here"),
                crate::model::Origin::Autogen { .. } => (
                    f.key_locs.get("autogen").copied().unwrap_or(f.loc),
                    "generated again by this autogen",
                ),
            };
            errs.push(
                Diagnostic::new(
                    "opal::duplicate_operator",
                    loc,
                    format!("operator `{}` is defined twice", f.func.name),
                )
                .label(label)
                .hint(format!(
                    "the first definition is at line {}; give this one a different overload name",
                    first.loc.line
                )),
            );
        } else {
            seen.insert(key, f);
        }
    }
}

/// Rules between declared functions.
fn check_all(fns: &[NativeFunction], errs: &mut Vec<Diagnostic>) {
    let by_name: HashMap<(&str, &OperatorName), &NativeFunction, FastHash> = fns
        .iter()
        .map(|f| ((f.namespace.as_str(), &f.func.name), f))
        .collect();
    for f in fns {
        if let Some(d) = &f.structured_delegate {
            let loc = f
                .key_locs
                .get("structured_delegate")
                .copied()
                .unwrap_or(f.func.loc);
            match by_name.get(&(f.namespace.as_str(), d)) {
                None => errs.push(
                    Diagnostic::new(
                        "opal::delegate_missing",
                        loc,
                        format!("structured_delegate `{d}` does not exist"),
                    )
                    .label("no function with this name")
                    .hint(format!(
                        "declare `{d}` with `structured: True`, or fix the name"
                    )),
                ),
                Some(t) if !t.structured => errs.push(
                    Diagnostic::new(
                        "opal::delegate_not_structured",
                        loc,
                        format!("structured_delegate `{d}` is not structured"),
                    )
                    .label("delegate target lacks `structured: True`")
                    .hint(format!(
                        "add `structured: True` to `{d}` (line {})",
                        t.loc.line
                    )),
                ),
                Some(_) => {}
            }
        }
        if f.tags.iter().any(|t| t == "inplace_view") {
            check_inplace_view(f, fns, errs);
        }
    }
}

/// An `inplace_view` op is in-place and has an out-of-place view of the same name.
fn check_inplace_view(f: &NativeFunction, fns: &[NativeFunction], errs: &mut Vec<Diagnostic>) {
    let name = f.func.name.to_string();
    let base = &f.func.name.name;
    // resize_/resize_as_/set_ are in-place views without view siblings.
    if name == "resize_" || name == "resize_as_" || base.to_string() == "set_" {
        return;
    }
    let mut out_of_place = base.clone();
    out_of_place.inplace = false;
    if !base.inplace || !fns.iter().any(|g| g.func.name.name == out_of_place) {
        errs.push(
            Diagnostic::new(
                "opal::inplace_view",
                f.key_locs.get("tags").copied().unwrap_or(f.func.loc),
                format!(
                    "`{name}` is tagged inplace_view but has no out-of-place view `{out_of_place}`"
                ),
            )
            .label("inplace_view tag")
            .hint("inplace_view ops end in `_` and have a view op of the same name without it"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::keys;

    #[test]
    fn dispatch_keys_compose_functionality_and_backend() {
        for k in [
            "CPU",
            "SparseCsrMeta",
            "QuantizedCUDA",
            "NestedTensorHPU",
            "PrivateUse1",
            "CompositeImplicitAutograd",
            "MkldnnCPU",
            "ZeroTensor",
        ] {
            assert!(keys::is_known(k), "{k}");
        }
        for k in ["Cpu", "SparseCsr", "", "CPU ", "Foo"] {
            assert!(!keys::is_known(k), "{k}");
        }
    }
}
