//! A faster way to read one piece of a `native_functions.yaml` into [`Node`]s:
//! keys and the values of string-valued keys are asked of yaml_serde as strings
//! (`deserialize_str`), which skips the null/bool/int/float guesses that
//! `deserialize_any` makes for every plain scalar (about 7% of the load's
//! instructions).
//!
//! The result must equal what [`Node`]'s own `Deserialize` gives. Where that is
//! not certain (a plain scalar that might read as null, a bool or a number, a key
//! holding a list where a string was expected, a YAML tag), this reader fails and
//! the caller reads the text again with [`Node`], which stays authoritative.
//!
//! Owns: the choice of which keys are read as strings. Must not: interpret values
//! or report problems (a failure here only means "read it the general way").

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::node::Node;

/// Keys whose value is a string in any valid file.
const STRING_KEYS: [&str; 8] = [
    "func",
    "variants",
    "structured_delegate",
    "structured_inherits",
    "python_module",
    "category_override",
    "device_check",
    "autogen",
];

/// Reads `text` (a block list of entries) like `serde_yaml::from_str::<Node>`
/// would, or `None` when it cannot be sure to.
pub(crate) fn read_entries(text: &str) -> Option<Vec<Node<'_>>> {
    if has_tags(text) {
        return None;
    }
    let de = serde_yaml::Deserializer::from_str(text);
    // An empty document is null for `Node`, not an empty list.
    Entries { text }
        .deserialize(de)
        .ok()
        .filter(|items| !items.is_empty())
}

/// Whether `text` may hold a YAML tag (`!name` starting a token): `deserialize_str`
/// would ignore it where `deserialize_any` refuses it. Schemas' `(a!)` do not
/// count.
fn has_tags(text: &str) -> bool {
    let b = text.as_bytes();
    memchr::memchr_iter(b'!', b)
        .any(|i| i == 0 || matches!(b[i - 1], b' ' | b'\t' | b'\n' | b'\r' | b'[' | b'{' | b','))
}

/// Whether a plain scalar reading `v` might be read as something else than a
/// string: null, a bool, or a number (which always start with a digit, a sign,
/// `.` or `~`).
fn might_not_be_a_string(v: &str) -> bool {
    match v.as_bytes().first() {
        None => true,
        Some(b'0'..=b'9' | b'+' | b'-' | b'.' | b'~') => true,
        Some(_) => matches!(
            v,
            "null" | "Null" | "NULL" | "true" | "True" | "TRUE" | "false" | "False" | "FALSE"
        ),
    }
}

/// Whether the slice `v` of `text` sits between two equal quotes.
fn is_quoted(v: &str, text: &str) -> bool {
    let Some(start) = (v.as_ptr() as usize).checked_sub(text.as_ptr() as usize) else {
        return false;
    };
    let b = text.as_bytes();
    match (
        start.checked_sub(1).and_then(|i| b.get(i)),
        b.get(start + v.len()),
    ) {
        (Some(&open), Some(&close)) => open == close && matches!(open, b'"' | b'\''),
        _ => false,
    }
}

fn give_up<E: de::Error>() -> E {
    E::custom("not for the fast reader")
}

/// The top-level list.
struct Entries<'t> {
    text: &'t str,
}

impl<'de> DeserializeSeed<'de> for Entries<'de> {
    type Value = Vec<Node<'de>>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Entries<'de> {
    type Value = Vec<Node<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of entries")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(n) = seq.next_element_seed(Map {
            text: self.text,
            entry: true,
        })? {
            items.push(n);
        }
        Ok(items)
    }
}

/// A mapping with string keys: an entry (`entry: true`: the values of
/// [`STRING_KEYS`] are strings, `dispatch:` maps strings to strings, other values
/// are [`Node`]s) or a `dispatch:` table (every value a string).
struct Map<'t> {
    text: &'t str,
    entry: bool,
}

impl<'de> DeserializeSeed<'de> for Map<'de> {
    type Value = Node<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Map<'de> {
    type Value = Node<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let text = self.text;
        let mut pairs = Vec::with_capacity(4);
        while let Some(k) = map.next_key_seed(Str { text })? {
            let v = match k.as_str() {
                _ if !self.entry => map.next_value_seed(Str { text })?,
                Some(key) if STRING_KEYS.contains(&key) => map.next_value_seed(Str { text })?,
                Some("dispatch") => map.next_value_seed(Map { text, entry: false })?,
                _ => map.next_value::<Node<'de>>()?,
            };
            pairs.push((k, v));
        }
        Ok(Node::Map(pairs))
    }
}

/// A scalar that [`Node`] would read as a string.
struct Str<'t> {
    text: &'t str,
}

impl<'de> DeserializeSeed<'de> for Str<'de> {
    type Value = Node<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Str<'de> {
    type Value = Node<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    /// yaml_serde lends single-line plain scalars and quoted ones without escapes.
    /// A plain one that might be null, a bool or a number is left to [`Node`].
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Node<'de>, E> {
        if might_not_be_a_string(v) && !is_quoted(v, self.text) {
            return Err(give_up());
        }
        Ok(Node::Str(Cow::Borrowed(v)))
    }

    /// Copied scalars are quoted with escapes, block scalars, or plain ones folded
    /// over several lines; the last hold whitespace, which no null, bool or number
    /// does, so all of them are strings for [`Node`] too.
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Node<'de>, E> {
        Ok(Node::Str(Cow::Owned(v.to_string())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Node<'de>, E> {
        Ok(Node::Str(Cow::Owned(v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::node::{items_read_generally as general, ENTRY_TEXTS, USUAL_ENTRY_TEXTS};

    #[test]
    fn reads_like_node_or_not_at_all() {
        let cases = ENTRY_TEXTS;
        for text in cases {
            if let Some(fast) = read_entries(text) {
                assert_eq!(Some(fast), general(text), "{text:?}");
            }
        }
        // The usual shapes do take the fast path; a number where a string is
        // expected does not.
        for text in &cases[..USUAL_ENTRY_TEXTS] {
            assert!(read_entries(text).is_some(), "{text:?}");
        }
        assert!(read_entries("- func: f(Tensor self) -> Tensor\n  autogen: 1\n").is_none());
    }
}
