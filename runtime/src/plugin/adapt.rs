//! Load-time adapters: a plugin's op schemas (from its manifest) against the host's,
//! with the rules `opal-codegen` applies to pinned backend schemas. The plugin's
//! schema may lack arguments that have defaults in the host's; types must otherwise
//! agree (`SymInt` = `int`, `int[2]` = `int[]`). A call passing the default of every
//! missing argument runs the plugin's kernel without them; any other value goes to
//! the plugin's fallback, or is an `Err` naming op, argument, value and plugin.
//!
//! Owns: schema comparison and the per-call argument plan. Must not: call plugins.

use crate::dispatch::OpDef;
use crate::ivalue::IValue;

/// One argument of a schema: name and normalised type.
#[derive(Debug, PartialEq, Eq)]
struct Arg {
    name: String,
    ty: String,
}

/// What to do with each host argument of a call.
#[derive(Debug, Clone)]
pub enum Slot {
    /// Passed to the plugin.
    Keep,
    /// Not in the plugin's schema: allowed only at the default, made by `default`.
    Drop(fn() -> IValue),
}

/// The adapter of one op: a slot per host argument (all `Keep` when the schemas agree).
#[derive(Debug, Clone)]
pub struct Plan {
    /// One per host argument.
    pub slots: Vec<Slot>,
    /// The plugin's schema text (for messages).
    pub plugin_schema: String,
}

impl Plan {
    /// True when every argument goes to the plugin as is.
    pub fn is_identity(&self) -> bool {
        self.slots.iter().all(|s| matches!(s, Slot::Keep))
    }
}

/// Splits `a, b[1, 2], c` at top-level commas.
pub(super) fn split_top(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0i32, 0usize, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = s[start..].trim();
    if !last.is_empty() {
        out.push(last);
    }
    out
}

/// The type as codegen compares it: alias sets reduced to "writes or not",
/// `SymInt` as `int`, fixed list sizes dropped.
fn normalise(ty: &str) -> String {
    let mut out = String::new();
    let mut chars = ty.trim().chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '(' => {
                let mut ann = String::new();
                for d in chars.by_ref() {
                    if d == ')' {
                        break;
                    }
                    ann.push(d);
                }
                if ann.contains('!') {
                    out.push('!');
                }
            }
            '[' => {
                while chars.peek().is_some_and(|d| d.is_ascii_digit()) {
                    chars.next();
                }
                out.push('[');
            }
            c if !c.is_whitespace() => out.push(c),
            _ => {}
        }
    }
    out.replace("SymInt", "int")
}

/// Arguments and return types of `name(args) -> rets`.
fn parse_schema(schema: &str) -> Option<(Vec<Arg>, Vec<String>)> {
    let open = schema.find('(')?;
    let arrow = schema.rfind("->")?;
    let close = schema[..arrow].rfind(')')?;
    if close < open {
        return None;
    }
    let mut args = Vec::new();
    for a in split_top(&schema[open + 1..close]) {
        if a == "*" {
            continue;
        }
        let decl = a.split_once('=').map_or(a, |(d, _)| d).trim();
        let (ty, name) = decl.rsplit_once(char::is_whitespace)?;
        args.push(Arg {
            name: name.trim().to_string(),
            ty: normalise(ty),
        });
    }
    let rets_text = schema[arrow + 2..].trim();
    let rets_text = rets_text
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or(rets_text);
    let rets = split_top(rets_text)
        .into_iter()
        .map(|r| {
            // A named return (`Tensor(a!) out`) keeps its type only.
            let t = r.rsplit_once(' ').map_or(r, |(t, n)| {
                if n.chars().all(|c| c.is_alphanumeric() || c == '_') && !t.trim().is_empty() {
                    t
                } else {
                    r
                }
            });
            normalise(t)
        })
        .collect();
    Some((args, rets))
}

/// Compares the plugin's `schema` with the host's op; the plan, or why the op must
/// stay disabled.
pub fn plan(host: &OpDef, schema: &str) -> Result<Plan, String> {
    let (pargs, prets) =
        parse_schema(schema).ok_or_else(|| format!("cannot parse the schema '{schema}'"))?;
    let hrets: Vec<String> = host.returns.iter().map(|r| normalise(r)).collect();
    if prets != hrets {
        return Err(format!(
            "returns differ: the plugin's schema returns ({}), the host's ({})",
            prets.join(", "),
            hrets.join(", ")
        ));
    }
    let mut slots = Vec::with_capacity(host.args.len());
    let mut j = 0;
    for h in host.args {
        match pargs.get(j) {
            Some(p) if p.name == h.name => {
                let hty = normalise(h.ty);
                if p.ty != hty {
                    return Err(format!(
                        "argument '{}' has type {} in the plugin's schema and {} in the host's",
                        h.name, p.ty, hty
                    ));
                }
                slots.push(Slot::Keep);
                j += 1;
            }
            _ => match h.default {
                Some(d) => slots.push(Slot::Drop(d)),
                None => {
                    return Err(format!(
                        "the host's argument '{}' has no default and the plugin's schema lacks it",
                        h.name
                    ))
                }
            },
        }
    }
    if let Some(p) = pargs.get(j) {
        return Err(format!(
            "the plugin's argument '{}' is not in the host's schema (or out of order)",
            p.name
        ));
    }
    Ok(Plan {
        slots,
        plugin_schema: schema.to_string(),
    })
}

/// Whether `v` is the default `d` (conservative: values it cannot compare are not).
pub fn is_default(v: &IValue, d: &IValue) -> bool {
    use IValue as V;
    match (v, d) {
        (V::None, V::None) => true,
        (V::Int(a), V::Int(b)) => a == b,
        (V::Double(a), V::Double(b)) => a.to_bits() == b.to_bits(),
        (V::Bool(a), V::Bool(b)) => a == b,
        (V::Str(a), V::Str(b)) => a == b,
        (V::Scalar(a), V::Scalar(b)) => a == b,
        (V::Scalar(a), V::Int(b)) | (V::Int(b), V::Scalar(a)) => *a == crate::Scalar::Int(*b),
        (V::DType(a), V::DType(b)) => a == b,
        (V::Layout(a), V::Layout(b)) => a == b,
        (V::Device(a), V::Device(b)) => a == b,
        (V::MemoryFormat(a), V::MemoryFormat(b)) => a == b,
        (V::IntList(a), V::IntList(b)) => a == b,
        (V::BoolList(a), V::BoolList(b)) => a == b,
        (V::DoubleList(a), V::DoubleList(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_types_as_codegen() {
        assert_eq!(normalise("Tensor(a!)"), "Tensor!");
        assert_eq!(normalise("Tensor(a)"), "Tensor");
        assert_eq!(normalise("SymInt[2]"), "int[]");
        assert_eq!(normalise("int[]?"), "int[]?");
        assert_eq!(normalise("ScalarType?"), "ScalarType?");
    }

    #[test]
    fn parses_arguments_and_returns() {
        let (a, r) = parse_schema(
            "max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
        )
        .unwrap();
        let names: Vec<_> = a.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["self", "dim", "keepdim"]);
        assert_eq!(r, ["Tensor", "Tensor"]);
        let (a, r) = parse_schema(
            "add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
        )
        .unwrap();
        assert_eq!(a[3].ty, "Tensor!");
        assert_eq!(r, ["Tensor!"]);
        assert!(parse_schema("nonsense").is_none());
    }
}
