//! The hasher of the generator's own maps (names, grouping keys, identifier
//! caches).
//!
//! Owns: [`FastHash`]. Must not: be used for maps keyed by untrusted input that
//! must resist collision floods (none in this crate: its inputs are the user's own
//! YAML files).

use std::hash::{BuildHasherDefault, Hasher};

/// FNV-1a-style hashing for the generator's name maps: keys are trusted strings,
/// where SipHash's flood resistance only costs time. Whole 8-byte words are
/// mixed in at a time (the autogen grouping keys run to ~160 bytes), and
/// `finish` folds the high bits down, since the multiply only carries low bits
/// upwards and the table picks buckets by the low bits.
#[derive(Default)]
pub(crate) struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        // murmur3's fmix64.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }

    fn write(&mut self, bytes: &[u8]) {
        const PRIME: u64 = 0x0100_0000_01b3;
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut word = [0; 8];
            word.copy_from_slice(w);
            h = (h ^ u64::from_le_bytes(word)).wrapping_mul(PRIME);
        }
        for b in words.remainder() {
            h = (h ^ u64::from(*b)).wrapping_mul(PRIME);
        }
        self.0 = h;
    }
}

pub(crate) type FastHash = BuildHasherDefault<Fnv>;
