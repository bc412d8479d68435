//! Errors of backend generation: located problems in the backend YAML, each with an
//! optional note pointing into the native YAML (pinned-schema mismatches show both
//! places), rendered through miette like the native loader's diagnostics.
//!
//! Owns: the error values of `backend::{load, plan}` and their text form. Must not:
//! decide what is an error, print, or exit.

use std::fmt;
use std::sync::Arc;

use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, SourceSpan};

use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::model::Loc;

/// A place in the native YAML that explains a backend problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub loc: Loc,
    pub label: String,
}

/// One problem in a backend YAML.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendDiagnostic {
    /// Located in the backend YAML.
    pub diag: Diagnostic,
    /// Located in the native YAML.
    pub note: Option<Note>,
}

impl From<Diagnostic> for BackendDiagnostic {
    fn from(diag: Diagnostic) -> Self {
        BackendDiagnostic { diag, note: None }
    }
}

/// A named source text.
#[derive(Clone, Debug)]
pub struct SourceFile {
    pub path: String,
    pub text: Arc<str>,
}

/// Everything wrong with one backend generation, with both files for snippets.
#[derive(Clone, Debug)]
pub struct BackendErrors {
    pub backend: SourceFile,
    /// The native YAML; absent when loading failed before it was needed.
    pub native: Option<SourceFile>,
    pub items: Vec<BackendDiagnostic>,
    /// Errors of the native YAML itself, rendered by the native loader.
    pub native_errors: Option<Box<Diagnostics>>,
}

impl BackendErrors {
    /// Renders every problem: no colors and a fixed width when `color` is false, so
    /// the output is stable for snapshots.
    pub fn render(&self, color: bool, width: usize) -> String {
        let mut out = String::new();
        if let Some(n) = &self.native_errors {
            out.push_str(&n.render(color, width));
        }
        let theme = if color {
            GraphicalTheme::unicode()
        } else {
            GraphicalTheme::unicode_nocolor()
        };
        let handler = GraphicalReportHandler::new_themed(theme)
            .with_width(width)
            .with_links(false);
        for item in &self.items {
            let note = match (&item.note, &self.native) {
                (Some(n), Some(f)) if !n.loc.is_synthetic() => Some(Part {
                    code: "opal::backend::note",
                    message: format!("{}:{}:{}: {}", f.path, n.loc.line, n.loc.col, n.label),
                    label: n.label.clone(),
                    hint: None,
                    loc: n.loc,
                    file: f,
                    related: Vec::new(),
                }),
                _ => None,
            };
            let d = &item.diag;
            let message = if d.loc.is_synthetic() {
                format!("{}: {}", self.backend.path, d.message)
            } else {
                format!(
                    "{}:{}:{}: {}",
                    self.backend.path, d.loc.line, d.loc.col, d.message
                )
            };
            let part = Part {
                code: d.code,
                message,
                label: d.label.clone(),
                hint: d.hint.clone(),
                loc: d.loc,
                file: &self.backend,
                related: note.into_iter().collect(),
            };
            if handler.render_report(&mut out, &part).is_err() {
                out.push_str(&part.message);
                out.push('\n');
            }
            out.push('\n');
        }
        let n = self.items.len();
        if n > 0 {
            out.push_str(&format!(
                "{}: {n} error{}\n",
                self.backend.path,
                if n == 1 { "" } else { "s" }
            ));
        }
        out
    }
}

impl fmt::Display for BackendErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(false, 100))
    }
}

impl std::error::Error for BackendErrors {}

/// One miette report: a message, a labelled span in one file, related notes.
struct Part<'a> {
    code: &'static str,
    message: String,
    label: String,
    hint: Option<String>,
    loc: Loc,
    file: &'a SourceFile,
    related: Vec<Part<'a>>,
}

impl fmt::Debug for Part<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Display for Part<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Part<'_> {}

impl miette::Diagnostic for Part<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(self.code))
    }

    fn severity(&self) -> Option<miette::Severity> {
        (self.code == "opal::backend::note").then_some(miette::Severity::Advice)
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.hint
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        if self.loc.is_synthetic() {
            None
        } else {
            Some(self.file)
        }
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        if self.loc.is_synthetic() {
            return None;
        }
        let len = self.file.text.len();
        let start = self.loc.offset.min(len);
        let span = SourceSpan::new(start.into(), self.loc.len.min(len - start));
        Some(Box::new(std::iter::once(LabeledSpan::new_with_span(
            Some(self.label.clone()),
            span,
        ))))
    }

    fn related<'b>(&'b self) -> Option<Box<dyn Iterator<Item = &'b dyn miette::Diagnostic> + 'b>> {
        if self.related.is_empty() {
            None
        } else {
            Some(Box::new(
                self.related.iter().map(|r| r as &dyn miette::Diagnostic),
            ))
        }
    }
}

impl miette::SourceCode for SourceFile {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn miette::SpanContents<'a> + 'a>, miette::MietteError> {
        let inner = self
            .text
            .read_span(span, context_lines_before, context_lines_after)?;
        Ok(Box::new(miette::MietteSpanContents::new_named(
            self.path.clone(),
            inner.data(),
            *inner.span(),
            inner.line(),
            inner.column(),
            inner.line_count(),
        )))
    }
}
