//! The `prover` CLI and its pieces: backend selection ([`select`]), reports ([`report`]), the
//! `bench` subcommand ([`bench`](mod@bench)), and the command line itself ([`cli`]).
//!
//! The commit pipeline is the [`commit`](mod@commit) library crate; everything it exports is
//! re-exported here, so `prover::commit`, `prover::CommitParams`, `prover::Admission` and
//! `prover::ProverError` name the same items as `commit::commit`, `commit::CommitParams`, ...
//! The concrete backends are named only in [`select`], behind the `cuda` / `wgpu` features.

pub mod bench;
pub mod cli;
pub mod report;
pub mod select;
mod trace;
pub mod units;

pub use ::commit::*;
pub use trace::TRACE_ENV;
