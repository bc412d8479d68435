//! Deterministic input values for the fused steps' unit tests, which compare each
//! step with the unfused operators on the same values.
//!
//! Owns: only value generation. Must not: know any step or operator.

/// `n` values cycling through 13 levels (`((i * k) % 13) * scale - 1.5`): varied
/// signs and magnitudes, reproducible, and different per `k` for each input.
pub(crate) fn seq(n: i64, k: usize, scale: f32) -> Vec<f32> {
    (0..n as usize)
        .map(|i| ((i * k) % 13) as f32 * scale - 1.5)
        .collect()
}
