//! Loading a whole `native_functions.yaml` (and `tags.yaml`) with yaml_serde, and
//! locating its values (lent slices of the text, through a [`LineIndex`]; the
//! [`super::outline`] only for items without any).
//!
//! Owns: decoding, YAML syntax errors, the document's shape (a list of mappings),
//! and cutting large files into pieces parsed on rayon's threads. Must not:
//! interpret keys (that is `entry`) or apply semantic rules (the per-function
//! check run on the parsing threads is the caller's).

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
    let loc = yaml_error_loc(e, src);
    let text = e.to_string();
    // yaml_serde appends "at line L column C"; the diagnostic shows that already.
    let message = match text.find(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    };
    let hint = if message.contains("repetition limit") {
        "the file expands YAML aliases too much; native_functions.yaml needs no aliases"
    } else if message.contains("recursion limit") {
        "the file nests lists or mappings too deeply; an entry needs only a few levels"
    } else if message.contains("more than one document") {
        "the file must be one YAML document: remove the `---` line and what follows, or make it a separate file"
    } else if message.contains("unknown anchor") {
        "an alias `*name` needs an anchor `&name` earlier in the file"
    } else if message.contains("duplicate entry") {
        "each key may appear once per mapping"
    } else {
        "check the indentation and quoting around this point"
    };
    Diagnostic::new("opal::yaml", loc, format!("invalid YAML: {message}"))
        .label("YAML parser stopped here")
        .hint(hint)
}

/// Where a yaml_serde error points; for the errors it reports without a place
/// (several documents, alias expansion), the place that causes them: the second
/// document's `---`, or the first alias.
fn yaml_error_loc(e: &serde_yaml::Error, src: &str) -> Loc {
    let idx = LineIndex::new(src);
    if let Some(l) = e.location() {
        return idx.loc(l.index().min(src.len()), 1);
    }
    let text = e.to_string();
    let at = if text.contains("more than one document") {
        second_document(src)
    } else if text.contains("repetition limit") || text.contains("recursion limit") {
        first_alias(src)
    } else {
        None
    };
    at.map_or(Loc::START, |(at, len)| idx.loc(at, len))
}

/// The `---` (or `...`) line that ends the first document of `src`, if any.
fn second_document(src: &str) -> Option<(usize, usize)> {
    let mut seen_content = false;
    let mut at = 0;
    for line in src.split_inclusive('\n') {
        let t = line.trim_end();
        let marker = t == "---" || t.starts_with("--- ") || t == "...";
        if marker && seen_content {
            return Some((at, 3));
        }
        if !marker && !t.trim_start().is_empty() && !t.trim_start().starts_with('#') {
            seen_content = true;
        }
        at += line.len();
    }
    None
}

/// The first `*alias` of `src` (a `*` after a space, `[`, `,` or `:` and before a
/// name character), if any.
fn first_alias(src: &str) -> Option<(usize, usize)> {
    let b = src.as_bytes();
    memchr::memchr_iter(b'*', b)
        .find(|&i| {
            matches!(
                i.checked_sub(1).map(|j| b[j]),
                None | Some(b' ' | b'[' | b',' | b':' | b'\t')
            ) && b
                .get(i + 1)
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        })
        .map(|i| (i, 1))
}

/// Open `[`/`{` (anywhere in the text, strings included) that are allowed to be
/// unclosed at one point. The YAML library stops at 128 levels of nesting anyway,
/// but only after scanning the whole document, in time quadratic in the depth of
/// flow collections (40,000 levels took 13 s).
const MAX_FLOW_DEPTH: usize = 1000;

/// Reads a whole small YAML document (a derivatives file, an autocast policy) as a
/// located [`Node`] tree: nesting too deep and YAML syntax errors are one located
/// diagnostic each.
pub(crate) fn read_document(src: &str) -> Result<Node<'_>, Diagnostic> {
    check_flow_depth(src)?;
    serde_yaml::from_str(src).map_err(|e| yaml_error(&e, src))
}

/// A located error when `src` opens more than [`MAX_FLOW_DEPTH`] brackets without
/// closing them. Only the brackets are visited (found with `memchr`), so this
/// costs about nothing on ordinary files.
fn check_flow_depth(src: &str) -> Result<(), Diagnostic> {
    let b = src.as_bytes();
    let mut depth = 0usize;
    let mut prev = 0;
    for at in memchr::memchr2_iter(b'[', b'{', b) {
        let closes = memchr::memchr2_iter(b']', b'}', &b[prev..at]).count();
        depth = depth.saturating_sub(closes) + 1;
        prev = at + 1;
        if depth > MAX_FLOW_DEPTH {
            return Err(Diagnostic::new(
                "opal::yaml_too_deep",
                LineIndex::new(src).loc(at, 1),
                format!("more than {MAX_FLOW_DEPTH} `[`/`{{` are open here"),
            )
            .label("too deeply nested")
            .hint("a YAML file for opal-codegen nests lists and mappings only a few levels deep; close the brackets"));
        }
    }
    Ok(())
}

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
/// their top-level `- ` lines and the pieces parsed on rayon's threads; anything
/// unusual (aliases across pieces, other top-level shapes, any YAML error) is
/// parsed again as one document, which is then authoritative.
pub fn parse_native_yaml(src: &str) -> Parsed {
    parse_native_yaml_checked(src, |_, _| ()).parsed
}

/// [`parse_native_yaml`] plus the result of `check` on each function, in order.
pub(crate) struct Checked<T> {
    pub parsed: Parsed,
    /// `check`'s result for each of `parsed.functions`.
    pub results: Vec<T>,
    /// What `check` reported, in function order (after all of `parsed.errors`).
    pub check_errors: Vec<Diagnostic>,
}

/// [`parse_native_yaml`], running `check` on every function right after it is
/// parsed, on the thread that parsed it: the loader's per-function rules then
/// need no second pass over the functions (the caller says what the rules are;
/// parsing knows none).
pub(crate) fn parse_native_yaml_checked<T: Send>(
    src: &str,
    check: impl Fn(&mut NativeFunction, &mut Vec<Diagnostic>) -> T + Sync,
) -> Checked<T> {
    if let Err(e) = check_flow_depth(src) {
        return Checked {
            parsed: Parsed {
                functions: Vec::new(),
                errors: vec![e],
            },
            results: Vec::new(),
            check_errors: Vec::new(),
        };
    }
    parse_in_pieces(src, &check).unwrap_or_else(|| run_check(parse_whole(src), &check))
}

/// `parsed` with `check` run on each of its functions.
fn run_check<T>(
    mut parsed: Parsed,
    check: &impl Fn(&mut NativeFunction, &mut Vec<Diagnostic>) -> T,
) -> Checked<T> {
    let mut check_errors = Vec::new();
    let results = parsed
        .functions
        .iter_mut()
        .map(|f| check(f, &mut check_errors))
        .collect();
    Checked {
        parsed,
        results,
        check_errors,
    }
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
                    Loc::START,
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
    out.functions.reserve(n);
    let functions = &mut out.functions;
    parse_items(
        &items,
        0,
        src,
        &idx,
        &mut out.errors,
        |i| {
            let ol = lines.get_or_insert_with(|| outline(src));
            ol.get(i)
                .filter(|_| ol.len() == n)
                .map_or(Loc::START, |o| o.loc)
        },
        |_, f| functions.push(f),
    );
    out
}

/// Turns top-level items (the first being item number `first`) into functions,
/// handing each to `found` with its index in `items`; problems go to `errors`.
fn parse_items(
    items: &[Node<'_>],
    first: usize,
    src: &str,
    idx: &LineIndex<'_>,
    errors: &mut Vec<Diagnostic>,
    mut fallback_loc: impl FnMut(usize) -> Loc,
    mut found: impl FnMut(usize, NativeFunction),
) {
    for (j, item) in items.iter().enumerate() {
        let i = first + j;
        let entry_loc = item_loc(item, src, idx).unwrap_or_else(|| fallback_loc(i));
        match item {
            Node::Map(m) => {
                if let Some(f) = parse_entry(m, entry_loc, src, idx, errors) {
                    found(j, f);
                }
            }
            other => {
                let what = match other {
                    Node::Str(s) => format!("the string `{s}`"),
                    Node::Seq(_) => "a list".into(),
                    Node::Null => "empty".into(),
                    _ => "a single value".into(),
                };
                errors.push(
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

/// Byte offsets and 1-based line numbers of the top-level items of a plain block
/// sequence at column 0, or `None` when the file has any other top-level line
/// (directives, markers, keys).
fn item_starts(src: &str) -> Option<Vec<(usize, u32)>> {
    let b = src.as_bytes();
    let mut starts = Vec::with_capacity(b.len() / 128);
    let mut line = 1;
    let mut at = 0;
    let mut newlines = memchr::memchr_iter(b'\n', b);
    while at < b.len() {
        match b[at] {
            b'-' if matches!(b.get(at + 1), Some(b' ' | b'\n' | b'\r') | None) => {
                starts.push((at, line))
            }
            b' ' | b'\n' | b'\r' | b'#' => {}
            _ => return None,
        }
        at = newlines.next().map_or(b.len(), |i| i + 1);
        line += 1;
    }
    Some(starts)
}

fn parse_in_pieces<T: Send>(
    src: &str,
    check: &(impl Fn(&mut NativeFunction, &mut Vec<Diagnostic>) -> T + Sync),
) -> Option<Checked<T>> {
    use rayon::prelude::*;
    // Pieces of 16 KiB and more, several per thread: rayon hands them to whichever
    // thread is free (the machine is shared, a thread may stall), and each piece's
    // yaml_serde event buffer stays small enough for the cache.
    const MIN_PIECE: usize = 16 * 1024;
    const PER_THREAD: usize = 8;
    // rayon sized its pool once; available_parallelism reads cgroup files on
    // every call.
    let threads = rayon::current_num_threads();
    if threads < 2 {
        return None;
    }
    let starts = item_starts(src)?;
    let pieces = (threads * PER_THREAD)
        .min(src.len() / MIN_PIECE)
        .min(starts.len() / 16);
    if pieces < 2 {
        return None;
    }
    // Piece k holds items bounds[k]..bounds[k+1]; the first also holds the preamble.
    let bounds: Vec<usize> = (0..=pieces).map(|k| k * starts.len() / pieces).collect();
    // Each item's function is written straight into its slot of the model's vector
    // (no per-piece vectors to copy together), with room for the functions autogen
    // adds so the validator appends in place.
    let n = starts.len();
    let mut slots: Vec<Option<NativeFunction>> = Vec::with_capacity(n + n / 4);
    slots.resize_with(n, || None);
    let mut parts = Vec::with_capacity(pieces);
    let mut rest = slots.as_mut_slice();
    for k in 0..pieces {
        let (part, tail) = rest.split_at_mut(bounds[k + 1] - bounds[k]);
        parts.push((k, part));
        rest = tail;
    }
    let results: Vec<Option<PieceResult<T>>> = parts
        .into_par_iter()
        .map(|(k, slots)| parse_piece(src, &starts, bounds[k]..bounds[k + 1], slots, check))
        .collect();
    let mut all = Checked {
        parsed: Parsed::default(),
        results: Vec::with_capacity(n),
        check_errors: Vec::new(),
    };
    for r in results {
        let r = r?;
        all.parsed.errors.extend(r.errors);
        all.results.extend(r.results);
        all.check_errors.extend(r.check_errors);
    }
    // In place: the same allocation, its filled slots moved to the front (`flatten`
    // would collect into a new vector).
    #[allow(clippy::filter_map_identity)]
    let functions = slots.into_iter().filter_map(|f| f).collect();
    all.parsed.functions = functions;
    Some(all)
}

/// Parses and checks the top-level items `range` of `src` (the first piece also
/// holds the preamble), writing each function into its slot; `None` when the
/// piece does not read as exactly those items on its own (the caller then reads
/// the whole document).
fn parse_piece<T>(
    src: &str,
    starts: &[(usize, u32)],
    range: std::ops::Range<usize>,
    slots: &mut [Option<NativeFunction>],
    check: &impl Fn(&mut NativeFunction, &mut Vec<Diagnostic>) -> T,
) -> Option<PieceResult<T>> {
    let (first, last) = (range.start, range.end);
    let (from, first_line) = if first == 0 { (0, 1) } else { starts[first] };
    let to = starts.get(last).map_or(src.len(), |s| s.0);
    let text = &src[from..to];
    let items = read_items(text)?;
    if items.len() != last - first {
        return None;
    }
    let idx = LineIndex::for_range(src, from, to, first_line);
    let mut out = PieceResult {
        errors: Vec::new(),
        results: Vec::with_capacity(items.len()),
        check_errors: Vec::new(),
    };
    parse_items(
        &items,
        first,
        src,
        &idx,
        &mut out.errors,
        |i| {
            let at = starts[i].0;
            let end = src[at..].find('\n').map_or(src.len(), |e| at + e);
            idx.loc(at, src[at..end].trim_end().len())
        },
        |j, mut f| {
            out.results.push(check(&mut f, &mut out.check_errors));
            slots[j] = Some(f);
        },
    );
    Some(out)
}

/// The items of a piece's block sequence: by the fast readers of the usual
/// layouts, else by `serde_yaml`; `None` when it is not a sequence.
fn read_items(text: &str) -> Option<Vec<Node<'_>>> {
    super::block::read_entries(text)
        .or_else(|| super::typed::read_entries(text))
        .or_else(|| match serde_yaml::from_str::<Node<'_>>(text) {
            Ok(Node::Seq(items)) => Some(items),
            _ => None,
        })
}

/// One piece's share of a [`Checked`]: its functions went to their slots.
struct PieceResult<T> {
    errors: Vec<Diagnostic>,
    results: Vec<T>,
    check_errors: Vec<Diagnostic>,
}

/// Reads the tag names of a `tags.yaml` (a list of `- tag: name` mappings).
pub fn parse_tags(src: &str) -> Result<Vec<String>, Vec<Diagnostic>> {
    check_flow_depth(src).map_err(|e| vec![e])?;
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
                Loc::START,
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
                    item_loc(item, src, &idx).unwrap_or(Loc::START),
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
        match parse_in_pieces(&src, &|_, _| ()) {
            Some(p) => {
                same(&p.parsed, &whole);
                // The slots' vector is kept, with its room for autogen.
                let n = p.parsed.functions.len();
                assert!(p.parsed.functions.capacity() >= n + n / 4);
            }
            None => assert_eq!(
                rayon::current_num_threads(),
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
