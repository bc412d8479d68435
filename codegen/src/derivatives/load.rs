//! Reading a `derivatives.yaml` into the [`Derivatives`] model: YAML through the
//! located [`Node`] tree of the native loader, `name:` through the native schema
//! parser, formulas through [`super::expr`], every piece with its place.
//!
//! Owns: the file's shape (a list of `- name:` mappings, `dispatch:` sections,
//! `output_differentiability:`, `key: formula` lines) and syntax errors. Must
//! not: check names against the native model (that is `validate`).

use super::expr;
use super::model::{
    Body, DerivativeEntry, Derivatives, Formula, Mode, Name, OutputDifferentiability,
    OutputDifferentiable, Section,
};
use crate::diagnostics::Diagnostic;
use crate::model::{FunctionSchema, Loc};
use crate::parse::node::Node;
use crate::parse::outline::{comma_parts, LineIndex};
use crate::parse::{parse_schema_at, read_document};

/// The keys of an entry that are not formulas.
pub(crate) const ENTRY_KEYS: [&str; 3] = ["name", "dispatch", "output_differentiability"];

/// Reads `src`: the entries that loaded, and every problem found. A formula or
/// value with a problem is left out of its entry, and an entry without a usable
/// `name:` is left out, so the rest can still be validated.
pub(crate) fn parse_derivatives(src: &str) -> (Derivatives, Vec<Diagnostic>) {
    let mut errs = Vec::new();
    let mut out = Derivatives::default();
    let doc: Node<'_> = match read_document(src) {
        Ok(d) => d,
        Err(d) => return (out, vec![d]),
    };
    let items = match doc {
        Node::Seq(items) => items,
        Node::Null => Vec::new(),
        other => {
            errs.push(
                Diagnostic::new(
                    "opal::not_a_list",
                    Loc::START,
                    format!("the file is {}, not a list of entries", other.describe()),
                )
                .label("top level")
                .hint("derivatives.yaml is a list: each entry starts with `- name: op(args) -> returns`"),
            );
            return (out, errs);
        }
    };
    let reader = Reader {
        src,
        idx: LineIndex::new(src),
    };
    for (i, item) in items.iter().enumerate() {
        if let Some(e) = reader.entry(i, item, &mut errs) {
            out.entries.push(e);
        }
    }
    (out, errs)
}

struct Reader<'s> {
    src: &'s str,
    idx: LineIndex<'s>,
}

impl Reader<'_> {
    /// Where `node` is, when the YAML parser lent it as a slice of the file.
    fn of(&self, node: &Node<'_>) -> Option<Loc> {
        node.span_in(self.src).map(|(o, l)| self.idx.loc(o, l))
    }

    /// Where a value is: itself, else its first located scalar, else `fallback`.
    fn value_loc(&self, node: &Node<'_>, fallback: Loc) -> Loc {
        node.first_span_in(self.src)
            .map_or(fallback, |(o, l)| self.idx.loc(o, l))
    }

    /// The `- ` line of an item, from its first located scalar.
    fn item_loc(&self, item: &Node<'_>) -> Loc {
        let Some((first, _)) = item.first_span_in(self.src) else {
            return Loc::START;
        };
        let line_start = self.src[..first].rfind('\n').map_or(0, |i| i + 1);
        let start = self.src[line_start..first]
            .find('-')
            .map_or(first, |i| line_start + i);
        let line_end = self.src[first..]
            .find('\n')
            .map_or(self.src.len(), |i| first + i);
        self.idx
            .loc(start, self.src[start..line_end].trim_end().len())
    }

    fn entry(
        &self,
        i: usize,
        item: &Node<'_>,
        errs: &mut Vec<Diagnostic>,
    ) -> Option<DerivativeEntry> {
        let loc = self.item_loc(item);
        let Node::Map(pairs) = item else {
            errs.push(
                Diagnostic::new(
                    "opal::entry_not_mapping",
                    loc,
                    format!("entry {} is {}, not a mapping", i + 1, item.describe()),
                )
                .label("expected `- name: ...` with formulas")
                .hint("an entry is a mapping: `- name: exp(Tensor self) -> Tensor` followed by indented `input: formula` lines"),
            );
            return None;
        };
        let schema = self.name(pairs, loc, errs)?;
        let mut entry = DerivativeEntry {
            schema,
            loc,
            sections: Vec::new(),
            output_differentiability: None,
        };
        let mut keyless = Section {
            dispatch_key: None,
            loc,
            formulas: Vec::new(),
        };
        for (k, v) in pairs {
            let kloc = self.of(k).unwrap_or(loc);
            match k.as_str() {
                Some("name") => {}
                Some("dispatch") => {
                    let sections = self.dispatch(&entry.schema, v, kloc, errs);
                    entry.sections.extend(sections);
                }
                Some("output_differentiability") => {
                    entry.output_differentiability =
                        self.output_differentiability(&entry.schema, v, kloc, errs)
                }
                Some(_) => {
                    if let Some(f) = self.formula(&entry.schema, k, v, kloc, errs) {
                        keyless.formulas.push(f);
                    }
                }
                None => errs.push(
                    Diagnostic::new(
                        "opal::key_type",
                        kloc,
                        format!("entry key {} is not a name", k.describe()),
                    )
                    .label("in this entry")
                    .hint("keys are `name`, `dispatch`, `output_differentiability` or input names"),
                ),
            }
        }
        if !keyless.formulas.is_empty() || entry.sections.is_empty() {
            entry.sections.insert(0, keyless);
        }
        Some(entry)
    }

    /// The parsed `name:` schema.
    fn name(
        &self,
        pairs: &[(Node<'_>, Node<'_>)],
        loc: Loc,
        errs: &mut Vec<Diagnostic>,
    ) -> Option<FunctionSchema> {
        let Some((k, v)) = pairs.iter().find(|(k, _)| k.as_str() == Some("name")) else {
            errs.push(
                Diagnostic::new("opal::missing_name", loc, "entry has no `name:` key")
                    .label("this entry")
                    .hint("every entry starts with `- name: op.overload(args) -> returns`"),
            );
            return None;
        };
        let vloc = self.of(v).or_else(|| self.of(k)).unwrap_or(loc);
        let Some(s) = v.as_str() else {
            errs.push(type_error("name", "a schema string", v, vloc));
            return None;
        };
        let mut base = vloc;
        base.len = s.len();
        parse_schema_at(s, base).map_err(|e| errs.push(e)).ok()
    }

    fn dispatch(
        &self,
        schema: &FunctionSchema,
        v: &Node<'_>,
        kloc: Loc,
        errs: &mut Vec<Diagnostic>,
    ) -> Vec<Section> {
        let mut out = Vec::new();
        let Node::Map(sections) = v else {
            errs.push(type_error(
                "dispatch",
                "a mapping of dispatch keys",
                v,
                kloc,
            ));
            return out;
        };
        for (dk, dv) in sections {
            let dloc = self.of(dk).unwrap_or(kloc);
            let (Some(key), Node::Map(lines)) = (dk.as_str(), dv) else {
                errs.push(type_error(
                    "dispatch",
                    "a mapping of dispatch keys to formulas",
                    if dk.as_str().is_some() { dv } else { dk },
                    dloc,
                ));
                continue;
            };
            let mut section = Section {
                dispatch_key: Some(key.to_string()),
                loc: dloc,
                formulas: Vec::new(),
            };
            for (k, fv) in lines {
                let floc = self.of(k).unwrap_or(dloc);
                if k.as_str().is_none() {
                    errs.push(type_error("a formula key", "an input name", k, floc));
                } else if let Some(f) = self.formula(schema, k, fv, floc, errs) {
                    section.formulas.push(f);
                }
            }
            out.push(section);
        }
        out
    }

    fn output_differentiability(
        &self,
        schema: &FunctionSchema,
        v: &Node<'_>,
        kloc: Loc,
        errs: &mut Vec<Diagnostic>,
    ) -> Option<OutputDifferentiability> {
        let loc = self.of(v).unwrap_or(kloc);
        let Node::Seq(items) = v else {
            errs.push(type_error(
                "output_differentiability",
                "a list of True/False",
                v,
                loc,
            ));
            return None;
        };
        let mut values = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Node::Bool(b) => values.push(OutputDifferentiable::Always(*b)),
                Node::Str(_) => {
                    let f = self.formula_text(schema, Vec::new(), item, kloc, errs)?;
                    values.push(OutputDifferentiable::When(f));
                }
                other => {
                    errs.push(type_error(
                        "output_differentiability",
                        "a list of True/False or conditions",
                        other,
                        self.value_loc(other, loc),
                    ));
                    return None;
                }
            }
        }
        Some(OutputDifferentiability { values, loc })
    }

    /// One `names: formula` line; `kloc` is the key's place.
    fn formula(
        &self,
        schema: &FunctionSchema,
        k: &Node<'_>,
        v: &Node<'_>,
        kloc: Loc,
        errs: &mut Vec<Diagnostic>,
    ) -> Option<Formula> {
        let key = k.as_str().unwrap_or_default();
        self.formula_text(schema, split_names(key, kloc), v, kloc, errs)
    }

    /// A formula keyed by `keys` (none for a condition) with text `v`.
    fn formula_text(
        &self,
        schema: &FunctionSchema,
        keys: Vec<Name>,
        v: &Node<'_>,
        kloc: Loc,
        errs: &mut Vec<Diagnostic>,
    ) -> Option<Formula> {
        let Some(text) = v.as_str() else {
            let key: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
            let key = key.join(", ");
            errs.push(
                type_error(&key, "a formula", v, self.value_loc(v, kloc)).hint(format!(
                    "write the formula as text, quoted if needed: `{key}: \"...\"`"
                )),
            );
            return None;
        };
        let (loc, exact) = match self.of(v) {
            Some(l) => (l, true),
            None => (kloc, false),
        };
        let is_output = |n: &str| {
            n == "result"
                || n.strip_prefix("result")
                    .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                || schema.returns.iter().any(|r| r.name.as_deref() == Some(n))
        };
        let mode = if keys.first().is_some_and(|k| is_output(&k.name)) {
            Mode::Forward
        } else {
            Mode::Backward
        };
        let mut f = Formula {
            keys,
            mode,
            text: text.to_string(),
            loc,
            exact,
            body: Body::NonDifferentiable,
        };
        f.body = match text.trim() {
            "non_differentiable" => Body::NonDifferentiable,
            "auto_element_wise" => Body::AutoElementWise,
            "auto_linear" => Body::AutoLinear,
            _ => match expr::parse(text) {
                Ok(e) => Body::Expr(e),
                Err(e) => {
                    errs.push(
                        Diagnostic::new(
                            "opal::formula_syntax",
                            f.loc_of(e.start, e.end),
                            format!("formula does not parse: {}", e.message),
                        )
                        .label("here")
                        .hint(e.hint),
                    );
                    return None;
                }
            },
        };
        Some(f)
    }
}

/// The names of a `self, other` key, each located inside the key when the key's
/// place covers its text.
fn split_names(key: &str, at: Loc) -> Vec<Name> {
    comma_parts(key, at)
        .map(|(name, loc)| Name {
            name: name.to_string(),
            loc,
        })
        .collect()
}

fn type_error(key: &str, want: &str, v: &Node<'_>, loc: Loc) -> Diagnostic {
    Diagnostic::new(
        "opal::key_type",
        loc,
        format!("`{key}` must be {want}, found {}", v.describe()),
    )
    .label(format!("expected {want}"))
    .hint("see PyTorch's derivatives.yaml for the shape of an entry")
}
