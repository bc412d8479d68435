//! A YAML value tree read through yaml_serde that remembers where its scalars are.
//!
//! yaml_serde hands plain and simply quoted scalars to serde as slices of the input
//! (`visit_borrowed_str`), so a scalar's byte offset is its pointer minus the
//! input's. [`Node`] keeps those slices; anything yaml_serde had to copy (escapes,
//! block scalars) has no offset and callers fall back to an enclosing location.
//! Mappings stay in file order, duplicates included, for the loader to report.
//!
//! Owns: the generic tree and offsets. Must not: know native_functions.yaml keys.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// One YAML value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Node<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// A string; `Cow::Borrowed` when it is a slice of the input.
    Str(Cow<'a, str>),
    Seq(Vec<Node<'a>>),
    /// Key/value pairs in file order.
    Map(Vec<(Node<'a>, Node<'a>)>),
}

impl<'a> Node<'a> {
    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Byte offset and length of this scalar in `src`, when it is a slice of it.
    pub fn span_in(&self, src: &str) -> Option<(usize, usize)> {
        match self {
            Node::Str(Cow::Borrowed(s)) => {
                let start = (s.as_ptr() as usize).checked_sub(src.as_ptr() as usize)?;
                (start + s.len() <= src.len()).then_some((start, s.len()))
            }
            _ => None,
        }
    }

    /// The first located scalar inside this node (itself, or a key/item within).
    pub fn first_span_in(&self, src: &str) -> Option<(usize, usize)> {
        match self {
            Node::Str(_) => self.span_in(src),
            Node::Seq(items) => items.iter().find_map(|n| n.first_span_in(src)),
            Node::Map(pairs) => pairs
                .iter()
                .find_map(|(k, v)| k.first_span_in(src).or_else(|| v.first_span_in(src))),
            _ => None,
        }
    }

    /// How the value reads in a message ("the string `x`", "a list", ...).
    pub fn describe(&self) -> String {
        match self {
            Node::Null => "nothing".into(),
            Node::Bool(b) => format!("the bool `{}`", if *b { "True" } else { "False" }),
            Node::Int(n) => format!("the number `{n}`"),
            Node::Float(n) => format!("the number `{n}`"),
            Node::Str(s) => format!("the string `{s}`"),
            Node::Seq(_) => "a list".into(),
            Node::Map(_) => "a mapping".into(),
        }
    }
}

impl<'de> Deserialize<'de> for Node<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value")
    }

    fn visit_unit<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }

    fn visit_none<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Node<'de>, E> {
        Ok(Node::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Node<'de>, E> {
        Ok(Node::Int(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Node<'de>, E> {
        Ok(i64::try_from(v).map_or(Node::Float(v as f64), Node::Int))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Node<'de>, E> {
        Ok(Node::Float(v))
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Node<'de>, E> {
        Ok(Node::Str(Cow::Borrowed(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Node<'de>, E> {
        Ok(Node::Str(Cow::Owned(v.to_string())))
    }

    fn visit_string<E>(self, v: String) -> Result<Node<'de>, E> {
        Ok(Node::Str(Cow::Owned(v)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node<'de>, A::Error> {
        // yaml_serde gives no size hints; entries' lists are short.
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(4));
        while let Some(n) = seq.next_element()? {
            items.push(n);
        }
        Ok(Node::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node<'de>, A::Error> {
        // An entry has a handful of keys: start with room for them.
        let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(4));
        while let Some(kv) = map.next_entry()? {
            pairs.push(kv);
        }
        Ok(Node::Map(pairs))
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, _data: A) -> Result<Node<'de>, A::Error> {
        Err(de::Error::custom(
            "YAML tags (`!name value`) are not used in native_functions.yaml",
        ))
    }
}

/// The items of a block list of entries as the general reader (`Node` through
/// yaml_serde) reads them: what the quicker readers' tests compare with.
#[cfg(test)]
pub(crate) fn items_read_generally(text: &str) -> Option<Vec<Node<'_>>> {
    match serde_yaml::from_str::<Node<'_>>(text) {
        Ok(Node::Seq(items)) => Some(items),
        _ => None,
    }
}

/// Entry texts that readers quicker than the general one must read exactly as it
/// does or not at all: first the shapes native_functions.yaml is written in (the
/// first [`USUAL_ENTRY_TEXTS`]), then near misses and invalid YAML.
#[cfg(test)]
pub(crate) const ENTRY_TEXTS: &[&str] = &[
    "- func: abs(Tensor self) -> Tensor\n  variants: function, method\n  dispatch:\n    CPU, CUDA: abs\n",
    "- func: 'f(Tensor self) -> Tensor'\n  structured: True\n  tags: [core, pointwise]\n",
    "- func: \"f(Tensor self) -> Tensor\"\n  autogen: \"1\"\n",
    "# preamble\n\n- func: f(Tensor(a!) self) -> Tensor(a!)  # a comment\n  device_check: NoCheck   # why\n  cpp_no_default_args: ['dim']\n",
    "- func: f() -> Tensor\n  precomputed:\n  - kernel_size -> int kH, int kW\n  - dim -> int dim\n  tags: []\n",
    "- func: f() -> Tensor\n  dispatch:\n    CPU: a\n    CUDA: b\n- func: g() -> Tensor\n",
    "- func: f(Tensor self) -> Tensor\n  autogen: 1\n",
    "- func: f(Tensor self) -> Tensor\n  variants: ~\n",
    "- func: f(Tensor self) -> Tensor\n  variants:\n",
    "- func: f(Tensor self) -> Tensor\n  variants: null\n",
    "- func: f(Tensor self) -> Tensor\n  variants: nullable\n",
    "- func: f(Tensor self) -> Tensor\n  structured: yes\n  a: on\n  b: No\n  c: OFF\n",
    "- func: f(Tensor self) -> Tensor\n  structured: .inf\n",
    "- func: f(Tensor self) -> Tensor\n  structured: 0x1F\n",
    "- func: f(Tensor self) -> Tensor\n  dispatch: CPU\n",
    "- func: f(Tensor self) -> Tensor\n  dispatch:\n    1: k\n",
    "- func: f(Tensor self) -> Tensor\n  dispatch:\n    CPU: k\n      CUDA: j\n",
    "- func: f(Tensor self) -> Tensor\n  dispatch:\n    CPU:\n      CUDA: j\n",
    "- func: f(Tensor self) -> Tensor\n  func: |\n    1\n",
    "- func: f(Tensor self,\n    Tensor other) -> Tensor\n",
    "- func: \"f(str s=\\\"a\\\") -> Tensor\"\n",
    "- func: 'it''s'\n",
    "- func: !tag f() -> Tensor\n",
    "- func: &a f() -> Tensor\n- func: *a\n",
    "- func: f() -> Tensor\n  tags: [a, [b]]\n",
    "- func: f() -> Tensor\n  cpp_no_default_args: [?dim']\n",
    "- func: f() -> Tensor\n  tags: [a:b]\n",
    "- func: f() -> Tensor\n  variants : function\n",
    "- func: f() -> Tensor\n  dispatch: {}\n",
    "- func: f() -> Tensor\n  dispatch: {a: b}\n",
    "- func: f() -> Tensor\n  tags: [a, ]\n",
    "- func: f() -> Tensor\n  tags: [a, 'b']\n",
    "- func: f() -> Tensor\n  tags: [a: b]\n",
    "- func: f() -> Tensor\n tags: x\n",
    "- func: f() -> Tensor\n  tags: x: y\n",
    "- func: f() -> Tensor\n  - x\n",
    "- func: f#x() -> Tensor\n",
    "- func: f() -> 'Tensor' # c\n",
    "- 1: x\n",
    "- true: x\n",
    "- []\n- x\n",
    "-\n  func: f\n",
    "- - a\n",
    "{a: b}\n",
    "a: b\n",
    "---\n- func: f\n",
    "- func: f\r\n",
    "- func:\tf\n",
    "- func: f(Tensor self) -> Tensor\n  variants: True\n",
    "- func: f(Tensor self) -> Tensor\n  variants: [function]\n",
    "",
    "# only a comment\n",
];

/// How many of [`ENTRY_TEXTS`], from the first, are in the usual shapes.
#[cfg(test)]
pub(crate) const USUAL_ENTRY_TEXTS: usize = 6;
