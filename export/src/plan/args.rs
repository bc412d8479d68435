//! One node's argument stack: each argument matched to its schema entry by
//! name (schema defaults for omitted ones), constants converted once for their
//! schema type, the rest recorded as fills read from the slots when the step
//! runs; and the slot numbering of the values.
//!
//! Owns: [`Slots`] and the conversion of node arguments and returns. Must not:
//! choose which nodes fuse (see the parent module).

use super::{Bind, Fill, IntOp, Kind, SizeOf, SymVal};
use crate::error::{bail, Error, Result};
use crate::schema::{Arg, Node, Out, SymRef};
use opal::dispatch::{ArgDef, OperatorHandle};
use opal::{Device, IValue, Scalar, Tensor};
use std::collections::HashMap;

pub(crate) struct Slots {
    pub map: HashMap<String, usize>,
    pub n: usize,
}

impl Slots {
    pub fn define(&mut self, name: &str) -> Result<usize> {
        if self.map.contains_key(name) {
            bail!("value '{name}' is defined twice");
        }
        self.map.insert(name.to_string(), self.n);
        self.n += 1;
        Ok(self.n - 1)
    }

    pub fn get(&self, name: &str) -> Result<usize> {
        self.map.get(name).copied().ok_or_else(|| {
            Error::new(format!(
                "names '{name}', which no graph input or earlier node defines"
            ))
        })
    }

    fn sym(&self, r: &SymRef) -> Result<SymVal> {
        Ok(match r {
            SymRef::Int(i) => SymVal::Const(*i),
            SymRef::Name(n) => SymVal::Slot(self.get(n)?),
        })
    }
}

/// The schema type without alias annotations, and whether it is optional:
/// `Tensor(a!)` is (`Tensor`, false), `int[1]?` is (`int[1]`, true).
fn base_type(ty: &str) -> (String, bool) {
    let mut out = String::with_capacity(ty.len());
    let mut depth = 0;
    for c in ty.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    match out.strip_suffix('?') {
        Some(b) => (b.to_string(), true),
        None => (out, false),
    }
}

fn scalar_or(ty: &str, s: Scalar, plain: IValue) -> IValue {
    if ty == "Scalar" {
        IValue::Scalar(s)
    } else {
        plain
    }
}

/// The constant value or the fill of one argument, converted for its schema type.
fn convert(
    arg: &Arg,
    def: &ArgDef,
    slots: &Slots,
    device: Device,
) -> Result<(IValue, Option<Fill>)> {
    let (ty, _) = base_type(def.ty);
    let is_list = ty.ends_with(']');
    let c = |v| Ok((v, None));
    // A number where a tensor is expected (`mul.Tensor(x, 0.5)`): PyTorch passes it
    // as a wrapped number, a 0-dim CPU tensor that promotes like a scalar.
    let number = match arg {
        Arg::Int(i) => Some(Scalar::Int(*i)),
        Arg::Float(f) => Some(Scalar::Float(*f)),
        Arg::Bool(b) => Some(Scalar::Bool(*b)),
        _ => None,
    };
    if let (Some(s), "Tensor") = (number, ty.as_str()) {
        return c(IValue::Tensor(Tensor::wrapped_number(&s)?));
    }
    match arg {
        Arg::None => c(IValue::None),
        Arg::Tensor(n) => Ok((IValue::None, Some(Fill::Value(slots.get(n)?)))),
        Arg::OptTensor(None) => c(IValue::None),
        Arg::OptTensor(Some(n)) => Ok((IValue::None, Some(Fill::Value(slots.get(n)?)))),
        Arg::Tensors(ns) => {
            let ids = ns
                .iter()
                .map(|n| slots.get(n))
                .collect::<Result<Vec<_>>>()?;
            let fill = if ty.starts_with("Tensor?") {
                Fill::OptTensors(ids.into_iter().map(Some).collect())
            } else {
                Fill::Tensors(ids)
            };
            Ok((IValue::None, Some(fill)))
        }
        Arg::OptTensors(ns) => {
            let ids = ns
                .iter()
                .map(|n| n.as_ref().map(|n| slots.get(n)).transpose())
                .collect::<Result<Vec<_>>>()?;
            Ok((IValue::None, Some(Fill::OptTensors(ids))))
        }
        Arg::Int(i) if is_list => c(IValue::IntList(vec![*i])),
        Arg::Int(i) if ty == "float" => c(IValue::Double(*i as f64)),
        Arg::Int(i) => c(scalar_or(&ty, Scalar::Int(*i), IValue::Int(*i))),
        Arg::Float(f) => c(scalar_or(&ty, Scalar::Float(*f), IValue::Double(*f))),
        Arg::Bool(b) => c(scalar_or(&ty, Scalar::Bool(*b), IValue::Bool(*b))),
        Arg::Ints(v) if ty.starts_with("float") => {
            c(IValue::DoubleList(v.iter().map(|&i| i as f64).collect()))
        }
        Arg::Ints(v) => c(IValue::IntList(v.clone())),
        Arg::Floats(v) => c(IValue::DoubleList(v.clone())),
        Arg::Bools(v) => c(IValue::BoolList(v.clone())),
        Arg::Str(s) => c(IValue::Str(s.clone())),
        Arg::Strs(v) => c(IValue::StrList(v.clone())),
        Arg::SymInt(r) => match slots.sym(r)? {
            SymVal::Const(i) => convert(&Arg::Int(i), def, slots, device),
            SymVal::Slot(s) if is_list => {
                Ok((IValue::None, Some(Fill::Ints(vec![SymVal::Slot(s)]))))
            }
            SymVal::Slot(s) if ty == "Tensor" => Ok((IValue::None, Some(Fill::WrappedInt(s)))),
            SymVal::Slot(s) => Ok((IValue::None, Some(Fill::Value(s)))),
        },
        Arg::SymInts(rs) => {
            let vals = rs
                .iter()
                .map(|r| slots.sym(r))
                .collect::<Result<Vec<_>>>()?;
            if vals.iter().all(|v| matches!(v, SymVal::Const(_))) {
                let ints = vals
                    .iter()
                    .map(|v| match v {
                        SymVal::Const(i) => *i,
                        SymVal::Slot(_) => 0,
                    })
                    .collect();
                c(IValue::IntList(ints))
            } else {
                Ok((IValue::None, Some(Fill::Ints(vals))))
            }
        }
        Arg::ScalarType(d) => c(IValue::DType(*d)),
        Arg::MemoryFormat(m) => c(IValue::MemoryFormat(*m)),
        Arg::Layout(l) => c(IValue::Layout(*l)),
        // The export ran on one device; the program runs on the runner's.
        Arg::Device(_) => c(IValue::Device(device)),
    }
}

fn int_arg(node: &Node, i: usize) -> Result<&Arg> {
    node.inputs.get(i).map(|a| &a.arg).ok_or_else(|| {
        Error::new(format!(
            "needs {} arguments, has {}",
            i + 1,
            node.inputs.len()
        ))
    })
}

fn sym_arg(node: &Node, i: usize, slots: &Slots) -> Result<SymVal> {
    match int_arg(node, i)? {
        Arg::Int(v) => Ok(SymVal::Const(*v)),
        Arg::SymInt(r) => slots.sym(r),
        other => bail!("argument {i} must be an int, got {other:?}"),
    }
}

pub(super) fn single_out(node: &Node, slots: &mut Slots) -> Result<usize> {
    match node.outputs.as_slice() {
        [Out::Tensor(n)] | [Out::SymInt(SymRef::Name(n))] => slots.define(n),
        _ => bail!("expected one named output, got {:?}", node.outputs),
    }
}

pub(super) fn compile_builtin(b: &str, node: &Node, slots: &mut Slots) -> Result<Kind> {
    if b == "getitem" {
        let src = match (int_arg(node, 0)?, int_arg(node, 1)?) {
            (Arg::Tensors(ns), Arg::Int(i)) => {
                let idx = usize::try_from(*i)
                    .ok()
                    .filter(|&i| i < ns.len())
                    .ok_or_else(|| {
                        Error::new(format!("index {i} is out of range for {} values", ns.len()))
                    })?;
                slots.get(&ns[idx])?
            }
            (a, i) => bail!("getitem of {a:?} at {i:?} is not supported"),
        };
        return Ok(Kind::Alias {
            src,
            dst: single_out(node, slots)?,
        });
    }
    let bin = |op| -> Result<(IntOp, SymVal, SymVal)> {
        Ok((op, sym_arg(node, 0, slots)?, sym_arg(node, 1, slots)?))
    };
    let (op, a, b) = match b {
        // neg(a) = 0 - a.
        "neg" => (IntOp::Sub, SymVal::Const(0), sym_arg(node, 0, slots)?),
        "add" => bin(IntOp::Add)?,
        "sub" => bin(IntOp::Sub)?,
        "mul" => bin(IntOp::Mul)?,
        "floordiv" => bin(IntOp::FloorDiv)?,
        _ => bin(IntOp::Mod)?,
    };
    Ok(Kind::Int {
        op,
        a,
        b,
        dst: single_out(node, slots)?,
    })
}

pub(super) fn compile_size(what: SizeOf, node: &Node, slots: &mut Slots) -> Result<Kind> {
    let src = match int_arg(node, 0)? {
        Arg::Tensor(n) => slots.get(n)?,
        other => bail!("expected a tensor, got {other:?}"),
    };
    let dim = match what {
        SizeOf::Size | SizeOf::Stride => match int_arg(node, 1)? {
            Arg::Int(d) => *d,
            other => bail!("expected an int dim, got {other:?}"),
        },
        _ => 0,
    };
    Ok(Kind::Size {
        src,
        dim,
        what,
        dst: single_out(node, slots)?,
    })
}

pub(super) fn compile_op(
    op: OperatorHandle,
    node: &Node,
    slots: &mut Slots,
    device: Device,
    traced_bytes: u64,
) -> Result<Kind> {
    let def = op
        .def()
        .ok_or_else(|| Error::new(format!("operator '{}' is not defined", op.name())))?;
    for a in &node.inputs {
        if !def.args.iter().any(|d| d.name == a.name) {
            bail!("'{}' has no argument '{}'", def.name, a.name);
        }
    }
    let mut template = Vec::with_capacity(def.args.len());
    let mut fills = Vec::new();
    for (i, d) in def.args.iter().enumerate() {
        let (v, fill) = match node.inputs.iter().find(|a| a.name == d.name) {
            Some(a) => convert(&a.arg, d, slots, device)
                .map_err(|e| e.context(format!("argument '{}'", d.name)))?,
            None => match d.default {
                Some(f) => (f(), None),
                None => bail!(
                    "argument '{}' of '{}' has no value and no schema default",
                    d.name,
                    def.name
                ),
            },
        };
        template.push(v);
        if let Some(f) = fill {
            fills.push((i, f));
        }
    }
    if node.outputs.len() != def.returns.len() {
        bail!(
            "has {} outputs but '{}' returns {}",
            node.outputs.len(),
            def.name,
            def.returns.len()
        );
    }
    let binds = node
        .outputs
        .iter()
        .map(|o| {
            Ok(match o {
                Out::None | Out::Int(_) | Out::SymInt(SymRef::Int(_)) => Bind::Drop,
                Out::Tensor(n) | Out::SymInt(SymRef::Name(n)) => Bind::Slot(slots.define(n)?),
                Out::Tensors(ns) => Bind::List(
                    ns.iter()
                        .map(|n| slots.define(n))
                        .collect::<Result<Vec<_>>>()?,
                ),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Kind::Op {
        op,
        template,
        fills,
        binds,
        traced_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_types_lose_their_annotations() {
        assert_eq!(base_type("Tensor(a!)"), ("Tensor".into(), false));
        assert_eq!(base_type("int[1]?"), ("int[1]".into(), true));
        assert_eq!(base_type("Tensor(a)[]"), ("Tensor[]".into(), false));
        assert_eq!(base_type("Tensor?[]"), ("Tensor?[]".into(), false));
    }
}
