//! Rules about one function on its own: schema shape per kind, key combinations,
//! dispatch keys, tags, and torchgen's implicit defaults (CompositeImplicitAutograd
//! kernel, ufunc kernels, `is_abstract`, composite flags, automatic tags).
//!
//! Owns: per-function checks and resolution. Must not: look at other functions
//! (that is `validate::check_all`) or parse text.

use crate::diagnostics::Diagnostic;
use crate::model::{BackendKernel, DeviceCheck, FunctionSchema, Loc, NativeFunction, SchemaKind};

use super::keys;

fn key_loc(f: &NativeFunction, key: &str) -> Loc {
    f.key_locs.get(key).copied().unwrap_or(f.func.loc)
}

/// Checks that only concern the schema string.
pub fn check_schema(f: &NativeFunction, errs: &mut Vec<Diagnostic>) {
    let s = &f.func;
    if s.name.name.inplace {
        check_inplace_self(s, errs);
    }
    check_out_arguments(s, errs);
    check_mutable_returns(s, errs);
}

/// Where a problem with the returns as a whole is shown.
fn returns_loc(s: &FunctionSchema) -> Loc {
    s.returns.first().map_or(s.loc, |r| r.loc)
}

/// An in-place function (`name_`) mutates `self` and returns it (a list returns
/// nothing).
fn check_inplace_self(s: &FunctionSchema, errs: &mut Vec<Diagnostic>) {
    match s.self_arg() {
        Some(a) if a.is_write() => {
            let is_list = matches!(a.ty, crate::model::Type::List { .. });
            let ok = if is_list {
                s.returns.is_empty()
            } else {
                s.returns.len() == 1 && s.returns[0].annotation == a.annotation
            };
            if !ok {
                errs.push(
                    Diagnostic::new(
                        "opal::inplace_return",
                        returns_loc(s),
                        format!("in-place function `{}` must return `self`", s.name),
                    )
                    .label("returns something other than self")
                    .hint(if is_list {
                        "an in-place function on a tensor list returns `()`".to_string()
                    } else {
                        format!("return `{}`", a.to_string().split(' ').next().unwrap_or("Tensor(a!)"))
                    }),
                );
            }
        }
        other => errs.push(
            Diagnostic::new(
                "opal::inplace_not_mutable",
                other.map_or(s.loc, |a| a.loc),
                format!(
                    "in-place function `{}` has no mutable `self` argument",
                    s.name
                ),
            )
            .label("expected `Tensor(a!) self`")
            .hint("a trailing `_` makes a function in-place; mark self `Tensor(a!) self` or drop the `_`"),
        ),
    }
}

/// An out= function returns its out arguments, in order, or nothing; every
/// argument named like `out` is mutable.
fn check_out_arguments(s: &FunctionSchema, errs: &mut Vec<Diagnostic>) {
    if !s.arguments.out.is_empty() {
        if !s.returns.is_empty() && s.returns.len() != s.arguments.out.len() {
            errs.push(
                Diagnostic::new(
                    "opal::out_returns",
                    returns_loc(s),
                    format!(
                        "`{}` has {} out arguments but {} returns",
                        s.name,
                        s.arguments.out.len(),
                        s.returns.len()
                    ),
                )
                .label("return count differs")
                .hint("an out= function returns each out argument, in order, or nothing"),
            );
        } else {
            for (a, r) in s.arguments.out.iter().zip(&s.returns) {
                if a.annotation != r.annotation {
                    errs.push(
                        Diagnostic::new(
                            "opal::out_returns",
                            r.loc,
                            format!("return does not alias out argument `{}`", a.name),
                        )
                        .label("annotation differs from the out argument's")
                        .hint("the i-th return carries the i-th out argument's annotation, e.g. `-> Tensor(a!)`"),
                    );
                }
            }
        }
    }
    for a in s.arguments.kwarg_only.iter() {
        let looks_out = a.name == "out"
            || (a.name.starts_with("out") && a.name[3..].bytes().all(|c| c.is_ascii_digit()));
        if looks_out && a.ty.is_tensor_like() && !a.is_write() {
            errs.push(
                Diagnostic::new(
                    "opal::out_not_mutable",
                    a.loc,
                    format!("out argument `{}` is not marked mutable", a.name),
                )
                .label("missing `(a!)`")
                .hint(format!(
                    "write `Tensor(a!) {}` and return `Tensor(a!)`",
                    a.name
                )),
            );
        }
    }
}

/// A mutable return aliases an argument; returns are all mutable or none; a
/// mutable positional argument is not returned.
fn check_mutable_returns(s: &FunctionSchema, errs: &mut Vec<Diagnostic>) {
    let mutable_rets = s
        .returns
        .iter()
        .filter(|r| r.annotation.as_ref().is_some_and(|a| a.is_write));
    let mut n_mut = 0;
    for r in mutable_rets {
        n_mut += 1;
        if !s.arguments.all().any(|a| a.annotation == r.annotation) {
            errs.push(
                Diagnostic::new(
                    "opal::mutable_return",
                    r.loc,
                    "mutable return aliases no argument",
                )
                .label("no argument has this annotation")
                .hint("a `Tensor(a!)` return must name the alias set of `self` or of a keyword-only out argument"),
            );
        }
    }
    if n_mut > 0 && n_mut < s.returns.len() {
        errs.push(
            Diagnostic::new(
                "opal::mixed_returns",
                returns_loc(s),
                format!("`{}` mixes mutable and immutable returns", s.name),
            )
            .label("some returns are `(a!)`, some are not")
            .hint("return either only mutated arguments or only new values"),
        );
    }
    for a in s.post_self_positional().iter().filter(|a| a.is_write()) {
        if s.returns.iter().any(|r| r.annotation == a.annotation) {
            errs.push(
                Diagnostic::new(
                    "opal::mutable_positional_returned",
                    a.loc,
                    format!("mutable positional argument `{}` is also returned", a.name),
                )
                .label("mutated and returned")
                .hint("return mutable positional arguments through `()`, or make them keyword-only out arguments"),
            );
        }
    }
}

/// Checks on key combinations, dispatch keys and tags.
pub fn check_keys(f: &NativeFunction, known_tags: Option<&[String]>, errs: &mut Vec<Diagnostic>) {
    check_combinations(f, errs);
    check_dispatch(f, errs);
    if let Some(known) = known_tags {
        check_tags(f, known, errs);
    }
}

/// Keys that need or exclude each other (`structured` on an out= function only,
/// `precomputed` with `structured`, ...) and keys that do not fit the schema.
fn check_combinations(f: &NativeFunction, errs: &mut Vec<Diagnostic>) {
    if f.func.is_out_fn() && f.variants.method {
        key_error(f, errs)(
            "opal::out_method",
            "variants",
            format!("out= function `{}` cannot be a method", f.func.name),
            "method variant on an out= function",
            "write `variants: function` for out= functions",
        );
    }
    check_structured(f, errs);
    let mut err = key_error(f, errs);
    for n in &f.cpp_no_default_args {
        let defaulted: Vec<&str> = f
            .func
            .arguments
            .all()
            .filter(|a| a.default.is_some())
            .map(|a| a.name.as_str())
            .collect();
        if !defaulted.contains(&n.as_str()) {
            err(
                "opal::cpp_no_default_args",
                "cpp_no_default_args",
                format!("`cpp_no_default_args` names `{n}`, which has no default"),
                "not a defaulted argument",
                &format!(
                    "defaulted arguments: {}",
                    if defaulted.is_empty() {
                        "none".to_string()
                    } else {
                        defaulted.join(", ")
                    }
                ),
            );
        }
    }
    if f.python_module.is_some() && f.variants.method {
        err(
            "opal::module_method",
            "python_module",
            "functions in a python_module cannot be methods".into(),
            "python_module with a method variant",
            "remove `method` from `variants` or drop `python_module`",
        );
    }
    if f.manual_kernel_registration && f.key_locs.contains_key("dispatch") {
        err(
            "opal::manual_and_dispatch",
            "manual_kernel_registration",
            "both `manual_kernel_registration` and `dispatch`".into(),
            "manual registration would hide the dispatch table",
            "remove one of them",
        );
    }
    if f.func.name.name.base.starts_with("_foreach") && f.device_check != DeviceCheck::NoCheck {
        err(
            "opal::foreach_device_check",
            "func",
            format!("`{}` must have `device_check: NoCheck`", f.func.name),
            "_foreach kernels take tensors on several devices",
            "add `device_check: NoCheck`",
        );
    }
}

/// A reporter of errors located at one key of `f`: code, key, message, label, hint.
fn key_error<'e>(
    f: &'e NativeFunction,
    errs: &'e mut Vec<Diagnostic>,
) -> impl FnMut(&'static str, &str, String, &str, &str) + 'e {
    |code, key, msg, label, hint| {
        errs.push(
            Diagnostic::new(code, key_loc(f, key), msg)
                .label(label)
                .hint(hint),
        );
    }
}

/// The structured-kernel keys: `structured` on an out= function only, never with
/// `structured_delegate` or `device_guard: False`; the keys only structured
/// kernels read.
fn check_structured(f: &NativeFunction, errs: &mut Vec<Diagnostic>) {
    let kind = f.func.kind();
    let mut err = key_error(f, errs);
    if f.structured && kind != SchemaKind::Out {
        err(
            "opal::structured_not_out",
            "structured",
            format!(
                "`structured` on `{}`, which is not an out= function",
                f.func.name
            ),
            "only out= functions are structured",
            "put `structured: True` on the out= variant and `structured_delegate:` here",
        );
    }
    if (f.structured || f.structured_delegate.is_some()) && !f.device_guard {
        err(
            "opal::structured_device_guard",
            "device_guard",
            "`device_guard: False` is not supported by structured kernels".into(),
            "structured kernels always guard the device",
            "remove `device_guard: False`",
        );
    }
    if f.structured_delegate.is_some() && kind == SchemaKind::Out {
        err(
            "opal::delegate_on_out",
            "structured_delegate",
            format!("`structured_delegate` on out= function `{}`", f.func.name),
            "out= functions are the delegate target",
            "use `structured: True` on the out= function",
        );
    }
    if f.structured && f.structured_delegate.is_some() {
        err(
            "opal::structured_and_delegate",
            "structured_delegate",
            "both `structured` and `structured_delegate`".into(),
            "pick one",
            "the out= function is `structured`, its siblings name it with `structured_delegate`",
        );
    }
    for (key, what) in [
        ("structured_inherits", "structured_inherits"),
        ("precomputed", "precomputed"),
        ("ufunc_inner_loop", "ufunc_inner_loop"),
    ] {
        if f.key_locs.contains_key(key) && !f.structured {
            err(
                "opal::needs_structured",
                key,
                format!("`{what}` needs `structured: True`"),
                "only structured kernels use this",
                "add `structured: True` or remove this key",
            );
        }
    }
}

/// The `dispatch:` table: known keys, at most one composite key (but the pairs
/// torchgen allows), no backend kernel where a structured delegate or a ufunc
/// provides it, no table that only spells out the default.
fn check_dispatch(f: &NativeFunction, errs: &mut Vec<Diagnostic>) {
    for (name, k) in &f.dispatch {
        if !keys::is_known(name) {
            let all = keys::all();
            let best = crate::suggest::did_you_mean(name, all.iter().map(|k| &**k));
            errs.push(
                Diagnostic::new("opal::unknown_dispatch_key", k.loc, format!("unknown dispatch key `{name}`"))
                    .label("not a dispatch key")
                    .hint(match best {
                        Some(hint) => hint,
                        None => "dispatch keys are backends (`CPU`, `CUDA`, `Meta`, ...) or composites (`CompositeExplicitAutograd`, ...)".into(),
                    }),
            );
        }
    }
    let composites: Vec<&str> = keys::COMPOSITES
        .iter()
        .copied()
        .filter(|c| f.dispatch.contains_key(*c))
        .collect();
    let ok_pair = composites.len() == 2
        && !composites.contains(&"CompositeExplicitAutogradNonFunctional")
        && composites.contains(&"CompositeImplicitAutogradNestedTensor");
    if composites.len() > 1 && !ok_pair {
        errs.push(
            Diagnostic::new("opal::several_composites", f.dispatch[composites[1]].loc, format!("dispatch names several composite keys: {}", composites.join(", ")))
                .label("second composite key")
                .hint("each composite key subsumes the others: keep CompositeExplicitAutograd for an explicit autograd formula, else CompositeImplicitAutograd"),
        );
    }
    if f.structured_delegate.is_some() {
        for k in keys::STRUCTURED {
            if let Some(b) = f.dispatch.get(k) {
                errs.push(
                    Diagnostic::new(
                        "opal::delegate_with_backend",
                        b.loc,
                        format!("`structured_delegate` together with a `{k}` kernel"),
                    )
                    .label("delegated functions take this kernel from their out= function")
                    .hint(format!(
                        "remove `{k}` here; the delegate's structured kernel serves it"
                    )),
                );
            }
        }
    }
    if !f.ufunc_inner_loop.is_empty() {
        for k in keys::UFUNC {
            if let Some(b) = f.dispatch.get(k) {
                errs.push(
                    Diagnostic::new(
                        "opal::ufunc_with_backend",
                        b.loc,
                        format!("`ufunc_inner_loop` together with a `{k}` kernel"),
                    )
                    .label("ufunc generates this kernel")
                    .hint(format!("remove the `{k}` entry")),
                );
            }
        }
    }
    if let Some(cia) = f.dispatch.get("CompositeImplicitAutograd") {
        if f.dispatch.len() == 1 && cia.kernel == cpp_name(f) {
            errs.push(
                Diagnostic::new("opal::redundant_dispatch", cia.loc, "unnecessary dispatch table".to_string())
                    .label("this is the default kernel name")
                    .hint("delete the `dispatch:` table; CompositeImplicitAutograd with this name is implied"),
            );
        }
    }
}

/// Every tag is one of `known` (those of tags.yaml).
fn check_tags(f: &NativeFunction, known: &[String], errs: &mut Vec<Diagnostic>) {
    for t in &f.tags {
        if !known.contains(t) {
            let best = crate::suggest::did_you_mean(t, known.iter().map(|k| &**k));
            errs.push(
                Diagnostic::new(
                    "opal::unknown_tag",
                    key_loc(f, "tags"),
                    format!("unknown tag `{t}`"),
                )
                .label("not in tags.yaml")
                .hint(match best {
                    Some(hint) => hint,
                    None => "add the tag to tags.yaml or remove it".into(),
                }),
            );
        }
    }
}

/// torchgen's default C++ kernel name: the base name, `_out` for out= functions.
pub fn cpp_name(f: &NativeFunction) -> String {
    let mut n = f.func.name.name.to_string();
    if f.func.is_out_fn() {
        n.push_str("_out");
    }
    n
}

/// Fills in implicit dispatch entries, derived flags and automatic tags.
pub fn resolve(f: &mut NativeFunction, known_tags: Option<&[String]>, errs: &mut Vec<Diagnostic>) {
    let written = f.key_locs.contains_key("dispatch");
    if !written && !f.structured && f.structured_delegate.is_none() {
        let base = f.func.name.name.to_string();
        let factory = base.starts_with("new_")
            || base.ends_with("_like")
            || (f.func.tensor_options_range().is_some() && !f.func.has_tensor_arg());
        if factory {
            errs.push(
                Diagnostic::new("opal::factory_needs_dispatch", f.func.loc, format!("factory function `{}` has no dispatch table", f.func.name))
                    .label("would default to CompositeImplicitAutograd")
                    .hint("factory functions must not decompose: add `dispatch:` with `CompositeExplicitAutograd: <kernel>`"),
            );
        }
        f.dispatch.insert(
            "CompositeImplicitAutograd".into(),
            BackendKernel {
                kernel: cpp_name(f),
                implicit: true,
                loc: f.func.loc,
            },
        );
    }
    if !f.ufunc_inner_loop.is_empty() {
        for k in keys::UFUNC {
            let loc = key_loc(f, "ufunc_inner_loop");
            let kernel = format!("ufunc_{}_{k}", f.func.name.name);
            f.dispatch
                .get_or_insert_with(k.to_string(), || BackendKernel {
                    kernel,
                    implicit: true,
                    loc,
                });
        }
    }
    let cia = f.dispatch.contains_key("CompositeImplicitAutograd");
    let cia_nt = f
        .dispatch
        .contains_key("CompositeImplicitAutogradNestedTensor");
    let only_implicit =
        !f.dispatch.is_empty() && f.dispatch.len() == usize::from(cia) + usize::from(cia_nt);
    f.is_abstract = f.structured_delegate.is_some() || !only_implicit;
    f.has_composite_implicit_autograd_kernel = cia;
    f.has_composite_explicit_autograd_kernel = f.dispatch.contains_key("CompositeExplicitAutograd");
    auto_tags(f, known_tags);
}

/// Tags torchgen adds by itself (when `tags.yaml` defines them): `pt2_compliant_tag`
/// on every `aten` op, `out`/`inplace` by schema kind.
pub fn auto_tags(f: &mut NativeFunction, known_tags: Option<&[String]>) {
    if let Some(known) = known_tags {
        let mut add = |t: &str| {
            if known.iter().any(|k| k == t) && !f.tags.iter().any(|x| x == t) {
                f.tags.push(t.to_string());
            }
        };
        if f.namespace == "aten" {
            add("pt2_compliant_tag");
        }
        match f.func.kind() {
            SchemaKind::Out => add("out"),
            SchemaKind::Inplace => add("inplace"),
            _ => {}
        }
        f.tags.sort();
    }
}
