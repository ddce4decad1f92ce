//! Phases of a commit and the progress callback the pipeline reports them to.

use std::fmt;

/// One phase of the fused commit, in pipeline order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Uploading a host trace into the snapshot's buffer, from which the LDE then extends it
    /// (only a host trace committed with a snapshot; a device trace has nothing to upload).
    Upload,
    /// Uploading a host trace and extending it in one call ([`backend_api::Backend::coset_lde_from_host`]),
    /// which a backend may overlap (CUDA, from page-locked memory: column groups uploaded on a
    /// copy stream while the LDE runs on the groups already there); it replaces the `upload` and
    /// `lde` phases of a host trace committed without a snapshot.
    UploadLde,
    /// The coset LDE, row-major.
    Lde,
    /// Transposing the trace in place into the column-major snapshot (when asked for).
    Snapshot,
    /// Queueing the row-major host copy of the LDE (when asked for), except for a host trace
    /// committed without a snapshot, whose `upload+lde` phase queues it.
    HostCopy,
    /// Hashing the LDE's leaves into each tree's node array and transposing the LDE in place to
    /// column-major, in one call ([`backend_api::Backend::hash_leaves_then_transpose`]), which a
    /// backend may interleave (CUDA hashes each block of rows beside the transpose's move of the
    /// block before it).
    LeavesTranspose,
    /// Completing the Merkle trees.
    Merkle,
    /// Downloading the roots (waits for all queued work).
    Roots,
}

impl Phase {
    /// The name used in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Upload => "upload",
            Phase::UploadLde => "upload+lde",
            Phase::Lde => "lde",
            Phase::Snapshot => "snapshot",
            Phase::HostCopy => "host_copy",
            Phase::LeavesTranspose => "leaves+transpose",
            Phase::Merkle => "merkle",
            Phase::Roots => "roots",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Receives phase boundaries from a commit (e.g. to drive a progress bar).
pub trait Progress: Sync {
    /// `phase` is about to be issued.
    fn start(&self, phase: Phase);
    /// `phase` was issued (and, with phase timing, finished on the device) after `seconds`.
    fn finish(&self, phase: Phase, seconds: f64);
}

/// A [`Progress`] that ignores everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _: Phase) {}
    fn finish(&self, _: Phase, _: f64) {}
}
