//! Checks of a loaded [`Derivatives`] against the native model it describes:
//! every entry names an operator of the `native_functions.yaml`, every formula
//! key an argument (backward) or output (forward) of that operator, every name in
//! a formula a variable in scope, and every called function or method a native
//! op or a known helper ([`super::helpers`]).
//!
//! Owns: those rules and their located messages. Must not: parse (that is
//! `load` and `expr`) or keep vocabulary of its own (that is `helpers`).

use std::collections::{HashMap, HashSet};

use super::expr::{Expr, ExprKind};
use super::helpers;
use super::load::ENTRY_KEYS;
use super::model::{Body, DerivativeEntry, Derivatives, Formula, Mode, OutputDifferentiable};
use crate::diagnostics::Diagnostic;
use crate::model::{FunctionSchema, Loc, NativeFunctions};
use crate::suggest::did_you_mean;

/// What the native model offers to formulas: operators by full name, and the
/// names callable as functions and as methods.
pub(crate) struct NativeVocabulary<'n> {
    ops: HashMap<String, &'n FunctionSchema>,
    functions: HashSet<String>,
    methods: HashSet<String>,
}

impl<'n> NativeVocabulary<'n> {
    pub fn new(native: &'n NativeFunctions) -> Self {
        let mut v = NativeVocabulary {
            ops: HashMap::with_capacity(native.functions.len()),
            functions: HashSet::new(),
            methods: HashSet::new(),
        };
        for f in &native.functions {
            let base = f.func.name.name.to_string();
            if f.variants.method {
                v.methods.insert(base.clone());
            }
            v.functions.insert(base);
            v.ops.insert(f.func.name.to_string(), &f.func);
        }
        v
    }

    /// Whether `name` (or `name` less a `_symint` suffix: the C++ API's SymInt
    /// overloads) is in `set`.
    fn has(set: &HashSet<String>, name: &str) -> bool {
        set.contains(name)
            || name
                .strip_suffix("_symint")
                .is_some_and(|n| set.contains(n))
    }

    fn is_function(&self, name: &str) -> bool {
        Self::has(&self.functions, name)
            || helpers::FUNCTIONS.contains(&name)
            || helpers::is_implemented(name)
    }

    fn is_method(&self, name: &str) -> bool {
        Self::has(&self.methods, name) || helpers::METHODS.contains(&name)
    }
}

/// Every problem of `d` against the native model.
pub(crate) fn validate(d: &Derivatives, native: &NativeVocabulary<'_>) -> Vec<Diagnostic> {
    let mut errs = Vec::new();
    let mut seen: HashMap<String, Loc> = HashMap::new();
    for e in &d.entries {
        let op = e.schema.name.to_string();
        if let Some(first) = seen.insert(op.clone(), e.schema.loc) {
            errs.push(
                Diagnostic::new(
                    "opal::deriv_duplicate_entry",
                    name_loc(e),
                    format!("`{op}` has a second entry"),
                )
                .label("second entry for this operator")
                .hint(format!("merge it with the entry on line {}", first.line)),
            );
        }
        if let Some(declared) = native.ops.get(&op) {
            let (ours, theirs) = (e.schema.to_string(), declared.to_string());
            if ours != theirs {
                errs.push(
                    Diagnostic::new(
                        "opal::deriv_schema_mismatch",
                        e.schema.loc,
                        format!("`{op}` is declared differently in native_functions.yaml"),
                    )
                    .label("not the native schema")
                    .hint(format!("native_functions.yaml has `{theirs}`")),
                );
            }
        } else {
            let hint = did_you_mean(&op, native.ops.keys().map(String::as_str)).unwrap_or_else(
                || "derivatives.yaml names operators of the native_functions.yaml it is checked with".into(),
            );
            errs.push(
                Diagnostic::new(
                    "opal::deriv_unknown_op",
                    name_loc(e),
                    format!("no operator `{op}` in native_functions.yaml"),
                )
                .label("not a native operator")
                .hint(hint),
            );
        }
        check_entry(e, native, &mut errs);
    }
    errs
}

/// The operator name at the start of an entry's `name:` schema.
fn name_loc(e: &DerivativeEntry) -> Loc {
    let mut l = e.schema.loc;
    l.len = e.schema.name.to_string().len().min(l.len.max(1));
    l
}

fn check_entry(e: &DerivativeEntry, native: &NativeVocabulary<'_>, errs: &mut Vec<Diagnostic>) {
    let schema = &e.schema;
    let scope = Scope::new(schema);
    if let Some(od) = &e.output_differentiability {
        for v in &od.values {
            if let OutputDifferentiable::When(f) = v {
                check_body(f, &scope, native, errs);
            }
        }
        if od.values.len() != schema.returns.len() {
            errs.push(
                Diagnostic::new(
                    "opal::deriv_output_differentiability",
                    od.loc,
                    format!(
                        "`output_differentiability` has {} for {} outputs",
                        count(od.values.len(), "value"),
                        schema.returns.len()
                    ),
                )
                .label("one True/False per output")
                .hint(format!(
                    "`{}` returns {}; give one True/False per output",
                    schema.name,
                    count(schema.returns.len(), "value")
                )),
            );
        }
    }
    for s in &e.sections {
        if let Some(key) = &s.dispatch_key {
            if !helpers::DISPATCH_KEYS.contains(&key.as_str()) {
                errs.push(unknown(
                    "opal::deriv_unknown_dispatch_key",
                    s.loc,
                    format!("unknown autograd dispatch key `{key}`"),
                    "not an autograd dispatch key",
                    key,
                    helpers::DISPATCH_KEYS.iter().copied(),
                ));
            }
        }
        let mut given: HashMap<&str, Loc> = HashMap::new();
        for f in &s.formulas {
            for k in &f.keys {
                if let Some(first) = given.insert(&k.name, k.loc) {
                    errs.push(
                        Diagnostic::new(
                            "opal::deriv_duplicate_key",
                            k.loc,
                            format!("a second formula for `{}`", k.name),
                        )
                        .label("given again")
                        .hint(format!("keep one: the first is on line {}", first.line)),
                    );
                }
            }
            check_keys(f, &scope, errs);
            check_body(f, &scope, native, errs);
        }
    }
}

/// The names a formula of one schema may read.
struct Scope<'a> {
    schema: &'a FunctionSchema,
    /// Arguments, then the formula variables of this schema.
    backward: Vec<String>,
    /// `backward` plus the forward-mode primal and tangent names.
    forward: Vec<String>,
}

impl<'a> Scope<'a> {
    fn new(schema: &'a FunctionSchema) -> Self {
        let mut backward: Vec<String> = schema.arguments.all().map(|a| a.name.clone()).collect();
        backward.extend(helpers::VARIABLES.iter().map(|v| v.to_string()));
        if schema.name.name.base.starts_with("_foreach_") {
            backward.extend(helpers::FOREACH_VARIABLES.iter().map(|v| v.to_string()));
        }
        for (i, r) in schema.returns.iter().enumerate() {
            backward.push(format!("result{i}"));
            if let Some(n) = &r.name {
                backward.push(n.clone());
                backward.push(format!("grad_{n}"));
            }
        }
        let mut forward = backward.clone();
        for a in schema.arguments.all() {
            forward.push(format!("{}_p", a.name));
            forward.push(format!("{}_t", a.name));
        }
        if schema.name.name.inplace {
            forward.extend(
                helpers::INPLACE_FORWARD_VARIABLES
                    .iter()
                    .map(|v| v.to_string()),
            );
        }
        Scope {
            schema,
            backward,
            forward,
        }
    }

    fn names(&self, mode: Mode) -> &[String] {
        match mode {
            Mode::Backward => &self.backward,
            Mode::Forward => &self.forward,
        }
    }

    /// The outputs a forward formula may be keyed by.
    fn outputs(&self) -> Vec<String> {
        let mut v = vec!["result".to_string()];
        for (i, r) in self.schema.returns.iter().enumerate() {
            v.push(format!("result{i}"));
            v.extend(r.name.clone());
        }
        v
    }
}

fn check_keys(f: &Formula, scope: &Scope<'_>, errs: &mut Vec<Diagnostic>) {
    let op = &scope.schema.name;
    match f.mode {
        Mode::Backward => {
            for k in &f.keys {
                if scope.schema.arguments.all().any(|a| a.name == k.name) {
                    continue;
                }
                let args = scope.schema.arguments.all().map(|a| a.name.as_str());
                errs.push(unknown(
                    "opal::deriv_unknown_input",
                    k.loc,
                    format!("`{}` is not an argument of `{op}`", k.name),
                    "no such argument",
                    &k.name,
                    args.chain(ENTRY_KEYS),
                ));
            }
            if matches!(f.body, Body::AutoElementWise | Body::AutoLinear) {
                errs.push(
                    Diagnostic::new(
                        "opal::deriv_misplaced_keyword",
                        f.loc,
                        format!("`{}` is a forward-mode keyword", f.text.trim()),
                    )
                    .label("on an input's gradient")
                    .hint("write `result: auto_element_wise` / `result: auto_linear`; an input's gradient needs a formula or `non_differentiable`"),
                );
            }
        }
        Mode::Forward => {
            let outputs = scope.outputs();
            for k in &f.keys {
                if outputs.contains(&k.name) {
                    continue;
                }
                errs.push(unknown(
                    "opal::deriv_unknown_output",
                    k.loc,
                    format!("`{}` is not an output of `{op}`", k.name),
                    "no such output",
                    &k.name,
                    outputs.iter().map(String::as_str),
                ));
            }
            if f.body == Body::NonDifferentiable {
                errs.push(
                    Diagnostic::new(
                        "opal::deriv_misplaced_keyword",
                        f.loc,
                        "`non_differentiable` marks an input, not an output",
                    )
                    .label("on an output")
                    .hint(
                        "use `output_differentiability: [False]` for outputs without a derivative",
                    ),
                );
            }
        }
    }
}

fn check_body(
    f: &Formula,
    scope: &Scope<'_>,
    native: &NativeVocabulary<'_>,
    errs: &mut Vec<Diagnostic>,
) {
    let Some(e) = f.expr() else { return };
    let mut c = Checker {
        f,
        scope: scope.names(f.mode),
        op: scope.schema.name.to_string(),
        native,
        locals: Vec::new(),
        errs,
    };
    c.value(e);
}

/// Walks one formula with the names in scope.
struct Checker<'a, 'e> {
    f: &'a Formula,
    scope: &'a [String],
    op: String,
    native: &'a NativeVocabulary<'a>,
    /// Lambda parameters of the enclosing lambdas.
    locals: Vec<&'a str>,
    errs: &'e mut Vec<Diagnostic>,
}

impl<'a> Checker<'a, '_> {
    fn loc(&self, e: &Expr) -> Loc {
        self.f.loc_of(e.span.start as usize, e.span.end as usize)
    }

    /// An expression read as a value.
    fn value(&mut self, e: &'a Expr) {
        match &e.kind {
            ExprKind::Ident(name) => self.variable(e, name),
            ExprKind::Path { segments, .. } => {
                let path = segments.join("::");
                if !helpers::CONSTANTS.contains(&path.as_str()) {
                    self.push_unknown(
                        e,
                        "opal::deriv_unknown_name",
                        format!("unknown name `{path}`"),
                        &path,
                        helpers::CONSTANTS.iter().copied(),
                    );
                }
            }
            ExprKind::Template { base, args } => {
                self.ty(base);
                args.iter().for_each(|a| self.template_arg(a));
            }
            ExprKind::Call { callee, args } => {
                self.callee(callee);
                args.iter().for_each(|a| self.value(a));
            }
            ExprKind::Member {
                receiver,
                name,
                name_span,
                template_args,
                args,
                ..
            } => {
                self.value(receiver);
                if !self.native.is_method(name) {
                    let loc = self
                        .f
                        .loc_of(name_span.start as usize, name_span.end as usize);
                    let candidates = helpers::METHODS
                        .iter()
                        .copied()
                        .chain(self.native.methods.iter().map(String::as_str));
                    self.errs.push(unknown(
                        "opal::deriv_unknown_method",
                        loc,
                        format!("unknown method `{name}`"),
                        "not a Tensor method nor a known helper method",
                        name,
                        candidates,
                    ));
                }
                template_args.iter().for_each(|a| self.template_arg(a));
                args.iter().flatten().for_each(|a| self.value(a));
            }
            ExprKind::Lambda { params, body, .. } => {
                let n = self.locals.len();
                for p in params {
                    self.ty(&p.ty);
                    self.locals.push(&p.name);
                }
                self.value(body);
                self.locals.truncate(n);
            }
            _ => e.for_each_child(&mut |c| self.value(c)),
        }
    }

    fn variable(&mut self, e: &Expr, name: &str) {
        let known = self.scope.iter().any(|s| s == name)
            || self.locals.contains(&name)
            || helpers::CONSTANTS.contains(&name);
        if !known {
            let msg = format!(
                "`{name}` is not an argument of `{}` nor a formula variable",
                self.op
            );
            let loc = self.loc(e);
            let candidates = self.scope.iter().map(String::as_str);
            self.errs.push(unknown(
                "opal::deriv_unknown_name",
                loc,
                msg,
                "not in scope",
                name,
                candidates.chain(self.locals.iter().copied()),
            ));
        }
    }

    /// What is called: a function name, `at::op`, a helper path, a type.
    fn callee(&mut self, e: &'a Expr) {
        match &e.kind {
            ExprKind::Ident(name) => {
                if !(self.native.is_function(name) || helpers::TYPES.contains(&name.as_str())) {
                    let candidates = helpers::FUNCTIONS
                        .iter()
                        .copied()
                        .chain(self.native.functions.iter().map(String::as_str));
                    self.push_unknown(
                        e,
                        "opal::deriv_unknown_function",
                        format!("unknown function `{name}`"),
                        name,
                        candidates,
                    );
                }
            }
            ExprKind::Path { segments, .. } => {
                let path = segments.join("::");
                let at_op = match segments.as_slice() {
                    [ns, op] if ns == "at" => self.native.is_function(op),
                    _ => false,
                };
                if !(at_op
                    || helpers::PATHS.contains(&path.as_str())
                    || helpers::TYPES.contains(&path.as_str()))
                {
                    self.push_unknown(
                        e,
                        "opal::deriv_unknown_function",
                        format!("unknown function `{path}`"),
                        &path,
                        helpers::PATHS.iter().copied(),
                    );
                }
            }
            ExprKind::Template { base, args } => {
                self.callee(base);
                args.iter().for_each(|a| self.template_arg(a));
            }
            _ => self.value(e),
        }
    }

    /// A type: a name or path of [`helpers::TYPES`], maybe with arguments.
    fn ty(&mut self, e: &'a Expr) {
        match &e.kind {
            ExprKind::Template { base, args } => {
                self.ty(base);
                args.iter().for_each(|a| self.template_arg(a));
            }
            ExprKind::Ident(_) | ExprKind::Path { .. } => {
                let name = e.to_string();
                let name = name.trim_start_matches("::");
                if !(helpers::TYPES.contains(&name) || helpers::PATHS.contains(&name)) {
                    self.push_unknown(
                        e,
                        "opal::deriv_unknown_type",
                        format!("unknown type `{name}`"),
                        name,
                        helpers::TYPES.iter().copied(),
                    );
                }
            }
            _ => self.value(e),
        }
    }

    fn template_arg(&mut self, e: &'a Expr) {
        if !matches!(e.kind, ExprKind::Int(_)) {
            self.ty(e);
        }
    }

    fn push_unknown<'c>(
        &mut self,
        e: &Expr,
        code: &'static str,
        message: String,
        name: &str,
        candidates: impl Iterator<Item = &'c str>,
    ) {
        let loc = self.loc(e);
        self.errs.push(unknown(
            code,
            loc,
            message,
            "unknown here",
            name,
            candidates,
        ));
    }
}

/// `n` and `what`, plural unless `n` is 1.
fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

fn unknown<'c>(
    code: &'static str,
    loc: Loc,
    message: String,
    label: &str,
    name: &str,
    candidates: impl Iterator<Item = &'c str>,
) -> Diagnostic {
    let hint = did_you_mean(name, candidates).unwrap_or_else(|| match code {
        "opal::deriv_unknown_input" | "opal::deriv_unknown_output" | "opal::deriv_unknown_name" => {
            "formulas are keyed by and read the operator's arguments and outputs, `grad`, `grads`, `result`".into()
        }
        _ => "a formula calls native operators, their Tensor methods, or the helpers listed in opal-codegen's derivatives/helpers.rs".into(),
    });
    Diagnostic::new(code, loc, message).label(label).hint(hint)
}
