//! Loading a whole `native_functions.yaml` (and `tags.yaml`) with yaml_serde, and
//! pairing its values with positions from [`super::outline`].
//!
//! Owns: decoding, YAML syntax errors, the document's shape (a list of mappings).
//! Must not: interpret keys (that is `entry`) or apply semantic rules.

use serde_yaml::Value;

use super::entry::parse_entry;
use super::outline::{outline, LineIndex};
use crate::diagnostics::Diagnostic;
use crate::model::{Loc, NativeFunction};

/// The result of reading one file: declared functions in file order, plus every
/// problem found. Entries with problems are left out of `functions`.
#[derive(Debug, Default)]
pub struct Parsed {
    pub functions: Vec<NativeFunction>,
    pub errors: Vec<Diagnostic>,
}

/// Decodes bytes as UTF-8, or reports where the first invalid byte is.
pub fn decode(bytes: &[u8]) -> Result<&str, Diagnostic> {
    std::str::from_utf8(bytes).map_err(|e| {
        let valid = &bytes[..e.valid_up_to()];
        let line = valid.iter().filter(|b| **b == b'\n').count() as u32 + 1;
        let line_start = valid.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        // The valid prefix is UTF-8, so its character count is well defined.
        let col = String::from_utf8_lossy(&valid[line_start..])
            .chars()
            .count() as u32
            + 1;
        Diagnostic::new(
            "opal::not_utf8",
            Loc {
                offset: e.valid_up_to(),
                len: e.error_len().unwrap_or(1),
                line,
                col,
            },
            format!(
                "file is not UTF-8: invalid byte 0x{:02x}",
                bytes[e.valid_up_to()]
            ),
        )
        .label("invalid UTF-8 here")
        .hint("save the file as UTF-8")
    })
}

/// Turns a yaml_serde error into a located diagnostic.
fn yaml_error(e: &serde_yaml::Error, src: &str) -> Diagnostic {
    let idx = LineIndex::new(src);
    let loc = e.location().map_or(
        Loc {
            offset: 0,
            len: 0,
            line: 1,
            col: 1,
        },
        |l| idx.loc(l.index(), 1),
    );
    let text = e.to_string();
    // yaml_serde appends "at line L column C"; the diagnostic shows that already.
    let message = match text.find(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    };
    let hint = if message.contains("repetition limit") || message.contains("recursion limit") {
        "the file expands YAML aliases too much; native_functions.yaml needs no aliases"
    } else if message.contains("duplicate entry") {
        "each key may appear once per mapping"
    } else {
        "check the indentation and quoting around this point"
    };
    Diagnostic::new("opal::yaml", loc, format!("invalid YAML: {message}"))
        .label("YAML parser stopped here")
        .hint(hint)
}

/// Parses `src` as a `native_functions.yaml`.
pub fn parse_native_yaml(src: &str) -> Parsed {
    let mut out = Parsed::default();
    let doc: Value = match serde_yaml::from_str(src) {
        Ok(v) => v,
        Err(e) => {
            out.errors.push(yaml_error(&e, src));
            return out;
        }
    };
    let items = match doc {
        Value::Sequence(items) => items,
        Value::Null => return out,
        other => {
            let what = match other {
                Value::Mapping(_) => "a mapping",
                Value::String(_) => "a string",
                _ => "a single value",
            };
            out.errors.push(
                Diagnostic::new(
                    "opal::not_a_list",
                    Loc {
                        offset: 0,
                        len: 0,
                        line: 1,
                        col: 1,
                    },
                    format!("the file is {what}, not a list of entries"),
                )
                .label("top level")
                .hint("native_functions.yaml is a list: each entry starts with `- func: ...`"),
            );
            return out;
        }
    };
    let lines = outline(src);
    // When the outline saw a different number of items the file is not in the
    // block style it understands; positions then fall back to the file start.
    let aligned = lines.len() == items.len();
    let fallback = Loc {
        offset: 0,
        len: 0,
        line: 1,
        col: 1,
    };
    for (i, item) in items.iter().enumerate() {
        let ol = if aligned { lines.get(i) } else { None };
        let entry_loc = ol.map_or(fallback, |o| o.loc);
        match item {
            Value::Mapping(m) => {
                if let Some(f) = parse_entry(m, ol, entry_loc, src, &mut out.errors) {
                    out.functions.push(f);
                }
            }
            other => {
                let what = match other {
                    Value::String(s) => format!("the string `{s}`"),
                    Value::Sequence(_) => "a list".into(),
                    Value::Null => "empty".into(),
                    _ => "a single value".into(),
                };
                out.errors.push(
                    Diagnostic::new(
                        "opal::entry_not_mapping",
                        entry_loc,
                        format!("entry {} is {what}, not a mapping", i + 1),
                    )
                    .label("expected `- func: ...` with keys")
                    .hint("an entry is a mapping: `- func: abs(Tensor self) -> Tensor` followed by indented keys"),
                );
            }
        }
    }
    out
}

/// Reads the tag names of a `tags.yaml` (a list of `- tag: name` mappings).
pub fn parse_tags(src: &str) -> Result<Vec<String>, Vec<Diagnostic>> {
    let doc: Value = serde_yaml::from_str(src).map_err(|e| vec![yaml_error(&e, src)])?;
    let lines = outline(src);
    let mut tags = Vec::new();
    let mut errs = Vec::new();
    let items = match doc {
        Value::Sequence(items) => items,
        Value::Null => Vec::new(),
        _ => {
            return Err(vec![Diagnostic::new(
                "opal::not_a_list",
                Loc {
                    offset: 0,
                    len: 0,
                    line: 1,
                    col: 1,
                },
                "tags.yaml is not a list of `- tag:` entries",
            )
            .label("top level")
            .hint("write each tag as `- tag: name` with a `desc:`")])
        }
    };
    for (i, item) in items.iter().enumerate() {
        match item.get("tag").and_then(Value::as_str) {
            Some(t) => tags.push(t.to_string()),
            None => errs.push(
                Diagnostic::new(
                    "opal::bad_tag_entry",
                    lines.get(i).map_or(
                        Loc {
                            offset: 0,
                            len: 0,
                            line: 1,
                            col: 1,
                        },
                        |o| o.loc,
                    ),
                    "tags.yaml entry has no `tag:` name",
                )
                .label("this entry")
                .hint("write `- tag: name`"),
            ),
        }
    }
    if errs.is_empty() {
        Ok(tags)
    } else {
        Err(errs)
    }
}
