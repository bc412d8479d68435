//! A backend YAML as a tree in which every node has a location, read through the
//! crate's one YAML reader (`parse::read_document`, yaml_serde underneath).
//!
//! yaml_serde lends string scalars as slices of the text, so those carry their exact
//! place. Values it hands over without text (numbers, booleans, nulls, strings it
//! had to unescape, empty lists) take the place of the nearest located key or
//! item around them, so a message about them still names `path:line:col`.
//!
//! Owns: text -> located [`Node`] tree for backend YAMLs. Must not: know what the
//! keys mean (that is `load`).

use crate::diagnostics::Diagnostic;
use crate::model::Loc;
use crate::parse::node::Node as Value;
use crate::parse::outline::LineIndex;

/// One `key: value` of a mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub key: String,
    pub key_loc: Loc,
    pub value: Node,
}

/// A located YAML node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Node {
    /// A scalar; `loc` covers its text (for quoted scalars, the text inside the
    /// quotes). Numbers and booleans read as the text YAML gives them.
    Scalar { text: String, loc: Loc },
    /// A list; `loc` is its opening `[` or first `-` (when empty: its key's).
    Seq { items: Vec<Node>, loc: Loc },
    /// A mapping; `loc` is its first key's.
    Map { entries: Vec<Entry>, loc: Loc },
    /// An absent value (`key:` with nothing after it, `~`, `null`, an empty file).
    Null { loc: Loc },
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

/// Parses the backend YAML `src` into a located tree.
pub(crate) fn parse(src: &str) -> Result<Node, Diagnostic> {
    let doc = crate::parse::read_document(src)?;
    let locate = Locate {
        src,
        idx: LineIndex::new(src),
    };
    let start = locate.idx.loc(0, 0);
    Ok(locate.node(&doc, start))
}

struct Locate<'a> {
    src: &'a str,
    idx: LineIndex<'a>,
}

impl Locate<'_> {
    /// Where `v` itself is written, if yaml_serde lent its text.
    fn own(&self, v: &Value<'_>) -> Option<Loc> {
        v.span_in(self.src).map(|(at, len)| self.idx.loc(at, len))
    }

    /// Where the list with items `items` is written: a flow list from its `[` to
    /// its `]`, a block list at its first `-` (both found by stepping over blanks
    /// from the items' places, never over other text).
    fn list_loc(&self, items: &[Node]) -> Option<Loc> {
        let (first, last) = (items.first()?.loc(), items.last()?.loc());
        let before = self
            .src
            .get(..first.offset)?
            .trim_end_matches([' ', '\t', '\r', '\n']);
        match before.as_bytes().last()? {
            b'[' => {
                let open = before.len() - 1;
                let after = last.offset + last.len;
                let close = self
                    .src
                    .get(after..)?
                    .trim_start_matches([' ', '\t', '\r', '\n', ',']);
                let end = if close.starts_with(']') {
                    self.src.len() - close.len() + 1
                } else {
                    after
                };
                // An item without text of its own carries an earlier place, so
                // the list may seem to end before its bracket: no span then.
                Some(self.idx.loc(open, end.checked_sub(open)?))
            }
            b'-' => Some(self.idx.loc(before.len() - 1, 1)),
            _ => None,
        }
    }

    /// `v` as a located node; `around` is the place of the nearest enclosing key or
    /// item, used for values that carry no text of their own.
    fn node(&self, v: &Value<'_>, around: Loc) -> Node {
        match v {
            Value::Null => Node::Null { loc: around },
            Value::Seq(items) => {
                let items: Vec<Node> = items.iter().map(|i| self.node(i, around)).collect();
                let loc = self
                    .list_loc(&items)
                    .or_else(|| items.first().map(Node::loc))
                    .unwrap_or(around);
                Node::Seq { items, loc }
            }
            Value::Map(pairs) => {
                let entries: Vec<Entry> = pairs
                    .iter()
                    .map(|(k, value)| {
                        let key_loc = self.own(k).unwrap_or(around);
                        Entry {
                            key: scalar_text(k),
                            key_loc,
                            value: self.node(value, key_loc),
                        }
                    })
                    .collect();
                let loc = entries.first().map_or(around, |e| e.key_loc);
                Node::Map { entries, loc }
            }
            scalar => Node::Scalar {
                text: scalar_text(scalar),
                loc: self.own(scalar).unwrap_or(around),
            },
        }
    }
}

/// A scalar's text as YAML resolved it (`3`, `true`, `1.5`); a collection used as
/// a key reads as how it is described.
fn scalar_text(v: &Value<'_>) -> String {
    match v {
        Value::Str(s) => s.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Int(n) => n.to_string(),
        Value::Float(x) => x.to_string(),
        Value::Null => String::new(),
        other => other.describe(),
    }
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
        // Anchors are plain YAML; the alias takes the anchor's value.
        let Node::Map { entries, .. } = parse("a: &x one\nb: *x\n").unwrap() else {
            panic!()
        };
        assert_eq!(scalar_texts(&entries[1].value), vec!["the value `one`"]);
        let e = parse("a: *missing\n").unwrap_err();
        assert_eq!(e.loc.line, 1, "{}", e.message);
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
