//! Source locations carried by every model item so diagnostics can point back into
//! the YAML.
//!
//! Owns: the [`Loc`] type and its fixed places ([`Loc::SYNTHETIC`], [`Loc::START`]).
//! Must not: compute locations from text (that is `crate::parse::outline` and the
//! schema lexer's `LocMap`).

/// A byte range in one source file, with the 1-based line and column of its start.
///
/// `offset`/`len` index the original bytes of the file (for snippets); `line`/`col`
/// are what users see as `path:line:col`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Loc {
    pub offset: usize,
    pub len: usize,
    pub line: u32,
    pub col: u32,
}

impl Loc {
    /// A location for items that do not come from a file (e.g. autogen functions).
    pub const SYNTHETIC: Loc = Loc {
        offset: 0,
        len: 0,
        line: 0,
        col: 0,
    };

    /// The start of a file: where problems of a whole file (not a list, empty)
    /// point.
    pub const START: Loc = Loc {
        offset: 0,
        len: 0,
        line: 1,
        col: 1,
    };

    pub fn is_synthetic(&self) -> bool {
        self.line == 0
    }
}
