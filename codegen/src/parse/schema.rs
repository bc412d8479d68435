//! The `func:` grammar: a hand-written recursive-descent parser from tokens to
//! [`FunctionSchema`], with checks that belong to a single schema string (name
//! rules, argument order, duplicate names, defaults that fit their types).
//!
//! Owns: schema syntax and per-schema well-formedness. Must not: read YAML, apply
//! cross-function rules (that is `validate`), or print (the printer is the
//! `Display` impls in `model`).

use super::lexer::{lex, LocMap, Tok, Token};
use crate::diagnostics::Diagnostic;
use crate::model::{
    Annotation, Argument, Arguments, BaseOperatorName, BaseTy, FunctionSchema, Loc, OperatorName,
    Return, Type,
};

const CODE: &str = "opal::schema_syntax";

/// Limits on one schema string, far above anything PyTorch writes (at most 23
/// arguments, 9 defaults, 492 characters, two type suffixes such as `Tensor?[]`):
/// generated code grows with arguments times schema length (every `Options` setter
/// documents the schema), and nested types and lists are recursive values.
pub mod limits {
    /// Bytes of one `func:` string.
    pub const SCHEMA_LEN: usize = 16 * 1024;
    /// Arguments, and separately returns, of one schema.
    pub const ARGS: usize = 256;
    /// `?` and `[]` suffixes on one type.
    pub(crate) const TYPE_SUFFIXES: usize = 8;
    /// Nesting of `[..]` lists in one default value.
    pub(crate) const LIST_DEPTH: usize = 8;
}

/// The located error for a schema past one of [`limits`].
fn too_large(loc: Loc, what: String, limit: usize) -> Diagnostic {
    Diagnostic::new("opal::schema_too_large", loc, what)
        .label(format!("past the limit of {limit}"))
        .hint(format!(
            "opal-codegen accepts at most {limit} here (PyTorch needs far fewer); split the operator or simplify it"
        ))
}

/// Dunder names whose `i` form is in-place (`__iadd__`).
const AUGMENTED_ASSIGNMENT: [&str; 11] = [
    "add", "sub", "mul", "div", "mod", "pow", "lshift", "rshift", "and", "xor", "or",
];

/// Parses a schema string that does not come from a file (locations start at 1:1).
pub fn parse_schema(src: &str) -> Result<FunctionSchema, Diagnostic> {
    parse_schema_at(
        src,
        Loc {
            offset: 0,
            len: src.len(),
            line: 1,
            col: 1,
        },
    )
}

/// Parses a schema string whose first byte lies at `base` in some file, so every
/// location in the result (and in the error) points into that file. An optional
/// `namespace::` prefix is accepted and dropped.
pub fn parse_schema_at(src: &str, base: Loc) -> Result<FunctionSchema, Diagnostic> {
    if src.len() > limits::SCHEMA_LEN {
        let mut loc = base;
        loc.len = src.len();
        return Err(too_large(
            loc,
            format!("schema string is {} bytes long", src.len()),
            limits::SCHEMA_LEN,
        ));
    }
    Parser::new(src, base)?.schema()
}

/// Parses an operator name such as `add.out` (for `structured_delegate:` and
/// `autogen:` values) located at `base`.
pub(crate) fn parse_operator_name_at(src: &str, base: Loc) -> Result<OperatorName, Diagnostic> {
    let mut p = Parser::new(src, base)?;
    let name = p.operator_name()?;
    if p.peek().kind != Tok::Eof {
        return Err(p
            .unexpected("the end of the operator name")
            .hint("operator names are written `name` or `name.overload`"));
    }
    Ok(name)
}

/// The namespace prefix of a `func:` string (`aten` when absent) and the rest.
pub fn split_namespace(func: &str) -> (&str, &str) {
    let head = func.split('(').next().unwrap_or("");
    match head.find("::") {
        Some(i) => (&func[..i], &func[i + 2..]),
        None => ("aten", func),
    }
}

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Token>,
    pos: usize,
    base: Loc,
    map: LocMap<'a>,
}

/// A default value's shape, enough to check it against a type.
enum Lit {
    Int,
    Float,
    Str,
    Ident(String),
    List(Vec<Lit>),
}

impl<'a> Parser<'a> {
    fn new(src: &'a str, base: Loc) -> Result<Self, Diagnostic> {
        Ok(Parser {
            src,
            toks: lex(src, base)?,
            pos: 0,
            base,
            map: LocMap::new(src, base),
        })
    }

    /// Where `t` is in the file.
    fn loc(&self, t: Token) -> Loc {
        self.map.at(t.start, t.end)
    }

    fn peek(&self) -> Token {
        self.toks[self.pos.min(self.toks.len() - 1)]
    }

    fn peek2(&self) -> Token {
        self.toks[(self.pos + 1).min(self.toks.len() - 1)]
    }

    fn bump(&mut self) -> Token {
        let t = self.peek();
        if t.kind != Tok::Eof {
            self.pos += 1;
        }
        t
    }

    fn text(&self, t: Token) -> &'a str {
        &self.src[t.start..t.end]
    }

    fn eat(&mut self, kind: Tok) -> bool {
        if self.peek().kind == kind {
            self.bump();
            true
        } else {
            false
        }
    }

    fn unexpected(&self, what: &str) -> Diagnostic {
        let t = self.peek();
        let found = if t.kind == Tok::Eof {
            t.kind.describe().to_string()
        } else {
            format!("`{}`", self.text(t))
        };
        Diagnostic::new(CODE, self.loc(t), format!("expected {what}, found {found}"))
            .label(format!("expected {what}"))
            .hint("schemas read `name.overload(Type arg, *, Type kwarg=default) -> Type`; names are letters, digits and `_`")
    }

    fn expect(&mut self, kind: Tok, what: &str) -> Result<Token, Diagnostic> {
        if self.peek().kind == kind {
            Ok(self.bump())
        } else {
            Err(self.unexpected(what))
        }
    }

    fn span(&self, from: Token, to: Token) -> Loc {
        let mut l = self.loc(from);
        l.len = to.end.saturating_sub(from.start);
        l
    }

    fn schema(&mut self) -> Result<FunctionSchema, Diagnostic> {
        if self.peek().kind == Tok::Ident && self.peek2().kind == Tok::ColonColon {
            self.bump();
            self.bump();
        }
        let name = self.operator_name()?;
        self.expect(Tok::LParen, "`(` after the operator name")?;
        let arguments = self.arguments()?;
        self.expect(Tok::Arrow, "` -> ` and the returns")
            .map_err(|d| d.hint("every schema ends in `-> <returns>`; use `-> ()` for none"))?;
        let returns = self.returns()?;
        if self.peek().kind != Tok::Eof {
            return Err(self
                .unexpected("the end of the schema")
                .hint("several returns are written in parentheses: `-> (Tensor a, Tensor b)`"));
        }
        let mut loc = self.base;
        loc.len = self.src.len();
        loc.line = loc.line.max(1);
        loc.col = loc.col.max(1);
        Ok(FunctionSchema {
            name,
            arguments,
            returns,
            loc,
        })
    }

    fn operator_name(&mut self) -> Result<OperatorName, Diagnostic> {
        let t = self.expect(Tok::Ident, "an operator name")?;
        let name = base_operator_name(self.text(t), self.loc(t))?;
        let overload_name = if self.eat(Tok::Dot) {
            let o = self.expect(Tok::Ident, "an overload name after `.`").map_err(|d| {
                d.hint("overload names are identifiers: letters, digits and `_`, not starting with a digit")
            })?;
            self.text(o).to_string()
        } else {
            String::new()
        };
        Ok(OperatorName {
            name,
            overload_name,
        })
    }

    fn arguments(&mut self) -> Result<Arguments, Diagnostic> {
        #[derive(PartialEq)]
        enum Section {
            Positional,
            Kwarg,
            Out,
        }
        // All arguments in order, split into the three sections at the end so each
        // section's vector is allocated at its exact size (a model holds thousands).
        let mut all: Vec<Argument> = Vec::with_capacity(16);
        let (mut n_positional, mut n_kwarg) = (0, 0);
        let mut section = Section::Positional;
        // Names borrowed from the schema string: no copy per argument.
        let mut seen: Vec<(&'a str, Token)> = Vec::new();
        if self.eat(Tok::RParen) {
            return Ok(Arguments::default());
        }
        loop {
            if self.peek().kind == Tok::Star {
                let star = self.bump();
                if section != Section::Positional {
                    return Err(Diagnostic::new(
                        CODE,
                        self.loc(star),
                        "second `*` in the arguments",
                    )
                    .label("keyword-only arguments already started")
                    .hint("write `*` once, before the first keyword-only argument"));
                }
                if self.peek().kind == Tok::RParen {
                    return Err(Diagnostic::new(
                        CODE,
                        self.loc(star),
                        "`*` is not followed by any argument",
                    )
                    .label("nothing after this `*`")
                    .hint("remove the `*` or add keyword-only arguments after it"));
                }
                section = Section::Kwarg;
            } else {
                let at = self.peek();
                if seen.len() == limits::ARGS {
                    return Err(too_large(
                        self.loc(at),
                        format!("schema has more than {} arguments", limits::ARGS),
                        limits::ARGS,
                    ));
                }
                let (arg, name_tok) = self.argument()?;
                if let Some((_, first)) = seen.iter().find(|(n, _)| *n == arg.name) {
                    return Err(Diagnostic::new(
                        "opal::duplicate_argument",
                        self.loc(name_tok),
                        format!("argument `{}` is declared twice", arg.name),
                    )
                    .label("second declaration")
                    .hint(format!(
                        "the first `{}` is at column {}; argument names must be unique",
                        arg.name,
                        self.loc(*first).col
                    )));
                }
                seen.push((self.text(name_tok), name_tok));
                match section {
                    Section::Positional => n_positional += 1,
                    Section::Kwarg if arg.is_write() => section = Section::Out,
                    Section::Kwarg => n_kwarg += 1,
                    Section::Out if arg.is_write() => {}
                    Section::Out => {
                        return Err(Diagnostic::new(
                            "opal::out_order",
                            arg.loc,
                            format!(
                                "keyword-only argument `{}` comes after the out arguments",
                                arg.name
                            ),
                        )
                        .label("not mutable, but after an out argument")
                        .hint("out arguments (`Tensor(a!) out`) must be the last keyword-only arguments"));
                    }
                }
                all.push(arg);
            }
            if self.eat(Tok::RParen) {
                let mut rest = all.into_iter();
                return Ok(Arguments {
                    positional: rest.by_ref().take(n_positional).collect(),
                    kwarg_only: rest.by_ref().take(n_kwarg).collect(),
                    out: rest.collect(),
                });
            }
            self.expect(Tok::Comma, "`,` or `)` after an argument")?;
        }
    }

    fn argument(&mut self) -> Result<(Argument, Token), Diagnostic> {
        let first = self.peek();
        let (ty, annotation) = self.ty()?;
        let name_tok = self
            .expect(Tok::Ident, "an argument name")
            .map_err(|d| d.hint("arguments are written `<type> <name>`, names are identifiers"))?;
        let name = self.text(name_tok).to_string();
        let mut last = name_tok;
        let default = if self.eat(Tok::Eq) {
            let dstart = self.peek();
            let lit = self.literal(0)?;
            let dend = self.toks[self.pos - 1];
            last = dend;
            let raw = &self.src[dstart.start..dend.end];
            if let Err(why) = default_fits(&ty, &lit) {
                return Err(Diagnostic::new(
                    "opal::bad_default",
                    self.span(dstart, dend),
                    format!("default `{raw}` cannot be a value of type `{ty}`"),
                )
                .label(format!("does not fit `{ty}`"))
                .hint(why));
            }
            Some(raw.to_string())
        } else {
            None
        };
        let arg = Argument {
            name,
            ty,
            default,
            annotation,
            loc: self.span(first, last),
        };
        Ok((arg, name_tok))
    }

    /// A default value inside `depth` enclosing lists.
    fn literal(&mut self, depth: usize) -> Result<Lit, Diagnostic> {
        let t = self.peek();
        match t.kind {
            Tok::Minus => {
                self.bump();
                let n = self.peek();
                match n.kind {
                    Tok::Number => {
                        self.bump();
                        Ok(number_lit(self.text(n)))
                    }
                    Tok::Ident if self.text(n) == "inf" => {
                        self.bump();
                        Ok(Lit::Float)
                    }
                    _ => Err(self.unexpected("a number after `-`")),
                }
            }
            Tok::Number => {
                self.bump();
                Ok(number_lit(self.text(t)))
            }
            Tok::Str => {
                self.bump();
                Ok(Lit::Str)
            }
            Tok::Ident => {
                self.bump();
                Ok(Lit::Ident(self.text(t).to_string()))
            }
            Tok::LBracket => {
                if depth == limits::LIST_DEPTH {
                    return Err(too_large(
                        self.loc(t),
                        format!(
                            "default value nests lists deeper than {}",
                            limits::LIST_DEPTH
                        ),
                        limits::LIST_DEPTH,
                    ));
                }
                self.bump();
                let mut items = Vec::new();
                if self.eat(Tok::RBracket) {
                    return Ok(Lit::List(items));
                }
                loop {
                    items.push(self.literal(depth + 1)?);
                    if self.eat(Tok::RBracket) {
                        return Ok(Lit::List(items));
                    }
                    self.expect(Tok::Comma, "`,` or `]` in a list default")?;
                }
            }
            _ => Err(self.unexpected("a default value").hint(
                "defaults are numbers, strings, `True`/`False`, `None`, names or `[..]` lists",
            )),
        }
    }

    /// A type with its optional alias annotation (`Tensor(a!)[]`).
    fn ty(&mut self) -> Result<(Type, Option<Annotation>), Diagnostic> {
        let t = self.expect(Tok::Ident, "a type")?;
        let text = self.text(t);
        let base = BaseTy::from_name(text).ok_or_else(|| unknown_type(text, self.loc(t)))?;
        let mut annotation = None;
        if self.peek().kind == Tok::LParen {
            let open = self.peek();
            if base != BaseTy::Tensor {
                return Err(Diagnostic::new(
                    CODE,
                    self.loc(open),
                    format!("alias annotation on `{text}`"),
                )
                .label("only `Tensor` can carry an alias annotation")
                .hint("remove the `(..)` annotation"));
            }
            self.bump();
            annotation = Some(self.annotation()?);
            self.expect(Tok::RParen, "`)` closing the alias annotation")?;
        }
        let mut ty = Type::Base(base);
        for n in 0.. {
            let kind = self.peek().kind;
            if n == limits::TYPE_SUFFIXES && matches!(kind, Tok::Question | Tok::LBracket) {
                let at = self.peek();
                return Err(too_large(
                    self.loc(at),
                    format!(
                        "type has more than {} `?`/`[]` suffixes",
                        limits::TYPE_SUFFIXES
                    ),
                    limits::TYPE_SUFFIXES,
                ));
            }
            match kind {
                Tok::Question => {
                    self.bump();
                    ty = Type::Optional(Box::new(ty));
                }
                Tok::LBracket => {
                    self.bump();
                    let size = if self.peek().kind == Tok::Number {
                        let n = self.bump();
                        let s = self.text(n);
                        Some(s.parse::<u32>().map_err(|_| {
                            Diagnostic::new(
                                CODE,
                                self.loc(n),
                                format!("list size `{s}` is not a small whole number"),
                            )
                            .label("expected a size like `2`")
                        })?)
                    } else {
                        None
                    };
                    self.expect(Tok::RBracket, "`]` closing the list type")?;
                    ty = Type::List {
                        elem: Box::new(ty),
                        size,
                    };
                }
                _ => break,
            }
        }
        Ok((ty, annotation))
    }

    fn alias_set(&mut self) -> Result<Vec<String>, Diagnostic> {
        let mut set = Vec::new();
        loop {
            let t = self.peek();
            match t.kind {
                Tok::Ident => {
                    self.bump();
                    let s = self.text(t);
                    if !s
                        .bytes()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                    {
                        return Err(Diagnostic::new(
                            CODE,
                            self.loc(t),
                            format!("alias set `{s}` is not lowercase"),
                        )
                        .label("alias sets are lowercase letters")
                        .hint("write alias sets like `a`, `b`, or `a|b`"));
                    }
                    set.push(s.to_string());
                }
                Tok::Star => {
                    self.bump();
                    set.push("*".to_string());
                }
                _ => return Err(self.unexpected("an alias set like `a`")),
            }
            if !self.eat(Tok::Pipe) {
                return Ok(set);
            }
        }
    }

    fn annotation(&mut self) -> Result<Annotation, Diagnostic> {
        let alias_set = self.alias_set()?;
        let is_write = self.eat(Tok::Bang);
        let alias_set_after = if self.eat(Tok::Arrow) {
            self.alias_set()?
        } else {
            Vec::new()
        };
        Ok(Annotation {
            alias_set,
            is_write,
            alias_set_after,
        })
    }

    fn returns(&mut self) -> Result<Vec<Return>, Diagnostic> {
        if self.peek().kind != Tok::LParen {
            return Ok(vec![self.ret()?]);
        }
        self.bump();
        let mut rets = Vec::new();
        if self.eat(Tok::RParen) {
            return Ok(rets);
        }
        loop {
            if rets.len() == limits::ARGS {
                let at = self.peek();
                return Err(too_large(
                    self.loc(at),
                    format!("schema has more than {} returns", limits::ARGS),
                    limits::ARGS,
                ));
            }
            rets.push(self.ret()?);
            if self.eat(Tok::RParen) {
                return Ok(rets);
            }
            self.expect(Tok::Comma, "`,` or `)` after a return")?;
        }
    }

    fn ret(&mut self) -> Result<Return, Diagnostic> {
        let first = self.peek();
        let (ty, annotation) = self.ty()?;
        let mut last = self.toks[self.pos - 1];
        let name = if self.peek().kind == Tok::Ident {
            let t = self.bump();
            last = t;
            Some(self.text(t).to_string())
        } else {
            None
        };
        Ok(Return {
            name,
            ty,
            annotation,
            loc: self.span(first, last),
        })
    }
}

fn number_lit(s: &str) -> Lit {
    if s.contains(['.', 'e', 'E']) {
        Lit::Float
    } else {
        Lit::Int
    }
}

/// Splits an operator name into torchgen's parts (in-place `_`, dunder, `_functional`).
fn base_operator_name(op: &str, loc: Loc) -> Result<BaseOperatorName, Diagnostic> {
    if op.ends_with("_out") {
        return Err(Diagnostic::new(
            "opal::reserved_name",
            loc,
            format!("operator name `{op}` ends in `_out`"),
        )
        .label("`_out` suffix is reserved")
        .hint(format!(
            "name the out= variant with an overload instead: `{}.out(...)`",
            op.trim_end_matches("_out")
        )));
    }
    let dunder = op
        .strip_prefix("__")
        .and_then(|s| s.strip_suffix("__"))
        .filter(|s| !s.is_empty() && !s.contains('_'));
    let (mut base, inplace, dunder_method) = match dunder {
        Some(inner) => match inner.strip_prefix('i') {
            Some(rest) if AUGMENTED_ASSIGNMENT.contains(&rest) => (rest.to_string(), true, true),
            _ => (inner.to_string(), false, true),
        },
        None => match op.strip_suffix('_') {
            Some(b) if !b.is_empty() => (b.to_string(), true, false),
            _ => (op.to_string(), false, false),
        },
    };
    let mut functional_overload = false;
    if let Some(b) = base.strip_suffix("_functional") {
        if dunder_method || inplace {
            return Err(Diagnostic::new(
                "opal::reserved_name",
                loc,
                format!("`{op}` combines `_functional` with an in-place or dunder name"),
            )
            .label("`_functional` marks the functional variant of a mutable op")
            .hint("drop the trailing `_` or the `_functional` suffix"));
        }
        base = b.to_string();
        functional_overload = true;
    }
    Ok(BaseOperatorName {
        base,
        inplace,
        dunder_method,
        functional_overload,
    })
}

fn unknown_type(text: &str, loc: Loc) -> Diagnostic {
    // Case is not a typo here (`tensor` means `Tensor`): compare lowercased.
    let lower: Vec<String> = BaseTy::ALL
        .iter()
        .map(|b| b.as_str().to_lowercase())
        .collect();
    let hint = match crate::suggest::closest(&text.to_lowercase(), lower.iter().map(String::as_str))
        .and_then(|l| BaseTy::ALL.iter().find(|b| b.as_str().to_lowercase() == l))
    {
        Some(b) => format!("did you mean `{}`?", b.as_str()),
        None => {
            let all: Vec<_> = BaseTy::ALL.iter().map(|b| b.as_str()).collect();
            format!("known types: {}", all.join(", "))
        }
    };
    Diagnostic::new("opal::unknown_type", loc, format!("unknown type `{text}`"))
        .label("not a schema type")
        .hint(hint)
}

/// Whether a default literal can be a value of `ty`; the error is a hint.
fn default_fits(ty: &Type, lit: &Lit) -> Result<(), String> {
    if let Lit::Ident(s) = lit {
        if s == "None" {
            return if ty.is_optional() {
                Ok(())
            } else {
                Err(format!("`None` needs an optional type: write `{ty}?`"))
            };
        }
    }
    let is_bool = |l: &Lit| matches!(l, Lit::Ident(s) if s == "True" || s == "False");
    let is_num = |l: &Lit| {
        matches!(l, Lit::Int | Lit::Float) || matches!(l, Lit::Ident(s) if s == "inf" || s == "nan")
    };
    let is_name = |l: &Lit| matches!(l, Lit::Ident(s) if s != "True" && s != "False");
    let ok = match ty {
        Type::Optional(inner) => return default_fits(inner, lit),
        Type::List { elem, size } => match lit {
            Lit::List(items) => {
                for item in items {
                    default_fits(elem, item)?;
                }
                true
            }
            // `int[2] stride=1` repeats one value; torchgen allows it for any list
            // whose element type takes the literal.
            other => {
                let _ = size;
                default_fits(elem, other).is_ok()
            }
        },
        Type::Base(b) => match b {
            BaseTy::Tensor
            | BaseTy::Generator
            | BaseTy::Storage
            | BaseTy::Stream
            | BaseTy::ConstQuantizerPtr
            | BaseTy::GraphModule => {
                return Err(format!(
                    "`{b}` arguments can only default to `None`, and only when optional (`{b}?`)",
                    b = b.as_str()
                ))
            }
            BaseTy::Int | BaseTy::SymInt | BaseTy::DeviceIndex => {
                matches!(lit, Lit::Int) || is_name(lit)
            }
            BaseTy::Float => is_num(lit),
            BaseTy::Bool | BaseTy::SymBool => is_bool(lit),
            BaseTy::Str => matches!(lit, Lit::Str),
            BaseTy::Scalar => is_num(lit) || is_bool(lit),
            BaseTy::ScalarType | BaseTy::Layout | BaseTy::MemoryFormat | BaseTy::QScheme => {
                is_name(lit)
            }
            BaseTy::Device | BaseTy::Dimname => matches!(lit, Lit::Str) || is_name(lit),
            BaseTy::DimVector => matches!(lit, Lit::List(_)),
        },
    };
    if ok {
        Ok(())
    } else {
        Err(match ty.base() {
            BaseTy::Int | BaseTy::SymInt | BaseTy::DeviceIndex => {
                "integer arguments default to a whole number such as `0` or `-1`".into()
            }
            BaseTy::Float => "float arguments default to a number such as `1.0` or `1e-05`".into(),
            BaseTy::Bool | BaseTy::SymBool => "bool arguments default to `True` or `False`".into(),
            BaseTy::Str => "str arguments default to a quoted string such as \"mean\"".into(),
            BaseTy::Scalar => "Scalar arguments default to a number or `True`/`False`".into(),
            _ => format!("`{ty}` defaults are names such as `contiguous_format` or `long`"),
        })
    }
}
