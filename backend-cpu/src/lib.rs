//! The CPU (rayon) backend: the default backend and the reference oracle.
//!
//! - **Host memory, device rules.** A [`CpuBuffer`] is a `Vec<u64>` whose bytes go through the
//!   backend's [`AllocTracker`] like any device allocation (reserved before, released on drop), so
//!   live/peak counters, fault injection and admission behave as on a GPU.
//!   [`CpuBackend::with_memory`] simulates a device of a given size for admission tests.
//! - **Synchronous.** Every operation has finished when it returns; [`Backend::queue_download`]
//!   copies at once and [`Backend::synchronize`] has nothing to wait for.
//! - **rayon where it pays.** Leaves hash in parallel, one task per group of leaves; a Merkle
//!   level's parents in parallel; LDE butterflies over whole rows, parallel over blocks and rows;
//!   copies of a batch in parallel (large ones in chunks); transpose tiles in parallel.
//! - **Safe where it can be.** Copy batches are carved into disjoint `&mut` slices with
//!   `split_at_mut` (the batch's independence is exactly what makes that possible), so copies
//!   need no `unsafe`; the raw-pointer code is the tile transpose, whose tasks write disjoint
//!   elements of one exclusively borrowed slice, and the LDE's AVX-512 and AVX2 loads and stores
//!   of eight- and four-element chunks, behind a run-time CPU feature check.
//! - **The crates' hashes, not ours.** Keccak-256 from p3-keccak's multi-lane `hash_many`
//!   (eight leaves or 32 Merkle parents per call, SIMD chosen at run time) and from `sha3` for a
//!   lone message (the original Keccak pad both), BLAKE3 from `blake3` and Poseidon2 from Plonky3
//!   (p3-goldilocks's permutation, p3-symmetric's sponge and compression, on Plonky3's packed
//!   field type); this crate only lays out leaf preimages (CONVENTIONS.md).
//! - **A hand-written NTT, measured against Plonky3's.** The LDE is a radix-2 NTT over the
//!   row-major layout with the shared [`backend_api::field::LdeTwiddles`] tables, in place in
//!   its output buffer: a butterfly combines two contiguous rows; the narrow stages of both
//!   transforms, the coset scaling and the spreading to `B` rows run block by block in cache,
//!   and the wide stages in groups of stages that one task keeps in cache, so the LDE makes
//!   three passes over memory after the fill (more only for very wide rows). With AVX-512F or AVX2
//!   (detected at run time, no build flag: [`LdeIsa`]) the butterflies work on eight or four
//!   columns at once. Plonky3's `p3-dft` was
//!   considered as the implementation: it works on its own field and matrix types, allocates
//!   its own output (outside this backend's accounting, and it aborts rather than reporting
//!   out of memory), returns bit-reversed rows from its fastest DFT on two threads, and is
//!   scalar unless the whole build targets the CPU. It is a dev-dependency instead: a test
//!   checks this LDE against its `coset_lde_batch` element for element, and the `lde_plonky3`
//!   bench times both in one process.
//! - **The plan is shared.** The in-place transpose executes [`backend_api::plan::TransposePlan`]
//!   step by step with one scratch of `geometry.scratch_elems` elements.

mod copy;
mod hash;
mod lde;
mod memory;
mod merkle;
mod open;
mod poseidon2;
mod quotient;
mod transpose;

use std::ops::Range;
use std::sync::Arc;

#[cfg(doc)]
use backend_api::Backend;
use backend_api::{
    AllocTracker, CopyRange, DeviceInfo, HashKind, LdeParams, LeafSpec, MatrixShape, Result, RowStride, TreeShape,
};

pub use lde::LdeIsa;
pub use memory::{CpuBuffer, CpuDownload};

use memory::{Allocator, host_copy, par_copy};

/// The CPU backend: host memory, rayon's global thread pool.
#[derive(Debug)]
pub struct CpuBackend {
    alloc: Allocator,
    /// The LDE's row kernels: [`LdeIsa::detect`] unless [`CpuBackend::with_lde_isa`] chose others.
    lde_isa: LdeIsa,
}

impl Default for CpuBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl CpuBackend {
    /// A backend limited only by the host allocator; [`Backend::info`] reports the host's memory.
    pub fn new() -> Self {
        Self { alloc: Allocator { tracker: Arc::new(AllocTracker::new()), limit: None }, lde_isa: LdeIsa::detect() }
    }

    /// A backend that behaves like a device of `total_bytes`: an allocation that would take the
    /// live bytes above it fails with [`backend_api::Error::OutOfMemory`], and [`Backend::info`]
    /// reports `total_bytes` and what is not live.
    pub fn with_memory(total_bytes: usize) -> Self {
        Self {
            alloc: Allocator { tracker: Arc::new(AllocTracker::new()), limit: Some(total_bytes) },
            lde_isa: LdeIsa::detect(),
        }
    }

    /// This backend with the LDE's row kernels `isa` instead of the best this CPU runs: to
    /// compare the kernels, or to reproduce a result from a CPU without the wider ones. Every
    /// kernel set computes the same values.
    ///
    /// # Errors
    /// [`backend_api::Error::InvalidArgument`] when this CPU does not run `isa`
    /// ([`LdeIsa::is_supported`]).
    pub fn with_lde_isa(mut self, isa: LdeIsa) -> Result<Self> {
        if !isa.is_supported() {
            return Err(backend_api::Error::InvalidArgument(format!(
                "cpu: this CPU does not run the {isa} LDE kernels (it runs {:?})",
                LdeIsa::supported()
            )));
        }
        self.lde_isa = isa;
        Ok(self)
    }

    /// The LDE's row kernels this backend runs.
    pub fn lde_isa(&self) -> LdeIsa {
        self.lde_isa
    }
}

impl backend_api::RawBackend for CpuBackend {
    type Buffer = CpuBuffer;
    type Download = CpuDownload;
    /// Ordinary memory: the CPU backend has no bus to cross.
    type HostBuffer = Vec<u64>;

    fn info(&self) -> DeviceInfo {
        self.alloc.info()
    }

    fn tracker(&self) -> &AllocTracker {
        &self.alloc.tracker
    }

    /// Allocates `len` zeroed elements (the trait leaves contents unspecified).
    unsafe fn alloc(&self, len: usize) -> Result<CpuBuffer> {
        self.alloc.zeroed(len)
    }

    unsafe fn upload(&self, host: &[u64]) -> Result<CpuBuffer> {
        use rayon::prelude::*;
        self.alloc.buffer_from(host.par_iter().copied())
    }

    unsafe fn write(&self, buf: &mut CpuBuffer, offset: usize, host: &[u64]) -> Result<()> {
        par_copy(&mut buf.as_mut_slice()[offset..offset + host.len()], host);
        Ok(())
    }

    unsafe fn download(&self, buf: &CpuBuffer, offset: usize, out: &mut [u64]) -> Result<()> {
        par_copy(out, &buf.as_slice()[offset..offset + out.len()]);
        Ok(())
    }

    /// Copies at once (every earlier operation has finished); `wait` returns the copy.
    unsafe fn queue_download(&self, buf: &CpuBuffer) -> Result<CpuDownload> {
        Ok(CpuDownload { data: host_copy(&self.alloc, buf.as_slice())? })
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    /// Fresh zero pages ([`backend_api::host_vec`]); not counted in the tracker (host memory).
    unsafe fn alloc_host(&self, len: usize) -> Result<Vec<u64>> {
        backend_api::host_vec("cpu", len)
    }

    unsafe fn transpose_in_place(&self, buf: &mut CpuBuffer, shape: MatrixShape, scratch_cap: usize) -> Result<()> {
        transpose::transpose_in_place(&self.alloc, buf.as_mut_slice(), shape, scratch_cap)
    }

    unsafe fn batched_copy(&self, src: &CpuBuffer, dst: &mut CpuBuffer, copies: &[CopyRange]) -> Result<()> {
        copy::batched_copy(src.as_slice(), dst.as_mut_slice(), copies)
    }

    unsafe fn batched_copy_within(&self, buf: &mut CpuBuffer, copies: &[CopyRange]) -> Result<()> {
        copy::batched_copy_within(buf.as_mut_slice(), copies)
    }

    unsafe fn bit_reversed_rows(
        &self,
        src: &CpuBuffer,
        src_at: usize,
        shape: MatrixShape,
        rows: Range<usize>,
        dst: &mut CpuBuffer,
        dst_at: usize,
    ) -> Result<()> {
        let matrix = &src.as_slice()[src_at..src_at + shape.len()];
        let out = &mut dst.as_mut_slice()[dst_at..dst_at + rows.len() * shape.cols()];
        copy::bit_reversed_rows(matrix, shape.cols(), shape.rows().trailing_zeros(), rows, out);
        Ok(())
    }

    unsafe fn hash_leaves_into(
        &self,
        matrix: &CpuBuffer,
        shape: MatrixShape,
        spec: &LeafSpec,
        out: &mut CpuBuffer,
        out_digest: usize,
    ) -> Result<()> {
        hash::hash_leaves_into(matrix.as_slice(), shape, spec, out.as_mut_slice(), out_digest)
    }

    /// Hashes `matrix` where it is: host memory is this backend's memory, so no copy is made.
    unsafe fn hash_leaves_from_host(
        &self,
        matrix: &[u64],
        shape: MatrixShape,
        spec: &LeafSpec,
        out: &mut CpuBuffer,
        out_digest: usize,
    ) -> Result<()> {
        hash::hash_leaves_into(matrix, shape, spec, out.as_mut_slice(), out_digest)
    }

    unsafe fn row_dot_products(
        &self,
        matrix: &CpuBuffer,
        shape: MatrixShape,
        coeffs: &[u64],
        out: &mut [u64],
    ) -> Result<()> {
        open::row_dot_products(matrix.as_slice(), shape, coeffs, out);
        Ok(())
    }

    unsafe fn column_dot_products(
        &self,
        matrix: &CpuBuffer,
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
        input: &CpuBuffer,
        beta: &[u64],
        addend: Option<(&CpuBuffer, &[u64])>,
        out: &mut CpuBuffer,
    ) -> Result<()> {
        open::fri_fold(input.as_slice(), beta, addend.map(|(v, gamma)| (v.as_slice(), gamma)), out.as_mut_slice());
        Ok(())
    }

    unsafe fn reduce_openings(
        &self,
        matrix: &CpuBuffer,
        shape: MatrixShape,
        call: &backend_api::ReductionCall<'_>,
        acc: &mut CpuBuffer,
    ) -> Result<()> {
        open::reduce_openings(matrix.as_slice(), shape, call, acc.as_mut_slice());
        Ok(())
    }

    unsafe fn quotient_values(
        &self,
        lde: &CpuBuffer,
        shape: MatrixShape,
        call: &backend_api::QuotientCall<'_>,
        out: &mut CpuBuffer,
    ) -> Result<()> {
        quotient::quotient_values(lde.as_slice(), shape, call, out.as_mut_slice());
        Ok(())
    }

    unsafe fn merkle_tree_in_place(&self, nodes: &mut CpuBuffer, tree: TreeShape, hash: HashKind) -> Result<()> {
        merkle::merkle_tree_in_place(nodes.as_mut_slice(), tree, hash)
    }

    unsafe fn coset_lde_in_place(&self, buf: &mut CpuBuffer, params: &LdeParams) -> Result<()> {
        lde::coset_lde_in_place(self.lde_isa, &self.alloc, buf.as_mut_slice(), params)
    }

    /// `cpu`: one host, one queue of reservations for every CPU commit on it.
    fn device_key(&self) -> String {
        "cpu".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backend_api::{Backend, DIGEST_WORDS, DeviceBuffer, Error, LeafLayout, PendingDownload, digests_from_words};

    #[test]
    fn lde_kernels_are_the_detected_ones_unless_chosen() {
        assert_eq!(CpuBackend::new().lde_isa(), LdeIsa::detect());
        assert_eq!(CpuBackend::with_memory(1 << 20).lde_isa(), LdeIsa::detect());
        for isa in LdeIsa::ALL {
            match CpuBackend::with_memory(1 << 20).with_lde_isa(isa) {
                Ok(b) => {
                    assert!(isa.is_supported());
                    assert_eq!((b.lde_isa(), b.info().total_memory), (isa, 1 << 20), "the other settings stay");
                }
                Err(e) => {
                    assert!(!isa.is_supported(), "{isa}: {e}");
                    assert!(matches!(&e, backend_api::Error::InvalidArgument(m) if m.contains(isa.name())), "{e}");
                }
            }
        }
    }

    #[test]
    fn info_reports_the_cpu_and_the_simulated_memory() {
        let b = CpuBackend::with_memory(1 << 20);
        let _held = b.alloc(1000).unwrap();
        let info = b.info();
        assert_eq!(info.backend, "cpu");
        assert!(!info.device.is_empty());
        assert_eq!((info.total_memory, info.free_memory), (1 << 20, (1 << 20) - 8000));
        let host = CpuBackend::new().info();
        if std::path::Path::new("/proc/meminfo").exists() {
            assert!(host.total_memory > 0 && host.free_memory <= host.total_memory, "{host:?}");
        }
    }

    #[test]
    fn refused_allocations_leave_the_counters_as_they_were() {
        let b = CpuBackend::with_memory(100);
        let err = b.upload(&[0; 13]).unwrap_err();
        assert!(matches!(err, Error::OutOfMemory { requested: 104, total: 100, .. }), "{err}");
        let _ten = b.upload(&[0; 10]).unwrap();
        let err = b.alloc(3).unwrap_err();
        assert!(matches!(err, Error::OutOfMemory { requested: 24, free: 20, .. }), "{err}");
        assert_eq!((b.memory().live, b.memory().peak), (80, 80));
        let host = CpuBackend::new();
        for len in [usize::MAX / 8, 1 << 57] {
            assert!(host.alloc(len).unwrap_err().is_out_of_memory(), "{len}");
        }
        assert_eq!((host.memory().live, host.memory().peak), (0, 0));
    }

    #[test]
    fn upload_download_and_queued_download() {
        let b = CpuBackend::new();
        let host: Vec<u64> = (0..100_000).map(|i| i * 3 + 1).collect();
        let mut buf = b.upload(&host).unwrap();
        let mut part = vec![0; 10];
        b.download(&buf, 99_990, &mut part).unwrap();
        assert_eq!(part, host[99_990..]);
        let err = b.download(&buf, 99_991, &mut part).unwrap_err();
        assert!(matches!(err, Error::OutOfBounds { start: 99_991, end: 100_001, len: 100_000, .. }), "{err}");
        let queued = b.queue_download(&buf).unwrap();
        // Later work does not affect a queued copy.
        b.batched_copy_within(&mut buf, &[CopyRange::new(0, 1, 1)]).unwrap();
        assert_eq!(queued.wait().unwrap(), host);
        assert_eq!(b.download_vec(&buf).unwrap()[1], host[0]);
        b.synchronize().unwrap();
        drop(buf);
        assert_eq!(b.memory().live, 0);
    }

    #[test]
    fn a_commit_through_the_trait_default_methods() {
        // LDE -> leaves -> tree, via the provided methods, and every byte returned afterwards.
        let b = CpuBackend::with_memory(64 << 20);
        let trace = b.upload(&(0..64u64).collect::<Vec<_>>()).unwrap();
        let params = LdeParams::new(MatrixShape::new(16, 4).unwrap(), 4, 7).unwrap();
        let lde = b.coset_lde(&trace, &params).unwrap();
        let spec = LeafSpec::new(HashKind::Blake3, LeafLayout::Rows, 0..4).unwrap();
        let leaves = b.hash_leaves(&lde, params.lde_shape(), &spec).unwrap();
        let nodes = b.merkle_tree(&leaves, HashKind::Blake3).unwrap();
        let all = digests_from_words(&b.download_vec(&nodes).unwrap());
        assert_eq!(all.len(), 127);
        let lde_host = b.download_vec(&lde).unwrap();
        let first_leaf = blake3::hash(bytemuck::cast_slice(&lde_host[..4]));
        assert_eq!(all[63], *first_leaf.as_bytes());
        assert_eq!(leaves.len(), 64 * DIGEST_WORDS);
        drop((trace, lde, leaves, nodes));
        assert_eq!(b.memory().live, 0);
    }
}
