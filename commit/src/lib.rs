//! The fused STARK commit pipeline, generic over the backend: what a commit computes, whether it
//! fits, and running it, on one device or a set of them. The `prover` CLI is built on this crate;
//! it adds backend selection, reports and benches.
//!
//! - **Generic, not branched.** [`commit()`] takes any [`backend_api::Backend`]; this crate names
//!   no concrete backend.
//! - **Refuse before allocating.** Validation ([`CommitPlan::new`]) and admission
//!   ([`Admission::admit`], against the [`memory`] model of this crate) run before the first
//!   allocation; a table that does not fit is refused with every modelled term listed.
//! - **One buffer, in place.** The trace is uploaded straight into the first `n` rows of the
//!   `N`-row LDE buffer and extended in place there (row-major), leaves are hashed straight into
//!   each tree's node array, trees completed in place, then the LDE transposed in place to
//!   column-major. The trace has no buffer of its own unless the column-major snapshot is kept.
//! - **No hidden syncs.** The pipeline issues phase after phase without waiting for the device;
//!   [`CommitParams::phase_timing`] adds one synchronisation per phase to time them.
//! - **Concurrent-ready.** [`commit_admitted`] shares one [`Admission`] between commits on one
//!   device; the [`Ticket`] in a [`Commitment`] holds the bytes its buffers keep on the device.
//!   A waiting admission queues commits that do not fit yet, in one process or across processes
//!   ([`Admission::cross_process`]).
//! - **One import.** [`prelude`] holds what a commit needs: the backend trait, shapes, hashes,
//!   layouts, the pipeline, its errors and a refusal's terms.
//! - **Many devices.** A [`DeviceSet`] places a batch of independent commits over several
//!   devices (or logical shares of one) by their modelled bytes.

mod admission;
mod commit;
pub mod device_set;
mod error;
mod input;
pub mod memory;
pub mod prelude;
mod progress;
mod reservations;
mod secure_fs;

pub use admission::{Admission, Blocked, DeviceMemory, POLL, Ticket};
pub use commit::{CommitParams, CommitPlan, Commitment, PhaseTimings, TreePlan, commit, commit_admitted};
pub use device_set::{DeviceSet, Job, JobOutcome, SetMember};
pub use error::{EXIT_OK, EXIT_REFUSED_OR_DEVICE, EXIT_USAGE, EXIT_WAIT_TIMED_OUT, ProverError, Result};
pub use input::{
    TraceInput, check_output_file, check_trace_file, read_trace_file, read_trace_file_into, synthetic_trace,
    synthetic_trace_into, write_u64_file,
};
pub use progress::{NoProgress, Phase, Progress};
pub use reservations::default_reservation_root;
