//! A located outline of a block-style YAML list: where each top-level `- ` item
//! starts.
//!
//! yaml_serde gives values but no positions; when an item has no position of its
//! own, the loader takes the item's from this outline, matched by item index. The
//! outline only has to be right for the block style `native_functions.yaml` uses;
//! for anything else (flow style) it finds a different number of items and the
//! loader falls back to the file's start.
//!
//! Owns: line/column bookkeeping over the raw text (also where each part of a
//! comma-separated value lies). Must not: interpret values.

use super::node::Node;
use crate::model::Loc;

/// One top-level `- ` item.
#[derive(Clone, Debug, Default)]
pub(crate) struct OutlineEntry {
    /// Span of the item's first line, from the `-`.
    pub loc: Loc,
}

/// Maps byte offsets to 1-based line/column.
pub(crate) struct LineIndex<'a> {
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

    /// Where `node` is: its first located scalar (`None` when it has none).
    pub fn first_loc(&self, node: &Node<'_>) -> Option<Loc> {
        node.first_span_in(self.src).map(|(o, l)| self.loc(o, l))
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
pub(crate) fn outline(src: &str) -> Vec<OutlineEntry> {
    let idx = LineIndex::new(src);
    let mut entries: Vec<OutlineEntry> = Vec::new();
    let mut seq_indent: Option<usize> = None;
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
            entries.push(OutlineEntry {
                loc: idx.loc(line_start + indent, content.len()),
            });
        }
    }
    entries
}

/// The comma-separated parts of `text` (trimmed), each with its place: inside
/// `at` when `at` covers exactly `text`, else `at` itself (the text was quoted or
/// folded, so its characters are not where the file has them).
pub(crate) fn comma_parts(text: &str, at: Loc) -> impl Iterator<Item = (&str, Loc)> {
    let mut off = 0;
    text.split(',').map(move |part| {
        let name = part.trim();
        let lead = part.len() - part.trim_start().len();
        let mut loc = at;
        if at.len == text.len() {
            loc.offset += off + lead;
            loc.col += (off + lead) as u32;
            loc.len = name.len();
        }
        off += part.len() + 1;
        (name, loc)
    })
}
