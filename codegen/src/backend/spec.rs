//! The backend YAML as plain located data: which dispatch key and device a backend
//! plugs into, which ops it implements natively (optionally pinned to the schema its
//! kernel was written against) and what runs everything else.
//!
//! Owns: the data types of a loaded backend YAML. Must not: read files, parse YAML,
//! compare schemas or emit code (see `load`, `compat`, `emit`).

use crate::model::{FunctionSchema, Loc, OperatorName};

/// A value together with where it was written in the backend YAML.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located<T> {
    pub value: T,
    pub loc: Loc,
}

impl<T> Located<T> {
    pub fn new(value: T, loc: Loc) -> Self {
        Located { value, loc }
    }
}

/// The dispatch keys an external backend may register under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BackendKey {
    Cpu,
    Meta,
    PrivateUse1,
    PrivateUse2,
    PrivateUse3,
}

impl BackendKey {
    pub const ALL: [BackendKey; 5] = [
        BackendKey::Cpu,
        BackendKey::Meta,
        BackendKey::PrivateUse1,
        BackendKey::PrivateUse2,
        BackendKey::PrivateUse3,
    ];

    /// The spelling used in YAML and as the `::opal::dispatch::DispatchKey` variant.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKey::Cpu => "CPU",
            BackendKey::Meta => "Meta",
            BackendKey::PrivateUse1 => "PrivateUse1",
            BackendKey::PrivateUse2 => "PrivateUse2",
            BackendKey::PrivateUse3 => "PrivateUse3",
        }
    }

    pub fn from_name(s: &str) -> Option<BackendKey> {
        BackendKey::ALL.iter().copied().find(|k| k.as_str() == s)
    }

    /// Whether the key is one of the renamable PrivateUse keys.
    /// The runtime's `DeviceType` variant of its devices (`Cpu`, `PrivateUse1`, ...).
    pub fn device_type(self) -> &'static str {
        match self {
            BackendKey::Cpu => "Cpu",
            BackendKey::Meta => "Meta",
            BackendKey::PrivateUse1 => "PrivateUse1",
            BackendKey::PrivateUse2 => "PrivateUse2",
            BackendKey::PrivateUse3 => "PrivateUse3",
        }
    }

    /// The runtime key its autograd kernels are registered at (`AutogradCPU`,
    /// `AutogradPrivateUse1`, ...).
    pub fn autograd_key(self) -> &'static str {
        match self {
            BackendKey::Cpu => "AutogradCPU",
            BackendKey::Meta => "AutogradMeta",
            BackendKey::PrivateUse1 => "AutogradPrivateUse1",
            BackendKey::PrivateUse2 => "AutogradPrivateUse2",
            BackendKey::PrivateUse3 => "AutogradPrivateUse3",
        }
    }

    pub fn is_private_use(self) -> bool {
        matches!(
            self,
            BackendKey::PrivateUse1 | BackendKey::PrivateUse2 | BackendKey::PrivateUse3
        )
    }

    /// The device name fixed by the key itself (`cpu`, `meta`); `None` for PrivateUse
    /// keys, whose device name the backend chooses.
    pub fn builtin_device(self) -> Option<&'static str> {
        match self {
            BackendKey::Cpu => Some("cpu"),
            BackendKey::Meta => Some("meta"),
            _ => None,
        }
    }
}

/// `fallback:`: what runs the ops a backend does not implement natively, and the
/// argument values a pinned kernel predates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FallbackPolicy {
    /// The boxed CPU fallback: copy to CPU, run the CPU kernel, copy back.
    Cpu,
    /// Nothing: such calls fail with an error naming op, argument, value and backend.
    None,
}

impl FallbackPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            FallbackPolicy::Cpu => "cpu",
            FallbackPolicy::None => "none",
        }
    }
}

/// One entry of `supported:`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SupportedOp {
    /// `- add.Tensor` (or `- add.Tensor: kernels::add`): the kernel implements the
    /// schema of the current native YAML.
    Current {
        name: OperatorName,
        loc: Loc,
        /// The Rust path of the kernel function, when the entry names one.
        kernel: Option<Located<String>>,
    },
    /// `- func: mul.Tensor(Tensor self, Tensor other) -> Tensor` (with an optional
    /// `kernel: path`): the kernel was written against this (possibly older) schema.
    Pinned {
        schema: FunctionSchema,
        loc: Loc,
        /// The Rust path of the kernel function, when the entry names one.
        kernel: Option<Located<String>>,
    },
}

impl SupportedOp {
    pub fn name(&self) -> &OperatorName {
        match self {
            SupportedOp::Current { name, .. } => name,
            SupportedOp::Pinned { schema, .. } => &schema.name,
        }
    }

    /// Where the entry was written.
    pub fn loc(&self) -> Loc {
        match self {
            SupportedOp::Current { loc, .. } | SupportedOp::Pinned { loc, .. } => *loc,
        }
    }

    /// The kernel function the entry names (`- add.Tensor: path` or `kernel: path`):
    /// a Rust path, relative to the crate that includes the generated code unless it
    /// starts with `crate::`, `self::`, `super::` or `::`. Generated code forwards
    /// the op's trait fn to it, so no hand-written forwarding is needed.
    pub fn kernel(&self) -> Option<&Located<String>> {
        match self {
            SupportedOp::Current { kernel, .. } | SupportedOp::Pinned { kernel, .. } => {
                kernel.as_ref()
            }
        }
    }

    pub fn pinned(&self) -> Option<&FunctionSchema> {
        match self {
            SupportedOp::Pinned { schema, .. } => Some(schema),
            SupportedOp::Current { .. } => None,
        }
    }
}

/// A loaded backend YAML.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendSpec {
    /// `backend:`: a CamelCase identifier naming the generated trait (`<backend>Kernels`).
    pub backend: Located<String>,
    /// `dispatch_key:`.
    pub dispatch_key: Located<BackendKey>,
    /// `device:`: the device name users write (`emu`, `emu:1`). Required for
    /// PrivateUse keys; fixed (`cpu`, `meta`) otherwise.
    pub device: Located<String>,
    /// `namespace:` of the operators (default `aten`).
    pub namespace: Located<String>,
    /// `fallback:` (default `none`).
    pub fallback: Located<FallbackPolicy>,
    /// `supported:` in file order.
    pub supported: Vec<SupportedOp>,
    /// `out_copy:`: the Rust path of the backend's copy rule for the `out=` ops the
    /// native YAML derives with `autogen:`, and for any other `out=` op the backend
    /// lists without a kernel. With it, such an op listed in `supported:` without a
    /// kernel gets one generated: the backend's functional kernel, then
    /// `out_copy(op_name, &[(&result, &out), ...])` (signature
    /// `fn(&str, &[(&Tensor, &Tensor)]) -> Result<()>`; pairs a false `output_mask`
    /// entry left uncomputed are not passed).
    pub out_copy: Option<Located<String>>,
    /// What the loader accepted but reports: vendor keys of torchgen's format it
    /// ignores, a `backend:` Opal has no key for (registered under PrivateUse1).
    pub warnings: Vec<crate::diagnostics::Diagnostic>,
    /// `autograd:` (as torch-xla's): ops the backend differentiates itself. Their
    /// kernels are registered at the backend's autograd key (`AutogradPrivateUse1`,
    /// ...), ahead of the kernels generated from `derivatives.yaml`. Names only.
    pub autograd: Vec<SupportedOp>,
}
