//! BackendSelect kernels for factory ops (no tensor arguments, a `device` argument):
//! the backend comes from `device` (`None` means cpu); the kernel redispatches to
//! that backend's key. `registry::def_all` registers them.
//!
//! Owns: `backend_select` in factory op modules. Must not: register kernels.

use syn::Item;

use super::ast::{self, call_path, p, var};
use super::plan::OpPlan;
use super::signature::{arg_exprs, kernel_fn};
use super::{member_doc, Ctx};
use crate::model::Type;

/// `backend_select` for a factory op (nothing for other ops).
pub(crate) fn backend_select(cx: &Ctx, op: &OpPlan) -> Option<Item> {
    let dev = &op.args[op.factory_device?];
    let device = match dev.ty() {
        Type::Optional(_) => var(dev.ident()),
        _ => ast::some(var(dev.ident())),
    };
    let doc = member_doc(&format!(
        "BackendSelect kernel: redispatches to the backend of `{}` (cpu when absent).",
        dev.arg.name
    ));
    let keys = call_path(&["support", "backend_select_keys"], [p(&["ks"]), device]);
    let args = std::iter::once(p(&["__ks"])).chain(arg_exprs(op.args.iter()));
    let body = vec![
        ast::let_var("__ks", keys),
        ast::tail(call_path(&["self", "redispatch"], args)),
    ];
    Some(kernel_fn(cx, op, "backend_select", doc, body))
}
