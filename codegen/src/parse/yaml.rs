//! Loading a whole `native_functions.yaml` (and `tags.yaml`) with yaml_serde, and
//! pairing its values with positions from [`super::outline`].
//!
//! Owns: decoding, YAML syntax errors, the document's shape (a list of mappings).
//! Must not: interpret keys (that is `entry`) or apply semantic rules.

use super::entry::parse_entry;
use super::node::Node;
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
    let loc = e.location().map_or(START, |l| idx.loc(l.index(), 1));
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

const START: Loc = Loc {
    offset: 0,
    len: 0,
    line: 1,
    col: 1,
};

/// The location of a top-level item: from its `- ` to the end of that line, found
/// from the first scalar yaml_serde located inside it.
fn item_loc(item: &Node<'_>, src: &str, idx: &LineIndex<'_>) -> Option<Loc> {
    let (first, _) = item.first_span_in(src)?;
    let line_start = src[..first].rfind('\n').map_or(0, |i| i + 1);
    let lead = &src[line_start..first];
    // `- func:` (block) or `- {func:` (flow): start at the dash when there is one.
    let start = lead.find('-').map_or(first, |i| line_start + i);
    let line_end = src[first..].find('\n').map_or(src.len(), |i| first + i);
    Some(idx.loc(start, src[start..line_end].trim_end().len()))
}

/// Parses `src` as a `native_functions.yaml`. Large block-style files are cut at
/// their top-level `- ` lines and the pieces parsed on several threads; anything
/// unusual (aliases across pieces, other top-level shapes, any YAML error) is
/// parsed again as one document, which is then authoritative.
pub fn parse_native_yaml(src: &str) -> Parsed {
    parse_in_pieces(src).unwrap_or_else(|| parse_whole(src))
}

fn parse_whole(src: &str) -> Parsed {
    let mut out = Parsed::default();
    let doc: Node<'_> = match serde_yaml::from_str(src) {
        Ok(v) => v,
        Err(e) => {
            out.errors.push(yaml_error(&e, src));
            return out;
        }
    };
    let items = match doc {
        Node::Seq(items) => items,
        Node::Null => return out,
        other => {
            let what = match other {
                Node::Map(_) => "a mapping",
                Node::Str(_) => "a string",
                _ => "a single value",
            };
            out.errors.push(
                Diagnostic::new(
                    "opal::not_a_list",
                    START,
                    format!("the file is {what}, not a list of entries"),
                )
                .label("top level")
                .hint("native_functions.yaml is a list: each entry starts with `- func: ...`"),
            );
            return out;
        }
    };
    let idx = LineIndex::new(src);
    // Items without any located scalar (e.g. `- []`) are found by the outline scan,
    // only computed when needed.
    let mut lines = None;
    let n = items.len();
    parse_items(&items, 0, src, &idx, &mut out, |i| {
        let ol = lines.get_or_insert_with(|| outline(src));
        ol.get(i).filter(|_| ol.len() == n).map_or(START, |o| o.loc)
    });
    out
}

/// Turns top-level items (the first being item number `first`) into functions.
fn parse_items(
    items: &[Node<'_>],
    first: usize,
    src: &str,
    idx: &LineIndex<'_>,
    out: &mut Parsed,
    mut fallback_loc: impl FnMut(usize) -> Loc,
) {
    out.functions.reserve(items.len());
    for (j, item) in items.iter().enumerate() {
        let i = first + j;
        let entry_loc = item_loc(item, src, idx).unwrap_or_else(|| fallback_loc(i));
        match item {
            Node::Map(m) => {
                if let Some(f) = parse_entry(m, entry_loc, src, idx, &mut out.errors) {
                    out.functions.push(f);
                }
            }
            other => {
                let what = match other {
                    Node::Str(s) => format!("the string `{s}`"),
                    Node::Seq(_) => "a list".into(),
                    Node::Null => "empty".into(),
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
}

/// Byte offsets of the top-level items of a plain block sequence at column 0, or
/// `None` when the file has any other top-level line (directives, markers, keys).
fn item_starts(src: &str) -> Option<Vec<usize>> {
    let mut starts = Vec::new();
    let mut offset = 0;
    for line in src.split_inclusive('\n') {
        let at = offset;
        offset += line.len();
        let b = line.as_bytes();
        match b.first() {
            Some(b'-') if matches!(b.get(1), Some(b' ' | b'\n' | b'\r') | None) => starts.push(at),
            Some(b' ' | b'\n' | b'\r' | b'#') | None => {}
            _ => return None,
        }
    }
    Some(starts)
}

fn parse_in_pieces(src: &str) -> Option<Parsed> {
    const MIN_PIECE: usize = 64 * 1024;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    let pieces = threads.min(src.len() / MIN_PIECE);
    if pieces < 2 {
        return None;
    }
    let starts = item_starts(src)?;
    if starts.len() < pieces * 16 {
        return None;
    }
    // Piece k holds items bounds[k]..bounds[k+1]; the first also holds the preamble.
    let bounds: Vec<usize> = (0..=pieces).map(|k| k * starts.len() / pieces).collect();
    let idx = LineIndex::new(src);
    let results: Vec<Option<Parsed>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..pieces)
            .map(|k| {
                let (first, last) = (bounds[k], bounds[k + 1]);
                let from = if k == 0 { 0 } else { starts[first] };
                let to = starts.get(last).copied().unwrap_or(src.len());
                let (idx, starts) = (&idx, &starts);
                scope.spawn(move || {
                    let items = match serde_yaml::from_str::<Node<'_>>(&src[from..to]) {
                        Ok(Node::Seq(items)) if items.len() == last - first => items,
                        _ => return None,
                    };
                    let mut out = Parsed::default();
                    parse_items(&items, first, src, idx, &mut out, |i| {
                        let at = starts[i];
                        let end = src[at..].find('\n').map_or(src.len(), |e| at + e);
                        idx.loc(at, src[at..end].trim_end().len())
                    });
                    Some(out)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().ok().flatten())
            .collect()
    });
    let mut out = Parsed::default();
    for r in results {
        let r = r?;
        out.functions.extend(r.functions);
        out.errors.extend(r.errors);
    }
    Some(out)
}

/// Reads the tag names of a `tags.yaml` (a list of `- tag: name` mappings).
pub fn parse_tags(src: &str) -> Result<Vec<String>, Vec<Diagnostic>> {
    let doc: Node<'_> = serde_yaml::from_str(src).map_err(|e| vec![yaml_error(&e, src)])?;
    let idx = LineIndex::new(src);
    let mut tags = Vec::new();
    let mut errs = Vec::new();
    let items = match doc {
        Node::Seq(items) => items,
        Node::Null => Vec::new(),
        _ => {
            return Err(vec![Diagnostic::new(
                "opal::not_a_list",
                START,
                "tags.yaml is not a list of `- tag:` entries",
            )
            .label("top level")
            .hint("write each tag as `- tag: name` with a `desc:`")])
        }
    };
    for item in &items {
        let tag = match item {
            Node::Map(pairs) => pairs
                .iter()
                .find(|(k, _)| k.as_str() == Some("tag"))
                .and_then(|(_, v)| v.as_str()),
            _ => None,
        };
        match tag {
            Some(t) => tags.push(t.to_string()),
            None => errs.push(
                Diagnostic::new(
                    "opal::bad_tag_entry",
                    item_loc(item, src, &idx).unwrap_or(START),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pytorch_2_15() -> String {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/fixtures/pytorch-2.15/native_functions.yaml"
        );
        std::fs::read_to_string(p).unwrap()
    }

    fn same(a: &Parsed, b: &Parsed) {
        assert_eq!(a.functions.len(), b.functions.len());
        assert!(a.functions == b.functions, "functions differ");
        assert_eq!(a.errors, b.errors);
    }

    #[test]
    fn pieces_give_the_same_result_as_one_document() {
        let src = pytorch_2_15();
        let whole = parse_whole(&src);
        assert_eq!(whole.functions.len(), 2590);
        match parse_in_pieces(&src) {
            Some(p) => same(&p, &whole),
            None => assert_eq!(
                std::thread::available_parallelism().map_or(1, |n| n.get()),
                1,
                "pieces refused on a multi-core machine"
            ),
        }
        same(&parse_native_yaml(&src), &whole);
    }

    #[test]
    fn errors_in_pieces_match_one_document() {
        let src = pytorch_2_15().replacen(
            "  variants: function, method",
            "  variants: function, methd",
            40,
        );
        let src = src.replacen("(Tensor self", "(Tensr self", 1);
        let whole = parse_whole(&src);
        assert!(whole.errors.len() > 2);
        same(&parse_native_yaml(&src), &whole);
    }

    #[test]
    fn aliases_across_pieces_fall_back_to_one_document() {
        let mut src =
            pytorch_2_15().replacen("  variants: function\n", "  variants: &v function\n", 1);
        src.push_str("\n- func: zzz_alias_user(Tensor self) -> Tensor\n  variants: *v\n");
        let got = parse_native_yaml(&src);
        assert!(got.errors.is_empty(), "{:?}", got.errors.first());
        assert_eq!(got.functions.len(), 2591);
        same(&got, &parse_whole(&src));
    }

    #[test]
    fn yaml_syntax_errors_come_from_the_whole_document() {
        let src = pytorch_2_15().replacen("  dispatch:\n    CPU:", "  dispatch:\n   CPU:", 1);
        let got = parse_native_yaml(&src);
        assert_eq!(got.errors.len(), 1);
        assert_eq!(got.errors[0].code, "opal::yaml");
        same(&got, &parse_whole(&src));
    }
}
