//! The quickest way to read one piece of a `native_functions.yaml` into [`Node`]s:
//! a line scanner for the plain block style such files are written in (a list of
//! mappings; values on one line, a one-level nested mapping such as `dispatch:`, a
//! block list of plain lines, or a flow list such as `[core, pointwise]`; comments
//! and blank lines anywhere).
//!
//! It reads no YAML the general way does not: on anything else (quotes with
//! escapes, multi-line scalars, anchors, tags, tabs, flow mappings, values that
//! might read as null or a number, deeper nesting, syntax errors) it returns
//! `None` and the caller reads the text with the next reader, so every problem is
//! still found and reported by yaml_serde. Its scalars are slices of the input,
//! at the same places as yaml_serde's, so locations do not change.
//!
//! Owns: the subset it accepts. Must not: interpret keys or report problems.

use std::borrow::Cow;

use super::node::Node;

/// One line that holds something: its indentation and its text after it, with a
/// trailing comment and trailing spaces cut off.
#[derive(Clone, Copy)]
struct Line<'t> {
    indent: usize,
    body: &'t str,
}

/// Reads `text` (a block list of mappings) as `serde_yaml::from_str::<Node>` would
/// (its items), or `None` when it is not sure to.
pub(crate) fn read_entries(text: &str) -> Option<Vec<Node<'_>>> {
    let lines = lines(text)?;
    let mut items = Vec::with_capacity(lines.len() / 3);
    let mut at = 0;
    while at < lines.len() {
        let line = lines[at];
        if line.indent != 0 {
            return None;
        }
        let (column, first) = item_body(line)?;
        // The item's mapping continues on the lines indented to its first key.
        let end = lines[at + 1..]
            .iter()
            .position(|l| l.indent < column)
            .map_or(lines.len(), |p| at + 1 + p);
        let first = Line {
            indent: column,
            body: first,
        };
        items.push(mapping(first, &lines[at + 1..end], true)?);
        at = end;
    }
    (!items.is_empty()).then_some(items)
}

/// The lines of `text` that hold something, or `None` for text outside the subset
/// (tabs, carriage returns, a byte-order mark, a `#` that may be inside quotes).
fn lines(text: &str) -> Option<Vec<Line<'_>>> {
    let b = text.as_bytes();
    if memchr::memchr2(b'\t', b'\r', b).is_some() || text.starts_with('\u{feff}') {
        return None;
    }
    let mut out = Vec::with_capacity(b.len() / 32);
    let mut from = 0;
    let ends = memchr::memchr_iter(b'\n', b).chain(std::iter::once(b.len()));
    for to in ends {
        let raw = &text[from..to];
        from = to + 1;
        let indent = raw.len() - raw.trim_start_matches(' ').len();
        let mut body = &raw[indent..];
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        // A `#` after a space starts a comment; any other is text. Inside quotes it
        // would be text too: such lines are left to yaml_serde.
        if let Some(i) = comment_start(body.as_bytes()) {
            if body.contains(['\'', '"']) {
                return None;
            }
            body = &body[..i];
        }
        let body = body.trim_end_matches(' ');
        out.push(Line { indent, body });
    }
    Some(out)
}

/// Where a comment starts in a line's text: a `#` after a space (any other `#` is
/// text). Byte scans: `str::find` with a two-byte pattern costs more than the
/// rest of the reader on these short lines.
fn comment_start(b: &[u8]) -> Option<usize> {
    memchr::memchr_iter(b'#', b).find(|&i| i > 0 && b[i - 1] == b' ')
}

/// The column and text of an item's first key: `- key: value` at column 0.
fn item_body(line: Line<'_>) -> Option<(usize, &str)> {
    let rest = line.body.strip_prefix("- ")?;
    let body = rest.trim_start_matches(' ');
    if body.is_empty() || body.starts_with('-') {
        return None;
    }
    Some((line.indent + line.body.len() - body.len(), body))
}

/// The mapping whose first pair is `first` and whose other lines are `rest` (each
/// indented at least as far as `first`). `nested` allows values on deeper lines.
fn mapping<'t>(first: Line<'t>, rest: &[Line<'t>], nested: bool) -> Option<Node<'t>> {
    let column = first.indent;
    let mut pairs = Vec::with_capacity(4);
    let mut line = first;
    let mut at = 0;
    loop {
        let (key, value) = pair(line.body)?;
        // The lines that belong to this pair's value: deeper ones, and (for an
        // empty value) a block list at the key's own column.
        let start = at;
        while at < rest.len()
            && (rest[at].indent > column
                || (value.is_empty() && rest[at].indent == column && is_list_item(rest[at])))
        {
            at += 1;
        }
        let below = &rest[start..at];
        let value = match (value.is_empty(), below) {
            (false, []) => scalar_or_flow_list(value)?,
            (false, _) => return None,
            (true, []) => Node::Null,
            (true, [head, tail @ ..]) if nested => {
                if is_list_item(*head) {
                    block_list(below)?
                } else {
                    if tail.iter().any(|l| l.indent != head.indent) {
                        return None;
                    }
                    mapping(*head, tail, false)?
                }
            }
            (true, _) => return None,
        };
        pairs.push((key, value));
        match rest.get(at) {
            None => break,
            Some(next) if next.indent == column && !is_list_item(*next) => {
                line = *next;
                at += 1;
            }
            Some(_) => return None,
        }
    }
    Some(Node::Map(pairs))
}

fn is_list_item(line: Line<'_>) -> bool {
    line.body == "-" || line.body.starts_with("- ")
}

/// A block list of one-line scalars, all at one column.
fn block_list<'t>(lines: &[Line<'t>]) -> Option<Node<'t>> {
    let column = lines[0].indent;
    lines
        .iter()
        .map(|l| {
            let item = l.body.strip_prefix("- ")?.trim_start_matches(' ');
            if l.indent != column || item.is_empty() {
                return None;
            }
            scalar(item)
        })
        .collect::<Option<Vec<_>>>()
        .map(Node::Seq)
}

/// `key: value` (value possibly empty) with a plain key that reads as a string.
fn pair(body: &str) -> Option<(Node<'_>, &str)> {
    let colon = memchr::memchr(b':', body.as_bytes())?;
    let (key, after) = (&body[..colon], &body[colon + 1..]);
    // yaml_serde trims a key's trailing spaces; such keys are left to it.
    if !(after.is_empty() || after.starts_with(' ')) || key.ends_with(' ') {
        return None;
    }
    let key = plain(key)?;
    if !matches!(key, Node::Str(_)) {
        return None;
    }
    Some((key, after.trim_start_matches(' ')))
}

fn scalar_or_flow_list(value: &str) -> Option<Node<'_>> {
    // `dispatch: {}`: an empty flow mapping (any other is left to yaml_serde).
    if value
        .strip_prefix('{')
        .and_then(|v| v.strip_suffix('}'))
        .is_some_and(|v| v.trim_matches(' ').is_empty())
    {
        return Some(Node::Map(Vec::new()));
    }
    match value.strip_prefix('[') {
        Some(inner) => flow_list(inner.strip_suffix(']')?),
        None => scalar(value),
    }
}

/// The items of `[a, 'b', c]` (given without its brackets): one-line scalars.
fn flow_list(inner: &str) -> Option<Node<'_>> {
    if inner.trim_matches(' ').is_empty() {
        return Some(Node::Seq(Vec::new()));
    }
    if inner.contains(['[', ']', '{', '}']) {
        return None;
    }
    inner
        .split(',')
        .map(|item| {
            let item = item.trim_matches(' ');
            // In a flow list `:` and `?` are indicators wherever they stand, so
            // plain items keep to names (`core`, `nondeterministic_seeded`).
            let name_like = item
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b' '));
            if item.is_empty() || !(name_like || item.starts_with(['\'', '"'])) {
                return None;
            }
            scalar(item)
        })
        .collect::<Option<Vec<_>>>()
        .map(Node::Seq)
}

/// A one-line scalar, quoted without escapes or plain.
fn scalar(v: &str) -> Option<Node<'_>> {
    let quoted = |q: char| -> Option<Node<'_>> {
        let inner = v.strip_prefix(q)?.strip_suffix(q)?;
        (!inner.contains([q, '\\'])).then_some(Node::Str(Cow::Borrowed(inner)))
    };
    match v.as_bytes().first()? {
        b'\'' => quoted('\''),
        b'"' => quoted('"'),
        _ => plain(v),
    }
}

/// A plain scalar: a string, or a bool for the words yaml_serde reads as bools;
/// `None` for anything else that might not be a string or might not be plain.
fn plain(v: &str) -> Option<Node<'_>> {
    let b = v.as_bytes();
    let first = *b.first()?;
    let starts_with_indicator = matches!(
        first,
        b'[' | b']'
            | b'{'
            | b'}'
            | b','
            | b'#'
            | b'&'
            | b'*'
            | b'!'
            | b'|'
            | b'>'
            | b'\''
            | b'"'
            | b'%'
            | b'@'
            | b'`'
    ) || (matches!(first, b'-' | b'?' | b':')
        && matches!(b.get(1), None | Some(b' ')));
    // `: ` or a final `:` would make it a key; ` #` a comment.
    let key_like = memchr::memchr_iter(b':', b).any(|i| matches!(b.get(i + 1), None | Some(b' ')));
    if starts_with_indicator || key_like || comment_start(b).is_some() {
        return None;
    }
    match v {
        "true" | "True" | "TRUE" => return Some(Node::Bool(true)),
        "false" | "False" | "FALSE" => return Some(Node::Bool(false)),
        _ => {}
    }
    // Numbers start with one of these; null is `~` or a word.
    if matches!(first, b'0'..=b'9' | b'+' | b'-' | b'.' | b'~')
        || matches!(v, "null" | "Null" | "NULL")
    {
        return None;
    }
    Some(Node::Str(Cow::Borrowed(v)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::node::{items_read_generally as general, ENTRY_TEXTS, USUAL_ENTRY_TEXTS};

    /// Equal trees, and every string at the same place in `text`.
    fn same(fast: &[Node<'_>], slow: &[Node<'_>], text: &str) -> bool {
        fn spans<'a>(n: &'a Node<'a>, text: &str, out: &mut Vec<Option<(usize, usize)>>) {
            match n {
                Node::Str(_) => out.push(n.span_in(text)),
                Node::Seq(items) => items.iter().for_each(|i| spans(i, text, out)),
                Node::Map(pairs) => pairs.iter().for_each(|(k, v)| {
                    spans(k, text, out);
                    spans(v, text, out)
                }),
                _ => {}
            }
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        fast.iter().for_each(|n| spans(n, text, &mut a));
        slow.iter().for_each(|n| spans(n, text, &mut b));
        fast == slow && a == b
    }

    #[test]
    fn reads_like_node_or_not_at_all() {
        let cases = ENTRY_TEXTS;
        let mut fast_ones = 0;
        for text in cases {
            if let Some(fast) = read_entries(text) {
                fast_ones += 1;
                let slow =
                    general(text).unwrap_or_else(|| panic!("{text:?}: yaml_serde refuses it"));
                assert!(same(&fast, &slow, text), "{text:?}:\n{fast:?}\n{slow:?}");
            }
        }
        // The shapes native_functions.yaml is written in do take this path.
        for text in &cases[..USUAL_ENTRY_TEXTS] {
            assert!(read_entries(text).is_some(), "{text:?}");
        }
        assert!(fast_ones >= 8, "{fast_ones}");
    }

    #[test]
    fn pytorch_2_15_reads_the_same_as_through_yaml_serde() {
        let text = pytorch_2_15();
        let fast = read_entries(&text).expect("the whole file is in the subset");
        let slow = general(&text).expect("yaml_serde reads it");
        assert_eq!(fast.len(), slow.len());
        assert!(same(&fast, &slow, &text));
    }

    fn pytorch_2_15() -> String {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/fixtures/pytorch-2.15/native_functions.yaml"
        );
        std::fs::read_to_string(path).expect("PyTorch 2.15 fixture (../shared)")
    }

    /// Pieces of PyTorch's file with a few bytes changed to YAML's indicator
    /// characters, spaces and line breaks (a fixed pseudo-random sequence): each
    /// reads as yaml_serde reads it or not at all.
    #[test]
    fn edited_pieces_read_the_same_or_not_at_all() {
        let text = pytorch_2_15();
        let starts: Vec<usize> = text.match_indices("\n- ").map(|(i, _)| i + 1).collect();
        const EDITS: &[u8] = b":#'\"[]{},-?|>&*!% \n~0";
        const ROUNDS: usize = 3000;
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |below: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % below as u64) as usize
        };
        let (mut fast_ones, mut tried) = (0, 0);
        for _ in 0..ROUNDS {
            let first = next(starts.len() - 4);
            let mut piece = text.as_bytes()[starts[first]..starts[first + 3]].to_vec();
            for _ in 0..1 + next(3) {
                let at = next(piece.len());
                let byte = EDITS[next(EDITS.len())];
                if next(2) == 0 {
                    piece[at] = byte;
                } else {
                    piece.insert(at, byte);
                }
            }
            let Ok(piece) = String::from_utf8(piece) else {
                continue;
            };
            tried += 1;
            if let Some(fast) = read_entries(&piece) {
                fast_ones += 1;
                let slow =
                    general(&piece).unwrap_or_else(|| panic!("{piece:?}: yaml_serde refuses it"));
                assert!(same(&fast, &slow, &piece), "{piece:?}:\n{fast:?}\n{slow:?}");
            }
        }
        // Many edits land in schema text, which stays in the subset.
        assert!(fast_ones > tried / 10, "{fast_ones} of {tried}");
    }
}
