//! The canonical printer: `Display` for every schema item, producing exactly the
//! strings torchgen produces for `str(FunctionSchema.parse(func))`.
//!
//! Owns: formatting only. Must not parse, validate or know about Rust names.

use std::fmt;

use super::{
    Annotation, Argument, Arguments, BaseOperatorName, FunctionSchema, OperatorName, Return, Type,
};

// Names are printed piece by piece with `write_str`: loading formats every
// operator's name a few times, and `write!`'s argument machinery cost more than
// the copying.
impl fmt::Display for BaseOperatorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.dunder_method {
            f.write_str(if self.inplace { "__i" } else { "__" })?;
            f.write_str(&self.base)?;
            return f.write_str("__");
        }
        f.write_str(&self.base)?;
        if self.functional_overload {
            f.write_str("_functional")?;
        }
        if self.inplace {
            f.write_str("_")?;
        }
        Ok(())
    }
}

impl fmt::Display for OperatorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.name, f)?;
        if !self.overload_name.is_empty() {
            f.write_str(".")?;
            f.write_str(&self.overload_name)?;
        }
        Ok(())
    }
}

impl fmt::Display for Annotation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.alias_set.join("|"))?;
        if self.is_write {
            f.write_str("!")?;
        }
        if !self.alias_set_after.is_empty() {
            write!(f, " -> {}", self.alias_set_after.join("|"))?;
        }
        Ok(())
    }
}

/// Writes a type with its alias annotation placed right after the base type, the
/// only place the grammar allows it (`Tensor(a!)[]`, `Tensor(a)?`).
fn write_annotated(
    f: &mut fmt::Formatter<'_>,
    ty: &Type,
    annotation: Option<&Annotation>,
) -> fmt::Result {
    match ty {
        Type::Base(b) => {
            f.write_str(b.as_str())?;
            if let Some(a) = annotation {
                write!(f, "({a})")?;
            }
            Ok(())
        }
        Type::Optional(inner) => {
            write_annotated(f, inner, annotation)?;
            f.write_str("?")
        }
        Type::List { elem, size } => {
            write_annotated(f, elem, annotation)?;
            match size {
                Some(n) => write!(f, "[{n}]"),
                None => f.write_str("[]"),
            }
        }
    }
}

impl fmt::Display for Argument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_annotated(f, &self.ty, self.annotation.as_ref())?;
        write!(f, " {}", self.name)?;
        if let Some(d) = &self.default {
            write!(f, "={d}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Return {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_annotated(f, &self.ty, self.annotation.as_ref())?;
        if let Some(n) = &self.name {
            write!(f, " {n}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Arguments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut sep = |f: &mut fmt::Formatter<'_>| {
            if first {
                first = false;
                Ok(())
            } else {
                f.write_str(", ")
            }
        };
        for a in &self.positional {
            sep(f)?;
            write!(f, "{a}")?;
        }
        if !self.kwarg_only.is_empty() || !self.out.is_empty() {
            sep(f)?;
            f.write_str("*")?;
        }
        for a in self.kwarg_only.iter().chain(&self.out) {
            sep(f)?;
            write!(f, "{a}")?;
        }
        Ok(())
    }
}

impl fmt::Display for FunctionSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({}) -> ", self.name, self.arguments)?;
        if self.returns.len() == 1 {
            write!(f, "{}", self.returns[0])
        } else {
            f.write_str("(")?;
            for (i, r) in self.returns.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{r}")?;
            }
            f.write_str(")")
        }
    }
}
