//! The formula language of `derivatives.yaml`: the subset of C++ expressions the
//! formulas use, lexed and parsed by hand into an [`Expr`] tree whose nodes keep
//! their byte span in the formula text.
//!
//! Grammar (C++ precedence, loosest first): ternary `c ? a : b` (right
//! associative); `||`; `&&`; `|`; `^`; `&`; `== !=`; `< > <= >=`; `+ -`;
//! `* / %`; prefix `- + ! ~ *`; postfix calls `f(a)`, indexing `a[i]`, members
//! `x.m`, `p->m` with optional template arguments `x.to<double>()`; primaries:
//! numbers (`2`, `0.`, `1e-12`), strings, `true`/`false`, `std::nullopt`, names
//! and paths (`grads`, `at::where`, `::std::nullopt`), templates
//! (`std::get<0>`, `std::tuple<Tensor, Tensor>`), brace lists (`{}`,
//! `{{0, 0}}`), parentheses and lambdas `[](c10::SymInt i){return -i;}`.
//! Comments `/* ... */` are skipped.
//!
//! Owns: formula syntax only. Must not: know which names exist (that is
//! `validate`) or read YAML (that is `load`).

use std::fmt;

/// A byte range of a formula's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    fn new(start: usize, end: usize) -> Span {
        // Formulas are far shorter than 4 GiB; `parse` refuses longer text.
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    fn to(self, other: Span) -> Span {
        Span {
            start: self.start,
            end: other.end,
        }
    }
}

/// One node of a formula.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

/// Prefix operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    Neg,
    Plus,
    Not,
    BitNot,
    /// `*opt`: the value of an optional.
    Deref,
}

/// Infix operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Mul,
    Div,
    Rem,
    Add,
    Sub,
    Lt,
    Gt,
    Le,
    Ge,
    Eq,
    Ne,
    BitAnd,
    BitXor,
    BitOr,
    And,
    Or,
}

/// Table of infix operators: token, operator, precedence (higher binds tighter).
const BINARY: [(&str, BinOp, u8); 16] = [
    ("||", BinOp::Or, 1),
    ("&&", BinOp::And, 2),
    ("|", BinOp::BitOr, 3),
    ("^", BinOp::BitXor, 4),
    ("&", BinOp::BitAnd, 5),
    ("==", BinOp::Eq, 6),
    ("!=", BinOp::Ne, 6),
    ("<", BinOp::Lt, 7),
    (">", BinOp::Gt, 7),
    ("<=", BinOp::Le, 7),
    (">=", BinOp::Ge, 7),
    ("+", BinOp::Add, 8),
    ("-", BinOp::Sub, 8),
    ("*", BinOp::Mul, 9),
    ("/", BinOp::Div, 9),
    ("%", BinOp::Rem, 9),
];

const UNARY: [(&str, UnOp); 5] = [
    ("-", UnOp::Neg),
    ("+", UnOp::Plus),
    ("!", UnOp::Not),
    ("~", UnOp::BitNot),
    ("*", UnOp::Deref),
];

impl BinOp {
    pub fn as_str(self) -> &'static str {
        BINARY.iter().find(|b| b.1 == self).map_or("?", |b| b.0)
    }
}

impl UnOp {
    pub fn as_str(self) -> &'static str {
        UNARY.iter().find(|u| u.1 == self).map_or("?", |u| u.0)
    }
}

/// A lambda parameter: `c10::SymInt i`.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub ty: Expr,
    pub name: String,
}

/// The kinds of node.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
    /// `std::nullopt`, `c10::nullopt`, `::std::nullopt`.
    Nullopt,
    /// A single name: a variable (`grad`, `self`, `result1`), a helper function,
    /// a type or a constant.
    Ident(String),
    /// A qualified name `at::where`, `c10::SymInt`; `global` for a leading `::`.
    Path {
        global: bool,
        segments: Vec<String>,
    },
    /// Template arguments on a name: `std::get<0>`, `std::vector<int64_t>`.
    Template {
        base: Box<Expr>,
        args: Vec<Expr>,
    },
    /// `callee(args)` where the callee is a name, path or template.
    Call {
        callee: Box<Expr>,
        args: Vec<Expr>,
    },
    /// `receiver.name<targs>(args)` (`arrow`: `->`); `args` is `None` for a plain
    /// member access without a call.
    Member {
        receiver: Box<Expr>,
        arrow: bool,
        name: String,
        name_span: Span,
        template_args: Vec<Expr>,
        args: Option<Vec<Expr>>,
    },
    /// `base[index]`.
    Index {
        base: Box<Expr>,
        index: Box<Expr>,
    },
    Unary {
        op: UnOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Ternary {
        cond: Box<Expr>,
        then: Box<Expr>,
        otherwise: Box<Expr>,
    },
    /// `{a, b}` (an initializer list; `{}` is empty).
    Braces(Vec<Expr>),
    /// `[captures](params){ return body; }`.
    Lambda {
        captures: Vec<String>,
        params: Vec<Param>,
        body: Box<Expr>,
    },
}

impl Expr {
    /// The name, when this is a plain identifier.
    pub fn as_ident(&self) -> Option<&str> {
        match &self.kind {
            ExprKind::Ident(s) => Some(s),
            _ => None,
        }
    }

    /// Calls `f` on each direct child, in source order (a lambda's parameter
    /// types included).
    pub fn for_each_child<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        match &self.kind {
            ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::Bool(_)
            | ExprKind::Nullopt
            | ExprKind::Ident(_)
            | ExprKind::Path { .. } => {}
            ExprKind::Template { base, args } => {
                f(base);
                args.iter().for_each(f);
            }
            ExprKind::Call { callee, args } => {
                f(callee);
                args.iter().for_each(f);
            }
            ExprKind::Member {
                receiver,
                template_args,
                args,
                ..
            } => {
                f(receiver);
                template_args.iter().for_each(&mut *f);
                args.iter().flatten().for_each(f);
            }
            ExprKind::Index { base, index } => {
                f(base);
                f(index);
            }
            ExprKind::Unary { operand, .. } => f(operand),
            ExprKind::Binary { lhs, rhs, .. } => {
                f(lhs);
                f(rhs);
            }
            ExprKind::Ternary {
                cond,
                then,
                otherwise,
            } => {
                f(cond);
                f(then);
                f(otherwise);
            }
            ExprKind::Braces(items) => items.iter().for_each(f),
            ExprKind::Lambda { params, body, .. } => {
                params.iter().for_each(|p| f(&p.ty));
                f(body);
            }
        }
    }

    /// Calls `f` on this node and every node below it, parents first.
    pub fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        f(self);
        self.for_each_child(&mut |c| c.walk(f));
    }

    /// Whether printing this node as an operand needs parentheses.
    fn is_compound(&self) -> bool {
        matches!(
            self.kind,
            ExprKind::Unary { .. }
                | ExprKind::Binary { .. }
                | ExprKind::Ternary { .. }
                | ExprKind::Lambda { .. }
        )
    }
}

/// Writes `items` separated by `, `.
fn comma_list(f: &mut fmt::Formatter<'_>, items: &[Expr]) -> fmt::Result {
    for (i, e) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{e}")?;
    }
    Ok(())
}

/// An operand, in parentheses when it is itself an operation.
struct Operand<'a>(&'a Expr);

impl fmt::Display for Operand<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_compound() {
            write!(f, "({})", self.0)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// Canonical C++ text: one space around infix operators, operands that are
/// operations parenthesized, comments dropped. Parsing the text again gives the
/// same tree (spans aside).
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ExprKind::Int(n) => write!(f, "{n}"),
            ExprKind::Float(x) => write!(f, "{x:?}"),
            ExprKind::Str(s) => write!(f, "{s:?}"),
            ExprKind::Bool(b) => write!(f, "{b}"),
            ExprKind::Nullopt => f.write_str("std::nullopt"),
            ExprKind::Ident(s) => f.write_str(s),
            ExprKind::Path { global, segments } => {
                if *global {
                    f.write_str("::")?;
                }
                f.write_str(&segments.join("::"))
            }
            ExprKind::Template { base, args } => {
                write!(f, "{base}<")?;
                comma_list(f, args)?;
                f.write_str(">")
            }
            ExprKind::Call { callee, args } => {
                write!(f, "{callee}(")?;
                comma_list(f, args)?;
                f.write_str(")")
            }
            ExprKind::Member {
                receiver,
                arrow,
                name,
                template_args,
                args,
                ..
            } => {
                let sep = if *arrow { "->" } else { "." };
                write!(f, "{}{sep}{name}", Operand(receiver))?;
                if !template_args.is_empty() {
                    f.write_str("<")?;
                    comma_list(f, template_args)?;
                    f.write_str(">")?;
                }
                if let Some(args) = args {
                    f.write_str("(")?;
                    comma_list(f, args)?;
                    f.write_str(")")?;
                }
                Ok(())
            }
            ExprKind::Index { base, index } => write!(f, "{}[{index}]", Operand(base)),
            ExprKind::Unary { op, operand } => write!(f, "{}{}", op.as_str(), Operand(operand)),
            ExprKind::Binary { op, lhs, rhs } => {
                write!(f, "{} {} {}", Operand(lhs), op.as_str(), Operand(rhs))
            }
            ExprKind::Ternary {
                cond,
                then,
                otherwise,
            } => write!(
                f,
                "{} ? {} : {}",
                Operand(cond),
                Operand(then),
                Operand(otherwise)
            ),
            ExprKind::Braces(items) => {
                f.write_str("{")?;
                comma_list(f, items)?;
                f.write_str("}")
            }
            ExprKind::Lambda {
                captures,
                params,
                body,
            } => {
                write!(f, "[{}](", captures.join(", "))?;
                for (i, p) in params.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{} {}", p.ty, p.name)?;
                }
                write!(f, ") {{ return {body}; }}")
            }
        }
    }
}

/// Why a formula does not parse, at a byte range of its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub message: String,
    pub start: usize,
    pub end: usize,
    pub hint: String,
}

/// Limits on one formula, far above what PyTorch writes: the parser is
/// recursive, so nesting is bounded before the stack is.
pub(crate) mod limits {
    /// Bytes of one formula.
    pub const FORMULA_LEN: usize = 64 * 1024;
    /// Nested operands, calls, parentheses and lists.
    pub const DEPTH: usize = 100;
}

/// Token kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    Ident,
    Int,
    Float,
    Str,
    /// An operator or bracket; the text says which.
    Punct,
    Eof,
}

#[derive(Clone, Copy, Debug)]
struct Token {
    kind: Tok,
    start: usize,
    end: usize,
}

/// Punctuation, longest first so `::` wins over `:`.
const PUNCTS: [&str; 31] = [
    "::", "->", "<=", ">=", "==", "!=", "&&", "||", "(", ")", "[", "]", "{", "}", ",", ".", "?",
    ":", "+", "-", "*", "/", "%", "<", ">", "!", "&", "|", "^", "~", ";",
];

fn lex(src: &str) -> Result<Vec<Token>, ParseError> {
    let b = src.as_bytes();
    let mut toks = Vec::with_capacity(src.len() / 3);
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        let kind = if c.is_ascii_whitespace() {
            i += 1;
            continue;
        } else if src[i..].starts_with("/*") {
            i = comment_end(src, start)?;
            continue;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            i = skip_while(b, i, |c| c.is_ascii_alphanumeric() || c == b'_');
            Tok::Ident
        } else if c.is_ascii_digit() {
            let (end, kind) = number(src, start)?;
            i = end;
            kind
        } else if c == b'"' {
            i = string_end(b, start)?;
            Tok::Str
        } else if let Some(p) = PUNCTS.iter().find(|p| src[i..].starts_with(**p)) {
            i += p.len();
            Tok::Punct
        } else {
            let ch = src[i..].chars().next().unwrap_or('?');
            return Err(lex_error(
                format!("unexpected character `{ch}`"),
                start,
                start + ch.len_utf8(),
                "formulas are C++ expressions: names, numbers, strings, calls and operators",
            ));
        };
        toks.push(Token {
            kind,
            start,
            end: i.min(b.len()),
        });
    }
    toks.push(Token {
        kind: Tok::Eof,
        start: b.len(),
        end: b.len(),
    });
    Ok(toks)
}

fn lex_error(message: String, start: usize, end: usize, hint: &str) -> ParseError {
    ParseError {
        message,
        start,
        end,
        hint: hint.to_string(),
    }
}

/// The first index from `i` on whose byte fails `keep` (or the end).
fn skip_while(b: &[u8], mut i: usize, keep: impl Fn(u8) -> bool) -> usize {
    while i < b.len() && keep(b[i]) {
        i += 1;
    }
    i
}

/// The end of the `/* ... */` comment that starts at `start`.
fn comment_end(src: &str, start: usize) -> Result<usize, ParseError> {
    match src[start + 2..].find("*/") {
        Some(e) => Ok(start + e + 4),
        None => Err(lex_error(
            "unterminated comment".into(),
            start,
            src.len(),
            "close it with `*/`",
        )),
    }
}

/// The end and kind of the number that starts at `start`: digits, an optional
/// fraction and an optional exponent; a letter right after it (a C++ suffix such
/// as `1.f`) is an error.
fn number(src: &str, start: usize) -> Result<(usize, Tok), ParseError> {
    let b = src.as_bytes();
    let mut float = false;
    let mut i = skip_while(b, start, |c| c.is_ascii_digit());
    if b.get(i) == Some(&b'.') {
        float = true;
        i = skip_while(b, i + 1, |c| c.is_ascii_digit());
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        if b.get(j).is_some_and(u8::is_ascii_digit) {
            float = true;
            i = skip_while(b, j, |c| c.is_ascii_digit());
        }
    }
    if b.get(i)
        .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
    {
        return Err(lex_error(
            format!("malformed number `{}`", &src[start..=i]),
            start,
            i + 1,
            "write numbers like `2`, `0.5` or `1e-12`, without a suffix",
        ));
    }
    Ok((i, if float { Tok::Float } else { Tok::Int }))
}

/// The end of the string literal that starts at `start` (a backslash escapes the
/// next byte).
fn string_end(b: &[u8], start: usize) -> Result<usize, ParseError> {
    let mut i = start + 1;
    loop {
        match b.get(i) {
            None => {
                return Err(lex_error(
                    "unterminated string".into(),
                    start,
                    b.len(),
                    "close the string with `\"`",
                ))
            }
            Some(b'\\') => i += 2,
            Some(b'"') => return Ok(i + 1),
            Some(_) => i += 1,
        }
    }
}

/// Parses one formula.
pub fn parse(src: &str) -> Result<Expr, ParseError> {
    if src.len() > limits::FORMULA_LEN {
        return Err(ParseError {
            message: format!("formula is {} bytes long", src.len()),
            start: 0,
            end: src.len(),
            hint: format!(
                "opal-codegen reads formulas of at most {} bytes; move the work into a helper function",
                limits::FORMULA_LEN
            ),
        });
    }
    let toks = lex(src)?;
    let mut p = Parser {
        src,
        not_template: vec![false; toks.len()],
        toks,
        pos: 0,
        depth: 0,
    };
    let e = p.expr()?;
    if p.peek().kind != Tok::Eof {
        return Err(p.unexpected("an operator or the end of the formula"));
    }
    Ok(e)
}

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Token>,
    pos: usize,
    depth: usize,
    /// Positions of `<` tokens already found not to open template arguments.
    not_template: Vec<bool>,
}

type PResult<T> = Result<T, ParseError>;

impl<'a> Parser<'a> {
    fn peek(&self) -> Token {
        self.toks[self.pos]
    }

    fn peek_at(&self, k: usize) -> Token {
        self.toks[(self.pos + k).min(self.toks.len() - 1)]
    }

    fn text(&self, t: Token) -> &'a str {
        &self.src[t.start..t.end]
    }

    fn bump(&mut self) -> Token {
        let t = self.peek();
        if t.kind != Tok::Eof {
            self.pos += 1;
        }
        t
    }

    fn is(&self, punct: &str) -> bool {
        let t = self.peek();
        t.kind == Tok::Punct && self.text(t) == punct
    }

    fn eat(&mut self, punct: &str) -> bool {
        let yes = self.is(punct);
        if yes {
            self.pos += 1;
        }
        yes
    }

    fn unexpected(&self, wanted: &str) -> ParseError {
        let t = self.peek();
        let found = if t.kind == Tok::Eof {
            "the end of the formula".to_string()
        } else {
            format!("`{}`", self.text(t))
        };
        ParseError {
            message: format!("expected {wanted}, found {found}"),
            start: t.start,
            end: t.end.max(t.start + usize::from(t.kind != Tok::Eof)),
            hint: "check the parentheses and commas around this point".into(),
        }
    }

    fn expect(&mut self, punct: &str) -> PResult<Token> {
        if self.is(punct) {
            Ok(self.bump())
        } else {
            Err(self.unexpected(&format!("`{punct}`")))
        }
    }

    fn span_from(&self, start: usize) -> Span {
        let end = self.toks[self.pos.saturating_sub(1)].end;
        Span::new(start, end.max(start))
    }

    fn node(&self, kind: ExprKind, start: usize) -> Expr {
        Expr {
            kind,
            span: self.span_from(start),
        }
    }

    fn expr(&mut self) -> PResult<Expr> {
        let cond = self.binary(1)?;
        if !self.eat("?") {
            return Ok(cond);
        }
        let then = self.expr()?;
        self.expect(":")?;
        let otherwise = self.expr()?;
        let span = cond.span.to(otherwise.span);
        Ok(Expr {
            kind: ExprKind::Ternary {
                cond: Box::new(cond),
                then: Box::new(then),
                otherwise: Box::new(otherwise),
            },
            span,
        })
    }

    fn binary_op(&self) -> Option<(BinOp, u8)> {
        let t = self.peek();
        if t.kind != Tok::Punct {
            return None;
        }
        let s = self.text(t);
        BINARY.iter().find(|b| b.0 == s).map(|b| (b.1, b.2))
    }

    fn binary(&mut self, min: u8) -> PResult<Expr> {
        let mut lhs = self.unary()?;
        while let Some((op, prec)) = self.binary_op().filter(|(_, p)| *p >= min) {
            self.bump();
            let rhs = self.binary(prec + 1)?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::Binary {
                    op,
                    lhs: Box::new(lhs),
                    rhs: Box::new(rhs),
                },
                span,
            };
        }
        Ok(lhs)
    }

    /// One level deeper (operands and template arguments), refused past
    /// [`limits::DEPTH`]; the caller steps back with `self.depth -= 1`.
    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth <= limits::DEPTH {
            return Ok(());
        }
        let t = self.peek();
        Err(ParseError {
            message: format!("formula nests more than {} levels deep", limits::DEPTH),
            start: t.start,
            end: t.end,
            hint: "simplify the formula or move the work into a helper function".into(),
        })
    }

    fn unary(&mut self) -> PResult<Expr> {
        self.enter()?;
        let t = self.peek();
        let op = (t.kind == Tok::Punct)
            .then(|| UNARY.iter().find(|u| u.0 == self.text(t)))
            .flatten()
            .map(|u| u.1);
        let e = match op {
            Some(op) => {
                self.bump();
                let operand = self.unary()?;
                Ok(self.node(
                    ExprKind::Unary {
                        op,
                        operand: Box::new(operand),
                    },
                    t.start,
                ))
            }
            None => self.postfix(),
        };
        self.depth -= 1;
        e
    }

    /// `(a, b)` after the opening parenthesis was seen; also `{a, b}`.
    fn list(&mut self, close: &str) -> PResult<Vec<Expr>> {
        let mut items = Vec::new();
        if self.eat(close) {
            return Ok(items);
        }
        loop {
            items.push(self.expr()?);
            if self.eat(close) {
                return Ok(items);
            }
            if !self.eat(",") {
                return Err(self.unexpected(&format!("`,` or `{close}`")));
            }
        }
    }

    fn postfix(&mut self) -> PResult<Expr> {
        let start = self.peek().start;
        let mut e = self.primary()?;
        loop {
            if self.eat("(") {
                let args = self.list(")")?;
                e = self.node(
                    ExprKind::Call {
                        callee: Box::new(e),
                        args,
                    },
                    start,
                );
            } else if self.eat("[") {
                let index = self.expr()?;
                self.expect("]")?;
                e = self.node(
                    ExprKind::Index {
                        base: Box::new(e),
                        index: Box::new(index),
                    },
                    start,
                );
            } else if self.is(".") || self.is("->") {
                let sep = self.bump();
                let arrow = self.text(sep) == "->";
                let name = self.peek();
                if name.kind != Tok::Ident {
                    return Err(self.unexpected("a member name"));
                }
                self.bump();
                let template_args = self.template_args().unwrap_or_default();
                let args = if self.eat("(") {
                    Some(self.list(")")?)
                } else {
                    None
                };
                e = self.node(
                    ExprKind::Member {
                        receiver: Box::new(e),
                        arrow,
                        name: self.text(name).to_string(),
                        name_span: Span::new(name.start, name.end),
                        template_args,
                        args,
                    },
                    start,
                );
            } else {
                return Ok(e);
            }
        }
    }

    /// `<args>` right after a name, when it reads as template arguments (types
    /// or numbers, closed by `>` and followed by `(`, `{` or `::`); `None`, with
    /// nothing consumed, when the `<` is a comparison.
    fn template_args(&mut self) -> Option<Vec<Expr>> {
        if !self.is("<") {
            return None;
        }
        let save = (self.pos, self.depth);
        if self.not_template[save.0] {
            return None;
        }
        let got = self.try_template_args();
        let followed = self.is("(") || self.is("{") || self.is("::");
        match got {
            Some(args) if followed => Some(args),
            _ => {
                (self.pos, self.depth) = save;
                // Remembered, so a chain `a < b < c < ...` is tried once per `<`.
                self.not_template[save.0] = true;
                None
            }
        }
    }

    fn try_template_args(&mut self) -> Option<Vec<Expr>> {
        self.bump();
        let mut args = Vec::new();
        loop {
            let t = self.peek();
            let arg = match t.kind {
                Tok::Int => self.primary().ok()?,
                Tok::Ident => self.type_name().ok()?,
                Tok::Punct if self.text(t) == "::" => self.type_name().ok()?,
                _ => return None,
            };
            args.push(arg);
            if self.eat(">") {
                return Some(args);
            }
            if !self.eat(",") {
                return None;
            }
        }
    }

    /// A type: a name or path with optional template arguments.
    fn type_name(&mut self) -> PResult<Expr> {
        self.enter()?;
        let start = self.peek().start;
        let base = self.path()?;
        let e = match self.template_args() {
            Some(args) => self.node(
                ExprKind::Template {
                    base: Box::new(base),
                    args,
                },
                start,
            ),
            None => base,
        };
        self.depth -= 1;
        Ok(e)
    }

    /// `name`, `a::b::c` or `::a::b`; `std::nullopt` becomes [`ExprKind::Nullopt`]
    /// and `true`/`false` booleans.
    fn path(&mut self) -> PResult<Expr> {
        let start = self.peek().start;
        let global = self.eat("::");
        let mut segments = Vec::new();
        loop {
            let t = self.peek();
            if t.kind != Tok::Ident {
                return Err(self.unexpected("a name"));
            }
            self.bump();
            segments.push(self.text(t).to_string());
            if !(self.is("::") && self.peek_at(1).kind == Tok::Ident) {
                break;
            }
            self.bump();
        }
        let kind = match (global, segments.as_slice()) {
            (false, [one]) if one == "true" || one == "false" => ExprKind::Bool(one == "true"),
            (_, [ns, n]) if n == "nullopt" && (ns == "std" || ns == "c10") => ExprKind::Nullopt,
            (false, [_]) => ExprKind::Ident(segments.pop().unwrap_or_default()),
            _ => ExprKind::Path { global, segments },
        };
        Ok(self.node(kind, start))
    }

    fn primary(&mut self) -> PResult<Expr> {
        let t = self.peek();
        let text = self.text(t);
        match t.kind {
            Tok::Int => {
                self.bump();
                match text.parse() {
                    Ok(n) => Ok(self.node(ExprKind::Int(n), t.start)),
                    Err(_) => Err(ParseError {
                        message: format!("integer `{text}` is too large"),
                        start: t.start,
                        end: t.end,
                        hint: "integers in formulas fit in 64 bits".into(),
                    }),
                }
            }
            Tok::Float => {
                self.bump();
                let x = text.parse().unwrap_or(f64::NAN);
                Ok(self.node(ExprKind::Float(x), t.start))
            }
            Tok::Str => {
                self.bump();
                Ok(self.node(ExprKind::Str(unescape(&text[1..text.len() - 1])), t.start))
            }
            Tok::Ident => self.type_name(),
            Tok::Punct => match text {
                "::" => self.type_name(),
                "(" => {
                    self.bump();
                    let e = self.expr()?;
                    self.expect(")")?;
                    // Parentheses only group: the node keeps its own span.
                    Ok(e)
                }
                "{" => {
                    self.bump();
                    let items = self.list("}")?;
                    Ok(self.node(ExprKind::Braces(items), t.start))
                }
                "[" => self.lambda(),
                _ => Err(self.unexpected("a value")),
            },
            Tok::Eof => Err(self.unexpected("a value")),
        }
    }

    /// `[captures](Type name, ...) { return expr; }`.
    fn lambda(&mut self) -> PResult<Expr> {
        let start = self.bump().start;
        let mut captures = Vec::new();
        while !self.eat("]") {
            let t = self.peek();
            if t.kind == Tok::Eof {
                return Err(self.unexpected("`]`"));
            }
            if !(t.kind == Tok::Punct && self.text(t) == ",") {
                captures.push(self.text(t).to_string());
            }
            self.bump();
        }
        self.expect("(")?;
        let mut params = Vec::new();
        if !self.eat(")") {
            loop {
                let ty = self.type_name()?;
                let name = self.peek();
                if name.kind != Tok::Ident {
                    return Err(self.unexpected("a parameter name"));
                }
                self.bump();
                params.push(Param {
                    ty,
                    name: self.text(name).to_string(),
                });
                if self.eat(")") {
                    break;
                }
                self.expect(",")?;
            }
        }
        self.expect("{")?;
        let ret = self.peek();
        if !(ret.kind == Tok::Ident && self.text(ret) == "return") {
            return Err(self
                .unexpected("`return`")
                .with_hint("a lambda in a formula is `[](T x) { return expression; }`"));
        }
        self.bump();
        let body = self.expr()?;
        self.expect(";")?;
        self.expect("}")?;
        Ok(self.node(
            ExprKind::Lambda {
                captures,
                params,
                body: Box::new(body),
            },
            start,
        ))
    }
}

impl ParseError {
    fn with_hint(mut self, hint: &str) -> Self {
        self.hint = hint.to_string();
        self
    }
}

/// The text of a C++ string literal's body (simple escapes only).
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Expr {
        parse(s).unwrap_or_else(|e| panic!("{s}: {e:?}"))
    }

    #[test]
    fn precedence_follows_cpp() {
        assert_eq!(p("a + b * c").to_string(), "a + (b * c)");
        assert_eq!(p("a - b - c").to_string(), "(a - b) - c");
        assert_eq!(
            p("a < b && c == d || e").to_string(),
            "((a < b) && (c == d)) || e"
        );
        assert_eq!(p("c ? x : d ? y : z").to_string(), "c ? x : (d ? y : z)");
        assert_eq!(p("-a.b()").to_string(), "-a.b()");
        assert_eq!(p("(-a).b()").to_string(), "(-a).b()");
        assert_eq!(
            p("(x == 0.) & (y <= -1.)").to_string(),
            "(x == 0.0) & (y <= (-1.0))"
        );
    }

    #[test]
    fn templates_and_comparisons_are_told_apart() {
        assert_eq!(p("std::get<0>(t)").to_string(), "std::get<0>(t)");
        assert_eq!(p("x.to<double>()").to_string(), "x.to<double>()");
        assert_eq!(p("a < b && c > (d)").to_string(), "(a < b) && (c > d)");
        assert_eq!(p("self < 3.0").to_string(), "self < 3.0");
        assert_eq!(
            p("std::vector<c10::SymInt>(n, 0)").to_string(),
            "std::vector<c10::SymInt>(n, 0)"
        );
    }

    #[test]
    fn lambdas_braces_and_literals() {
        assert_eq!(
            p("fmap(v, [](c10::SymInt i){return -i;})").to_string(),
            "fmap(v, [](c10::SymInt i) { return -i; })"
        );
        assert_eq!(p("f({{0, 0}}, {})").to_string(), "f({{0, 0}}, {})");
        assert_eq!(p("::std::nullopt").kind, ExprKind::Nullopt);
        assert_eq!(p("1e-12").kind, ExprKind::Float(1e-12));
        assert_eq!(p("true").kind, ExprKind::Bool(true));
        assert_eq!(p("f(/*x=*/\"a\\\"b\")").to_string(), "f(\"a\\\"b\")");
        assert_eq!(p("b->sym_sizes()").to_string(), "b->sym_sizes()");
    }

    #[test]
    fn errors_point_at_the_problem() {
        let e = parse("f(a,, b)").unwrap_err();
        assert_eq!((e.start, e.end), (4, 5));
        let e = parse("f(a").unwrap_err();
        assert!(e.message.contains("end of the formula"), "{e:?}");
        let e = parse("a $ b").unwrap_err();
        assert_eq!(
            (e.start, e.message.as_str()),
            (2, "unexpected character `$`")
        );
        let deep = format!("{}x{}", "(".repeat(500), ")".repeat(500));
        assert!(parse(&deep).unwrap_err().message.contains("levels deep"));
        // Template arguments nested too deep are not read as templates (an
        // error, not a stack overflow); a long comparison chain is fine.
        let deep = format!("f({}int{}())", "std::vector<".repeat(500), ">".repeat(500));
        assert!(parse(&deep).is_err());
        let chain = format!("{}b", "a < ".repeat(5000));
        assert!(parse(&chain).is_ok());
    }

    #[test]
    fn spans_cover_their_nodes() {
        let e = p("grad * other.conj()");
        let ExprKind::Binary { rhs, .. } = &e.kind else {
            panic!("{e:?}")
        };
        assert_eq!((rhs.span.start, rhs.span.end), (7, 19));
        let ExprKind::Member { name_span, .. } = &rhs.kind else {
            panic!("{rhs:?}")
        };
        assert_eq!((name_span.start, name_span.end), (13, 17));
    }
}
