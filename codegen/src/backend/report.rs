//! Errors of backend generation: located problems in the backend YAML, each with an
//! optional note pointing into the native YAML (pinned-schema mismatches show both
//! places), rendered through miette like the native loader's diagnostics.
//!
//! Owns: the error values of `backend::{load, plan}` and their text form. Must not:
//! decide what is an error, print, or exit.

use std::fmt;
use std::sync::Arc;

use miette::LabeledSpan;

use crate::diagnostics::{self, Diagnostic, Diagnostics, Excerpt, Handler, MAX_RENDERED};
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
        self.render_with(&diagnostics::handler(color, width))
    }

    /// [`BackendErrors::render`] with a given handler.
    pub(crate) fn render_with(&self, handler: &Handler) -> String {
        let mut out = String::new();
        if let Some(n) = &self.native_errors {
            out.push_str(&n.render_with(handler));
        }
        for item in self.items.iter().take(MAX_RENDERED) {
            let note = match (&item.note, &self.native) {
                (Some(n), Some(f)) if !n.loc.is_synthetic() => Some(Part {
                    code: "opal::backend::note",
                    message: format!("{}:{}:{}: {}", f.path, n.loc.line, n.loc.col, n.label),
                    label: n.label.clone(),
                    hint: None,
                    src: Some(Excerpt::new(&f.path, &f.text, n.loc)),
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
                src: (!d.loc.is_synthetic())
                    .then(|| Excerpt::new(&self.backend.path, &self.backend.text, d.loc)),
                related: note.into_iter().collect(),
            };
            if handler.render_report(&mut out, &part).is_err() {
                out.push_str(&part.message);
                out.push('\n');
            }
            out.push('\n');
        }
        let n = self.items.len();
        diagnostics::push_more(&mut out, &self.backend.path, n);
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
struct Part {
    code: &'static str,
    message: String,
    label: String,
    hint: Option<String>,
    /// The snippet; `None` for problems without a place.
    src: Option<Excerpt>,
    related: Vec<Part>,
}

impl fmt::Debug for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Part {}

impl miette::Diagnostic for Part {
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
        self.src.as_ref().map(|s| s as &dyn miette::SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let src = self.src.as_ref()?;
        Some(Box::new(std::iter::once(src.label(&self.label))))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain renderer shows a pinned-schema note in the native YAML after the
    /// problem in the backend YAML, each with its own location and snippet.
    #[test]
    fn plain_rendering_shows_the_note_in_the_native_yaml() {
        let backend = "backend: Emu\nsupported:\n  - func: relu(Tensor self, int x) -> Tensor\n";
        let native = "- func: relu(Tensor self) -> Tensor\n";
        let at = |text: &str, what: &str, line: u32| Loc {
            offset: text.find(what).unwrap(),
            len: what.len(),
            line,
            col: 1 + text
                .lines()
                .nth(line as usize - 1)
                .unwrap()
                .find(what)
                .unwrap() as u32,
        };
        let errors = BackendErrors {
            backend: SourceFile {
                path: "emu.yaml".into(),
                text: backend.into(),
            },
            native: Some(SourceFile {
                path: "native.yaml".into(),
                text: native.into(),
            }),
            items: vec![BackendDiagnostic {
                diag: Diagnostic::new(
                    "opal::backend::pinned",
                    at(backend, "int x", 3),
                    "`relu`: the pinned schema has an argument the current one lacks",
                )
                .label("not in the current schema"),
                note: Some(Note {
                    loc: at(native, "relu(Tensor self)", 1),
                    label: "the current schema".into(),
                }),
            }],
            native_errors: None,
        };
        let expected = "\
error: emu.yaml:3:29: `relu`: the pinned schema has an argument the current one lacks [opal::backend::pinned]
  |
2 | supported:
3 |   - func: relu(Tensor self, int x) -> Tensor
  |                             ^^^^^ not in the current schema
note: native.yaml:1:9: the current schema [opal::backend::note]
  |
1 | - func: relu(Tensor self) -> Tensor
  |         ^^^^^^^^^^^^^^^^^ the current schema

emu.yaml: 1 error
";
        assert_eq!(errors.render_with(&Handler::Plain), expected);
    }
}
