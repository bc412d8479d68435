//! [`DispatchKeySet`]: a `u64` bit set of runtime dispatch keys.
//!
//! Owns: set operations and the O(1) highest-priority key. Must not: read TLS or
//! global state (that is `dispatch::tls`), or know about tensors or operators (the
//! tensor module adds the methods that union a tensor's keys in).

use super::key::DispatchKey;
use std::fmt;

bitflags::bitflags! {
    /// A set of runtime dispatch keys; bit `i` is the key with `DispatchKey as u8 == i`.
    /// A higher bit has higher priority ([`DispatchKeySet::highest`]).
    #[derive(Copy, Clone, PartialEq, Eq, Hash, Default)]
    pub struct DispatchKeySet: u64 {
        // Every bit is meaningful (free bits are reserved for future keys).
        const _ = !0;
    }
}

impl DispatchKeySet {
    /// The set holding just `k` (empty for alias keys and `Undefined`; use
    /// [`DispatchKey::alias_expansion`] for aliases).
    #[inline]
    pub const fn from_key(k: DispatchKey) -> Self {
        if k.is_runtime() {
            DispatchKeySet::from_bits_retain(1u64 << (k as u8))
        } else {
            DispatchKeySet::empty()
        }
    }

    /// The set of the given runtime keys.
    pub const fn from_keys(ks: &[DispatchKey]) -> Self {
        let mut bits = 0u64;
        let mut i = 0;
        while i < ks.len() {
            bits |= DispatchKeySet::from_key(ks[i]).bits();
            i += 1;
        }
        DispatchKeySet::from_bits_retain(bits)
    }

    /// `self ∪ {k}`.
    #[inline]
    #[must_use]
    pub const fn add(self, k: DispatchKey) -> Self {
        DispatchKeySet::from_bits_retain(self.bits() | DispatchKeySet::from_key(k).bits())
    }

    /// `self − {k}`.
    #[inline]
    #[must_use]
    pub const fn remove_key(self, k: DispatchKey) -> Self {
        DispatchKeySet::from_bits_retain(self.bits() & !DispatchKeySet::from_key(k).bits())
    }

    /// True when `k` is in the set.
    #[inline]
    pub const fn has(self, k: DispatchKey) -> bool {
        self.bits() & DispatchKeySet::from_key(k).bits() != 0
    }

    /// The highest-priority key, in O(1) (one leading-zero count).
    #[inline]
    pub const fn highest(self) -> Option<DispatchKey> {
        let b = self.bits();
        if b == 0 {
            None
        } else {
            Some(super::key::KEY_OF_BIT[(63 - b.leading_zeros()) as usize])
        }
    }

    /// The keys of strictly lower priority than `k` (what a kernel at `k` redispatches
    /// to: `ks.below(k)`).
    #[inline]
    #[must_use]
    pub const fn below(self, k: DispatchKey) -> Self {
        match k.bit() {
            Some(b) => DispatchKeySet::from_bits_retain(self.bits() & ((1u64 << b) - 1)),
            None => self,
        }
    }

    /// The keys of priority `k` and lower.
    #[inline]
    #[must_use]
    pub const fn at_and_below(self, k: DispatchKey) -> Self {
        match k.bit() {
            Some(63) => self,
            Some(b) => DispatchKeySet::from_bits_retain(self.bits() & ((1u64 << (b + 1)) - 1)),
            None => self,
        }
    }

    /// The backend keys of the set.
    #[inline]
    #[must_use]
    pub const fn backends(self) -> Self {
        DispatchKeySet::from_bits_retain(
            self.bits() & ((1u64 << (super::key::LAST_BACKEND_BIT + 1)) - 1),
        )
    }

    /// The keys, highest priority first.
    pub fn keys(self) -> impl Iterator<Item = DispatchKey> {
        let mut b = self.bits();
        std::iter::from_fn(move || {
            if b == 0 {
                return None;
            }
            let i = 63 - b.leading_zeros();
            b &= !(1u64 << i);
            Some(super::key::KEY_OF_BIT[i as usize])
        })
    }
}

impl From<DispatchKey> for DispatchKeySet {
    fn from(k: DispatchKey) -> Self {
        k.alias_expansion()
    }
}

impl fmt::Debug for DispatchKeySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DispatchKeySet(")?;
        for (i, k) in self.keys().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{k}")?;
        }
        write!(f, ")")
    }
}

impl fmt::Display for DispatchKeySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
