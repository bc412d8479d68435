//! [`LoadLimits`] and [`RunLimits`]: the resources a user lets one archive take.
//!
//! Owns: the limits and their defaults. Must not: enforce them (the reader and the
//! runner do, each where the allocation would happen).

/// Limits checked while an archive is read: each is checked before the
/// allocation it guards, and exceeding one is an `Err` naming it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadLimits {
    /// Size of the `.pt2` file.
    pub max_archive_bytes: u64,
    /// Size of the program's JSON (`models/<name>.json`) and of each config JSON.
    pub max_json_bytes: u64,
    /// Bytes of all weights and constants together (tied weights count once).
    pub max_weight_bytes: u64,
    /// Nodes in the graph.
    pub max_nodes: usize,
}

impl Default for LoadLimits {
    /// 64 GiB of archive, 1 GiB of JSON, 32 GiB of weights, a million nodes.
    fn default() -> Self {
        LoadLimits {
            max_archive_bytes: 64 << 30,
            max_json_bytes: 1 << 30,
            max_weight_bytes: 32 << 30,
            max_nodes: 1_000_000,
        }
    }
}

/// Limits checked while a program runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunLimits {
    /// Bytes of intermediate values alive at once (counted per value from its
    /// sizes and dtype, so a view counts as much as the tensor it views). Checked
    /// before each node from the output sizes the export recorded, and after it
    /// from the real ones.
    pub max_peak_intermediate_bytes: u64,
}

impl Default for RunLimits {
    /// 64 GiB.
    fn default() -> Self {
        RunLimits {
            max_peak_intermediate_bytes: 64 << 30,
        }
    }
}
