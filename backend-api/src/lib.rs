//! The contract every commit backend implements, and the host-side logic they share.
//!
//! - **One trait, associated buffers.** [`Backend`] owns device memory through its `Buffer` type
//!   (freed on drop) and exposes the kernel families of a STARK commit: in-place transpose,
//!   batched copy and bit-reversed rows ([`Backend::bit_reversed_rows`]), leaf hashing, Merkle
//!   tree, coset LDE; and, optionally, the opening products a PCS's openings run over the
//!   committed LDE ([`Backend::row_dot_products`], [`Backend::column_dot_products`]), FRI's
//!   fold ([`Backend::fri_fold`]) with its input ([`Backend::reduce_openings`]) and a STARK's quotient from its constraints compiled into a
//!   [`ConstraintProgram`] ([`Backend::quotient_values`]). Pipelines are generic over it.
//! - **A checked front, an unchecked port.** A port implements [`RawBackend`]; every
//!   `RawBackend` is a [`Backend`] through one sealed blanket implementation whose methods
//!   validate every argument ([`validate`]: shapes against buffers, ranges, overflow, and that
//!   each buffer belongs to the instance it is passed to) before the port's method runs. A port
//!   cannot skip a check, and never writes one. The raw methods that take a buffer, a length, a
//!   range, a shape or a host slice are `unsafe fn` whose safety contract is those checks, so safe
//!   code reaches them only through the front (as wgpu-hal's methods are `unsafe` and only
//!   wgpu-core calls them).
//! - **Shared plans, not shared kernels.** The in-place transpose [`plan`] and the LDE twiddles
//!   ([`field::LdeTwiddles`]) are computed here, on the host, so every backend executes the same
//!   moves over the same constants; a backend only supplies the kernels.
//! - **Same bytes everywhere.** CONVENTIONS.md fixes the field, the LDE, the leaf layouts, the
//!   hashes and the tree layout; shapes and specs here validate against it once for all backends.
//! - **Count every byte.** Each backend reserves its allocations in an [`AllocTracker`] before
//!   making them: live and peak bytes, and a hook that fails the N-th allocation for
//!   fault-injection tests ([`fault`]). Budgets and admission are the commit pipeline's policy
//!   (the `commit` crate's memory model), not part of this contract.

mod backend;
pub mod contract;
pub mod copy;
mod error;
pub mod fault;
pub mod field;
pub mod open;
pub mod plan;
mod port;
mod prepare;
pub mod quotient;
mod shape;
pub mod validate;

pub use backend::{
    Backend, DeviceBuffer, DeviceInfo, HostBuffer, LeafJob, PendingDownload, digest_to_words, digests_from_words, hex,
    host_memory, host_total_memory, host_vec,
};
pub use error::{DriverError, Error, Result};
pub use fault::{AllocTracker, FaultSite, MemoryCounters, Reservation, Reserved};
pub use open::{MAX_REDUCTION_POINTS, ReductionCall, ReductionPoint};
pub use plan::DEFAULT_SCRATCH_CAP;
pub use port::{
    HOST_LEAF_CHUNK_BYTES, RawBackend, hash_leaves_in_chunks, host_leaf_chunk_rows, leaves_then_transpose_in_turn,
};
pub use prepare::{Preparation, TransferFloor, file_safe_key};
pub use quotient::{ConstraintProgram, Instr, QuotientCall, QuotientDomain, Selector};
pub use shape::{
    CopyRange, DIGEST_BYTES, DIGEST_WORDS, ELEM_BYTES, HashKind, LdeParams, LeafLayout, LeafSpec, MAX_DOT_VECTORS,
    MAX_EXTENSION_DEGREE, MAX_LOG_DOMAIN, MatrixShape, RowStride, TreeShape,
};
