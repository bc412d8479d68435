//! Structured-delegate derivation: for an op with `structured_delegate: <op>.out`, a
//! kernel `structured` (of the op's own `Sig`) that runs the functional op on meta
//! tensors of the same sizes/strides/dtype (the Meta backend's kernel is the meta
//! function), allocates the outputs on the real device (in-place: checks the result
//! fits `self`) and calls the out= op by `redispatch` with the same key set. A backend
//! that registers `add.out` registers `add_tensor::kernel(add_tensor::structured)` and
//! `add_tensor_::kernel(add_tensor_::structured)` for its key and gets `add`/`add_`.
//!
//! Owns: `structured` in op modules. Must not: register kernels.

use syn::{Expr, Item, Member, Stmt};

use super::ast::{self, call, call_path, p, reference, try_, var};
use super::plan::OpPlan;
use super::signature::{arg_exprs, kernel_fn};
use super::{member_doc, Ctx};
use crate::model::{BaseTy, Type};

/// `support::name(args..)`.
fn support(name: &str, args: impl IntoIterator<Item = Expr>) -> Expr {
    call_path(&["support", name], args)
}

/// `module::op::entry(args..)` for a sibling op module.
fn sibling(op: &str, entry: &str, args: impl IntoIterator<Item = Expr>) -> Expr {
    let path = ast::path_of([ast::id("super"), ast::id(op), ast::id(entry)]);
    call(ast::path_expr(path), args)
}

/// `structured` for an op with a usable structured delegate (nothing otherwise).
pub(crate) fn structured(cx: &Ctx, op: &OpPlan) -> Option<Item> {
    let s = op.structured.as_ref()?;
    let mut prep: Vec<Stmt> = Vec::new();
    let mut meta_args = Vec::new();
    let mut device = None;
    let mut tensors: Vec<Expr> = Vec::new();
    let tensor = Type::Base(BaseTy::Tensor);
    for (i, a) in op.args.iter().enumerate() {
        let id = || var(a.ident());
        let m = format!("__m{i}");
        let (to_meta, meta_arg) = match a.ty() {
            t if *t == tensor => {
                tensors.push(id());
                ("to_meta", reference(p(&[m.as_str()])))
            }
            Type::Optional(t) if **t == tensor => (
                "opt_to_meta",
                ast::method(p(&[m.as_str()]), "as_ref", None, []),
            ),
            Type::List { elem, .. } if **elem == tensor => {
                device.get_or_insert_with(|| try_(support("device_of_list", [id()])));
                ("list_to_meta", reference(p(&[m.as_str()])))
            }
            Type::List { elem, .. } if elem.is_tensor_like() => {
                ("opt_list_to_meta", reference(p(&[m.as_str()])))
            }
            _ => {
                meta_args.push(id());
                continue;
            }
        };
        prep.push(ast::let_var(&m, try_(support(to_meta, [id()]))));
        meta_args.push(meta_arg);
    }
    if !tensors.is_empty() {
        // The outputs follow the tensor arguments, a zero-dim CPU scalar among them
        // excepted (`1 - x` on a device), as the device check lets such scalars in.
        device = Some(support("device_of", [syn::parse_quote!(&[#(#tensors),*])]));
    }
    let device = device?;
    let ns = || arg_exprs(op.args.iter());
    let meta = ast::let_var("__meta", try_(sibling(&s.meta_op, "call", meta_args)));
    let mut body = prep;
    if s.inplace {
        let self_id = || var(op.args[0].ident());
        let check = support(
            "check_inplace",
            [
                ast::field(p(&["self", "DEF"]), Member::Named(ast::id("name"))),
                self_id(),
                reference(p(&["__meta"])),
            ],
        );
        let ks_args = std::iter::once(p(&["ks"])).chain(ns()).chain([self_id()]);
        body.extend([
            meta,
            ast::semi(try_(check)),
            ast::semi(try_(sibling(&s.out_op, "redispatch", ks_args))),
            ast::tail(ast::ok(ast::method(self_id(), "clone", None, []))),
        ]);
    } else {
        let nret = op.f.func.returns.len();
        let outs: Vec<String> = (0..nret).map(|i| format!("__o{i}")).collect();
        body.push(ast::let_var("__device", device));
        body.push(meta);
        for (i, o) in outs.iter().enumerate() {
            let result = if nret == 1 {
                p(&["__meta"])
            } else {
                let index = syn::Index::from(i);
                ast::field(p(&["__meta"]), Member::Unnamed(index))
            };
            let alloc = support("empty_from_meta", [reference(result), p(&["__device"])]);
            body.push(ast::let_var(o, try_(alloc)));
        }
        let out_refs = outs.iter().map(|o| reference(p(&[o.as_str()])));
        let ks_args = std::iter::once(p(&["ks"])).chain(ns()).chain(out_refs);
        body.push(ast::semi(try_(sibling(&s.out_op, "redispatch", ks_args))));
        let result = if nret == 1 {
            p(&[outs[0].as_str()])
        } else {
            ast::tuple(outs.iter().map(|o| p(&[o.as_str()])))
        };
        body.push(ast::tail(ast::ok(result)));
    }
    let doc = member_doc(&format!(
            "Kernel derived from the out= operator `{}` and the Meta kernel of `{}`: register `kernel(structured)` for any backend key that has the out= kernel.",
            s.out_op, s.meta_op
        ),
    );
    Some(kernel_fn(cx, op, "structured", doc, body))
}
