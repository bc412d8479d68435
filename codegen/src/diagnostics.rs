//! Located errors and their rendering: every problem found while loading a YAML is
//! a [`Diagnostic`] (message, location, label, hint); a run collects all of them
//! into [`Diagnostics`], rendered through miette as `path:line:col` plus a snippet.
//!
//! Owns: the error values of parsing/loading/validation and their text form.
//! Must not: decide what is an error (that is `parse` and `validate`), exit the
//! process or print (the CLI does).

use std::fmt;
use std::sync::Arc;

use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceSpan};

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

    /// Renders every problem with miette: no colors and a fixed width when `color`
    /// is false, so the output is stable for snapshots.
    pub fn render(&self, color: bool, width: usize) -> String {
        let theme = if color {
            GraphicalTheme::unicode()
        } else {
            GraphicalTheme::unicode_nocolor()
        };
        let handler = GraphicalReportHandler::new_themed(theme)
            .with_width(width)
            .with_links(false);
        let mut out = String::new();
        for d in &self.items {
            let report = Report {
                d,
                src: NamedSource::new(&self.path, Arc::clone(&self.source)),
                path: &self.path,
                len: self.source.len(),
            };
            if handler.render_report(&mut out, &report).is_err() {
                out.push_str(&format!("{}: {}\n", self.path, d));
            }
            out.push('\n');
        }
        let n = self.items.len();
        out.push_str(&format!(
            "{}: {n} error{}\n",
            self.path,
            if n == 1 { "" } else { "s" }
        ));
        out
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(false, 100))
    }
}

impl std::error::Error for Diagnostics {}

/// Adapter giving miette one diagnostic with the file attached.
struct Report<'a> {
    d: &'a Diagnostic,
    src: NamedSource<Arc<str>>,
    path: &'a str,
    len: usize,
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

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        if self.d.loc.is_synthetic() {
            None
        } else {
            Some(&self.src)
        }
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        if self.d.loc.is_synthetic() {
            return None;
        }
        // Offsets come from our own scanner; clamping keeps a stale or synthetic
        // offset from making miette fail to render.
        let start = self.d.loc.offset.min(self.len);
        let len = self.d.loc.len.min(self.len - start);
        let span = SourceSpan::new(start.into(), len);
        Some(Box::new(std::iter::once(LabeledSpan::new_with_span(
            Some(self.d.label.clone()),
            span,
        ))))
    }
}
