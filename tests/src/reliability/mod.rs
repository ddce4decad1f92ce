//! Reliability checks: a commit is either correct or refused, every time — under concurrency, under
//! allocation failures, across repetitions and thread counts, and for hostile copy batches.
//!
//! - **Whole commits, not kernels.** These checks drive [`commit::commit_admitted`], the pipeline
//!   users run, on the backend under test; the kernel-level checks are the rest of this crate.
//! - **The CPU backend is the oracle.** Every expected result is the [`backend_cpu::CpuBackend`]
//!   commit of the same table on a fresh instance, and that oracle is itself checked against the
//!   naive [`reference`](mod@crate::reference) (LDE by naive DFT, leaves through the `sha3` / `blake3` crates, recursive
//!   Merkle roots) before it is trusted. A GPU backend never calls the CPU backend; only this test
//!   code does.
//! - **One macro line per backend.** [`reliability_suite!`](crate::reliability_suite) mirrors
//!   [`conformance_suite!`](crate::conformance_suite): one `#[test]` per check, skips printed as
//!   `SKIPPED <backend>::<check>: <reason>`, and a `REQUIRE_*` variable that turns a skip into a
//!   failure.
//! - **`'static` backends.** The concurrency check runs commits on plain threads so that a
//!   deadlock is reported as a failure after [`CONCURRENCY_TIMEOUT`] instead of hanging the test
//!   run; those threads need the backend for `'static`, which the macro's `OnceLock` provides.
//!   A port driving a check by hand can `Box::leak` its backend.
//! - **Sizes.** Tables are small (at most 256 x 12, blowup 4) so the naive references stay fast
//!   and the whole CPU run stays well under a minute on two cores; the shapes still cover split
//!   trees, snapshots, host copies, both hashes and layouts, and scratch caps small enough to
//!   force many copy batches.
//!
//! The checks live in one file per concern: [`table`] (the tables, what a commit produced, the
//! CPU oracle), [`concurrency`], [`fault_injection`], [`determinism`] (repetitions and rayon
//! thread counts), [`device_set`] (a batch over logical devices), [`processes`] (waiting admission across
//! `prover` processes), [`copy_overlaps`], and the CUDA launch configurations (with the `cuda`
//! feature); [`suite`] runs them and holds the macros.

pub mod concurrency;
pub mod copy_overlaps;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod determinism;
pub mod device_set;
pub mod fault_injection;
pub mod processes;
pub mod suite;
pub mod table;

#[cfg(test)]
mod tests;

pub use concurrency::{CONCURRENCY_TIMEOUT, concurrency_tables, concurrent_commits_under_admission};
pub use copy_overlaps::batched_copy_overlaps_refused;
#[cfg(feature = "cuda")]
pub use cuda::cuda_launch_configurations;
pub use determinism::{commit_rayon_thread_counts, commit_repeated_100};
pub use device_set::device_set_over_logical_devices;
pub use fault_injection::{commit_fault_injection, fault_tables};
pub use processes::{
    ProcessCheck, ProcessSetup, eight_processes_under_a_two_commit_budget, run_process_check,
    sigkill_of_a_waiting_process_frees_its_share,
};
pub use suite::{run_reliability_check, run_reliability_outcome};
pub use table::{Committed, Table, commit_table, oracle, read_back};

use crate::Outcome;

/// A reliability check: like [`crate::Check`], but the backend lives for the whole process.
pub type ReliabilityCheck<B> = fn(&'static B) -> Outcome;
