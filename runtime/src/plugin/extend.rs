//! ABI 1.4's extensions of a plugin beyond kernels for host ops: backward kernels
//! for ops it differentiates itself (registered at its autograd key, ahead of the
//! kernels generated from derivatives) and operators of its own namespace.
//!
//! Owns: validating those registrations and making them runtime kernels and op
//! definitions. Must not: run anything before the plugin's entry succeeded (the
//! registration applies them).

use super::host::{guarded, invoke, reg, RawKernel};
use super::value::Marshal;
use crate::autograd::{self, SavedTensor};
use crate::dispatch::{
    ArgDef, DispatchKey, DispatchKeySet, Dispatcher, KernelFunction, Library, OpDef, OperatorHandle,
};
use crate::error::{OpalError, Result};
use crate::ivalue::{IValue, Stack};
use crate::tensor::Tensor;
use opal_plugin_abi::{OpalKernelFn, OpalStatus, OpalStr};
use std::ffi::c_void;
use std::sync::Arc;

/// A backward kernel a plugin registered for a host op.
pub struct AutogradKernel {
    op: String,
    node: &'static str,
    backward: RawKernel,
}

/// An operator a plugin declared, with its kernel.
pub struct CustomOp {
    def: &'static OpDef,
    kernel: RawKernel,
}

/// A borrowed string argument of a registrar function, as UTF-8.
///
/// # Safety
/// `s` is a borrowed string valid for the call (ABI).
unsafe fn text<'a>(s: OpalStr, what: &str) -> Result<&'a str> {
    // SAFETY: forwarded contract.
    unsafe { s.as_str() }.ok_or_else(|| OpalError::msg(format!("{what} is not UTF-8")))
}

pub unsafe extern "C" fn register_autograd_kernel(
    ctx: *mut c_void,
    name: OpalStr,
    node: OpalStr,
    backward: OpalKernelFn,
    user: *mut c_void,
) -> OpalStatus {
    guarded("register_autograd_kernel", || {
        // SAFETY: called during the entry with the registrar's own ctx (ABI).
        let r = unsafe { reg(ctx) }?;
        // SAFETY: borrowed strings valid for the call (ABI).
        let (name, node) = unsafe {
            (
                text(name, "register_autograd_kernel: the op name")?,
                text(node, "register_autograd_kernel: the node name")?,
            )
        };
        let name = super::host::qualified(name);
        let plan = r.plans.get(&name).ok_or_else(|| {
            OpalError::msg(format!(
                "plugin '{}' registers a backward kernel for '{name}', which its manifest \
                 does not list (or the host disabled)",
                r.plugin
            ))
        })?;
        if !plan.is_identity() {
            return Err(OpalError::msg(format!(
                "plugin '{}' registers a backward kernel for '{name}', whose schema differs \
                 from the host's ('{}'): a backward kernel takes the host's arguments",
                r.plugin, plan.plugin_schema
            )));
        }
        if node.is_empty() || !node.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(OpalError::msg(format!(
                "plugin '{}': backward node name '{node}' for '{name}' is not an identifier",
                r.plugin
            )));
        }
        r.autograd.push(AutogradKernel {
            op: name,
            node: Box::leak(node.to_string().into_boxed_str()),
            backward: RawKernel { f: backward, user },
        });
        Ok(())
    })
}

pub unsafe extern "C" fn register_custom_op(
    ctx: *mut c_void,
    schema: OpalStr,
    kernel: OpalKernelFn,
    user: *mut c_void,
) -> OpalStatus {
    guarded("register_custom_op", || {
        // SAFETY: called during the entry with the registrar's own ctx (ABI).
        let r = unsafe { reg(ctx) }?;
        // SAFETY: a borrowed string valid for the call (ABI).
        let schema = unsafe { text(schema, "register_custom_op: the schema") }?;
        let def = op_def(&r.plugin, &r.device, schema)?;
        if Dispatcher::global()
            .find(def.name)
            .is_some_and(|h| h.def().is_some())
            || r.custom.iter().any(|c| c.def.name == def.name)
        {
            return Err(OpalError::msg(format!(
                "plugin '{}' declares '{}', which is already defined",
                r.plugin, def.name
            )));
        }
        r.custom.push(CustomOp {
            def: Box::leak(Box::new(def)),
            kernel: RawKernel { f: kernel, user },
        });
        Ok(())
    })
}

/// The type id of every plugin operator's "typed signature": they have none (the
/// dispatcher calls their kernels boxed), and no typed stub names this type.
struct BoxedOnly;

/// The definition of `schema` (`ns::name.overload(args) -> rets`), whose
/// namespace must be `device`.
fn op_def(plugin: &str, device: &str, schema: &str) -> Result<OpDef> {
    let bad = |why: String| {
        OpalError::msg(format!(
            "plugin '{plugin}''s operator schema '{schema}': {why}"
        ))
    };
    let open = schema.find('(').ok_or_else(|| bad("no '('".into()))?;
    let arrow = schema.rfind("->").ok_or_else(|| bad("no '->'".into()))?;
    let close = schema[..arrow]
        .rfind(')')
        .filter(|&c| c > open)
        .ok_or_else(|| bad("no ')' before '->'".into()))?;
    let qualified = schema[..open].trim();
    let (ns, name) = qualified
        .split_once("::")
        .ok_or_else(|| bad(format!("the name must be qualified ('{device}::...')")))?;
    if ns != device {
        return Err(bad(format!(
            "the namespace must be the plugin's device name '{device}', not '{ns}'"
        )));
    }
    let ident = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    };
    if !ident(name) {
        return Err(bad(format!("'{name}' is not an operator name")));
    }
    let mut args = Vec::new();
    let mut kwarg_only = false;
    for a in super::adapt::split_top(&schema[open + 1..close]) {
        let a = a.trim();
        if a == "*" {
            kwarg_only = true;
            continue;
        }
        if a.contains('=') {
            return Err(bad(format!(
                "argument '{a}' has a default value (ABI 1.4 operators take none)"
            )));
        }
        let (ty, arg) = a
            .rsplit_once(char::is_whitespace)
            .ok_or_else(|| bad(format!("argument '{a}' has no name")))?;
        let leak = |s: &str| -> &'static str { Box::leak(s.trim().to_string().into_boxed_str()) };
        args.push(ArgDef {
            name: leak(arg),
            ty: leak(ty),
            default: None,
            kwarg_only,
            out: false,
            mutable: ty.contains('!'),
        });
    }
    let rets_text = schema[arrow + 2..].trim();
    let rets_text = rets_text
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or(rets_text);
    let returns: Vec<&'static str> = super::adapt::split_top(rets_text)
        .into_iter()
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(|r| -> &'static str { Box::leak(r.to_string().into_boxed_str()) })
        .collect();
    Ok(OpDef {
        name: Box::leak(qualified.to_string().into_boxed_str()),
        schema: Box::leak(format!("{name}{}", &schema[open..]).into_boxed_str()),
        args: Box::leak(args.into_boxed_slice()),
        returns: Box::leak(returns.into_boxed_slice()),
        signature: std::any::TypeId::of::<BoxedOnly>,
    })
}

/// Registers the plugin's backward kernels at `key`'s autograd key and its
/// operators (defined, with their kernels at `key`).
pub fn apply(
    plugin: &Arc<str>,
    key: DispatchKey,
    autograd: Vec<AutogradKernel>,
    custom: Vec<CustomOp>,
) -> Result<()> {
    let ag_key = key
        .autograd_key()
        .ok_or_else(|| OpalError::msg(format!("{key} has no autograd key")))?;
    let mut lib = Library::new("aten", ag_key);
    for a in autograd {
        let (plugin, node, bw) = (plugin.clone(), a.node, a.backward);
        lib.impl_(
            &a.op,
            KernelFunction::from_boxed_fn(move |op, ks, stack| {
                differentiate(&plugin, node, bw, op, ks, stack)
            }),
        )?;
    }
    lib.leak();
    for c in custom {
        Dispatcher::global().def(c.def)?;
        let (plugin, k) = (plugin.clone(), c.kernel);
        let mut lib = Library::new(c.def.namespace(), key);
        lib.impl_(
            c.def.name,
            KernelFunction::from_boxed_fn(move |op, _ks, stack| call_custom(&plugin, k, op, stack)),
        )?;
        lib.leak();
    }
    Ok(())
}

/// `op`'s definition and where its arguments start on `stack`.
fn arguments(op: &OperatorHandle, stack: &Stack) -> Result<(&'static OpDef, usize)> {
    let def = op
        .def()
        .ok_or_else(|| OpalError::msg(format!("{}: the op has no schema", op.name())))?;
    let base = stack
        .len()
        .checked_sub(def.num_args())
        .ok_or_else(|| OpalError::msg(format!("{}: too few arguments on the stack", op.name())))?;
    Ok((def, base))
}

/// The tensors among `vals`.
fn tensors(vals: &[IValue]) -> Vec<Tensor> {
    vals.iter()
        .filter_map(|v| match v {
            IValue::Tensor(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

/// The plugin's autograd kernel of one op: the op below the autograd keys, then
/// (when an input requires grad) node `node` whose backward is the plugin's.
fn differentiate(
    plugin: &Arc<str>,
    node: &'static str,
    bw: RawKernel,
    op: &OperatorHandle,
    ks: DispatchKeySet,
    stack: &mut Stack,
) -> Result<()> {
    let (_, base) = arguments(op, stack)?;
    let inputs = tensors(&stack[base..]);
    op.redispatch_boxed(ks.below(DispatchKey::AutogradOther), stack)?;
    let refs: Vec<&Tensor> = inputs.iter().collect();
    if !autograd::helpers::should_record(&refs) {
        return Ok(());
    }
    let outputs = tensors(&stack[base..]);
    let saved_in: Vec<SavedTensor> = inputs
        .iter()
        .map(|t| SavedTensor::input(t, node, "input"))
        .collect();
    let saved_out = outputs
        .iter()
        .map(|t| SavedTensor::output(t, node, "result"))
        .collect::<Result<Vec<_>>>()?;
    let n_in = inputs.len();
    let plugin = plugin.clone();
    let out_refs: Vec<&Tensor> = outputs.iter().collect();
    autograd::record(
        node,
        &refs,
        &out_refs,
        Box::new(move |grads| {
            let mut m = Marshal::take();
            for g in grads {
                match g {
                    Some(t) if t.is_defined() => m.push(&IValue::Tensor(t.clone()))?,
                    _ => m.push(&IValue::None)?,
                }
            }
            for s in saved_in.iter().chain(&saved_out) {
                m.push(&IValue::Tensor(s.get()?))?;
            }
            let rets = invoke(&plugin, bw, node, m, n_in)?.ok_or_else(|| {
                OpalError::msg(format!(
                    "{node}: plugin '{plugin}''s backward kernel declined (a backward has no fallback)"
                ))
            })?;
            rets.into_iter()
                .map(|v| match v {
                    IValue::Tensor(t) => Ok(Some(t)),
                    IValue::None => Ok(None),
                    other => Err(OpalError::msg(format!(
                        "{node}: plugin '{plugin}''s backward kernel returned a {} where a \
                         gradient (a tensor or None) belongs",
                        other.type_name()
                    ))),
                })
                .collect()
        }),
    )?;
    Ok(())
}

/// Calls the plugin's kernel of its own operator on the stack's arguments.
fn call_custom(plugin: &str, k: RawKernel, op: &OperatorHandle, stack: &mut Stack) -> Result<()> {
    let (def, base) = arguments(op, stack)?;
    let mut m = Marshal::take();
    for v in &stack[base..] {
        m.push(v)?;
    }
    let rets = invoke(plugin, k, op.name(), m, def.returns.len())?.ok_or_else(|| {
        OpalError::msg(format!(
            "{}: plugin '{plugin}''s kernel declined, and its own operator has no fallback",
            op.name()
        ))
    })?;
    stack.truncate(base);
    stack.extend(rets);
    Ok(())
}
