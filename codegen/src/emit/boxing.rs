//! Boxed <-> typed adapters per op: `boxed(f)` wraps a typed kernel (`Sig`) so it
//! serves boxed calls (pops the arguments off the stack with `FromIValue`, calls `f`,
//! pushes the returns), and `kernel(f)` makes the `KernelFunction` that carries both.
//! (The typed -> boxed direction of calls lives in `stubs::entry`.)
//!
//! Owns: `boxed` and `kernel`. Must not: register anything.

use syn::{Expr, Item};

use super::ast::{self, call, call_path, method, p, reference, try_};
use super::plan::OpPlan;
use super::signature::inline_attrs;
use super::{checks, member_doc, Ctx};
use crate::ident::{Passing, Types};
use crate::model::{BaseTy, Type};

/// `f: Sig`.
fn sig_param() -> syn::FnArg {
    ast::param(ast::id("f"), ast::ty("Sig"))
}

/// `boxed` and `kernel` in the op module.
pub(crate) fn adapters(cx: &Ctx, op: &OpPlan, out: &mut Vec<Item>) {
    // Each argument is popped in order right inside the call expression; temporaries
    // live until the end of the statement, so borrowed forms can point at them.
    let next = |ty: Option<&Type>| {
        let ty = ty.map(|t| cx.types.owned_type(t));
        try_(method(p(&["a"]), "next", ty, []))
    };
    let pass = op.args.iter().map(|a| match Types::passing(a.ty()) {
        Passing::Value => next(None),
        Passing::Ref => match a.ty() {
            // `&Tensor` etc. infer `T`; `&str`/`&[T]` need the owned type named.
            Type::Base(b) if !matches!(b, BaseTy::Str | BaseTy::DimVector) => reference(next(None)),
            t => reference(next(Some(t))),
        },
        Passing::OptRef => method(next(Some(a.ty())), "as_ref", None, []),
        Passing::OptDeref => method(next(Some(a.ty())), "as_deref", None, []),
    });
    let nret = op.f.func.returns.len();
    let f_call = try_(call(p(&["f"]), std::iter::once(p(&["ks"])).chain(pass)));
    let push = |e: Expr| ast::semi(method(p(&["stack"]), "push", None, [e]));
    let into_ivalue = |e: Expr| method(e, "into_ivalue", None, []);
    let mut body = match nret {
        0 => vec![ast::semi(f_call)],
        1 => vec![push(into_ivalue(f_call))],
        _ => {
            let rs: Vec<String> = (0..nret).map(|i| format!("r{i}")).collect();
            let pat = ast::pat_tuple(rs.iter().map(|r| ast::pat_ident(ast::id(r), false)));
            let mut stmts = vec![ast::let_(pat, f_call)];
            stmts.extend(rs.iter().map(|r| push(into_ivalue(p(&[r.as_str()])))));
            stmts
        }
    };
    body.push(ast::tail(ast::ok(ast::tuple([]))));
    let binding = |name: &str, used: bool| {
        if used {
            ast::pat_ident(ast::id(name), false)
        } else {
            ast::pat_wild()
        }
    };
    let closure = ast::closure(
        true,
        [
            binding("ks", true),
            binding("a", !op.args.is_empty()),
            binding("stack", nret != 0),
        ],
        ast::block_expr(body),
    );
    let bdoc = member_doc("Wraps a typed kernel so it serves boxed calls: pops the arguments, calls `f`, pushes the returns.",
    );
    let arc = ast::with_generics(
        ast::global_path(&["std", "sync", "Arc"]),
        [ast::ty("BoxedKernelFn")],
        false,
    );
    let sig = ast::signature(ast::id("boxed"), [sig_param()], ast::ty_path(arc));
    let boxed = call_path(
        &["support", "boxed"],
        [
            reference(p(&["DEF"])),
            checks::checks_expr(op, checks::Positions::Schema),
            closure,
        ],
    );
    out.push(ast::pub_fn(inline_attrs(bdoc), sig, vec![ast::tail(boxed)]));

    let kdoc = member_doc(
        "The `KernelFunction` of a typed kernel: its typed fast path plus its boxed adapter.",
    );
    let sig = ast::signature(ast::id("kernel"), [sig_param()], ast::ty("KernelFunction"));
    let typed = call_path(
        &["KernelFunction", "typed"],
        [p(&["f"]), call_path(&["self", "boxed"], [p(&["f"])])],
    );
    out.push(ast::pub_fn(inline_attrs(kdoc), sig, vec![ast::tail(typed)]));
}
