//! [`DispatchKey`]: every key a kernel can be registered for, their priority order,
//! names and the relations between them (backend <-> autograd/autocast keys, alias
//! expansion).
//!
//! Owns: the list of keys and their bit positions. Must not: hold state, or know
//! about operators or kernels.
//!
//! # Priority order
//!
//! Runtime keys are bits of a `u64`; a higher bit is a higher priority, so the key a
//! call runs at is the highest set bit of its (masked) key set. From low to high:
//!
//! 1. backend keys (bits 0..=27): dense `CPU, CUDA, MPS, XPU, MTIA, Meta,
//!    PrivateUse1..3`, then `MkldnnCPU`, `Quantized*`, `Sparse*`, `SparseCsr*`,
//!    `NestedTensor*`;
//! 2. `BackendSelect`, `Python`, `Functionalize`, `NamedTensor`, `Conjugate`,
//!    `Negative`, `ZeroTensor`, `ADInplaceOrView`;
//! 3. autograd keys `AutogradOther, AutogradCPU, AutogradCUDA, AutogradXPU,
//!    AutogradMPS, AutogradMTIA, AutogradMeta, AutogradPrivateUse1..3,
//!    AutogradNestedTensor`; then `Tracer`;
//! 4. autocast keys `AutocastCPU, AutocastCUDA, AutocastXPU, AutocastMPS,
//!    AutocastPrivateUse1..3`;
//! 5. `FuncTorchBatched`, `BatchedNestedTensor`, `PythonTLSSnapshot`, `PreDispatch`,
//!    `PythonDispatcher` (highest). Bits 60..=63 are free for later keys.
//!
//! Alias keys (`Autograd`, `CompositeImplicitAutograd`,
//! `CompositeImplicitAutogradNestedTensor`, `CompositeExplicitAutograd`,
//! `CompositeExplicitAutogradNonFunctional`) are not bits: a kernel registered for an
//! alias key fills the table slots of the runtime keys the alias stands for
//! ([`DispatchKey::alias_expansion`]), with lower precedence than a kernel registered
//! directly for the runtime key (see `table`).

use super::keyset::DispatchKeySet;
use crate::device_type::DeviceType;
use std::fmt;

macro_rules! keys {
    (runtime { $($rk:ident = $bit:literal : $rdoc:literal,)* }
     alias { $($ak:ident = $aval:literal : $adoc:literal,)* }) => {
        /// A dispatch key: a runtime key (a bit of [`DispatchKeySet`]) or an alias key.
        /// See the module docs for the priority order.
        #[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum DispatchKey {
            $(#[doc = $rdoc] $rk = $bit,)*
            $(#[doc = $adoc] $ak = $aval,)*
            /// No key (an empty key set's highest key).
            Undefined = 255,
        }

        impl DispatchKey {
            /// Every runtime key, lowest priority first.
            pub const RUNTIME: &'static [DispatchKey] = &[$(DispatchKey::$rk,)*];
            /// Every alias key.
            pub const ALIASES: &'static [DispatchKey] = &[$(DispatchKey::$ak,)*];

            /// The key's name as PyTorch spells it (`CPU`, `AutogradPrivateUse1`, ...).
            pub const fn name(self) -> &'static str {
                match self {
                    $(DispatchKey::$rk => stringify!($rk),)*
                    $(DispatchKey::$ak => stringify!($ak),)*
                    DispatchKey::Undefined => "Undefined",
                }
            }

            /// Parses a key name (exact spelling, as in `native_functions.yaml`).
            pub fn from_name(s: &str) -> Option<DispatchKey> {
                match s {
                    $(stringify!($rk) => Some(DispatchKey::$rk),)*
                    $(stringify!($ak) => Some(DispatchKey::$ak),)*
                    "Undefined" => Some(DispatchKey::Undefined),
                    _ => None,
                }
            }
        }

        /// Runtime key for each bit index (`Undefined` for free bits).
        pub(crate) const KEY_OF_BIT: [DispatchKey; 64] = {
            let mut t = [DispatchKey::Undefined; 64];
            $(t[$bit] = DispatchKey::$rk;)*
            t
        };
    };
}

keys! {
    runtime {
        CPU = 0: "Dense CPU backend.",
        CUDA = 1: "Dense CUDA backend.",
        MPS = 2: "Dense Apple MPS backend.",
        XPU = 3: "Dense Intel XPU backend.",
        MTIA = 4: "Dense MTIA backend.",
        Meta = 5: "Meta (shape-only) backend.",
        PrivateUse1 = 6: "Out-of-tree backend slot 1 (name registered at runtime, e.g. `emu`).",
        PrivateUse2 = 7: "Out-of-tree backend slot 2.",
        PrivateUse3 = 8: "Out-of-tree backend slot 3.",
        MkldnnCPU = 9: "MKL-DNN CPU tensors.",
        QuantizedCPU = 10: "Quantized CPU tensors.",
        QuantizedCUDA = 11: "Quantized CUDA tensors.",
        QuantizedMeta = 12: "Quantized meta tensors.",
        SparseCPU = 13: "Sparse COO CPU tensors.",
        SparseCUDA = 14: "Sparse COO CUDA tensors.",
        SparseXPU = 15: "Sparse COO XPU tensors.",
        SparseMPS = 16: "Sparse COO MPS tensors.",
        SparseMeta = 17: "Sparse COO meta tensors.",
        SparseCsrCPU = 18: "Sparse compressed CPU tensors.",
        SparseCsrCUDA = 19: "Sparse compressed CUDA tensors.",
        SparseCsrXPU = 20: "Sparse compressed XPU tensors.",
        SparseCsrMPS = 21: "Sparse compressed MPS tensors.",
        SparseCsrMeta = 22: "Sparse compressed meta tensors.",
        NestedTensorCPU = 23: "Nested CPU tensors.",
        NestedTensorCUDA = 24: "Nested CUDA tensors.",
        NestedTensorXPU = 25: "Nested XPU tensors.",
        NestedTensorHPU = 26: "Nested HPU tensors.",
        NestedTensorMeta = 27: "Nested meta tensors.",
        BackendSelect = 28: "Picks the backend of factory functions from their arguments.",
        Python = 29: "Python tensor subclasses / modes.",
        Functionalize = 30: "Functionalization (removes mutation and aliasing).",
        NamedTensor = 31: "Named tensors.",
        Conjugate = 32: "Lazy conjugation bit.",
        Negative = 33: "Lazy negation bit.",
        ZeroTensor = 34: "Efficient all-zero tensors.",
        ADInplaceOrView = 35: "View and in-place bookkeeping for autograd.",
        AutogradOther = 36: "Autograd for backends without their own autograd key.",
        AutogradCPU = 37: "Autograd for CPU tensors.",
        AutogradCUDA = 38: "Autograd for CUDA tensors.",
        AutogradXPU = 39: "Autograd for XPU tensors.",
        AutogradMPS = 40: "Autograd for MPS tensors.",
        AutogradMTIA = 41: "Autograd for MTIA tensors.",
        AutogradMeta = 42: "Autograd for meta tensors.",
        AutogradPrivateUse1 = 43: "Autograd for PrivateUse1 tensors.",
        AutogradPrivateUse2 = 44: "Autograd for PrivateUse2 tensors.",
        AutogradPrivateUse3 = 45: "Autograd for PrivateUse3 tensors.",
        AutogradNestedTensor = 46: "Autograd for nested tensors.",
        Tracer = 47: "JIT tracing.",
        AutocastCPU = 48: "Automatic mixed precision on CPU.",
        AutocastCUDA = 49: "Automatic mixed precision on CUDA.",
        AutocastXPU = 50: "Automatic mixed precision on XPU.",
        AutocastMPS = 51: "Automatic mixed precision on MPS.",
        AutocastPrivateUse1 = 52: "Automatic mixed precision on PrivateUse1.",
        AutocastPrivateUse2 = 53: "Automatic mixed precision on PrivateUse2.",
        AutocastPrivateUse3 = 54: "Automatic mixed precision on PrivateUse3.",
        FuncTorchBatched = 55: "vmap batching.",
        BatchedNestedTensor = 56: "vmap over nested tensors.",
        PythonTLSSnapshot = 57: "Snapshots Python TLS state.",
        PreDispatch = 58: "Pre-dispatch tracing.",
        PythonDispatcher = 59: "Python-level dispatcher (highest).",
    }
    alias {
        Autograd = 64: "Alias: every Autograd* key.",
        CompositeImplicitAutograd = 65: "Alias: every backend and autograd key; a kernel written in terms of other ops (autograd comes for free).",
        CompositeImplicitAutogradNestedTensor = 66: "Alias: CompositeImplicitAutograd restricted to nested tensors (wins over it there).",
        CompositeExplicitAutograd = 67: "Alias: every backend key; one kernel for all backends, with its own autograd formula.",
        CompositeExplicitAutogradNonFunctional = 68: "Alias: backend keys except sparse; wins over CompositeExplicitAutograd.",
    }
}

impl fmt::Debug for DispatchKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for DispatchKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for DispatchKey {
    type Err = crate::OpalError;
    fn from_str(s: &str) -> crate::Result<Self> {
        DispatchKey::from_name(s)
            .ok_or_else(|| crate::OpalError::msg(format!("unknown dispatch key '{s}'")))
    }
}

/// For each autograd key's bit: the backend keys it serves (computed at compile time).
const AUTOGRAD_BACKENDS: [u64; 64] = {
    let mut t = [0u64; 64];
    let mut i = 0;
    while i < 64 {
        if let Some(a) = KEY_OF_BIT[i].autograd_key() {
            t[a as usize] |= 1u64 << i;
        }
        i += 1;
    }
    t
};

/// The last backend key's bit.
pub(crate) const LAST_BACKEND_BIT: u8 = 27;

impl DispatchKey {
    /// True for alias keys (not bits of a key set).
    pub const fn is_alias(self) -> bool {
        (self as u8) >= 64 && (self as u8) < 255
    }

    /// True for runtime keys (bits of a key set).
    pub const fn is_runtime(self) -> bool {
        (self as u8) < 64
    }

    /// True for backend keys (a tensor's device/layout key, bits 0..=27).
    pub const fn is_backend(self) -> bool {
        (self as u8) <= LAST_BACKEND_BIT
    }

    /// True for the `Autograd*` runtime keys.
    pub const fn is_autograd(self) -> bool {
        let b = self as u8;
        b >= DispatchKey::AutogradOther as u8 && b <= DispatchKey::AutogradNestedTensor as u8
    }

    /// The bit index of a runtime key; `None` for alias keys and `Undefined`.
    pub const fn bit(self) -> Option<u32> {
        if self.is_runtime() {
            Some(self as u32)
        } else {
            None
        }
    }

    /// The runtime key at bit `i` (`None` for free bits and `i >= 64`).
    pub const fn from_bit(i: u32) -> Option<DispatchKey> {
        if i >= 64 {
            return None;
        }
        match KEY_OF_BIT[i as usize] {
            DispatchKey::Undefined => None,
            k => Some(k),
        }
    }

    /// The device type a backend key's tensors live on (`None` for non-backend keys).
    pub const fn device_type(self) -> Option<DeviceType> {
        use DispatchKey::*;
        Some(match self {
            CPU | MkldnnCPU | QuantizedCPU | SparseCPU | SparseCsrCPU | NestedTensorCPU
            | AutogradCPU | AutocastCPU => DeviceType::Cpu,
            CUDA | QuantizedCUDA | SparseCUDA | SparseCsrCUDA | NestedTensorCUDA | AutogradCUDA
            | AutocastCUDA => DeviceType::Cuda,
            MPS | SparseMPS | SparseCsrMPS | AutogradMPS | AutocastMPS => DeviceType::Mps,
            XPU | SparseXPU | SparseCsrXPU | NestedTensorXPU | AutogradXPU | AutocastXPU => {
                DeviceType::Xpu
            }
            MTIA | AutogradMTIA => DeviceType::Mtia,
            NestedTensorHPU => DeviceType::Hpu,
            Meta | QuantizedMeta | SparseMeta | SparseCsrMeta | NestedTensorMeta | AutogradMeta => {
                DeviceType::Meta
            }
            PrivateUse1 | AutogradPrivateUse1 | AutocastPrivateUse1 => DeviceType::PrivateUse1,
            PrivateUse2 | AutogradPrivateUse2 | AutocastPrivateUse2 => DeviceType::PrivateUse2,
            PrivateUse3 | AutogradPrivateUse3 | AutocastPrivateUse3 => DeviceType::PrivateUse3,
            _ => return None,
        })
    }

    /// The autograd key serving tensors of backend key `self`
    /// (`CPU -> AutogradCPU`, nested -> `AutogradNestedTensor`, others -> `AutogradOther`).
    pub const fn autograd_key(self) -> Option<DispatchKey> {
        use DispatchKey::*;
        if !self.is_backend() {
            return None;
        }
        Some(match self {
            NestedTensorCPU | NestedTensorCUDA | NestedTensorXPU | NestedTensorHPU
            | NestedTensorMeta => AutogradNestedTensor,
            _ => match self.device_type() {
                Some(DeviceType::Cpu) => AutogradCPU,
                Some(DeviceType::Cuda) => AutogradCUDA,
                Some(DeviceType::Xpu) => AutogradXPU,
                Some(DeviceType::Mps) => AutogradMPS,
                Some(DeviceType::Mtia) => AutogradMTIA,
                Some(DeviceType::Meta) => AutogradMeta,
                Some(DeviceType::PrivateUse1) => AutogradPrivateUse1,
                Some(DeviceType::PrivateUse2) => AutogradPrivateUse2,
                Some(DeviceType::PrivateUse3) => AutogradPrivateUse3,
                _ => AutogradOther,
            },
        })
    }

    /// The autocast key for a device type, if that device has one.
    pub const fn autocast_key_for(d: DeviceType) -> Option<DispatchKey> {
        use DispatchKey::*;
        Some(match d {
            DeviceType::Cpu => AutocastCPU,
            DeviceType::Cuda => AutocastCUDA,
            DeviceType::Xpu => AutocastXPU,
            DeviceType::Mps => AutocastMPS,
            DeviceType::PrivateUse1 => AutocastPrivateUse1,
            DeviceType::PrivateUse2 => AutocastPrivateUse2,
            DeviceType::PrivateUse3 => AutocastPrivateUse3,
            _ => return None,
        })
    }

    /// The backend keys an autograd key serves (empty for other keys).
    pub const fn backends_of_autograd(self) -> DispatchKeySet {
        match self.bit() {
            Some(b) => DispatchKeySet::from_bits_retain(AUTOGRAD_BACKENDS[b as usize]),
            None => DispatchKeySet::empty(),
        }
    }

    /// The runtime keys a key stands for: an alias key's expansion, or the key itself.
    pub fn alias_expansion(self) -> DispatchKeySet {
        use DispatchKey::*;
        let backends = DispatchKeySet::from_bits_retain((1u64 << (LAST_BACKEND_BIT + 1)) - 1);
        let autograd = DispatchKeySet::from_bits_retain(
            ((1u64 << (AutogradNestedTensor as u32 + 1)) - 1)
                & !((1u64 << AutogradOther as u32) - 1),
        );
        let nested = DispatchKeySet::from_keys(&[
            NestedTensorCPU,
            NestedTensorCUDA,
            NestedTensorXPU,
            NestedTensorHPU,
            NestedTensorMeta,
        ]);
        let sparse =
            DispatchKeySet::from_keys(&[SparseCPU, SparseCUDA, SparseXPU, SparseMPS, SparseMeta]);
        match self {
            Autograd => autograd,
            CompositeImplicitAutograd => backends | autograd,
            CompositeImplicitAutogradNestedTensor => nested.add(AutogradNestedTensor),
            CompositeExplicitAutograd => backends,
            CompositeExplicitAutogradNonFunctional => backends - sparse,
            Undefined => DispatchKeySet::empty(),
            k => DispatchKeySet::from_key(k),
        }
    }
}
