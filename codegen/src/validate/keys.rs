//! The dispatch key names a `native_functions.yaml` may use.
//!
//! Owns: the list of names. Must not: know what a key means at run time (that is
//! the runtime's dispatcher).

/// Per-backend functionality prefixes (`SparseCPU`, `QuantizedCUDA`, ...); the empty
/// prefix is the dense key itself.
const FUNCTIONALITIES: [&str; 6] = [
    "",
    "Quantized",
    "Sparse",
    "SparseCsr",
    "NestedTensor",
    "Autograd",
];

/// Backend components every functionality combines with.
const BACKENDS: [&str; 16] = [
    "CPU",
    "CUDA",
    "HIP",
    "XLA",
    "MPS",
    "IPU",
    "XPU",
    "HPU",
    "VE",
    "Lazy",
    "MTIA",
    "MAIA",
    "Meta",
    "PrivateUse1",
    "PrivateUse2",
    "PrivateUse3",
];

/// Keys that are not a functionality/backend pair.
const STANDALONE: [&str; 17] = [
    "CompositeImplicitAutograd",
    "CompositeImplicitAutogradNestedTensor",
    "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
    "Autograd",
    "AutogradOther",
    "AutogradNestedTensor",
    "FPGA",
    "Vulkan",
    "Metal",
    "MkldnnCPU",
    "ZeroTensor",
    "Conjugate",
    "Negative",
    "BackendSelect",
    "Functionalize",
    "FuncTorchBatchedDecomposition",
];

/// The composite (alias) keys a kernel may be registered under.
pub const COMPOSITES: [&str; 4] = [
    "CompositeImplicitAutograd",
    "CompositeImplicitAutogradNestedTensor",
    "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
];

/// Keys a structured kernel serves itself; a `structured_delegate` must not name them.
pub(crate) const STRUCTURED: [&str; 5] = ["CPU", "CUDA", "MPS", "XPU", "MTIA"];

/// Keys that `ufunc_inner_loop:` fills in.
pub(crate) const UFUNC: [&str; 2] = ["CPU", "CUDA"];

/// Every known dispatch key name.
pub fn all() -> Vec<String> {
    let mut v: Vec<String> = STANDALONE.iter().map(|s| s.to_string()).collect();
    for f in FUNCTIONALITIES {
        for b in BACKENDS {
            v.push(format!("{f}{b}"));
        }
    }
    v
}

/// Whether `name` is a dispatch key.
pub fn is_known(name: &str) -> bool {
    STANDALONE.contains(&name)
        || FUNCTIONALITIES
            .iter()
            .any(|f| name.strip_prefix(f).is_some_and(|b| BACKENDS.contains(&b)))
}
