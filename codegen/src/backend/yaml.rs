//! A located reader for the YAML a backend file is written in: block mappings and
//! sequences, one-line flow sequences of scalars, plain and quoted scalars and
//! comments, each node with its `line:col`. The file is first checked by the YAML
//! library (`serde_yaml`), so syntax errors read like YAML's own; anything legal in
//! YAML but outside this subset (anchors, tags, block scalars, flow mappings) is a
//! located error saying so.
//!
//! Owns: text -> located [`Node`] tree for backend YAMLs. Must not: know what the
//! keys mean (that is `load`).

use crate::diagnostics::Diagnostic;
use crate::model::Loc;

const CODE: &str = "opal::backend::yaml";

/// One `key: value` of a mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub key_loc: Loc,
    pub value: Node,
}

/// A located YAML node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    /// A scalar; `loc` covers its text (for quoted scalars, the text inside the quotes).
    Scalar {
        text: String,
        loc: Loc,
        quoted: bool,
    },
    Seq {
        items: Vec<Node>,
        loc: Loc,
    },
    Map {
        entries: Vec<Entry>,
        loc: Loc,
    },
    /// An absent value (`key:` with nothing under it, or an empty file).
    Null {
        loc: Loc,
    },
}

impl Node {
    pub fn loc(&self) -> Loc {
        match self {
            Node::Scalar { loc, .. }
            | Node::Seq { loc, .. }
            | Node::Map { loc, .. }
            | Node::Null { loc } => *loc,
        }
    }

    /// `a list`, `a mapping`, `the value "x"`, `nothing`, for messages.
    pub fn describe(&self) -> String {
        match self {
            Node::Scalar { text, .. } => format!("the value `{text}`"),
            Node::Seq { .. } => "a list".to_string(),
            Node::Map { .. } => "a mapping".to_string(),
            Node::Null { .. } => "nothing".to_string(),
        }
    }
}

/// One non-blank source line, comment stripped.
#[derive(Clone, Debug)]
struct Line<'a> {
    /// Column (0-based, in chars) where the content starts.
    indent: usize,
    /// Byte offset of the content in the file.
    offset: usize,
    /// 1-based line number.
    line: u32,
    /// Byte offset of the start of the line.
    line_start: usize,
    text: &'a str,
}

/// Parses the backend YAML `src` into a located tree.
pub fn parse(src: &str) -> Result<Node, Diagnostic> {
    crate::parse::check_flow_depth(src)?;
    // Duplicate keys are reported by `load` with their location.
    let checked = serde_yaml::from_str::<serde_yaml::Value>(src)
        .map(drop)
        .or_else(|e| {
            if e.to_string().contains("duplicate entry") {
                Ok(())
            } else {
                Err(e)
            }
        });
    if let Err(e) = checked {
        let loc = crate::parse::yaml_error_loc(&e, src);
        let msg = e.to_string();
        let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
        return Err(Diagnostic::new(CODE, loc, format!("invalid YAML: {msg}"))
            .label("here")
            .hint("a backend YAML is a mapping: `backend: Emu`, `dispatch_key: PrivateUse1`, `device: emu`, `supported:` with one `- op` per line"));
    }
    let lines = split_lines(src)?;
    let mut p = Parser { src, lines, pos: 0 };
    if p.lines.is_empty() {
        return Ok(Node::Null {
            loc: Loc {
                offset: 0,
                len: 0,
                line: 1,
                col: 1,
            },
        });
    }
    let indent = p.lines[0].indent;
    let node = p.block(indent)?;
    if let Some(l) = p.lines.get(p.pos) {
        return Err(
            Diagnostic::new(CODE, p.loc_of(l, 0, l.text.len()), "unexpected content")
                .label("not part of the mapping above")
                .hint("check the indentation: top-level keys start in the first column"),
        );
    }
    Ok(node)
}

fn split_lines(src: &str) -> Result<Vec<Line<'_>>, Diagnostic> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, raw) in src.split('\n').enumerate() {
        let line_start = start;
        start += raw.len() + 1;
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let trimmed = raw.trim_start_matches(' ');
        let indent_bytes = raw.len() - trimmed.len();
        if trimmed.starts_with('\t') {
            return Err(Diagnostic::new(
                CODE,
                Loc {
                    offset: line_start + indent_bytes,
                    len: 1,
                    line: i as u32 + 1,
                    col: indent_bytes as u32 + 1,
                },
                "tab in indentation",
            )
            .label("tab")
            .hint("YAML indents with spaces"));
        }
        let text = strip_comment(trimmed).trim_end();
        if text.is_empty() || (out.is_empty() && text == "---") {
            continue;
        }
        out.push(Line {
            indent: indent_bytes,
            offset: line_start + indent_bytes,
            line: i as u32 + 1,
            line_start,
            text,
        });
    }
    Ok(out)
}

/// Removes a `# comment` (at the start or after a space, outside quotes).
fn strip_comment(s: &str) -> &str {
    let bytes = s.as_bytes();
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match quote {
            Some(q) => {
                if c == b'\\' && q == b'"' {
                    i += 1;
                } else if c == q {
                    quote = None;
                }
            }
            None => {
                if (c == b'"' || c == b'\'')
                    && (i == 0 || matches!(bytes[i - 1], b' ' | b'[' | b','))
                {
                    quote = Some(c);
                } else if c == b'#' && (i == 0 || bytes[i - 1] == b' ') {
                    return &s[..i];
                }
            }
        }
        i += 1;
    }
    s
}

struct Parser<'a> {
    src: &'a str,
    lines: Vec<Line<'a>>,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn loc_of(&self, l: &Line<'_>, start: usize, end: usize) -> Loc {
        let offset = l.offset + start;
        let col = self.src[l.line_start..offset].chars().count() as u32 + 1;
        Loc {
            offset,
            len: end.saturating_sub(start),
            line: l.line,
            col,
        }
    }

    /// A block node whose first line is at `self.pos` with indentation `indent`.
    fn block(&mut self, indent: usize) -> Result<Node, Diagnostic> {
        let l = self.lines[self.pos].clone();
        if is_seq_item(l.text) {
            self.seq(indent)
        } else if find_colon(l.text).is_some() {
            self.map(indent)
        } else {
            self.pos += 1;
            self.inline(&l, 0)
        }
    }

    fn seq(&mut self, indent: usize) -> Result<Node, Diagnostic> {
        let first = self.lines[self.pos].clone();
        let mut items = Vec::new();
        while let Some(l) = self.lines.get(self.pos).cloned() {
            if l.indent != indent || !is_seq_item(l.text) {
                if l.indent > indent {
                    return Err(self.bad_indent(&l));
                }
                break;
            }
            let rest = l.text[1..].trim_start_matches(' ');
            if rest.is_empty() {
                self.pos += 1;
                match self.lines.get(self.pos) {
                    Some(n) if n.indent > indent => {
                        let ni = n.indent;
                        items.push(self.block(ni)?);
                    }
                    _ => items.push(Node::Null {
                        loc: self.loc_of(&l, 0, 1),
                    }),
                }
                continue;
            }
            // The item's content becomes a line of its own, indented where it starts.
            let skip = l.text.len() - rest.len();
            let virt = Line {
                indent: l.indent + skip,
                offset: l.offset + skip,
                line: l.line,
                line_start: l.line_start,
                text: rest,
            };
            self.lines[self.pos] = virt.clone();
            items.push(self.block(virt.indent)?);
        }
        Ok(Node::Seq {
            items,
            loc: self.loc_of(&first, 0, 1),
        })
    }

    fn map(&mut self, indent: usize) -> Result<Node, Diagnostic> {
        let first = self.lines[self.pos].clone();
        let mut entries = Vec::new();
        while let Some(l) = self.lines.get(self.pos).cloned() {
            if l.indent != indent || is_seq_item(l.text) {
                if l.indent > indent {
                    return Err(self.bad_indent(&l));
                }
                break;
            }
            let Some(colon) = find_colon(l.text) else {
                return Err(Diagnostic::new(
                    CODE,
                    self.loc_of(&l, 0, l.text.len()),
                    "expected `key: value`",
                )
                .label("no `:` on this line")
                .hint("every line of a mapping is `key: value`"));
            };
            let raw_key = l.text[..colon].trim_end();
            let (key, key_loc) = match raw_key.chars().next() {
                Some(q @ ('"' | '\'')) => {
                    let (k, _) = unquote(raw_key, q).ok_or_else(|| {
                        Diagnostic::new(
                            CODE,
                            self.loc_of(&l, 0, raw_key.len()),
                            "unterminated quoted key",
                        )
                        .label("here")
                    })?;
                    (k, self.loc_of(&l, 0, raw_key.len()))
                }
                _ => (raw_key.to_string(), self.loc_of(&l, 0, raw_key.len())),
            };
            let vstart = colon + 1;
            let rest = l.text[vstart..].trim_start_matches(' ');
            self.pos += 1;
            let value = if rest.is_empty() {
                match self.lines.get(self.pos) {
                    Some(n) if n.indent > indent => {
                        let ni = n.indent;
                        self.block(ni)?
                    }
                    Some(n) if n.indent == indent && is_seq_item(n.text) => self.seq(indent)?,
                    _ => Node::Null {
                        loc: self.loc_of(&l, colon, colon + 1),
                    },
                }
            } else {
                let at = l.text.len() - rest.len();
                self.inline(&l, at)?
            };
            entries.push(Entry {
                key,
                key_loc,
                value,
            });
        }
        Ok(Node::Map {
            entries,
            loc: self.loc_of(&first, 0, first.text.len()),
        })
    }

    fn bad_indent(&self, l: &Line<'_>) -> Diagnostic {
        Diagnostic::new(
            CODE,
            self.loc_of(l, 0, l.text.len()),
            "unexpected indentation",
        )
        .label("indented more than the lines before")
        .hint("items of one list or mapping line up in the same column")
    }

    /// A value written on the same line as its key or dash, from byte `at` of `l`.
    fn inline(&self, l: &Line<'_>, at: usize) -> Result<Node, Diagnostic> {
        let text = &l.text[at..];
        let unsupported = |what: &str| {
            Diagnostic::new(
                CODE,
                self.loc_of(l, at, l.text.len()),
                format!("{what} are not used in backend YAMLs"),
            )
            .label("not supported here")
            .hint("write plain values, quoted strings and lists")
        };
        match text.as_bytes().first() {
            Some(b'[') => self.flow_seq(l, at),
            Some(b'{') => Err(unsupported("flow mappings (`{...}`)")),
            Some(b'&') => Err(unsupported("anchors (`&`)")),
            Some(b'*') => Err(unsupported("aliases (`*`)")),
            Some(b'!') => Err(unsupported("tags (`!`)")),
            Some(b'|') | Some(b'>') => Err(unsupported("block scalars (`|`, `>`)")),
            _ => self.scalar(l, at, l.text.len()),
        }
    }

    fn scalar(&self, l: &Line<'_>, start: usize, end: usize) -> Result<Node, Diagnostic> {
        let raw = &l.text[start..end];
        match raw.chars().next() {
            Some(q @ ('"' | '\'')) => {
                let (text, used) = unquote(raw, q).ok_or_else(|| {
                    Diagnostic::new(
                        CODE,
                        self.loc_of(l, start, end),
                        "unterminated quoted string",
                    )
                    .label("no closing quote")
                })?;
                if raw[used..].trim().is_empty() {
                    Ok(Node::Scalar {
                        text,
                        loc: self.loc_of(l, start + 1, start + used - 1),
                        quoted: true,
                    })
                } else {
                    Err(Diagnostic::new(
                        CODE,
                        self.loc_of(l, start + used, end),
                        "text after a quoted string",
                    )
                    .label("unexpected"))
                }
            }
            _ => Ok(Node::Scalar {
                text: raw.to_string(),
                loc: self.loc_of(l, start, end),
                quoted: false,
            }),
        }
    }

    fn flow_seq(&self, l: &Line<'_>, at: usize) -> Result<Node, Diagnostic> {
        let text = &l.text[at..];
        if !text.ends_with(']') {
            return Err(Diagnostic::new(
                CODE,
                self.loc_of(l, at, l.text.len()),
                "a `[...]` list must end on the line it starts",
            )
            .label("no closing `]` on this line")
            .hint("write long lists in block form, one `- item` per line"));
        }
        let inner_start = at + 1;
        let inner_end = l.text.len() - 1;
        let mut items = Vec::new();
        let inner = &l.text[inner_start..inner_end];
        if !inner.trim().is_empty() {
            let mut quote: Option<u8> = None;
            let mut item_start = 0;
            let bytes = inner.as_bytes();
            let mut bounds = Vec::new();
            for (i, &c) in bytes.iter().enumerate() {
                match quote {
                    Some(q) if c == q => quote = None,
                    Some(_) => {}
                    None if c == b'"' || c == b'\'' => quote = Some(c),
                    None if c == b'[' || c == b'{' => {
                        return Err(Diagnostic::new(
                            CODE,
                            self.loc_of(l, inner_start + i, inner_start + i + 1),
                            "nested lists and mappings are not used in backend YAMLs",
                        )
                        .label("here"))
                    }
                    None if c == b',' => {
                        bounds.push((item_start, i));
                        item_start = i + 1;
                    }
                    None => {}
                }
            }
            bounds.push((item_start, inner.len()));
            for (s, e) in bounds {
                let piece = &inner[s..e];
                let lead = piece.len() - piece.trim_start().len();
                let trail = piece.len() - piece.trim_end().len();
                let (s, e) = (inner_start + s + lead, inner_start + e - trail);
                if s >= e {
                    return Err(
                        Diagnostic::new(CODE, self.loc_of(l, s, s + 1), "empty list item")
                            .label("nothing between the commas"),
                    );
                }
                items.push(self.scalar(l, s, e)?);
            }
        }
        Ok(Node::Seq {
            items,
            loc: self.loc_of(l, at, l.text.len()),
        })
    }
}

fn is_seq_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

/// Byte index of the `:` that ends a mapping key (followed by a space or the end of
/// the line, outside quotes and brackets).
fn find_colon(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut quote: Option<u8> = None;
    let mut depth = 0usize;
    for (i, &c) in bytes.iter().enumerate() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                b'"' | b'\'' if i == 0 => quote = Some(c),
                b'[' | b'(' => depth += 1,
                b']' | b')' => depth = depth.saturating_sub(1),
                b':' if depth == 0 && (i + 1 == bytes.len() || bytes[i + 1] == b' ') => {
                    return Some(i)
                }
                _ => {}
            },
        }
    }
    None
}

/// The text of a quoted scalar starting at byte 0 of `raw`, and the bytes used
/// (quotes included).
fn unquote(raw: &str, q: char) -> Option<(String, usize)> {
    let mut out = String::new();
    let mut chars = raw.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        if c == q {
            if q == '\'' && raw[i + 1..].starts_with('\'') {
                chars.next();
                out.push('\'');
                continue;
            }
            return Some((out, i + 1));
        }
        if c == '\\' && q == '"' {
            let (_, e) = chars.next()?;
            out.push(match e {
                'n' => '\n',
                't' => '\t',
                other => other,
            });
        } else {
            out.push(c);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar_texts(n: &Node) -> Vec<String> {
        match n {
            Node::Seq { items, .. } => items
                .iter()
                .map(|i| match i {
                    Node::Scalar { text, .. } => text.clone(),
                    Node::Map { entries, .. } => format!("map:{}", entries[0].key),
                    other => other.describe(),
                })
                .collect(),
            other => vec![other.describe()],
        }
    }

    #[test]
    fn block_and_flow_forms() {
        let src = "# c\nbackend: Emu  # trailing\nsupported:\n- add.Tensor\n- func: mul.Tensor(Tensor self, Tensor other) -> Tensor\nlist: [a, 'b c', \"d\"]\nempty:\n";
        let Node::Map { entries, .. } = parse(src).unwrap() else {
            panic!("not a map")
        };
        assert_eq!(entries[0].key, "backend");
        assert_eq!(entries[0].key_loc.line, 2);
        assert_eq!(
            entries[0].value,
            Node::Scalar {
                text: "Emu".into(),
                loc: Loc {
                    offset: 13,
                    len: 3,
                    line: 2,
                    col: 10
                },
                quoted: false
            }
        );
        assert_eq!(
            scalar_texts(&entries[1].value),
            vec!["add.Tensor", "map:func"]
        );
        let Node::Seq { items, .. } = &entries[1].value else {
            panic!()
        };
        let Node::Map { entries: f, .. } = &items[1] else {
            panic!()
        };
        assert_eq!(f[0].value.loc().line, 5);
        assert_eq!(f[0].value.loc().col, 9);
        assert_eq!(scalar_texts(&entries[2].value), vec!["a", "b c", "d"]);
        assert!(matches!(entries[3].value, Node::Null { .. }));
    }

    #[test]
    fn indented_sequences_and_errors() {
        let src = "supported:\n  - a\n  - b\nx: 1\n";
        let Node::Map { entries, .. } = parse(src).unwrap() else {
            panic!()
        };
        assert_eq!(scalar_texts(&entries[0].value), vec!["a", "b"]);
        let e = parse("a: &x 1\nb: *x\n").unwrap_err();
        assert!(e.message.contains("anchors"), "{}", e.message);
        let e = parse("a: [1, 2\n").unwrap_err();
        assert!(
            e.loc.line >= 1 && e.message.contains("YAML"),
            "{}",
            e.message
        );
        let e = parse("a:\n\tb: 1\n").unwrap_err();
        assert!(
            e.message.contains("tab") || e.message.contains("YAML"),
            "{}",
            e.message
        );
    }
}
