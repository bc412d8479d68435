//! What a node's target names: an operator of the dispatcher, a Python builtin
//! on ints, or a size query, before the plan resolves it.
//!
//! Owns: the mapping from serialized target strings to those kinds. Must not:
//! look at a node's arguments (see `args`).

use super::SizeOf;
use crate::error::{bail, Result};
use crate::schema::Node;
use opal::dispatch::{Dispatcher, OperatorHandle};

/// What a target is, before resolution against a device.
pub(crate) enum Target {
    /// An operator of the dispatcher (`aten::add.Tensor`, or a plugin's own).
    Aten(String),
    Builtin(&'static str),
    Other,
}

const BUILTINS: [&str; 7] = ["getitem", "add", "sub", "mul", "floordiv", "mod", "neg"];

/// Classifies a serialized target: `torch.ops.aten.add.Tensor` is `aten::add.Tensor`
/// (`.default` is no overload), and an operator of another namespace (a plugin's
/// own, `torch.ops.emu.fused_add_relu.default`) is `emu::fused_add_relu`, looked
/// up in the dispatcher alike; `_operator.getitem` and `<built-in function
/// getitem>` are builtins.
pub(crate) fn classify(target: &str) -> Target {
    let ident = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if let Some((ns, rest)) = target
        .strip_prefix("torch.ops.")
        .and_then(|t| t.split_once('.'))
        .filter(|(ns, rest)| ident(ns) && !rest.is_empty())
    {
        return Target::Aten(match rest.rsplit_once('.') {
            Some((name, "default")) => format!("{ns}::{name}"),
            Some((name, ov)) => format!("{ns}::{name}.{ov}"),
            None => format!("{ns}::{rest}"),
        });
    }
    let b = target
        .strip_prefix("_operator.")
        .or_else(|| target.strip_prefix("operator."))
        .or_else(|| {
            target
                .strip_prefix("<built-in function ")
                .and_then(|t| t.strip_suffix('>'))
        });
    match b.and_then(|b| BUILTINS.iter().find(|x| **x == b)) {
        Some(b) => Target::Builtin(b),
        None => Target::Other,
    }
}

/// The `sym_*` queries handled without the dispatcher (they return ints).
pub(super) fn size_query(op: &str) -> Option<SizeOf> {
    Some(match op {
        "aten::sym_size.int" => SizeOf::Size,
        "aten::sym_stride.int" => SizeOf::Stride,
        "aten::sym_numel" => SizeOf::Numel,
        "aten::sym_storage_offset" => SizeOf::Offset,
        _ => return None,
    })
}

/// The operator a node names, or why it has none.
pub(crate) fn resolve(node: &Node) -> Result<Option<OperatorHandle>> {
    match classify(&node.target) {
        Target::Aten(name) if size_query(&name).is_some() => Ok(None),
        Target::Aten(name) => match Dispatcher::global().find(&name) {
            Some(h) if h.def().is_some() => Ok(Some(h)),
            _ => bail!("operator '{name}' is not defined in Opal"),
        },
        Target::Builtin(_) => Ok(None),
        Target::Other => bail!(
            "target '{}' is not an ATen operator or a supported builtin",
            node.target
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_map_to_dispatcher_names() {
        let name = |t| match classify(t) {
            Target::Aten(n) => n,
            Target::Builtin(b) => format!("builtin {b}"),
            Target::Other => "other".into(),
        };
        assert_eq!(name("torch.ops.aten.addmm.default"), "aten::addmm");
        assert_eq!(name("torch.ops.aten.add.Tensor"), "aten::add.Tensor");
        assert_eq!(name("_operator.getitem"), "builtin getitem");
        assert_eq!(name("<built-in function add>"), "builtin add");
        assert_eq!(name("torch.ops.mylib.op.default"), "mylib::op");
        assert_eq!(
            name("torch.ops.emu.fused_add_relu.out"),
            "emu::fused_add_relu.out"
        );
        assert_eq!(name("math.sqrt"), "other");
    }
}
