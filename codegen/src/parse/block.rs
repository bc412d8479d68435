//! A fast reader for the block-style YAML subset `native_functions.yaml` is written
//! in: a top-level list of `- key: value` mappings, nested block mappings and
//! sequences, single-line plain or simply quoted scalars, one-line flow sequences,
//! comments and blank lines.
//!
//! It gives exactly the [`Node`] tree yaml_serde gives for such text, scalars as
//! slices of the input, so locations stay exact. Anything outside the subset (tabs,
//! non-ASCII, anchors, tags, multi-line scalars, flow mappings, escapes, odd
//! indentation, ...) makes it decline with `None`, and the caller parses with
//! yaml_serde, which stays authoritative and reports every YAML error.
//!
//! Owns: recognising the subset and building its nodes. Must not: report errors or
//! interpret keys (that is `entry`).

use std::borrow::Cow;

use super::node::Node;

/// One line with content (not blank, not only a comment).
#[derive(Clone, Copy)]
struct Line<'a> {
    indent: usize,
    /// The text after the indentation.
    text: &'a str,
}

/// The items of a top-level block sequence, or `None` when `src` is not in the
/// subset (or not such a sequence).
pub fn read_items(src: &str) -> Option<Vec<Node<'_>>> {
    if src.bytes().any(|b| b >= 0x7f || (b < 0x20 && b != b'\n')) {
        return None;
    }
    let lines: Vec<Line<'_>> = src
        .split('\n')
        .filter_map(|l| {
            let text = l.trim_start_matches(' ');
            (!text.is_empty() && !text.starts_with('#')).then(|| Line {
                indent: l.len() - text.len(),
                text,
            })
        })
        .collect();
    let mut r = Reader { lines, pos: 0 };
    let mut items = Vec::new();
    while let Some(l) = r.peek() {
        let rest = l.text.strip_prefix("- ")?;
        let key = rest.trim_start_matches(' ');
        if l.indent != 0 || key.starts_with('#') {
            return None;
        }
        items.push(r.mapping(2 + rest.len() - key.len(), key)?);
    }
    Some(items)
}

struct Reader<'a> {
    lines: Vec<Line<'a>>,
    pos: usize,
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<Line<'a>> {
        self.lines.get(self.pos).copied()
    }

    /// Whether the next line is indented deeper than `indent` (a continuation the
    /// subset does not have).
    fn deeper_next(&self, indent: usize) -> bool {
        self.peek().is_some_and(|l| l.indent > indent)
    }

    /// A block mapping at column `indent` whose first key line (the current line)
    /// reads `first` from that column.
    fn mapping(&mut self, indent: usize, first: &'a str) -> Option<Node<'a>> {
        let mut pairs = Vec::new();
        let mut text = first;
        loop {
            self.pos += 1;
            pairs.push(self.pair(indent, text)?);
            match self.peek() {
                Some(l) if l.indent == indent && !is_item(l.text) => text = l.text,
                Some(l) if l.indent >= indent => return None,
                _ => return Some(Node::Map(pairs)),
            }
        }
    }

    /// One `key: value` of a mapping at column `indent` (its line already consumed).
    fn pair(&mut self, indent: usize, text: &'a str) -> Option<(Node<'a>, Node<'a>)> {
        let body = without_comment(text);
        let (key, value) = match body.find(": ") {
            Some(i) => (&body[..i], body[i + 2..].trim_start_matches(' ')),
            None => (body.strip_suffix(':')?, ""),
        };
        if key.ends_with(' ') || key.starts_with(['\'', '"']) {
            return None;
        }
        let key = plain(key)?;
        if !value.is_empty() {
            let v = scalar(value)?;
            return (!self.deeper_next(indent)).then_some((key, v));
        }
        let value = match self.peek() {
            Some(l) if l.indent > indent && is_item(l.text) => self.sequence(l.indent)?,
            Some(l) if l.indent > indent => self.mapping(l.indent, l.text)?,
            Some(l) if l.indent == indent && is_item(l.text) => self.sequence(indent)?,
            _ => Node::Null,
        };
        Some((key, value))
    }

    /// A block sequence of scalars at column `indent` (the current line is its first
    /// item).
    fn sequence(&mut self, indent: usize) -> Option<Node<'a>> {
        let mut items = Vec::new();
        while let Some(l) = self.peek() {
            if l.indent != indent || !is_item(l.text) {
                break;
            }
            self.pos += 1;
            let body = without_comment(l.text.strip_prefix("- ")?).trim_start_matches(' ');
            if body.contains(": ") || body.ends_with(':') || self.deeper_next(indent) {
                return None;
            }
            items.push(scalar(body)?);
        }
        Some(Node::Seq(items))
    }
}

fn is_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

/// The text before a comment (` #`), without trailing spaces.
fn without_comment(text: &str) -> &str {
    let end = text.find(" #").unwrap_or(text.len());
    text[..end].trim_end_matches(' ')
}

/// A one-line value: a flow sequence, an empty flow mapping, a quoted or a plain
/// scalar.
fn scalar(v: &str) -> Option<Node<'_>> {
    if let Some(inner) = v.strip_prefix('{') {
        let empty = inner.strip_suffix('}')?.trim_matches(' ').is_empty();
        return empty.then(|| Node::Map(Vec::new()));
    }
    if let Some(inner) = v.strip_prefix('[') {
        let inner = inner.strip_suffix(']')?;
        if inner.contains(['[', ']', '{', '}', '#']) {
            return None;
        }
        if inner.trim_matches(' ').is_empty() {
            return Some(Node::Seq(Vec::new()));
        }
        return inner
            .split(',')
            .map(|item| {
                let item = item.trim_matches(' ');
                if item.starts_with(['\'', '"']) {
                    quoted(item)
                } else if item.contains(':') {
                    None
                } else {
                    plain(item)
                }
            })
            .collect::<Option<Vec<_>>>()
            .map(Node::Seq);
    }
    if v.starts_with(['\'', '"']) {
        return quoted(v);
    }
    if v.contains(": ") || v.ends_with(':') {
        return None;
    }
    plain(v)
}

/// `'text'` or `"text"` without escapes or inner quotes.
fn quoted(v: &str) -> Option<Node<'_>> {
    let q = v.chars().next()?;
    let inner = v.strip_prefix(q)?.strip_suffix(q)?;
    if inner.contains(['\'', '"', '\\']) {
        return None;
    }
    Some(Node::Str(Cow::Borrowed(inner)))
}

/// A plain scalar, resolved as yaml_serde resolves untagged plain scalars.
fn plain(v: &str) -> Option<Node<'_>> {
    let first = *v.as_bytes().first()?;
    // Indicators cannot start a plain scalar; `-`, `?` and `:` can when a non-space
    // follows.
    let starts_plain = match first {
        b'-' | b'?' | b':' => v.as_bytes().get(1).is_some_and(|b| *b != b' '),
        _ => !b",[]{}#&*!|>'\"%@`".contains(&first),
    };
    if !starts_plain {
        return None;
    }
    match v {
        "true" | "True" | "TRUE" => return Some(Node::Bool(true)),
        "false" | "False" | "FALSE" => return Some(Node::Bool(false)),
        "null" | "Null" | "NULL" | "~" => return Some(Node::Null),
        _ => {}
    }
    if first.is_ascii_alphabetic() || first == b'_' {
        // Not a number (`inf`/`nan` parse only to non-finite values, which YAML
        // resolution keeps as strings).
        return Some(Node::Str(Cow::Borrowed(v)));
    }
    // Numbers and other rare forms: resolve the scalar alone with yaml_serde.
    match serde_yaml::from_str::<Node<'_>>(v).ok()? {
        Node::Str(s) if s == v => Some(Node::Str(Cow::Borrowed(v))),
        n @ (Node::Null | Node::Bool(_) | Node::Int(_) | Node::Float(_)) => Some(n),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scalars with where they lie in `src`, in tree order.
    fn flat<'a>(n: &Node<'a>, src: &str, out: &mut Vec<(Node<'a>, Option<(usize, usize)>)>) {
        match n {
            Node::Seq(items) => {
                out.push((Node::Seq(Vec::new()), None));
                items.iter().for_each(|i| flat(i, src, out));
            }
            Node::Map(pairs) => {
                out.push((Node::Map(Vec::new()), None));
                for (k, v) in pairs {
                    flat(k, src, out);
                    flat(v, src, out);
                }
            }
            other => out.push((other.clone(), other.span_in(src))),
        }
    }

    /// Where the fast reader accepts `src`, it gives yaml_serde's tree, spans included.
    fn agrees(src: &str) -> bool {
        let Some(fast) = read_items(src) else {
            return false;
        };
        let slow = match serde_yaml::from_str::<Node<'_>>(src) {
            Ok(Node::Seq(items)) => items,
            Ok(Node::Null) => Vec::new(),
            other => panic!("fast reader accepted what yaml_serde reads as {other:?}"),
        };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        flat(&Node::Seq(fast), src, &mut a);
        flat(&Node::Seq(slow), src, &mut b);
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x, y);
        }
        true
    }

    #[test]
    fn agrees_with_yaml_serde_on_every_release() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/pytorch-releases"
        );
        let mut files = vec![std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/fixtures/pytorch-2.15/native_functions.yaml"
        ))];
        for e in std::fs::read_dir(dir).unwrap() {
            files.push(e.unwrap().path().join("native_functions.yaml"));
        }
        for f in files {
            let src = std::fs::read_to_string(&f).unwrap();
            assert!(agrees(&src), "declined {}", f.display());
        }
    }

    #[test]
    fn small_cases_agree_or_decline() {
        let cases = [
            "- func: a(Tensor self) -> Tensor\n  variants: function, method\n",
            "# c\n\n- func: a # c\n  dispatch:\n    CPU, CUDA: k\n    Meta: m  # c\n  tags: [core, 'x', \"y\"]\n",
            "- func: a\n  precomputed:\n  - x -> int y\n  - z\n  autogen: a.out\n",
            "- func: a\n  structured: True\n  n: 12\n  f: 1.5\n  e: ~\n  z: 0x1f\n  o: 012\n  t: []\n",
            "- func: a\n  k:\n    - p\n    - q\n",
            "- func: a\n  k:\n",
            "- func: a\n  x: ''\n  y: -1\n  w: -.inf\n  d: {}\n",
        ];
        for c in cases {
            assert!(agrees(c), "{c}");
        }
        let declined = [
            "- func: a\n  k: b\n    c\n",
            "- func: a\n  k: &x b\n  l: *x\n",
            "- func: a\n  k: 'it''s'\n",
            "- func: a\n  k: \"a\\tb\"\n",
            "- func: a\n  k: {a: b}\n",
            "- func: a\n  k: |\n    text\n",
            "- func: a\n\tk: b\n",
            "func: a\n",
            "- func: a\n - k: b\n",
            "- func: a\n  k: a: b\n",
            "- - a\n",
            "- func: a\n  k: [a, [b]]\n",
            "- func: a\n  k: [a,]\n",
        ];
        for c in declined {
            assert!(read_items(c).is_none(), "{c}");
            // What yaml_serde makes of it is what the loader uses.
            let _ = serde_yaml::from_str::<Node<'_>>(c);
        }
    }
}
