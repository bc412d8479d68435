//! Tokens of the `func:` schema language, each with its byte range in the schema
//! string; [`LocMap`] turns a range into a [`Loc`] in the YAML file when one is
//! needed (diagnostics, argument spans), not for every token.
//!
//! Owns: splitting a schema string into tokens and mapping string offsets to file
//! locations. Must not: know the grammar (that is `parse::schema`).

use crate::diagnostics::Diagnostic;
use crate::model::Loc;

/// Kind of a schema token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tok {
    /// `[A-Za-z_][A-Za-z0-9_]*`
    Ident,
    /// `12`, `1.5`, `1e-05` (sign is a separate [`Tok::Minus`]).
    Number,
    /// `"..."` or `'...'` with backslash escapes, quotes included.
    Str,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Star,
    Question,
    Bang,
    Pipe,
    Dot,
    Eq,
    /// `->`
    Arrow,
    Minus,
    /// `::`
    ColonColon,
    /// End of input (zero-length, at the end).
    Eof,
}

impl Tok {
    /// How the token kind is named in messages.
    pub fn describe(self) -> &'static str {
        match self {
            Tok::Ident => "a name",
            Tok::Number => "a number",
            Tok::Str => "a string",
            Tok::LParen => "`(`",
            Tok::RParen => "`)`",
            Tok::LBracket => "`[`",
            Tok::RBracket => "`]`",
            Tok::Comma => "`,`",
            Tok::Star => "`*`",
            Tok::Question => "`?`",
            Tok::Bang => "`!`",
            Tok::Pipe => "`|`",
            Tok::Dot => "`.`",
            Tok::Eq => "`=`",
            Tok::Arrow => "`->`",
            Tok::Minus => "`-`",
            Tok::ColonColon => "`::`",
            Tok::Eof => "the end of the schema",
        }
    }
}

/// One token: its kind and byte range in the schema string ([`LocMap::at`] gives
/// its place in the file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    pub kind: Tok,
    /// Byte offset of the first byte in the schema string.
    pub start: usize,
    /// Byte offset one past the last byte in the schema string.
    pub end: usize,
}

/// Maps byte offsets in a schema string to file locations, given where the string
/// starts. Schema strings are single-line in practice; columns count characters.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LocMap<'a> {
    src: &'a str,
    base: Loc,
    ascii: bool,
}

impl<'a> LocMap<'a> {
    /// A map for `src` whose first byte is at `base` in the file.
    pub fn new(src: &'a str, base: Loc) -> Self {
        LocMap {
            src,
            base,
            ascii: src.is_ascii(),
        }
    }

    /// The location of bytes `start..end` of the string.
    pub fn at(&self, start: usize, end: usize) -> Loc {
        let col_off = if self.ascii {
            start
        } else {
            self.src.get(..start).map_or(start, |s| s.chars().count())
        };
        Loc {
            offset: self.base.offset + start,
            len: end.saturating_sub(start),
            line: self.base.line.max(1),
            col: self.base.col.max(1) + col_off as u32,
        }
    }
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Splits `src` into tokens (ending with [`Tok::Eof`]); `base` is where `src` starts
/// in its file.
pub(crate) fn lex(src: &str, base: Loc) -> Result<Vec<Token>, Diagnostic> {
    let map = LocMap::new(src, base);
    let b = src.as_bytes();
    let mut toks = Vec::with_capacity(b.len() / 3 + 2);
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        let kind = match c {
            b' ' | b'\t' => {
                i += 1;
                continue;
            }
            b'(' => Tok::LParen,
            b')' => Tok::RParen,
            b'[' => Tok::LBracket,
            b']' => Tok::RBracket,
            b',' => Tok::Comma,
            b'*' => Tok::Star,
            b'?' => Tok::Question,
            b'!' => Tok::Bang,
            b'|' => Tok::Pipe,
            b'.' => Tok::Dot,
            b'=' => Tok::Eq,
            b'-' if b.get(i + 1) == Some(&b'>') => {
                i += 1;
                Tok::Arrow
            }
            b'-' => Tok::Minus,
            b':' if b.get(i + 1) == Some(&b':') => {
                i += 1;
                Tok::ColonColon
            }
            b'"' | b'\'' => {
                i = string_last(b, start, &map)?;
                Tok::Str
            }
            c if c.is_ascii_digit() => {
                i = number_last(b, start);
                Tok::Number
            }
            c if is_ident_start(c) => {
                i = last_of(b, start, is_ident_char);
                Tok::Ident
            }
            _ => return Err(unexpected_char(src, start, &map)),
        };
        i += 1;
        toks.push(Token {
            kind,
            start,
            end: i,
        });
    }
    toks.push(Token {
        kind: Tok::Eof,
        start: b.len(),
        end: b.len(),
    });
    Ok(toks)
}

/// The index of the last of the bytes from `i` on that `keep` accepts, the byte
/// at `i` being accepted already.
#[inline]
fn last_of(b: &[u8], mut i: usize, keep: fn(u8) -> bool) -> usize {
    while i + 1 < b.len() && keep(b[i + 1]) {
        i += 1;
    }
    i
}

/// The index of the last byte of the number that starts at `start`: digits, then
/// `.digits` and an exponent (`e-05`) when they follow.
fn number_last(b: &[u8], start: usize) -> usize {
    let digit = |c: u8| c.is_ascii_digit();
    let mut i = last_of(b, start, digit);
    if b.get(i + 1) == Some(&b'.') && b.get(i + 2).is_some_and(u8::is_ascii_digit) {
        i = last_of(b, i + 2, digit);
    }
    if matches!(b.get(i + 1), Some(b'e' | b'E')) {
        let mut j = i + 2;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        if b.get(j).is_some_and(u8::is_ascii_digit) {
            i = last_of(b, j, digit);
        }
    }
    i
}

/// The index of the quote that closes the string starting at `start` (a
/// backslash escapes the next byte).
fn string_last(b: &[u8], start: usize, map: &LocMap) -> Result<usize, Diagnostic> {
    let quote = b[start];
    let mut i = start + 1;
    loop {
        match b.get(i) {
            None => {
                return Err(Diagnostic::new(
                    "opal::schema_syntax",
                    map.at(start, b.len()),
                    "unterminated string literal",
                )
                .label("string starts here")
                .hint(format!("close the string with {}", quote as char)));
            }
            Some(b'\\') => i += 2,
            Some(&q) if q == quote => return Ok(i),
            Some(_) => i += 1,
        }
    }
}

/// The error for a character outside the schema language at `start`.
#[cold]
fn unexpected_char(src: &str, start: usize, map: &LocMap) -> Diagnostic {
    let ch = src[start..].chars().next().unwrap_or('?');
    Diagnostic::new(
        "opal::schema_syntax",
        map.at(start, start + ch.len_utf8()),
        format!("unexpected character `{}` in schema", ch.escape_debug()),
    )
    .label("not part of the schema language")
    .hint("names may only contain ASCII letters, digits and `_`")
}
