//! A real proof: p3-uni-stark over Goldilocks with a Keccak-256 MMCS and a Fibonacci AIR, proved
//! with Plonky3's stock `Radix2DitParallel` and `MerkleTreeMmcs`, and with `BackendDft` and
//! `BackendMmcs` on each backend. Each proof verifies with Plonky3's stock verifier (for
//! `BackendMmcs`, with the stock configuration types, over the deserialized bytes), and its
//! postcard serialization is byte-identical to the stock proof's. A wrong public value is
//! rejected, so the verification is not vacuous.

mod common;

use std::sync::Arc;

use backend_cpu::CpuBackend;
use common::stark::{prove_and_verify, prove_with_mmcs, stock};
use p3_dft::Radix2DitParallel;
use plonky3_adapter::{BackendDft, BackendMmcs};

#[test]
fn cpu_backend_proof_is_byte_identical_to_stock_and_verifies() {
    // Threshold 0: the trace's and the quotient chunks' LDEs all run on the backend.
    for (pairs, rows) in [(1, 1 << 3), (1, 1 << 10), (8, 1 << 9)] {
        let dft = BackendDft::new(Arc::new(CpuBackend::new()));
        let ours = prove_and_verify(dft.clone(), pairs, rows);
        assert_eq!(ours, stock(pairs, rows), "{pairs} pairs x {rows} rows: the proofs differ");
        let stats = dft.stats();
        assert!(stats.backend_ldes >= 2 && stats.device_errors == 0, "{pairs} x {rows}: {stats:?}");
    }
}

#[test]
fn cpu_backend_mmcs_proof_is_byte_identical_to_stock_and_verifies() {
    // The LDEs and the Merkle trees (trace, quotient, every FRI layer) on the CPU backend.
    for (pairs, rows) in [(1, 1 << 3), (1, 1 << 10), (8, 1 << 9)] {
        let backend = Arc::new(CpuBackend::new());
        let dft = BackendDft::new(Arc::clone(&backend));
        let mmcs = BackendMmcs::new(backend, 0);
        let ours = prove_with_mmcs(dft.clone(), mmcs.clone(), pairs, rows);
        assert_eq!(ours, stock(pairs, rows), "{pairs} pairs x {rows} rows: the proofs differ");
        let (lde, tree) = (dft.stats(), mmcs.stats());
        assert!(lde.backend_ldes >= 2 && lde.device_errors == 0, "{pairs} x {rows}: {lde:?}");
        // The trace, the quotient and at least one FRI layer, none on the host.
        assert!(tree.device_commits >= 3 && tree.host_commits == 0 && tree.device_errors == 0, "{tree:?}");
    }
    // The MMCS alone, beside Plonky3's own DFT.
    let mmcs = BackendMmcs::new(Arc::new(CpuBackend::new()), 0);
    assert_eq!(prove_with_mmcs(Radix2DitParallel::default(), mmcs.clone(), 4, 1 << 8), stock(4, 1 << 8));
    assert!(mmcs.stats().device_commits >= 3, "{:?}", mmcs.stats());
}

#[test]
fn default_cpu_dft_proof_is_byte_identical_to_stock() {
    // The type's Default, as a Plonky3 user writes it: the CPU backend's measured threshold
    // keeps every LDE on Plonky3's own DFT (see `DefaultDevice for CpuBackend`).
    let dft = BackendDft::<CpuBackend>::default();
    assert_eq!(prove_and_verify(dft.clone(), 4, 1 << 10), stock(4, 1 << 10));
    let stats = dft.stats();
    assert!(stats.backend_ldes == 0 && stats.cpu_ldes >= 2, "{stats:?}");
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_backend_proof_is_byte_identical_to_stock() {
    use backend_wgpu::{WgpuBackend, WgpuOptions};
    let backend = match WgpuBackend::new(WgpuOptions { allow_software: true, ..Default::default() }) {
        Ok(b) => Arc::new(b),
        Err(e) => return common::skip("plonky3_adapter proof::wgpu", e, "REQUIRE_WGPU"),
    };
    let dft = BackendDft::new(Arc::clone(&backend));
    assert_eq!(prove_and_verify(dft.clone(), 2, 1 << 9), stock(2, 1 << 9));
    assert!(dft.stats().backend_ldes >= 2, "{:?}", dft.stats());
    let mmcs = BackendMmcs::new(backend, 0);
    assert_eq!(prove_with_mmcs(dft.clone(), mmcs.clone(), 2, 1 << 9), stock(2, 1 << 9));
    let stats = mmcs.stats();
    assert!(stats.device_commits >= 3 && stats.host_commits == 0, "{stats:?}");
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_backend_proof_is_byte_identical_to_stock() {
    use backend_cuda::CudaBackend;
    let dft = BackendDft::<CudaBackend>::default().with_min_backend_elems(0);
    if let Err(reason) = dft.backend() {
        return common::skip("plonky3_adapter proof::cuda", &reason, "REQUIRE_CUDA");
    }
    for (pairs, rows) in [(1, 1 << 10), (8, 1 << 14)] {
        assert_eq!(prove_and_verify(dft.clone(), pairs, rows), stock(pairs, rows), "{pairs} x {rows}");
    }
    let stats = dft.stats();
    assert!(stats.backend_ldes >= 4 && stats.device_errors == 0, "{stats:?}");
    let mmcs = BackendMmcs::new(dft.backend().expect("opened above"), 0);
    for (pairs, rows) in [(1, 1 << 10), (8, 1 << 14)] {
        assert_eq!(prove_with_mmcs(dft.clone(), mmcs.clone(), pairs, rows), stock(pairs, rows), "{pairs} x {rows}");
    }
    let stats = mmcs.stats();
    assert!(stats.device_commits >= 6 && stats.host_commits == 0 && stats.device_errors == 0, "{stats:?}");
}

/// Fibonacci shapes (pairs, rows) and Keccak-f permutation counts the fused PCS is checked at.
const FIBONACCI: [(usize, usize); 3] = [(1, 1 << 3), (1, 1 << 10), (8, 1 << 9)];
const KECCAK_HASHES: [usize; 2] = [2, 21];

/// Opening products per proof where the backend has them, for a quotient of `chunks` chunks: the
/// trace's evaluations at its two points (both AIRs read the next row; one call) and its rows'
/// reduction, then each chunk's evaluation at its point and its rows' reduction (the quotient's
/// LDE is on the device too).
const fn device_openings_per_proof(chunks: usize) -> usize {
    2 + 2 * chunks
}

/// The quotient's chunks of the Fibonacci AIR (constraint degree 2) and of the Keccak-f AIR
/// (degree 3) at blowup 2.
const FIBONACCI_CHUNKS: usize = 1;
const KECCAK_CHUNKS: usize = 2;

/// Proves every statement with `BackendPcs` on `backend` and checks each proof is the stock
/// proof's bytes (and verifies, inside `prove_checked`): the trace commits fused, the quotient's
/// chunks committed on the device, and the openings of both on the device where `products` (the
/// backend implements the opening products).
fn fused_proofs_are_stock<B: backend_api::Backend + 'static>(
    backend: Arc<B>,
    fibonacci: &[(usize, usize)],
    keccak: &[usize],
    products: bool,
    reductions: bool,
) {
    use common::stark::{FibonacciAir, config, fibonacci_trace, fused_config, keccak_trace, prove_checked};
    use p3_uni_stark::StarkGenericConfig;
    let stock_config = config(Radix2DitParallel::default());
    let dft = BackendDft::new(Arc::clone(&backend));
    let ours = fused_config(dft, BackendMmcs::new(backend, 0));
    let mut proofs = 0;
    for &(pairs, rows) in fibonacci {
        let air = FibonacciAir { pairs };
        let (trace, public) = fibonacci_trace(pairs, rows);
        let want = prove_checked(&stock_config, &air, trace.clone(), &public);
        assert_eq!(prove_checked(&ours, &air, trace, &public), want, "Fibonacci {pairs} pairs x {rows} rows");
        proofs += 1;
    }
    for &hashes in keccak {
        let air = p3_keccak_air::KeccakAir {};
        let trace = keccak_trace(hashes);
        let want = prove_checked(&stock_config, &air, trace.clone(), &[]);
        assert_eq!(prove_checked(&ours, &air, trace, &[]), want, "Keccak-f AIR, {hashes} permutations");
        proofs += 1;
    }
    let stats = ours.pcs().stats();
    assert_eq!((stats.fused_commits, stats.device_errors, stats.host_openings), (proofs, 0, 0), "{stats:?}");
    // `p3_uni_stark::prove` hands the quotient's values to `commit_quotient`, which commits them
    // on the device.
    assert_eq!((stats.device_quotient_commits, stats.stock_commits), (proofs, 0), "the quotient commits: {stats:?}");
    let per_proof = fibonacci.len() * device_openings_per_proof(FIBONACCI_CHUNKS)
        + keccak.len() * device_openings_per_proof(KECCAK_CHUNKS);
    let openings = if products { per_proof } else { 0 };
    assert_eq!(stats.device_openings, openings, "{stats:?}");
    // FRI's input from every matrix (the trace and each quotient chunk) on the device.
    let matrices = fibonacci.len() * (1 + FIBONACCI_CHUNKS) + keccak.len() * (1 + KECCAK_CHUNKS);
    assert_eq!(stats.device_reductions, if reductions { matrices } else { 0 }, "{stats:?}");
    // Every FRI round folded on the device: a proof of 2^k LDE rows and a constant final
    // polynomial folds k times.
    assert!(stats.device_fri_rounds >= proofs && stats.host_fri_rounds == 0, "{stats:?}");
}

/// With Plonky3's `ExtensionMmcs` as FRI's MMCS, `prove_fri` folds on the host, and the proof is
/// the same.
#[test]
fn host_fri_folds_give_the_same_proofs() {
    use common::stark::{FibonacciAir, config, fibonacci_trace, fused_config_host_fri, prove_checked};
    use p3_uni_stark::StarkGenericConfig;
    let backend = Arc::new(CpuBackend::new());
    let ours = fused_config_host_fri(BackendDft::new(Arc::clone(&backend)), BackendMmcs::new(backend, 0), true);
    let air = FibonacciAir { pairs: 4 };
    let (trace, public) = fibonacci_trace(4, 1 << 8);
    let want = prove_checked(&config(Radix2DitParallel::default()), &air, trace.clone(), &public);
    assert_eq!(prove_checked(&ours, &air, trace, &public), want);
    let stats = ours.pcs().stats();
    assert_eq!((stats.fused_commits, stats.device_fri_rounds, stats.host_fri_rounds), (1, 0, 0), "{stats:?}");
}

#[test]
fn cpu_backend_fused_pcs_proofs_are_byte_identical_to_stock() {
    fused_proofs_are_stock(Arc::new(CpuBackend::new()), &FIBONACCI, &KECCAK_HASHES, true, true);
}

#[test]
fn toy_port_fused_pcs_proofs_are_byte_identical_to_stock() {
    fused_proofs_are_stock(Arc::new(toy_backend::ToyBackend::new()), &FIBONACCI[..2], &KECCAK_HASHES[..1], true, true);
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_backend_fused_pcs_proofs_are_byte_identical_to_stock() {
    use backend_wgpu::{WgpuBackend, WgpuOptions};
    match WgpuBackend::new(WgpuOptions { allow_software: true, ..Default::default() }) {
        Ok(b) => fused_proofs_are_stock(Arc::new(b), &FIBONACCI, &KECCAK_HASHES[..1], true, true),
        Err(e) => common::skip("plonky3_adapter proof::wgpu fused", e, "REQUIRE_WGPU"),
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_backend_fused_pcs_proofs_are_byte_identical_to_stock() {
    use backend_cuda::CudaBackend;
    match BackendDft::<CudaBackend>::default().backend() {
        Ok(b) => fused_proofs_are_stock(b, &[(1, 1 << 10), (8, 1 << 14)], &KECCAK_HASHES, true, true),
        Err(reason) => common::skip("plonky3_adapter proof::cuda fused", &reason, "REQUIRE_CUDA"),
    }
}

/// [`fused_proofs_are_stock`] with Plonky3's Poseidon2 MMCS and a duplex challenger: the trace,
/// quotient and FRI trees hashed with Poseidon2 on `backend`.
fn fused_poseidon2_proofs_are_stock<B: backend_api::Backend + 'static>(backend: Arc<B>, products: bool) {
    use common::stark::{FibonacciAir, fibonacci_trace, keccak_trace, poseidon2, prove_checked_against};
    use p3_uni_stark::StarkGenericConfig;
    let stock = poseidon2::stock();
    let ours = poseidon2::fused(Arc::clone(&backend));
    let air = FibonacciAir { pairs: 8 };
    let (trace, public) = fibonacci_trace(8, 1 << 9);
    let want = prove_checked_against(&stock, &stock, &air, trace.clone(), &public);
    assert_eq!(prove_checked_against(&ours, &stock, &air, trace, &public), want, "Fibonacci 8 x 2^9");
    let air = p3_keccak_air::KeccakAir {};
    let trace = keccak_trace(2);
    let want = prove_checked_against(&stock, &stock, &air, trace.clone(), &[]);
    assert_eq!(prove_checked_against(&ours, &stock, &air, trace, &[]), want, "Keccak-f AIR, 2 permutations");
    let stats = ours.pcs().stats();
    assert_eq!((stats.fused_commits, stats.device_errors), (2, 0), "{stats:?}");
    let per_proof = device_openings_per_proof(FIBONACCI_CHUNKS) + device_openings_per_proof(KECCAK_CHUNKS);
    assert_eq!(stats.device_openings, if products { per_proof } else { 0 }, "{stats:?}");
    let trees = ours.pcs().mmcs().stats();
    assert!(trees.device_commits >= 6 && trees.host_commits == 0, "{trees:?}");
}

#[test]
fn cpu_backend_fused_poseidon2_proofs_are_byte_identical_to_stock() {
    fused_poseidon2_proofs_are_stock(Arc::new(CpuBackend::new()), true);
}

#[test]
fn toy_port_fused_poseidon2_proofs_are_byte_identical_to_stock() {
    fused_poseidon2_proofs_are_stock(Arc::new(toy_backend::ToyBackend::new()), true);
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_backend_fused_poseidon2_proofs_are_byte_identical_to_stock() {
    use backend_wgpu::{WgpuBackend, WgpuOptions};
    match WgpuBackend::new(WgpuOptions { allow_software: true, ..Default::default() }) {
        Ok(b) => fused_poseidon2_proofs_are_stock(Arc::new(b), true),
        Err(e) => common::skip("plonky3_adapter proof::wgpu poseidon2", e, "REQUIRE_WGPU"),
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_backend_fused_poseidon2_proofs_are_byte_identical_to_stock() {
    use backend_cuda::CudaBackend;
    match BackendDft::<CudaBackend>::default().backend() {
        Ok(b) => fused_poseidon2_proofs_are_stock(b, true),
        Err(reason) => common::skip("plonky3_adapter proof::cuda poseidon2", &reason, "REQUIRE_CUDA"),
    }
}

/// A port whose opening products and reduced openings fail on every matrix taller than one row
/// (the one-row probes that decide whether a fused commit keeps its LDE, and whether openings are
/// reduced on the device, pass), and whose FRI fold fails once the
/// folded vector is 16 words or shorter (a device error in the middle of FRI's commit phase): the
/// toy port otherwise.
/// With `.1` (`only_sums`), only the reduced openings that add to an earlier sum fail: a height's
/// first matrix is reduced on the device, the next one fails.
struct FailingProducts(toy_backend::ToyBackend, bool);

mod failing_products {
    use backend_api::{
        AllocTracker, CopyRange, DeviceInfo, Error, HashKind, LdeParams, LeafSpec, MatrixShape, RawBackend, Result,
        RowStride, TreeShape,
    };
    use toy_backend::{ToyBackend, ToyBuffer, ToyDownload};

    use super::FailingProducts;

    fn refused(shape: MatrixShape) -> Result<()> {
        if shape.rows() > 1 {
            return Err(Error::Device {
                backend: "failing-products",
                op: "dot products".into(),
                source: "injected".into(),
            });
        }
        Ok(())
    }

    impl RawBackend for FailingProducts {
        type Buffer = ToyBuffer;
        type Download = ToyDownload;
        type HostBuffer = Vec<u64>;

        fn info(&self) -> DeviceInfo {
            DeviceInfo { backend: "failing-products", ..RawBackend::info(&self.0) }
        }
        fn tracker(&self) -> &AllocTracker {
            RawBackend::tracker(&self.0)
        }
        unsafe fn alloc(&self, len: usize) -> Result<ToyBuffer> {
            // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
            unsafe { RawBackend::alloc(&self.0, len) }
        }
        unsafe fn upload(&self, host: &[u64]) -> Result<ToyBuffer> {
            // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
            unsafe { RawBackend::upload(&self.0, host) }
        }
        unsafe fn write(&self, buf: &mut ToyBuffer, offset: usize, host: &[u64]) -> Result<()> {
            // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
            unsafe { RawBackend::write(&self.0, buf, offset, host) }
        }
        unsafe fn download(&self, buf: &ToyBuffer, offset: usize, out: &mut [u64]) -> Result<()> {
            // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
            unsafe { RawBackend::download(&self.0, buf, offset, out) }
        }
        unsafe fn queue_download(&self, buf: &ToyBuffer) -> Result<ToyDownload> {
            // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
            unsafe { RawBackend::queue_download(&self.0, buf) }
        }
        fn synchronize(&self) -> Result<()> {
            RawBackend::synchronize(&self.0)
        }
        unsafe fn alloc_host(&self, len: usize) -> Result<Vec<u64>> {
            // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
            unsafe { RawBackend::alloc_host(&self.0, len) }
        }
        unsafe fn transpose_in_place(&self, buf: &mut ToyBuffer, shape: MatrixShape, scratch_cap: usize) -> Result<()> {
            // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
            unsafe { RawBackend::transpose_in_place(&self.0, buf, shape, scratch_cap) }
        }
        unsafe fn batched_copy(&self, src: &ToyBuffer, dst: &mut ToyBuffer, copies: &[CopyRange]) -> Result<()> {
            // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
            unsafe { RawBackend::batched_copy(&self.0, src, dst, copies) }
        }
        unsafe fn batched_copy_within(&self, buf: &mut ToyBuffer, copies: &[CopyRange]) -> Result<()> {
            // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
            unsafe { RawBackend::batched_copy_within(&self.0, buf, copies) }
        }
        unsafe fn hash_leaves_into(
            &self,
            matrix: &ToyBuffer,
            shape: MatrixShape,
            spec: &LeafSpec,
            out: &mut ToyBuffer,
            out_digest: usize,
        ) -> Result<()> {
            // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
            unsafe { RawBackend::hash_leaves_into(&self.0, matrix, shape, spec, out, out_digest) }
        }
        unsafe fn merkle_tree_in_place(&self, nodes: &mut ToyBuffer, tree: TreeShape, hash: HashKind) -> Result<()> {
            // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
            unsafe { RawBackend::merkle_tree_in_place(&self.0, nodes, tree, hash) }
        }
        unsafe fn coset_lde_in_place(&self, buf: &mut ToyBuffer, params: &LdeParams) -> Result<()> {
            // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
            unsafe { RawBackend::coset_lde_in_place(&self.0, buf, params) }
        }
        unsafe fn row_dot_products(
            &self,
            m: &ToyBuffer,
            shape: MatrixShape,
            coeffs: &[u64],
            out: &mut [u64],
        ) -> Result<()> {
            refused(shape)?;
            // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
            unsafe { RawBackend::row_dot_products(&self.0, m, shape, coeffs, out) }
        }
        unsafe fn column_dot_products(
            &self,
            m: &ToyBuffer,
            shape: MatrixShape,
            rows: RowStride,
            weights: &[u64],
            out: &mut [u64],
        ) -> Result<()> {
            refused(shape)?;
            // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
            unsafe { RawBackend::column_dot_products(&self.0, m, shape, rows, weights, out) }
        }
        unsafe fn reduce_openings(
            &self,
            m: &ToyBuffer,
            shape: MatrixShape,
            call: &backend_api::ReductionCall<'_>,
            acc: &mut ToyBuffer,
        ) -> Result<()> {
            if !self.1 || call.accumulate {
                refused(shape)?;
            }
            // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
            unsafe { RawBackend::reduce_openings(&self.0, m, shape, call, acc) }
        }
        unsafe fn fri_fold(
            &self,
            input: &ToyBuffer,
            beta: &[u64],
            addend: Option<(&ToyBuffer, &[u64])>,
            out: &mut ToyBuffer,
        ) -> Result<()> {
            if backend_api::DeviceBuffer::len(out) <= 16 {
                return Err(Error::Device {
                    backend: "failing-products",
                    op: "fri_fold".into(),
                    source: "injected".into(),
                });
            }
            // SAFETY: our contract, for the backend this one wraps (its buffers and tracker are ours).
            unsafe { RawBackend::fri_fold(&self.0, input, beta, addend, out) }
        }
    }

    // Keeps the type's constructor next to its implementation.
    pub(super) fn new() -> FailingProducts {
        FailingProducts(ToyBackend::new(), false)
    }

    /// Only the reduced openings that add to an earlier sum fail.
    pub(super) fn failing_sums() -> FailingProducts {
        FailingProducts(ToyBackend::new(), true)
    }
}

/// Opening products that fail on the device are computed on the host, each counted; a FRI fold
/// that fails moves that round and the rest to the host; the proof is still the stock proof's
/// bytes.
#[test]
fn failed_opening_products_fall_back_to_the_host_with_the_same_proof() {
    use common::stark::{FibonacciAir, config, fibonacci_trace, fused_config, prove_checked};
    use p3_uni_stark::StarkGenericConfig;
    let backend = Arc::new(failing_products::new());
    let ours = fused_config(BackendDft::new(Arc::clone(&backend)), BackendMmcs::new(backend, 0));
    let air = FibonacciAir { pairs: 2 };
    let (trace, public) = fibonacci_trace(2, 1 << 6);
    let want = prove_checked(&config(Radix2DitParallel::default()), &air, trace.clone(), &public);
    assert_eq!(prove_checked(&ours, &air, trace, &public), want);
    let stats = ours.pcs().stats();
    assert_eq!((stats.fused_commits, stats.device_openings, stats.device_reductions), (1, 0, 0), "{stats:?}");
    assert_eq!(
        (stats.host_openings, stats.device_errors),
        (device_openings_per_proof(FIBONACCI_CHUNKS), device_openings_per_proof(FIBONACCI_CHUNKS) + 1),
        "{stats:?}"
    );
    assert!(stats.device_fri_rounds >= 1 && stats.host_fri_rounds >= 1, "{stats:?}");
}

/// A height's reduced openings that fail on the device after an earlier matrix's succeeded (the
/// quotient chunk's, added to the trace's sum) are reduced again on the host, the earlier
/// matrix's included (the device sum may hold part of the failed call): the proof is the stock
/// proof's bytes.
#[test]
fn a_failed_reduction_after_a_successful_one_reduces_both_on_the_host() {
    use common::stark::{FibonacciAir, config, fibonacci_trace, fused_config, prove_checked};
    use p3_uni_stark::StarkGenericConfig;
    let backend = Arc::new(failing_products::failing_sums());
    let ours = fused_config(BackendDft::new(Arc::clone(&backend)), BackendMmcs::new(backend, 0));
    let air = FibonacciAir { pairs: 2 };
    let (trace, public) = fibonacci_trace(2, 1 << 6);
    let want = prove_checked(&config(Radix2DitParallel::default()), &air, trace.clone(), &public);
    assert_eq!(prove_checked(&ours, &air, trace, &public), want);
    let stats = ours.pcs().stats();
    // The trace's reduction succeeded (and was redone on the host), the chunk's failed; the
    // evaluations' products (one call per matrix) fail as in the port's other mode.
    assert_eq!((stats.device_reductions, stats.host_openings), (1, 1 + (1 + FIBONACCI_CHUNKS)), "{stats:?}");
}

/// A fused commit that the memory admission refuses, under `OnRefusal::Fail`, fails the proof
/// with the typed error in p3-uni-stark's `ProvingError::Pcs` (the trace commitment phase); under
/// the default the same proof is the stock proof's bytes.
#[test]
fn a_refused_admission_fails_the_proof_with_the_typed_error_or_proves_the_stock_way() {
    use common::stark::{FibonacciAir, FusedConfig, FusedPcs, config, fibonacci_trace, fri, prove_checked};
    use p3_keccak::Keccak256Hash;
    use p3_uni_stark::{ProvingError, StarkGenericConfig};
    use plonky3_adapter::{BackendExtensionMmcs, OnRefusal, PcsError};
    let air = FibonacciAir { pairs: 2 };
    let (trace, public) = fibonacci_trace(2, 1 << 8);
    let with = |on_refusal| {
        let backend = Arc::new(CpuBackend::new());
        let mmcs = BackendMmcs::new(Arc::clone(&backend), 0);
        let pcs = FusedPcs::new(BackendDft::new(backend), mmcs.clone(), fri(BackendExtensionMmcs::new(mmcs), 1))
            // 1 KiB: far below the 2^9 x 4 LDE alone.
            .with_admission(commit::Admission::new(1 << 10))
            .on_admission_refusal(on_refusal);
        FusedConfig::new(pcs, common::stark::Challenger::from_hasher(vec![], Keccak256Hash {}))
    };
    let failing = with(OnRefusal::Fail);
    match p3_uni_stark::prove(&failing, &air, trace.clone(), &public) {
        Err(ProvingError::Pcs { phase, source: PcsError::NotAdmitted { backend, blowup, .. } }) => {
            assert_eq!((phase, backend, blowup), ("trace commitment", "cpu", 2));
        }
        Err(other) => panic!("expected the trace commitment's NotAdmitted, got {other:?}"),
        Ok(_) => panic!("a proof whose fused commit was refused succeeded under OnRefusal::Fail"),
    }
    assert_eq!(failing.pcs().stats().admission_refusals, 1);
    let stock_way = with(OnRefusal::CommitStock);
    let want = prove_checked(&config(Radix2DitParallel::default()), &air, trace.clone(), &public);
    assert_eq!(prove_checked(&stock_way, &air, trace, &public), want);
    let stats = stock_way.pcs().stats();
    // The trace's commit and the quotient's, both refused and committed the stock way.
    assert_eq!(
        (stats.admission_refusals, stats.fused_commits, stats.device_quotient_commits, stats.stock_commits),
        (2, 0, 0, 2),
        "{stats:?}"
    );
}
