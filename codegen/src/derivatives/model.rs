//! The derivatives model: plain, immutable data describing a `derivatives.yaml` as
//! written (entries, dispatch sections, formulas with their parsed expressions and
//! source locations).
//!
//! Owns: the data types only. Must not: read YAML (that is `load`), parse formula
//! text (that is `expr`) or check anything against the native model (`validate`).

use super::expr::Expr;
use crate::model::{FunctionSchema, Loc};

/// A loaded `derivatives.yaml`: its entries in file order.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Derivatives {
    pub entries: Vec<DerivativeEntry>,
}

impl Derivatives {
    /// Every formula of every entry and section, in file order.
    pub fn formulas(&self) -> impl Iterator<Item = &Formula> {
        self.entries.iter().flat_map(DerivativeEntry::formulas)
    }

    /// The entry whose `name:` has operator name `op` (`mul.Tensor`, `relu`).
    pub fn entry(&self, op: &str) -> Option<&DerivativeEntry> {
        self.entries
            .iter()
            .find(|e| e.schema.name.to_string() == op)
    }
}

/// One `- name:` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct DerivativeEntry {
    /// The `name:` schema, parsed by the native schema parser (locations point into
    /// the derivatives file).
    pub schema: FunctionSchema,
    /// The `- name:` item.
    pub loc: Loc,
    /// The formulas, grouped by `dispatch:` key; an entry without `dispatch:` has
    /// one section with no key.
    pub sections: Vec<Section>,
    /// `output_differentiability:`, when given.
    pub output_differentiability: Option<OutputDifferentiability>,
}

impl DerivativeEntry {
    /// The formulas of all sections, in file order.
    pub fn formulas(&self) -> impl Iterator<Item = &Formula> {
        self.sections.iter().flat_map(|s| s.formulas.iter())
    }

    /// The section of dispatch key `key` (`None`: the entry's only, keyless one).
    pub fn section(&self, key: Option<&str>) -> Option<&Section> {
        self.sections
            .iter()
            .find(|s| s.dispatch_key.as_deref() == key)
    }
}

/// The formulas of one autograd dispatch key (or of the whole entry).
#[derive(Clone, Debug, PartialEq)]
pub struct Section {
    /// `Default`, `AutogradNestedTensor`, ... under `dispatch:`; `None` when the
    /// entry has no `dispatch:`.
    pub dispatch_key: Option<String>,
    /// The dispatch key, or the entry when there is none.
    pub loc: Loc,
    pub formulas: Vec<Formula>,
}

impl Section {
    /// The formula whose key lists `name` (an input, `result`, an output name).
    pub fn formula_for(&self, name: &str) -> Option<&Formula> {
        self.formulas
            .iter()
            .find(|f| f.keys.iter().any(|k| k.name == name))
    }
}

/// A name written in the file, with its place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Name {
    pub name: String,
    pub loc: Loc,
}

/// Which derivative a formula computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Gradient of one or several inputs (keys name arguments).
    Backward,
    /// Forward-mode derivative of an output (keys `result`, `resultN` or an
    /// output's name): kept, and to be ignored by backward code generation.
    Forward,
}

/// What a formula says.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// A formula expression.
    Expr(Expr),
    /// `non_differentiable`: the input gets no gradient.
    NonDifferentiable,
    /// `auto_element_wise`: the forward derivative follows from the backward one
    /// of an element-wise function.
    AutoElementWise,
    /// `auto_linear`: the function is linear; its forward derivative is itself.
    AutoLinear,
}

/// One `key: formula` line.
#[derive(Clone, Debug, PartialEq)]
pub struct Formula {
    /// The names before the colon (`self`, or `self, other` for a formula giving
    /// several gradients at once), in order.
    pub keys: Vec<Name>,
    pub mode: Mode,
    /// The formula text as written.
    pub text: String,
    /// Where the text is. When [`Formula::exact`], `loc` covers the text byte
    /// for byte (a plain or escape-free quoted scalar on one line); otherwise it
    /// is the key's place.
    pub loc: Loc,
    pub exact: bool,
    pub body: Body,
}

impl Formula {
    /// The expression, unless the formula is a keyword.
    pub fn expr(&self) -> Option<&Expr> {
        match &self.body {
            Body::Expr(e) => Some(e),
            _ => None,
        }
    }

    /// Whether the expression reads `grad_input_mask` (which inputs need a
    /// gradient): such formulas compute several gradients in one call.
    pub fn uses_grad_input_mask(&self) -> bool {
        self.uses("grad_input_mask")
    }

    /// Whether the expression reads the variable `name` anywhere.
    pub fn uses(&self, name: &str) -> bool {
        self.expr().is_some_and(|e| {
            let mut found = false;
            e.walk(&mut |x| found |= x.as_ident() == Some(name));
            found
        })
    }

    /// The place of `start..end` (byte offsets into [`Formula::text`]): exact when
    /// the text is, else the formula's place.
    pub fn loc_of(&self, start: usize, end: usize) -> Loc {
        if !self.exact {
            return self.loc;
        }
        let col = self.text.get(..start).map_or(start, |s| s.chars().count());
        Loc {
            offset: self.loc.offset + start,
            len: end.saturating_sub(start),
            line: self.loc.line,
            col: self.loc.col + col as u32,
        }
    }
}

/// `output_differentiability: [True, False]`: one value per output.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputDifferentiability {
    pub values: Vec<OutputDifferentiable>,
    pub loc: Loc,
}

/// Whether one output is differentiable.
#[derive(Clone, Debug, PartialEq)]
pub enum OutputDifferentiable {
    Always(bool),
    /// A condition written as a formula string
    /// (`"!dtype || isDifferentiableType(*dtype)"`), kept as a keyless backward
    /// formula so it is located and checked like one.
    When(Formula),
}
