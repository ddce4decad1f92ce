//! A single-threaded host backend: the example port of the porting guide (docs/porting.md), written by
//! following it step by step.
//!
//! - **The smallest honest backend.** Host memory and plain loops on one thread; no `unsafe`
//!   block (its raw methods are `unsafe fn`, as the trait has them, and their bodies plain Rust), no
//!   rayon. It passes the conformance and reliability suites, so it shows what a port must do and
//!   nothing more. It is not fast: use `backend-cpu` for real work.
//! - **Shared host math, not copies of it.** The LDE uses backend-api's field arithmetic and
//!   [`LdeTwiddles`](backend_api::field::LdeTwiddles), the transpose executes the shared
//!   [`TransposePlan`](backend_api::plan::TransposePlan), copy batches and leaf specs are checked
//!   by backend-api's validators, and the hashes are the `sha3` and `blake3` crates'.
//! - **Every byte through the tracker.** A [`ToyBuffer`] holds the
//!   [`Reservation`](backend_api::Reservation) of its bytes in the backend's shared
//!   [`AllocTracker`], and so does every scratch and table, so counters, admission and fault
//!   injection see this backend as they see a device.
//!
//! Its binary, with the `prover` CLI around it, is `examples/toy-prover`.

mod copy;
mod hash;
mod lde;
mod memory;
mod merkle;
mod open;
mod quotient;
mod transpose;

use std::sync::Arc;

use backend_api::{
    AllocTracker, CopyRange, DeviceBuffer, DeviceInfo, HashKind, LdeParams, LeafSpec, MatrixShape, Result, RowStride,
    TreeShape,
};

pub use memory::{ToyBuffer, ToyDownload};

/// The backend's name, as [`DeviceInfo`] and its errors spell it.
pub const NAME: &str = "toy";

/// A single-threaded host backend. Its memory is the host's; [`ToyBackend::with_memory`]
/// simulates a device of a given size.
#[derive(Debug, Default)]
pub struct ToyBackend {
    tracker: Arc<AllocTracker>,
    limit: Option<usize>,
}

impl ToyBackend {
    /// A backend limited only by the host allocator.
    pub fn new() -> Self {
        Self::default()
    }

    /// A backend that behaves like a device of `total_bytes`: an allocation that would take the
    /// live bytes above it fails with [`backend_api::Error::OutOfMemory`].
    pub fn with_memory(total_bytes: usize) -> Self {
        Self { tracker: Arc::default(), limit: Some(total_bytes) }
    }
}

impl backend_api::RawBackend for ToyBackend {
    type Buffer = ToyBuffer;
    type Download = ToyDownload;
    /// Plain host memory: the toy backend's "device" is host memory already.
    type HostBuffer = Vec<u64>;

    fn info(&self) -> DeviceInfo {
        let (total_memory, free_memory) = memory::total_and_free(self);
        DeviceInfo { backend: NAME, device: "one host thread".into(), total_memory, free_memory }
    }

    fn tracker(&self) -> &AllocTracker {
        &self.tracker
    }

    /// Allocates `len` zeroed elements (the trait leaves contents unspecified).
    unsafe fn alloc(&self, len: usize) -> Result<ToyBuffer> {
        memory::zeroed(self, len)
    }

    unsafe fn upload(&self, host: &[u64]) -> Result<ToyBuffer> {
        let mut buf = memory::zeroed(self, host.len())?;
        buf.as_mut_slice().copy_from_slice(host);
        Ok(buf)
    }

    unsafe fn write(&self, buf: &mut ToyBuffer, offset: usize, host: &[u64]) -> Result<()> {
        buf.as_mut_slice()[offset..offset + host.len()].copy_from_slice(host);
        Ok(())
    }

    unsafe fn download(&self, buf: &ToyBuffer, offset: usize, out: &mut [u64]) -> Result<()> {
        out.copy_from_slice(&buf.as_slice()[offset..offset + out.len()]);
        Ok(())
    }

    /// Copies at once (every earlier operation has finished); `wait` returns the copy.
    unsafe fn queue_download(&self, buf: &ToyBuffer) -> Result<ToyDownload> {
        let mut copy = memory::zeroed(self, buf.len())?;
        copy.as_mut_slice().copy_from_slice(buf.as_slice());
        Ok(ToyDownload { copy })
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    unsafe fn alloc_host(&self, len: usize) -> Result<Vec<u64>> {
        backend_api::host_vec(NAME, len)
    }

    unsafe fn transpose_in_place(&self, buf: &mut ToyBuffer, shape: MatrixShape, scratch_cap: usize) -> Result<()> {
        transpose::transpose_in_place(self, buf.as_mut_slice(), shape, scratch_cap)
    }

    unsafe fn batched_copy(&self, src: &ToyBuffer, dst: &mut ToyBuffer, copies: &[CopyRange]) -> Result<()> {
        copy::batched_copy(src.as_slice(), dst.as_mut_slice(), copies)
    }

    unsafe fn batched_copy_within(&self, buf: &mut ToyBuffer, copies: &[CopyRange]) -> Result<()> {
        copy::batched_copy_within(buf.as_mut_slice(), copies)
    }

    unsafe fn hash_leaves_into(
        &self,
        matrix: &ToyBuffer,
        shape: MatrixShape,
        spec: &LeafSpec,
        out: &mut ToyBuffer,
        out_digest: usize,
    ) -> Result<()> {
        hash::hash_leaves_into(matrix.as_slice(), shape, spec, out.as_mut_slice(), out_digest)
    }

    unsafe fn row_dot_products(
        &self,
        matrix: &ToyBuffer,
        shape: MatrixShape,
        coeffs: &[u64],
        out: &mut [u64],
    ) -> Result<()> {
        open::row_dot_products(matrix.as_slice(), shape, coeffs, out);
        Ok(())
    }

    unsafe fn column_dot_products(
        &self,
        matrix: &ToyBuffer,
        shape: MatrixShape,
        rows: RowStride,
        weights: &[u64],
        out: &mut [u64],
    ) -> Result<()> {
        open::column_dot_products(matrix.as_slice(), shape, rows, weights, out);
        Ok(())
    }

    unsafe fn fri_fold(
        &self,
        input: &ToyBuffer,
        beta: &[u64],
        addend: Option<(&ToyBuffer, &[u64])>,
        out: &mut ToyBuffer,
    ) -> Result<()> {
        open::fri_fold(input.as_slice(), beta, addend.map(|(v, gamma)| (v.as_slice(), gamma)), out.as_mut_slice());
        Ok(())
    }

    unsafe fn reduce_openings(
        &self,
        matrix: &ToyBuffer,
        shape: MatrixShape,
        call: &backend_api::ReductionCall<'_>,
        acc: &mut ToyBuffer,
    ) -> Result<()> {
        open::reduce_openings(matrix.as_slice(), shape, call, acc.as_mut_slice());
        Ok(())
    }

    unsafe fn quotient_values(
        &self,
        lde: &ToyBuffer,
        shape: MatrixShape,
        call: &backend_api::QuotientCall<'_>,
        out: &mut ToyBuffer,
    ) -> Result<()> {
        quotient::quotient_values(lde.as_slice(), shape, call, out.as_mut_slice());
        Ok(())
    }

    unsafe fn merkle_tree_in_place(&self, nodes: &mut ToyBuffer, tree: TreeShape, hash: HashKind) -> Result<()> {
        merkle::merkle_tree_in_place(nodes.as_mut_slice(), tree, hash)
    }

    unsafe fn coset_lde_in_place(&self, buf: &mut ToyBuffer, params: &LdeParams) -> Result<()> {
        lde::coset_lde_in_place(self, buf.as_mut_slice(), params)
    }
}
