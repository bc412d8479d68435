//! Types of the schema language.

use std::fmt;

/// Every base type used by the schema language of PyTorch 1.13 through 2.15.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BaseTy {
    Tensor,
    Int,
    SymInt,
    SymBool,
    Float,
    Bool,
    Str,
    Scalar,
    ScalarType,
    Layout,
    Device,
    DeviceIndex,
    MemoryFormat,
    Generator,
    Dimname,
    DimVector,
    Storage,
    Stream,
    QScheme,
    ConstQuantizerPtr,
    GraphModule,
}

impl BaseTy {
    pub const ALL: [BaseTy; 21] = [
        BaseTy::Tensor,
        BaseTy::Int,
        BaseTy::SymInt,
        BaseTy::SymBool,
        BaseTy::Float,
        BaseTy::Bool,
        BaseTy::Str,
        BaseTy::Scalar,
        BaseTy::ScalarType,
        BaseTy::Layout,
        BaseTy::Device,
        BaseTy::DeviceIndex,
        BaseTy::MemoryFormat,
        BaseTy::Generator,
        BaseTy::Dimname,
        BaseTy::DimVector,
        BaseTy::Storage,
        BaseTy::Stream,
        BaseTy::QScheme,
        BaseTy::ConstQuantizerPtr,
        BaseTy::GraphModule,
    ];

    /// The spelling used in schema strings.
    pub fn as_str(self) -> &'static str {
        match self {
            BaseTy::Tensor => "Tensor",
            BaseTy::Int => "int",
            BaseTy::SymInt => "SymInt",
            BaseTy::SymBool => "SymBool",
            BaseTy::Float => "float",
            BaseTy::Bool => "bool",
            BaseTy::Str => "str",
            BaseTy::Scalar => "Scalar",
            BaseTy::ScalarType => "ScalarType",
            BaseTy::Layout => "Layout",
            BaseTy::Device => "Device",
            BaseTy::DeviceIndex => "DeviceIndex",
            BaseTy::MemoryFormat => "MemoryFormat",
            BaseTy::Generator => "Generator",
            BaseTy::Dimname => "Dimname",
            BaseTy::DimVector => "DimVector",
            BaseTy::Storage => "Storage",
            BaseTy::Stream => "Stream",
            BaseTy::QScheme => "QScheme",
            BaseTy::ConstQuantizerPtr => "ConstQuantizerPtr",
            BaseTy::GraphModule => "GraphModule",
        }
    }

    pub fn from_name(s: &str) -> Option<BaseTy> {
        // A match compiles to a length switch and one comparison; every argument
        // of every schema goes through here.
        Some(match s {
            "Tensor" => BaseTy::Tensor,
            "int" => BaseTy::Int,
            "SymInt" => BaseTy::SymInt,
            "SymBool" => BaseTy::SymBool,
            "float" => BaseTy::Float,
            "bool" => BaseTy::Bool,
            "str" => BaseTy::Str,
            "Scalar" => BaseTy::Scalar,
            "ScalarType" => BaseTy::ScalarType,
            "Layout" => BaseTy::Layout,
            "Device" => BaseTy::Device,
            "DeviceIndex" => BaseTy::DeviceIndex,
            "MemoryFormat" => BaseTy::MemoryFormat,
            "Generator" => BaseTy::Generator,
            "Dimname" => BaseTy::Dimname,
            "DimVector" => BaseTy::DimVector,
            "Storage" => BaseTy::Storage,
            "Stream" => BaseTy::Stream,
            "QScheme" => BaseTy::QScheme,
            "ConstQuantizerPtr" => BaseTy::ConstQuantizerPtr,
            "GraphModule" => BaseTy::GraphModule,
            _ => return None,
        })
    }
}

/// A schema type: a base type, an optional `T?`, or a list `T[]` / `T[N]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Type {
    Base(BaseTy),
    Optional(Box<Type>),
    List { elem: Box<Type>, size: Option<u32> },
}

impl Type {
    pub fn is_tensor_like(&self) -> bool {
        match self {
            Type::Base(b) => *b == BaseTy::Tensor,
            Type::Optional(t) => t.is_tensor_like(),
            Type::List { elem, .. } => elem.is_tensor_like(),
        }
    }

    pub fn is_optional(&self) -> bool {
        matches!(self, Type::Optional(_))
    }

    /// The base type beneath any optional/list wrappers.
    pub fn base(&self) -> BaseTy {
        match self {
            Type::Base(b) => *b,
            Type::Optional(t) => t.base(),
            Type::List { elem, .. } => elem.base(),
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Base(b) => f.write_str(b.as_str()),
            Type::Optional(t) => write!(f, "{t}?"),
            Type::List {
                elem,
                size: Some(n),
            } => write!(f, "{elem}[{n}]"),
            Type::List { elem, size: None } => write!(f, "{elem}[]"),
        }
    }
}

/// An alias annotation such as `(a)`, `(a!)`, `(a -> *)` or `(a|b!)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Annotation {
    pub alias_set: Vec<String>,
    pub is_write: bool,
    pub alias_set_after: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::BaseTy;

    #[test]
    fn from_name_reads_back_every_spelling() {
        for t in BaseTy::ALL {
            assert_eq!(BaseTy::from_name(t.as_str()), Some(t));
        }
        assert_eq!(BaseTy::from_name("tensor"), None);
    }
}
