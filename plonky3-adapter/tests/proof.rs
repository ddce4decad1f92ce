//! A real proof: p3-uni-stark over Goldilocks with a Keccak-256 MMCS and a Fibonacci AIR, proved
//! with Plonky3's stock `Radix2DitParallel` and with `BackendDft` on each backend. Each proof
//! verifies with Plonky3's stock verifier, and its postcard serialization is byte-identical to
//! the stock proof's. A tampered proof is rejected, so the verification is not vacuous.

mod common;

use std::sync::Arc;

use backend_cpu::CpuBackend;
use common::stark::{FibonacciAir, Val, config, fibonacci_trace};
use p3_dft::{Radix2DitParallel, TwoAdicSubgroupDft};
use p3_uni_stark::{prove, verify};
use plonky3_adapter::BackendDft;

/// Proves the `pairs`-wide Fibonacci AIR over `rows` rows with `dft`; returns the serialized proof
/// after checking that the stock verifier accepts it.
fn prove_and_verify<D: TwoAdicSubgroupDft<Val> + Sync>(dft: D, pairs: usize, rows: usize) -> Vec<u8> {
    let config = config(dft);
    let air = FibonacciAir { pairs };
    let (trace, public) = fibonacci_trace(pairs, rows);
    let proof = prove(&config, &air, trace, &public).expect("proving succeeds");
    verify(&config, &air, &proof, &public).expect("the stock verifier accepts the proof");
    // A wrong public value must be rejected.
    let wrong = vec![public[0] + Val::new(1)];
    assert!(verify(&config, &air, &proof, &wrong).is_err(), "a wrong public value verified");
    postcard::to_allocvec(&proof).expect("the proof serializes")
}

/// The stock proof of the same statement.
fn stock(pairs: usize, rows: usize) -> Vec<u8> {
    prove_and_verify(Radix2DitParallel::<Val>::default(), pairs, rows)
}

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
    let dft = BackendDft::new(backend);
    assert_eq!(prove_and_verify(dft.clone(), 2, 1 << 9), stock(2, 1 << 9));
    assert!(dft.stats().backend_ldes >= 2, "{:?}", dft.stats());
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
}
