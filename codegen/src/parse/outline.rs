//! A located outline of a block-style YAML list of mappings: where each top-level
//! `- ` item, each of its keys, and each nested key starts.
//!
//! yaml_serde gives values but no positions, so the loader reads values from
//! yaml_serde and positions from this outline, matched by item index and key name.
//! The outline only has to be right for the block style `native_functions.yaml`
//! uses; for anything else (flow style, multi-line keys) it finds fewer keys and the
//! loader falls back to the enclosing item's position.
//!
//! Owns: line/column bookkeeping over the raw text. Must not: interpret values.

use crate::model::Loc;

/// One `key: value` line.
#[derive(Clone, Debug, Default)]
pub struct OutlineKey {
    /// The key as written (quotes removed), e.g. `CPU, CUDA`.
    pub name: String,
    /// The key's span.
    pub loc: Loc,
    /// The value's span on the key's line (zero length when the value starts on a
    /// later line), without a trailing comment.
    pub value: Loc,
    /// Keys nested under this one (e.g. the entries of `dispatch:`).
    pub children: Vec<OutlineKey>,
}

/// One top-level `- ` item.
#[derive(Clone, Debug, Default)]
pub struct OutlineEntry {
    /// Span of the item's first line, from the `-`.
    pub loc: Loc,
    pub keys: Vec<OutlineKey>,
}

impl OutlineEntry {
    /// The key named `name`, if the outline found it.
    pub fn key(&self, name: &str) -> Option<&OutlineKey> {
        self.keys.iter().find(|k| k.name == name)
    }
}

/// Maps byte offsets to 1-based line/column.
pub struct LineIndex<'a> {
    src: &'a str,
    /// Starts of the indexed lines, the first being line `first_line`.
    starts: Vec<usize>,
    first_line: u32,
    /// End of the indexed range.
    end: usize,
    /// All-ASCII ranges (the usual case) have columns equal to byte distances.
    ascii: bool,
}

impl<'a> LineIndex<'a> {
    /// Indexes the line starts of `src`.
    pub fn new(src: &'a str) -> Self {
        Self::for_range(src, 0, src.len(), 1)
    }

    /// Indexes only `src[from..to]`, where `from` starts line `first_line`: each
    /// piece parsed on its own thread indexes its own range, instead of one thread
    /// indexing the whole file before the others can start.
    pub fn for_range(src: &'a str, from: usize, to: usize, first_line: u32) -> Self {
        let range = src.as_bytes().get(from..to).unwrap_or_default();
        let mut starts = Vec::with_capacity(range.len() / 32 + 1);
        starts.push(from);
        starts.extend(memchr::memchr_iter(b'\n', range).map(|i| from + i + 1));
        LineIndex {
            src,
            starts,
            first_line,
            end: to,
            ascii: range.is_ascii(),
        }
    }

    /// The location of `offset..offset+len`.
    pub fn loc(&self, offset: usize, len: usize) -> Loc {
        let offset = offset.min(self.src.len());
        if offset < self.starts[0] || offset > self.end {
            // Outside the indexed piece: callers only ask for offsets inside it, but
            // an answer from the whole file is still right.
            return LineIndex::new(self.src).loc(offset, len);
        }
        let line = self.starts.partition_point(|&s| s <= offset) - 1;
        let start = self.starts[line];
        let col = if self.ascii {
            offset - start
        } else {
            self.src
                .get(start..offset)
                .map_or(offset - start, |s| s.chars().count())
        };
        Loc {
            offset,
            len,
            line: self.first_line + line as u32,
            col: col as u32 + 1,
        }
    }
}

/// Builds the outline of `src`.
pub fn outline(src: &str) -> Vec<OutlineEntry> {
    let idx = LineIndex::new(src);
    let mut entries: Vec<OutlineEntry> = Vec::new();
    let mut seq_indent: Option<usize> = None;
    let mut key_indent: Option<usize> = None;
    let mut child_indent: Option<usize> = None;
    let mut offset = 0;
    for raw_line in src.split_inclusive('\n') {
        let line_start = offset;
        offset += raw_line.len();
        let line = raw_line.trim_end_matches(['\n', '\r']);
        let indent = line.len() - line.trim_start_matches(' ').len();
        let content = &line[indent..];
        if content.is_empty()
            || content.starts_with('#')
            || (indent == 0 && (content.starts_with("---") || content.starts_with("...")))
        {
            continue;
        }
        let is_item = content == "-" || content.starts_with("- ");
        if is_item && seq_indent.is_none_or(|s| indent <= s) {
            seq_indent = Some(indent);
            let mut entry = OutlineEntry {
                loc: idx.loc(line_start + indent, content.len()),
                keys: Vec::new(),
            };
            key_indent = None;
            child_indent = None;
            let rest = content[1..].trim_start_matches(' ');
            if !rest.is_empty() {
                let col = indent + (content.len() - rest.len());
                key_indent = Some(col);
                if let Some(k) = key_line(rest, line_start + col, &idx) {
                    entry.keys.push(k);
                }
            }
            entries.push(entry);
            continue;
        }
        let Some(entry) = entries.last_mut() else {
            continue;
        };
        if seq_indent.is_some_and(|s| indent <= s) {
            continue;
        }
        let ki = *key_indent.get_or_insert(indent);
        if indent == ki {
            child_indent = None;
            if let Some(k) = key_line(content, line_start + indent, &idx) {
                entry.keys.push(k);
            }
        } else if indent > ki && !is_item {
            let ci = *child_indent.get_or_insert(indent);
            if indent == ci {
                if let (Some(parent), Some(k)) = (
                    entry.keys.last_mut(),
                    key_line(content, line_start + indent, &idx),
                ) {
                    parent.children.push(k);
                }
            }
        }
    }
    entries
}

/// Parses `key: value` starting at file offset `at`.
fn key_line(content: &str, at: usize, idx: &LineIndex<'_>) -> Option<OutlineKey> {
    if content.starts_with(['{', '[', '-', '#', '|', '>']) {
        return None;
    }
    let (name, name_len, colon) = match content.as_bytes()[0] {
        q @ (b'"' | b'\'') => {
            let close = content[1..].find(q as char)? + 1;
            let after = &content[close + 1..];
            let colon = close + 1 + after.find(':')?;
            (content[1..close].to_string(), close + 1, colon)
        }
        _ => {
            let b = content.as_bytes();
            let colon =
                (0..b.len()).find(|&i| b[i] == b':' && (i + 1 == b.len() || b[i + 1] == b' '))?;
            let name = content[..colon].trim_end();
            (name.to_string(), name.len(), colon)
        }
    };
    let after = &content[colon + 1..];
    let value_start = colon + 1 + (after.len() - after.trim_start().len());
    let mut value = &content[value_start..];
    if let Some(hash) = comment_start(value) {
        value = &value[..hash];
    }
    let value = value.trim_end();
    Some(OutlineKey {
        name,
        loc: idx.loc(at, name_len),
        value: idx.loc(at + value_start, value.len()),
        children: Vec::new(),
    })
}

/// Byte index of a ` #` comment outside quotes, if any.
fn comment_start(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut quote: Option<u8> = None;
    for i in 0..b.len() {
        match (quote, b[i]) {
            (None, q @ (b'"' | b'\'')) if i == 0 => quote = Some(q),
            (Some(q), c) if c == q => quote = None,
            (None, b'#') if i == 0 || b[i - 1] == b' ' || b[i - 1] == b'\t' => return Some(i),
            _ => {}
        }
    }
    None
}
