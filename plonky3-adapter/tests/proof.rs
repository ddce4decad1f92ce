//! A real proof: p3-uni-stark over Goldilocks with a Keccak-256 MMCS and a Fibonacci AIR, proved
//! with Plonky3's stock `Radix2DitParallel` and with `BackendDft` on each backend. Each proof
//! verifies with Plonky3's stock verifier, and its postcard serialization is byte-identical to
//! the stock proof's. A tampered proof is rejected, so the verification is not vacuous.

mod common;

use std::sync::Arc;

use backend_cpu::CpuBackend;
use common::stark::{prove_and_verify, stock};
use plonky3_adapter::BackendDft;

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
