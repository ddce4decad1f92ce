//! The `prover` CLI and its pieces: backend selection ([`select`]), reports ([`report`]), the
//! `bench` subcommand ([`bench`](mod@bench)), and the command line itself ([`cli`]).
//!
//! The commit pipeline is the [`commit`](mod@commit) library crate; everything it exports is
//! re-exported here, so `prover::commit`, `prover::CommitParams`, `prover::Admission` and
//! `prover::ProverError` name the same items as `commit::commit`, `commit::CommitParams`, ...
//! The concrete backends are named only in [`select`], behind the `cuda` / `wgpu` features.
//! [`prelude`] imports what a program that commits needs, backend choice included.
//!
//! # Example
//!
//! Commit a table on the first usable backend of a fallback list, read the roots and the LDE
//! back, and ask an error what it is. The repository's `examples/commit` is the longer version
//! (split trees, the lambda-vm-pairs layout, the host copy, a naive check of the LDE).
//!
//! ```
//! use prover::prelude::*;
//!
//! // `true` admits software adapters (llvmpipe), as on a machine without a GPU.
//! let (selected, skipped) = Registry::builtin().select_from("cuda,wgpu,cpu", true)?;
//! for why in &skipped {
//!     eprintln!("skipped {why}");
//! }
//! let (rows, cols) = (1 << 10, 8);
//! let trace: Vec<u64> = (0..(rows * cols) as u64).collect(); // row-major
//! let params = CommitParams { blowup: 4, ..CommitParams::default() };
//! let lde_len = with_backend!(selected, |b| {
//!     let c = commit(b, TraceInput::host(&trace, MatrixShape::new(rows, cols)?), &params, &NoProgress)?;
//!     println!("{}: root {}", selected.name(), c.roots_hex()[0]);
//!     c.lde_to_host(b)?.len() // column-major, N x cols
//! });
//! assert_eq!(lde_len, rows * 4 * cols);
//!
//! // A budget of 64 KiB cannot hold the 256 KiB LDE: refused before anything is allocated,
//! // with every term of the model.
//! let tiny = CommitParams { budget: Some(64 << 10), ..params };
//! let shape = MatrixShape::new(rows, cols)?;
//! let err = with_backend!(selected, |b| commit(b, TraceInput::host(&trace, shape), &tiny, &NoProgress).err())
//!     .expect("refused");
//! let refusal = err.refusal().expect("a budget refusal");
//! assert!(refusal.model.total() > refusal.budget);
//! # Ok::<(), ProverError>(())
//! ```

pub mod bench;
pub mod cli;
pub mod prelude;
pub mod report;
pub mod select;
mod trace;
pub mod units;

pub use ::commit::*;
pub use trace::TRACE_ENV;
