//! Small constructors of `syn` values (paths, expressions, statements, types,
//! functions, attributes), so emitters build the syntax tree of their items directly:
//! quoting tokens and parsing them back cost four times more than formatting the
//! result.
//!
//! Each constructor makes the tree `syn` would parse from the code it is named
//! after, with call-site spans and no trailing punctuation (prettyplease decides
//! separators itself), so the formatted text is what formatting parsed tokens gives.
//!
//! Owns: generic syntax constructors, and the keyword list that makes an
//! identifier raw. Must not: know about operators, schema types or the layout of
//! the output (the emitters and `crate::ident`, which names things, do).

use proc_macro2::extra::DelimSpan;
use proc_macro2::{Delimiter, Group, Ident, Literal, Span, TokenStream};
use std::cell::RefCell;
use std::collections::HashMap;
use syn::token;
use syn::{
    AngleBracketedGenericArguments, Arm, AttrStyle, Attribute, Block, Expr, FnArg, GenericArgument,
    ImplItem, ImplItemFn, Item, ItemFn, ItemImpl, Lit, Local, LocalInit, MacroDelimiter, Member,
    Meta, MetaList, Pat, PatIdent, PatType, Path, PathArguments, PathSegment, Receiver, ReturnType,
    Signature, Stmt, Type, TypePath, Visibility,
};

thread_local! {
    /// The span of every delimiter: `syn`'s `Default` for `Paren`/`Brace`/`Bracket`
    /// makes it by building and dropping a token group, an allocation apiece.
    static DELIM: DelimSpan = Group::new(Delimiter::None, TokenStream::new()).delim_span();
}

/// `( .. )` delimiters.
pub(crate) fn paren() -> token::Paren {
    token::Paren {
        span: DELIM.with(|d| *d),
    }
}

/// `{ .. }` delimiters.
pub(crate) fn brace() -> token::Brace {
    token::Brace {
        span: DELIM.with(|d| *d),
    }
}

/// `[ .. ]` delimiters.
pub(crate) fn bracket() -> token::Bracket {
    token::Bracket {
        span: DELIM.with(|d| *d),
    }
}

/// An identifier (raw for keywords): [`ident`].
pub(crate) fn id(s: &str) -> Ident {
    ident(s)
}

/// Words that are keywords in some Rust edition (strict and reserved).
pub(crate) const KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate",
    "do", "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl",
    "in", "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref",
    "return", "self", "Self", "static", "struct", "super", "trait", "true", "try", "type",
    "typeof", "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
];

/// Keywords that cannot be raw identifiers; these get a trailing `_` instead.
pub(crate) const NOT_RAW: &[&str] = &["self", "Self", "super", "crate", "_"];

/// An [`Ident`] for `s` (raw when it is a keyword). The string must be an
/// identifier; callers only pass names that went through `crate::ident`'s
/// `op_ident` / `arg_ident` or fixed names.
pub(crate) fn ident(s: &str) -> Ident {
    thread_local! {
        /// Identifiers made on this thread: generation makes millions, of a few
        /// thousand names, and a clone costs less than checking the keyword list and
        /// validating the name again.
        static MADE: RefCell<HashMap<Box<str>, Ident, crate::hash::FastHash>> =
            RefCell::new(HashMap::default());
    }
    MADE.with(|made| {
        if let Some(id) = made.borrow().get(s) {
            return id.clone();
        }
        let id = if KEYWORDS.contains(&s) && !NOT_RAW.contains(&s) {
            Ident::new_raw(s, Span::call_site())
        } else {
            Ident::new(s, Span::call_site())
        };
        made.borrow_mut().insert(s.into(), id.clone());
        id
    })
}

fn segment(ident: Ident) -> PathSegment {
    PathSegment {
        ident,
        arguments: PathArguments::None,
    }
}

/// A relative path from identifiers.
pub(crate) fn path_of(idents: impl IntoIterator<Item = Ident>) -> Path {
    Path {
        leading_colon: None,
        segments: idents.into_iter().map(segment).collect(),
    }
}

/// `a::b::c`.
pub(crate) fn path(segs: &[&str]) -> Path {
    path_of(segs.iter().map(|s| id(s)))
}

/// `::a::b::c`.
pub(crate) fn global_path(segs: &[&str]) -> Path {
    Path {
        leading_colon: Some(Default::default()),
        ..path(segs)
    }
}

/// `<T>` (or `::<T>` with `turbofish`).
fn generic_args(
    tys: impl IntoIterator<Item = Type>,
    turbofish: bool,
) -> AngleBracketedGenericArguments {
    AngleBracketedGenericArguments {
        colon2_token: turbofish.then(Default::default),
        lt_token: Default::default(),
        args: tys.into_iter().map(GenericArgument::Type).collect(),
        gt_token: Default::default(),
    }
}

/// `path` with generic arguments on its last segment (`Vec<T>`, `TypeId::of::<T>`).
pub(crate) fn with_generics(
    mut p: Path,
    tys: impl IntoIterator<Item = Type>,
    turbofish: bool,
) -> Path {
    if let Some(last) = p.segments.last_mut() {
        last.arguments = PathArguments::AngleBracketed(generic_args(tys, turbofish));
    }
    p
}

// Expressions.

/// A path expression.
pub(crate) fn path_expr(path: Path) -> Expr {
    Expr::Path(syn::ExprPath {
        attrs: Vec::new(),
        qself: None,
        path,
    })
}

/// `a::b::c` as an expression.
pub(crate) fn p(segs: &[&str]) -> Expr {
    path_expr(path(segs))
}

/// A local variable (or any single identifier) as an expression.
pub(crate) fn var(ident: Ident) -> Expr {
    path_expr(path_of([ident]))
}

/// `f(args..)`.
pub(crate) fn call(func: Expr, args: impl IntoIterator<Item = Expr>) -> Expr {
    Expr::Call(syn::ExprCall {
        attrs: Vec::new(),
        func: Box::new(func),
        paren_token: paren(),
        args: args.into_iter().collect(),
    })
}

/// `a::b::f(args..)`.
pub(crate) fn call_path(segs: &[&str], args: impl IntoIterator<Item = Expr>) -> Expr {
    call(p(segs), args)
}

/// `recv.name(args..)`, or `recv.name::<T>(args..)` with a turbofish type.
pub(crate) fn method(
    recv: Expr,
    name: &str,
    turbofish: Option<Type>,
    args: impl IntoIterator<Item = Expr>,
) -> Expr {
    Expr::MethodCall(syn::ExprMethodCall {
        attrs: Vec::new(),
        receiver: Box::new(recv),
        dot_token: Default::default(),
        method: id(name),
        turbofish: turbofish.map(|t| generic_args([t], true)),
        paren_token: paren(),
        args: args.into_iter().collect(),
    })
}

/// `e?`.
pub(crate) fn try_(e: Expr) -> Expr {
    Expr::Try(syn::ExprTry {
        attrs: Vec::new(),
        expr: Box::new(e),
        question_token: Default::default(),
    })
}

/// `&e`.
pub(crate) fn reference(e: Expr) -> Expr {
    Expr::Reference(syn::ExprReference {
        attrs: Vec::new(),
        and_token: Default::default(),
        mutability: None,
        expr: Box::new(e),
    })
}

/// `e.name` or `e.0`.
pub(crate) fn field(e: Expr, member: Member) -> Expr {
    Expr::Field(syn::ExprField {
        attrs: Vec::new(),
        base: Box::new(e),
        dot_token: Default::default(),
        member,
    })
}

/// A literal expression.
pub(crate) fn lit(l: Lit) -> Expr {
    Expr::Lit(syn::ExprLit {
        attrs: Vec::new(),
        lit: l,
    })
}

/// A literal expression from a literal token.
pub(crate) fn literal(l: Literal) -> Expr {
    lit(Lit::new(l))
}

/// `"s"`.
pub(crate) fn str_lit(s: &str) -> Expr {
    lit(Lit::Str(syn::LitStr::new(s, Span::call_site())))
}

/// `true` / `false`.
pub(crate) fn bool_lit(b: bool) -> Expr {
    lit(Lit::Bool(syn::LitBool::new(b, Span::call_site())))
}

/// `(a, b)`; `()` when empty.
pub(crate) fn tuple(elems: impl IntoIterator<Item = Expr>) -> Expr {
    Expr::Tuple(syn::ExprTuple {
        attrs: Vec::new(),
        paren_token: paren(),
        elems: elems.into_iter().collect(),
    })
}

/// `[a, b]`.
pub(crate) fn array(elems: impl IntoIterator<Item = Expr>) -> Expr {
    Expr::Array(syn::ExprArray {
        attrs: Vec::new(),
        bracket_token: bracket(),
        elems: elems.into_iter().collect(),
    })
}

/// `name![tokens]`.
pub(crate) fn bracket_macro(name: &str, tokens: TokenStream) -> Expr {
    Expr::Macro(syn::ExprMacro {
        attrs: Vec::new(),
        mac: syn::Macro {
            path: path(&[name]),
            bang_token: Default::default(),
            delimiter: MacroDelimiter::Bracket(bracket()),
            tokens,
        },
    })
}

/// `Some(e)`.
pub(crate) fn some(e: Expr) -> Expr {
    call_path(&["Some"], [e])
}

/// `Ok(e)`.
pub(crate) fn ok(e: Expr) -> Expr {
    call_path(&["Ok"], [e])
}

/// `|inputs| body` (with `move` when asked).
pub(crate) fn closure(is_move: bool, inputs: impl IntoIterator<Item = Pat>, body: Expr) -> Expr {
    Expr::Closure(syn::ExprClosure {
        attrs: Vec::new(),
        lifetimes: None,
        constness: None,
        movability: None,
        asyncness: None,
        capture: is_move.then(Default::default),
        or1_token: Default::default(),
        inputs: inputs.into_iter().collect(),
        or2_token: Default::default(),
        output: ReturnType::Default,
        body: Box::new(body),
    })
}

/// `{ stmts }` as an expression.
pub(crate) fn block_expr(stmts: Vec<Stmt>) -> Expr {
    Expr::Block(syn::ExprBlock {
        attrs: Vec::new(),
        label: None,
        block: block(stmts),
    })
}

/// `match e { arms }`, each arm `pat => body,`.
pub(crate) fn match_(e: Expr, arms: impl IntoIterator<Item = (Pat, Expr)>) -> Expr {
    Expr::Match(syn::ExprMatch {
        attrs: Vec::new(),
        match_token: Default::default(),
        expr: Box::new(e),
        brace_token: brace(),
        arms: arms
            .into_iter()
            .map(|(pat, body)| Arm {
                attrs: Vec::new(),
                pat,
                guard: None,
                fat_arrow_token: Default::default(),
                body: Box::new(body),
                comma: Some(Default::default()),
            })
            .collect(),
    })
}

/// `left = right`.
pub(crate) fn assign(left: Expr, right: Expr) -> Expr {
    Expr::Assign(syn::ExprAssign {
        attrs: Vec::new(),
        left: Box::new(left),
        eq_token: Default::default(),
        right: Box::new(right),
    })
}

/// `a | b | c` (left-associated, as parsed).
pub(crate) fn bit_or(items: impl IntoIterator<Item = Expr>) -> Option<Expr> {
    items.into_iter().reduce(|l, r| {
        Expr::Binary(syn::ExprBinary {
            attrs: Vec::new(),
            left: Box::new(l),
            op: syn::BinOp::BitOr(Default::default()),
            right: Box::new(r),
        })
    })
}

/// `Path { name: value, .. }` with the fields in order.
pub(crate) fn struct_expr(path: Path, fields: impl IntoIterator<Item = (Ident, Expr)>) -> Expr {
    Expr::Struct(syn::ExprStruct {
        attrs: Vec::new(),
        qself: None,
        path,
        brace_token: brace(),
        fields: fields
            .into_iter()
            .map(|(name, expr)| syn::FieldValue {
                attrs: Vec::new(),
                member: Member::Named(name),
                colon_token: Some(Default::default()),
                expr,
            })
            .collect(),
        dot2_token: None,
        rest: None,
    })
}

// Patterns and statements.

/// A binding pattern `name` (`mut name` when asked).
pub(crate) fn pat_ident(ident: Ident, mutable: bool) -> Pat {
    Pat::Ident(PatIdent {
        attrs: Vec::new(),
        by_ref: None,
        mutability: mutable.then(Default::default),
        ident,
        subpat: None,
    })
}

/// `_`.
pub(crate) fn pat_wild() -> Pat {
    Pat::Wild(syn::PatWild {
        attrs: Vec::new(),
        underscore_token: Default::default(),
    })
}

/// `(a, b)`.
pub(crate) fn pat_tuple(elems: impl IntoIterator<Item = Pat>) -> Pat {
    Pat::Tuple(syn::PatTuple {
        attrs: Vec::new(),
        paren_token: paren(),
        elems: elems.into_iter().collect(),
    })
}

/// `a::B(x)`.
pub(crate) fn pat_tuple_struct(segs: &[&str], binding: Ident) -> Pat {
    Pat::TupleStruct(syn::PatTupleStruct {
        attrs: Vec::new(),
        qself: None,
        path: path(segs),
        paren_token: paren(),
        elems: std::iter::once(pat_ident(binding, false)).collect(),
    })
}

/// `e;`.
pub(crate) fn semi(e: Expr) -> Stmt {
    Stmt::Expr(e, Some(Default::default()))
}

/// `e` as the value of a block.
pub(crate) fn tail(e: Expr) -> Stmt {
    Stmt::Expr(e, None)
}

/// `let pat = e;`.
pub(crate) fn let_(pat: Pat, e: Expr) -> Stmt {
    Stmt::Local(Local {
        attrs: Vec::new(),
        let_token: Default::default(),
        pat,
        init: Some(LocalInit {
            eq_token: Default::default(),
            expr: Box::new(e),
            diverge: None,
        }),
        semi_token: Default::default(),
    })
}

/// `let name = e;`.
pub(crate) fn let_var(name: &str, e: Expr) -> Stmt {
    let_(pat_ident(id(name), false), e)
}

/// `{ stmts }`.
pub(crate) fn block(stmts: Vec<Stmt>) -> Block {
    Block {
        brace_token: brace(),
        stmts,
    }
}

// Types.

/// A type named by a path.
pub(crate) fn ty_path(path: Path) -> Type {
    Type::Path(TypePath { qself: None, path })
}

/// A type named by one identifier (`Tensor`, `i64`, `Self`).
pub(crate) fn ty(name: &str) -> Type {
    ty_path(path(&[name]))
}

/// `Name<args..>`.
pub(crate) fn ty_generic(name: &str, args: impl IntoIterator<Item = Type>) -> Type {
    ty_path(with_generics(path(&[name]), args, false))
}

/// `&t`.
pub(crate) fn ty_ref(t: Type) -> Type {
    Type::Reference(syn::TypeReference {
        and_token: Default::default(),
        lifetime: None,
        mutability: None,
        elem: Box::new(t),
    })
}

/// `[t]`.
pub(crate) fn ty_slice(t: Type) -> Type {
    Type::Slice(syn::TypeSlice {
        bracket_token: bracket(),
        elem: Box::new(t),
    })
}

/// `(a, b)`; `()` when empty.
pub(crate) fn ty_tuple(elems: impl IntoIterator<Item = Type>) -> Type {
    Type::Tuple(syn::TypeTuple {
        paren_token: paren(),
        elems: elems.into_iter().collect(),
    })
}

/// `impl Trait<args..>`.
pub(crate) fn ty_impl(trait_: &str, args: impl IntoIterator<Item = Type>) -> Type {
    Type::ImplTrait(syn::TypeImplTrait {
        impl_token: Default::default(),
        bounds: std::iter::once(syn::TypeParamBound::Trait(syn::TraitBound {
            paren_token: None,
            modifier: syn::TraitBoundModifier::None,
            lifetimes: None,
            path: with_generics(path(&[trait_]), args, false),
        }))
        .collect(),
    })
}

/// `fn(args..) -> ret`.
pub(crate) fn ty_fn(args: impl IntoIterator<Item = Type>, ret: Type) -> Type {
    Type::BareFn(syn::TypeBareFn {
        lifetimes: None,
        unsafety: None,
        abi: None,
        fn_token: Default::default(),
        paren_token: paren(),
        inputs: args
            .into_iter()
            .map(|ty| syn::BareFnArg {
                attrs: Vec::new(),
                name: None,
                ty,
            })
            .collect(),
        variadic: None,
        output: ReturnType::Type(Default::default(), Box::new(ret)),
    })
}

// Functions and items.

/// `name: ty`.
pub(crate) fn param(name: Ident, ty: Type) -> FnArg {
    FnArg::Typed(PatType {
        attrs: Vec::new(),
        pat: Box::new(pat_ident(name, false)),
        colon_token: Default::default(),
        ty: Box::new(ty),
    })
}

/// `self` (`mut self`), or `&self` with `by_ref`.
pub(crate) fn receiver(by_ref: bool, mutable: bool) -> FnArg {
    let self_ty = ty("Self");
    FnArg::Receiver(Receiver {
        attrs: Vec::new(),
        reference: by_ref.then(|| (Default::default(), None)),
        mutability: mutable.then(Default::default),
        self_token: Default::default(),
        colon_token: None,
        ty: Box::new(if by_ref { ty_ref(self_ty) } else { self_ty }),
    })
}

/// `fn name(inputs..) -> output`.
pub(crate) fn signature(
    name: Ident,
    inputs: impl IntoIterator<Item = FnArg>,
    output: Type,
) -> Signature {
    Signature {
        constness: None,
        asyncness: None,
        unsafety: None,
        abi: None,
        fn_token: Default::default(),
        ident: name,
        generics: Default::default(),
        paren_token: paren(),
        inputs: inputs.into_iter().collect(),
        variadic: None,
        output: ReturnType::Type(Default::default(), Box::new(output)),
    }
}

/// `pub`.
pub(crate) fn public() -> Visibility {
    Visibility::Public(Default::default())
}

/// `attrs pub fn sig { stmts }`.
pub(crate) fn pub_fn(attrs: Vec<Attribute>, sig: Signature, stmts: Vec<Stmt>) -> Item {
    Item::Fn(ItemFn {
        attrs,
        vis: public(),
        sig,
        block: Box::new(block(stmts)),
    })
}

/// A function inside an `impl` block.
pub(crate) fn impl_fn(
    attrs: Vec<Attribute>,
    vis: Visibility,
    sig: Signature,
    stmts: Vec<Stmt>,
) -> ImplItem {
    ImplItem::Fn(ImplItemFn {
        attrs,
        vis,
        defaultness: None,
        sig,
        block: block(stmts),
    })
}

/// `attrs impl [trait_ for] self_ty { items }`.
pub(crate) fn impl_block(
    attrs: Vec<Attribute>,
    trait_: Option<&str>,
    self_ty: Type,
    items: Vec<ImplItem>,
) -> Item {
    Item::Impl(ItemImpl {
        attrs,
        defaultness: None,
        unsafety: None,
        impl_token: Default::default(),
        generics: Default::default(),
        trait_: trait_.map(|t| (None, path(&[t]), Default::default())),
        self_ty: Box::new(self_ty),
        brace_token: brace(),
        items,
    })
}

/// `attrs vis static name: ty = expr;`.
pub(crate) fn static_item(
    attrs: Vec<Attribute>,
    vis: Visibility,
    name: &str,
    ty: Type,
    expr: Expr,
) -> Item {
    Item::Static(syn::ItemStatic {
        attrs,
        vis,
        static_token: Default::default(),
        mutability: syn::StaticMutability::None,
        ident: id(name),
        colon_token: Default::default(),
        ty: Box::new(ty),
        eq_token: Default::default(),
        expr: Box::new(expr),
        semi_token: Default::default(),
    })
}

/// `use a::b::c;` (`*` as the last segment is a glob).
pub(crate) fn use_item(segs: &[&str]) -> Item {
    let mut tree = match segs.last() {
        Some(&"*") => syn::UseTree::Glob(syn::UseGlob {
            star_token: Default::default(),
        }),
        Some(last) => syn::UseTree::Name(syn::UseName { ident: id(last) }),
        None => syn::UseTree::Glob(syn::UseGlob {
            star_token: Default::default(),
        }),
    };
    for s in segs.iter().rev().skip(1) {
        tree = syn::UseTree::Path(syn::UsePath {
            ident: id(s),
            colon2_token: Default::default(),
            tree: Box::new(tree),
        });
    }
    Item::Use(syn::ItemUse {
        attrs: Vec::new(),
        vis: Visibility::Inherited,
        use_token: Default::default(),
        leading_colon: None,
        tree,
        semi_token: Default::default(),
    })
}

// Attributes.

/// `#[name]`.
pub(crate) fn attr_word(name: &str) -> Attribute {
    outer(Meta::Path(path(&[name])))
}

/// `#[name(tokens)]`.
pub(crate) fn attr_list(name: &str, tokens: TokenStream) -> Attribute {
    outer(Meta::List(MetaList {
        path: path(&[name]),
        delimiter: MacroDelimiter::Paren(paren()),
        tokens,
    }))
}

/// `#[doc = "text"]`.
pub(crate) fn attr_doc(text: &str) -> Attribute {
    outer(Meta::NameValue(syn::MetaNameValue {
        path: path(&["doc"]),
        eq_token: Default::default(),
        value: str_lit(text),
    }))
}

fn outer(meta: Meta) -> Attribute {
    Attribute {
        pound_token: Default::default(),
        style: AttrStyle::Outer,
        bracket_token: bracket(),
        meta,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A function built with the constructors prints like the same code parsed.
    #[test]
    fn prints_like_parsed_code() {
        let body = vec![
            let_(
                pat_ident(id("x"), true),
                try_(call_path(&["a", "b"], [p(&["y"])])),
            ),
            semi(assign(
                field(p(&["self"]), Member::Named(id("f"))),
                some(method(p(&["v"]), "next", Some(ty("i64")), [])),
            )),
            let_(
                pat_tuple([pat_ident(id("r0"), false), pat_wild()]),
                tuple([reference(str_lit("s")), bool_lit(true)]),
            ),
            tail(match_(
                p(&["k"]),
                [(
                    pat_tuple_struct(&["K", "A"], id("f")),
                    closure(
                        true,
                        [pat_ident(id("ks"), false)],
                        block_expr(vec![tail(ok(tuple([])))]),
                    ),
                )],
            )),
        ];
        let sig = signature(
            id("where"),
            [
                receiver(true, false),
                param(
                    id("a"),
                    ty_ref(ty_slice(ty_generic("Option", [ty("Tensor")]))),
                ),
                param(id("b"), ty_impl("Into", [ty("Scalar")])),
            ],
            ty_generic("Result", [ty_tuple([ty("i64"), ty("bool")])]),
        );
        let built = pub_fn(vec![attr_word("inline")], sig, body);
        let source = "#[inline] pub fn r#where(&self, a: &[Option<Tensor>], b: impl Into<Scalar>) \
                      -> Result<(i64, bool)> { let mut x = a::b(y)?; self.f = Some(v.next::<i64>()); \
                      let (r0, _) = (&\"s\", true); match k { K::A(f) => move |ks| { Ok(()) }, } }";
        let file = |items| syn::File {
            shebang: None,
            attrs: Vec::new(),
            items,
        };
        let parsed: syn::File = match syn::parse_str(source) {
            Ok(f) => f,
            Err(e) => panic!("test source does not parse: {e}"),
        };
        assert_eq!(
            prettyplease::unparse(&file(vec![built])),
            prettyplease::unparse(&parsed)
        );
    }
}
