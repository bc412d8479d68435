//! Located errors and their rendering: every problem found while loading a YAML is
//! a [`Diagnostic`] (message, location, label, hint); a run collects all of them
//! into [`Diagnostics`], rendered as `path:line:col`, a snippet and the hint: by
//! miette's graphical renderer with the `fancy` feature, by a small plain-text
//! renderer (no dependencies) without it.
//!
//! Owns: the error values of parsing/loading/validation and their text form.
//! Must not: decide what is an error (that is `parse` and `validate`), exit the
//! process or print (the CLI does).

use std::fmt;
use std::sync::Arc;

#[cfg(feature = "fancy")]
use miette::{GraphicalReportHandler, GraphicalTheme};
use miette::{
    LabeledSpan, MietteError, MietteSpanContents, Severity, SourceCode, SourceSpan, SpanContents,
};

use crate::model::Loc;

/// One located problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Stable short code, e.g. `opal::unknown_key`.
    pub code: &'static str,
    /// What is wrong, one sentence.
    pub message: String,
    /// Where; [`Loc::SYNTHETIC`] when the problem has no single place.
    pub loc: Loc,
    /// Text shown under the snippet's underline.
    pub label: String,
    /// How to fix it.
    pub hint: Option<String>,
}

impl Diagnostic {
    /// A diagnostic with a label equal to a short form of the message.
    pub fn new(code: &'static str, loc: Loc, message: impl Into<String>) -> Self {
        Diagnostic {
            code,
            message: message.into(),
            loc,
            label: String::from("here"),
            hint: None,
        }
    }

    /// Replaces the underline label.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// Adds a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.loc.is_synthetic() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}:{}: {}", self.loc.line, self.loc.col, self.message)
        }
    }
}

impl std::error::Error for Diagnostic {}

/// All problems found in one file, with the file's text for snippets.
#[derive(Clone, Debug)]
pub struct Diagnostics {
    /// The path as given by the caller, used in `path:line:col`.
    pub path: String,
    /// The file's text (lossily decoded when it was not UTF-8).
    pub source: Arc<str>,
    /// In the order found; [`Diagnostics::sort`] orders them by location.
    pub items: Vec<Diagnostic>,
}

impl Diagnostics {
    /// An empty set for `path` with source text `source`.
    pub fn new(path: impl Into<String>, source: impl Into<Arc<str>>) -> Self {
        Diagnostics {
            path: path.into(),
            source: source.into(),
            items: Vec::new(),
        }
    }

    /// The problems `items` of `path`, sorted by position.
    pub fn sorted(
        path: impl Into<String>,
        source: impl Into<Arc<str>>,
        items: Vec<Diagnostic>,
    ) -> Self {
        let mut d = Diagnostics {
            path: path.into(),
            source: source.into(),
            items,
        };
        d.sort();
        d
    }

    /// `Ok(value)` when `items` is empty, else them as sorted diagnostics of
    /// `path` (what every loader returns).
    pub(crate) fn or_ok<T>(
        value: T,
        items: Vec<Diagnostic>,
        path: &str,
        source: &str,
    ) -> Result<T, Self> {
        if items.is_empty() {
            Ok(value)
        } else {
            Err(Diagnostics::sorted(path, source, items))
        }
    }

    /// Number of problems.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Adds one problem.
    pub fn push(&mut self, d: Diagnostic) {
        self.items.push(d);
    }

    /// Sorts by position (stable, so problems at one place keep their order).
    pub fn sort(&mut self) {
        self.items.sort_by_key(|d| (d.loc.line, d.loc.col));
    }

    /// Renders the problems (graphically with the `fancy` feature, as plain text
    /// without it): no colors and a fixed width when `color` is false, so the
    /// output is stable for snapshots. At most [`MAX_RENDERED`]
    /// are shown in full, then a line says how many more there are; the closing
    /// count is always the total.
    pub fn render(&self, color: bool, width: usize) -> String {
        self.render_with(&handler(color, width))
    }

    /// [`Diagnostics::render`] with a given handler.
    pub(crate) fn render_with(&self, handler: &Handler) -> String {
        let mut out = String::new();
        for d in self.items.iter().take(MAX_RENDERED) {
            let report = Report {
                d,
                src: (!d.loc.is_synthetic()).then(|| Excerpt::new(&self.path, &self.source, d.loc)),
                path: &self.path,
            };
            if handler.render_report(&mut out, &report).is_err() {
                out.push_str(&format!("{}: {}\n", self.path, d));
            }
            out.push('\n');
        }
        let n = self.items.len();
        push_more(&mut out, &self.path, n);
        out.push_str(&format!(
            "{}: {n} error{}\n",
            self.path,
            if n == 1 { "" } else { "s" }
        ));
        out
    }
}

/// How many problems a rendering shows in full: a broken file can have thousands,
/// and each snippet costs time and screen; the first ones are what a reader fixes.
pub const MAX_RENDERED: usize = 50;

/// The "and N more" line after [`MAX_RENDERED`] rendered problems (nothing when all
/// were shown).
pub(crate) fn push_more(out: &mut String, path: &str, total: usize) {
    if total > MAX_RENDERED {
        let more = total - MAX_RENDERED;
        out.push_str(&format!(
            "{path}: ... and {more} more error{} not shown\n",
            if more == 1 { "" } else { "s" }
        ));
    }
}

/// The handler of every rendering: miette's graphical renderer with the `fancy`
/// feature, [`Handler::Plain`] without it.
pub(crate) fn handler(color: bool, width: usize) -> Handler {
    #[cfg(feature = "fancy")]
    {
        let theme = if color {
            GraphicalTheme::unicode()
        } else {
            GraphicalTheme::unicode_nocolor()
        };
        Handler::Graphical(Box::new(
            GraphicalReportHandler::new_themed(theme)
                .with_width(width)
                .with_links(false),
        ))
    }
    #[cfg(not(feature = "fancy"))]
    {
        let _ = (color, width);
        Handler::Plain
    }
}

/// Draws one miette report.
pub(crate) enum Handler {
    /// miette's renderer: boxes, underlines, wrapping at a width, colors on request.
    #[cfg(feature = "fancy")]
    Graphical(Box<GraphicalReportHandler>),
    /// Plain text, one report as
    ///
    /// ```text
    /// error: path:3:5: message [opal::code]
    ///   |
    /// 2 | the line before
    /// 3 |   the line
    ///   |     ^^^^ label
    /// 4 | the line after
    ///   = hint: how to fix it
    /// ```
    ///
    /// and each related report after it the same way (a note says `note:`).
    // Built by `handler` only without `fancy`; the tests build it either way.
    #[cfg_attr(feature = "fancy", allow(dead_code))]
    Plain,
}

impl Handler {
    /// Appends `report` to `out`.
    pub(crate) fn render_report(
        &self,
        out: &mut String,
        report: &dyn miette::Diagnostic,
    ) -> fmt::Result {
        match self {
            #[cfg(feature = "fancy")]
            Handler::Graphical(h) => h.render_report(out, report),
            Handler::Plain => render_plain(out, report),
        }
    }
}

/// [`Handler::Plain`]'s rendering of `d` and its related reports.
fn render_plain(out: &mut String, d: &dyn miette::Diagnostic) -> fmt::Result {
    use fmt::Write;
    let severity = match d.severity() {
        Some(Severity::Advice) => "note",
        Some(Severity::Warning) => "warning",
        Some(Severity::Error) | None => "error",
    };
    write!(out, "{severity}: {d}")?;
    if let Some(code) = d.code() {
        write!(out, " [{code}]")?;
    }
    out.push('\n');
    if let (Some(src), Some(labels)) = (d.source_code(), d.labels()) {
        for label in labels {
            if let Ok(contents) = src.read_span(label.inner(), 1, 1) {
                plain_snippet(out, contents.as_ref(), &label)?;
            }
        }
    }
    if let Some(help) = d.help() {
        writeln!(out, "  = hint: {help}")?;
    }
    for related in d.related().into_iter().flatten() {
        render_plain(out, related)?;
    }
    Ok(())
}

/// The numbered lines of `contents` with carets under `label`'s span and its text
/// after the carets of the span's first line.
fn plain_snippet(
    out: &mut String,
    contents: &dyn SpanContents<'_>,
    label: &LabeledSpan,
) -> fmt::Result {
    use fmt::Write;
    let data = String::from_utf8_lossy(contents.data());
    let data = data.strip_suffix('\n').unwrap_or(&data);
    let start = label.offset().saturating_sub(contents.span().offset());
    let end = start + label.len();
    let first = contents.line() + 1;
    let width = (first + data.split('\n').count()).to_string().len();
    writeln!(out, "{:width$} |", "")?;
    let mut at = 0;
    let mut labelled = false;
    for (i, line) in data.split('\n').enumerate() {
        let text = line.strip_suffix('\r').unwrap_or(line);
        writeln!(out, "{:>width$} | {text}", first + i)?;
        let line_end = at + text.len();
        // The part of [start, end) on this line (an empty span marks one character).
        let (from, to) = (start.max(at), end.min(line_end));
        if from <= line_end && (from < to || (from == start && start >= at)) {
            let column = |byte: usize| text.get(..byte - at).map_or(0, |t| t.chars().count());
            let (c0, c1) = (column(from), column(to.max(from)));
            write!(
                out,
                "{:width$} | {}{}",
                "",
                " ".repeat(c0),
                "^".repeat(c1.saturating_sub(c0).max(1))
            )?;
            match label.label() {
                Some(l) if !labelled && !l.is_empty() => writeln!(out, " {l}")?,
                _ => out.push('\n'),
            }
            labelled = true;
        }
        at += line.len() + 1;
    }
    Ok(())
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(false, 100))
    }
}

impl std::error::Error for Diagnostics {}

/// Adapter giving miette one diagnostic with its excerpt attached.
struct Report<'a> {
    d: &'a Diagnostic,
    src: Option<Excerpt>,
    path: &'a str,
}

impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.d)
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // miette prints the location in the snippet header; repeating it in the
        // message keeps `path:line:col` greppable even where no snippet is shown.
        if self.d.loc.is_synthetic() {
            write!(f, "{}: {}", self.path, self.d.message)
        } else {
            write!(
                f,
                "{}:{}:{}: {}",
                self.path, self.d.loc.line, self.d.loc.col, self.d.message
            )
        }
    }
}

impl std::error::Error for Report<'_> {}

impl miette::Diagnostic for Report<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(self.d.code))
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.d
            .hint
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.src.as_ref().map(|s| s as &dyn SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let src = self.src.as_ref()?;
        Some(Box::new(std::iter::once(src.label(&self.d.label))))
    }
}

/// The few lines around one location, cut to a window of columns around it: what
/// miette is given instead of the whole file. miette finds line numbers by scanning
/// its source from the start (a cost per problem that grows with the file), and
/// pads the underline with a formatting width, which panics past 65,535 columns;
/// an excerpt keeps both small whatever the file looks like. Line and column
/// numbers shown stay those of the file.
pub(crate) struct Excerpt {
    name: String,
    text: String,
    /// 0-based line number in the file of the excerpt's first line.
    first_line: usize,
    /// Index in the excerpt of the line holding the span's start.
    label_line: usize,
    /// Characters of that line cut off before the window, less the marker shown.
    col_shift: usize,
    span: SourceSpan,
}

/// Characters kept before the start of a span when a line is cut.
const LEAD: usize = 40;
/// Characters of a line shown at most.
const WINDOW: usize = 160;
/// Lines of a span shown at most (the span is cut after them).
const SPAN_LINES: usize = 8;
const CUT: &str = "…";

impl Excerpt {
    /// The excerpt of `src` around `loc` (a located, non-synthetic place).
    pub(crate) fn new(name: &str, src: &str, loc: Loc) -> Excerpt {
        let b = src.as_bytes();
        let floor = |mut i: usize| {
            i = i.min(src.len());
            while !src.is_char_boundary(i) {
                i -= 1;
            }
            i
        };
        let start = floor(loc.offset);
        // Rounded up, so a span inside one character (an offset into bytes that were
        // decoded lossily) still covers it.
        let mut end = loc.offset.saturating_add(loc.len).clamp(start, src.len());
        while !src.is_char_boundary(end) {
            end += 1;
        }
        let line_start = |at: usize| memchr::memrchr(b'\n', &b[..at]).map_or(0, |i| i + 1);
        let line_end = |at: usize| memchr::memchr(b'\n', &b[at..]).map_or(b.len(), |i| at + i);
        // The lines of the span (at most SPAN_LINES), one before and one after.
        let first = line_start(start);
        let mut lines = vec![(first, line_end(first))];
        while lines.len() < SPAN_LINES {
            let (_, e) = lines[lines.len() - 1];
            if e >= end || e >= b.len() {
                break;
            }
            lines.push((e + 1, line_end(e + 1)));
        }
        let label_line = usize::from(first > 0);
        if first > 0 {
            let s = line_start(first - 1);
            lines.insert(0, (s, first - 1));
        }
        let last_end = lines[lines.len() - 1].1;
        let end = end.min(last_end);
        let span_lines = label_line..lines.len();
        if last_end < b.len() {
            lines.push((last_end + 1, line_end(last_end + 1)));
        }
        // One window of columns for every line, placed around the span's start.
        let col = src[first..start].chars().count();
        let skip = if col > LEAD + LEAD / 2 { col - LEAD } else { 0 };
        let mut text = String::new();
        let (mut span_start, mut span_end) = (0, 0);
        for (k, &(s, e)) in lines.iter().enumerate() {
            let line = &src[s..e];
            let mut chars = line.char_indices().skip(skip);
            let from = match chars.next() {
                Some((i, _)) => i,
                None => line.len(),
            };
            if skip > 0 && from > 0 {
                text.push_str(CUT);
            }
            let to = line
                .char_indices()
                .skip(skip + WINDOW)
                .map(|(i, _)| i)
                .next()
                .unwrap_or(line.len())
                .max(from);
            let shown = text.len();
            text.push_str(&line[from..to]);
            if to < line.len() {
                text.push_str(CUT);
            }
            // Where a byte of the file lands in the excerpt's copy of this line.
            let at = |i: usize| shown + i.clamp(s + from, s + to) - s - from;
            if k == label_line {
                span_start = at(start);
            }
            if span_lines.contains(&k) && (s..=e).contains(&end) {
                span_end = at(end);
            }
            // Each line keeps its newline, as in the file: miette shows an empty
            // last line only when it is terminated.
            if e < b.len() {
                text.push('\n');
            }
        }
        span_end = span_end.max(span_start);
        Excerpt {
            name: name.to_string(),
            text,
            first_line: (loc.line as usize).saturating_sub(1 + label_line),
            label_line,
            col_shift: skip.saturating_sub(usize::from(skip > 0)),
            span: SourceSpan::new(span_start.into(), span_end - span_start),
        }
    }

    /// The one label of the report, on the excerpt's span.
    pub(crate) fn label(&self, text: &str) -> LabeledSpan {
        LabeledSpan::new_with_span(Some(text.to_string()), self.span)
    }
}

impl SourceCode for Excerpt {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        before: usize,
        after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        let inner = self.text.as_str().read_span(span, before, after)?;
        let column = if inner.line() == self.label_line {
            inner.column() + self.col_shift
        } else {
            inner.column()
        };
        Ok(Box::new(MietteSpanContents::new_named(
            self.name.clone(),
            inner.data(),
            *inner.span(),
            inner.line() + self.first_line,
            column,
            inner.line_count(),
        )))
    }
}

/// The operators of a list where each may stand once (autocast policy,
/// composites): [`ListedOnce::again`] answers a second listing with "operator `op`
/// is listed twice", pointing back at the first, the one wording of every such list.
pub(crate) struct ListedOnce<'a> {
    code: &'static str,
    seen: Vec<(&'a str, Loc)>,
}

impl<'a> ListedOnce<'a> {
    /// An empty list whose duplicates report `code`.
    pub(crate) fn new(code: &'static str) -> Self {
        ListedOnce {
            code,
            seen: Vec::new(),
        }
    }

    /// The diagnostic for `op` listed again at `at`, or `None` (and `op` noted)
    /// for its first listing.
    pub(crate) fn again(&mut self, op: &'a str, at: Loc) -> Option<Diagnostic> {
        let Some(&(_, first)) = self.seen.iter().find(|(n, _)| *n == op) else {
            self.seen.push((op, at));
            return None;
        };
        Some(
            Diagnostic::new(self.code, at, format!("operator `{op}` is listed twice"))
                .label("second listing")
                .hint(format!(
                    "it is first listed at line {}, column {}; keep one",
                    first.line, first.col
                )),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain renderer (what build scripts show: they do not enable `fancy`)
    /// gives the location, the numbered lines around it, carets under the span with
    /// the label, the hint and the code.
    #[test]
    fn plain_rendering_has_location_snippet_label_and_hint() {
        let src = "- func: a(Tensor self) -> Tensor\n  bogus: 1\n- func: b() -> Tensor\n";
        let offset = src.find("bogus").unwrap();
        let loc = Loc {
            offset,
            len: "bogus".len(),
            line: 2,
            col: 3,
        };
        let mut d = Diagnostics::new("ops.yaml", src);
        d.push(
            Diagnostic::new("opal::unknown_key", loc, "unknown key `bogus`")
                .label("not a key")
                .hint("remove it"),
        );
        d.push(Diagnostic::new(
            "opal::other",
            Loc::SYNTHETIC,
            "a problem without a place",
        ));
        let text = d.render_with(&Handler::Plain);
        let expected = "\
error: ops.yaml:2:3: unknown key `bogus` [opal::unknown_key]
  |
1 | - func: a(Tensor self) -> Tensor
2 |   bogus: 1
  |   ^^^^^ not a key
3 | - func: b() -> Tensor
  = hint: remove it

error: ops.yaml: a problem without a place [opal::other]

ops.yaml: 2 errors
";
        assert_eq!(text, expected);
    }
}
