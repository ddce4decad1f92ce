//! Everything a commit needs, in one import: `use commit::prelude::*;` (or
//! `use prover::prelude::*;`, which adds run-time backend choice).
//!
//! - the backend trait and its buffers: [`Backend`], [`DeviceBuffer`], [`HostBuffer`];
//! - shapes, hashes and layouts: [`MatrixShape`], [`LdeParams`], [`HashKind`], [`LeafLayout`],
//!   [`LeafSpec`], [`TreeShape`], [`DIGEST_BYTES`], [`DEFAULT_SCRATCH_CAP`];
//! - the pipeline: [`commit()`], [`commit_admitted`], [`CommitParams`], [`CommitPlan`],
//!   [`Commitment`], [`TraceInput`], [`NoProgress`], [`Progress`], [`Phase`], [`Admission`];
//! - errors: [`ProverError`] (what [`commit()`] returns), [`BackendError`] (what a
//!   [`Backend`] call returns; `backend_api::Error` renamed so that it does not shadow other
//!   `Error`s), [`Refusal`] and [`MemoryModel`] (a budget refusal's terms);
//! - [`hex`], for digests.
//!
//! ```
//! use commit::prelude::*;
//!
//! let cpu = backend_cpu::CpuBackend::new();
//! let trace: Vec<u64> = (0..8 * 4).collect(); // 8 rows x 4 columns, row-major
//! let params = CommitParams { blowup: 2, ..CommitParams::default() };
//! let c = commit(&cpu, TraceInput::host(&trace, MatrixShape::new(8, 4)?), &params, &NoProgress)?;
//! assert_eq!(c.roots_hex()[0].len(), 2 * DIGEST_BYTES);
//! assert_eq!(c.lde_to_host(&cpu)?.len(), 16 * 4);
//!
//! // A budget too small for the commit: refused before anything is allocated, with its terms.
//! let tiny = CommitParams { budget: Some(1024), ..params };
//! let err = commit(&cpu, TraceInput::host(&trace, MatrixShape::new(8, 4)?), &tiny, &NoProgress).err().unwrap();
//! let refusal: &Refusal = err.refusal().expect("a refusal");
//! assert!(refusal.model.total() > refusal.budget);
//! # Ok::<(), ProverError>(())
//! ```

pub use crate::memory::{MemoryModel, Refusal};
pub use backend_api::{
    Backend, DEFAULT_SCRATCH_CAP, DIGEST_BYTES, DeviceBuffer, Error as BackendError, HashKind, HostBuffer, LdeParams,
    LeafLayout, LeafSpec, MatrixShape, TreeShape, hex,
};

pub use crate::{
    Admission, CommitParams, CommitPlan, Commitment, NoProgress, Phase, Progress, ProverError, TraceInput, commit,
    commit_admitted,
};
