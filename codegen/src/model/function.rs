//! Native functions: a schema plus the YAML metadata that says how it is dispatched.

use super::{FunctionSchema, Loc, OperatorName, SmallMap};

/// `variants:`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Variants {
    pub function: bool,
    pub method: bool,
}

/// `device_check:`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum DeviceCheck {
    #[default]
    ExactSame,
    NoCheck,
}

/// One `dispatch:` entry after `CPU, CUDA: kernel` shared keys are split apart.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BackendKernel {
    /// The kernel function name as written.
    pub kernel: String,
    /// Whether this entry comes from the implicit CompositeImplicitAutograd rule.
    pub implicit: bool,
    /// Where the dispatch key was written (synthetic for implicit entries).
    pub loc: Loc,
}

/// Where a native function came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// Written as an entry of the YAML.
    Declared,
    /// Produced by the `autogen:` list of the named function.
    Autogen { from: OperatorName },
}

/// One native function: a declared YAML entry, or one produced by `autogen:`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NativeFunction {
    /// Operator namespace: the `ns::` prefix of `func:`, `aten` when absent.
    pub namespace: String,
    pub func: FunctionSchema,
    pub origin: Origin,
    /// Location of the entry (the `- func:` item).
    pub loc: Loc,
    /// Location of every key written in the entry, by key name.
    pub key_locs: SmallMap<&'static str, Loc>,
    pub variants: Variants,
    /// Resolved dispatch table: dispatch key name -> kernel (including the implicit
    /// CompositeImplicitAutograd default). Ordered by key name for determinism.
    pub dispatch: SmallMap<String, BackendKernel>,
    pub structured: bool,
    pub structured_delegate: Option<OperatorName>,
    pub structured_inherits: Option<String>,
    pub precomputed: Vec<String>,
    pub autogen: Vec<OperatorName>,
    /// Tags as written plus the ones torchgen adds when `tags.yaml` defines them
    /// (`pt2_compliant_tag` on `aten` ops, `out`/`inplace` by schema kind,
    /// `generated` on autogen functions); sorted and deduplicated.
    pub tags: Vec<String>,
    pub device_check: DeviceCheck,
    pub device_guard: bool,
    pub manual_cpp_binding: bool,
    pub manual_kernel_registration: bool,
    /// `use_const_ref_for_mutable_tensors:` (C++ binding detail, kept for fidelity).
    pub use_const_ref_for_mutable_tensors: bool,
    pub python_module: Option<String>,
    pub category_override: Option<String>,
    pub cpp_no_default_args: Vec<String>,
    /// `ufunc_inner_loop:` key -> value, as written.
    pub ufunc_inner_loop: SmallMap<String, String>,
    pub is_abstract: bool,
    pub has_composite_implicit_autograd_kernel: bool,
    pub has_composite_explicit_autograd_kernel: bool,
}

/// A loaded and validated `native_functions.yaml` (autogen functions included, in
/// the order torchgen lists them).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NativeFunctions {
    pub functions: Vec<NativeFunction>,
    /// Tags known from `tags.yaml` (empty when none was given).
    pub known_tags: Vec<String>,
}

impl NativeFunction {
    /// A function with every YAML key at the value torchgen assumes when the key is
    /// absent (function variant, ExactSame device check, device guard on, nothing
    /// else set), and no dispatch table yet.
    pub fn new(namespace: String, func: FunctionSchema, origin: Origin, loc: Loc) -> Self {
        NativeFunction {
            namespace,
            func,
            origin,
            loc,
            key_locs: SmallMap::new(),
            variants: Variants {
                function: true,
                method: false,
            },
            dispatch: SmallMap::new(),
            structured: false,
            structured_delegate: None,
            structured_inherits: None,
            precomputed: Vec::new(),
            autogen: Vec::new(),
            tags: Vec::new(),
            device_check: DeviceCheck::ExactSame,
            device_guard: true,
            manual_cpp_binding: false,
            manual_kernel_registration: false,
            use_const_ref_for_mutable_tensors: false,
            python_module: None,
            category_override: None,
            cpp_no_default_args: Vec::new(),
            ufunc_inner_loop: SmallMap::new(),
            is_abstract: false,
            has_composite_implicit_autograd_kernel: false,
            has_composite_explicit_autograd_kernel: false,
        }
    }
}
