//! Many tables in one proof: p3-batch-stark's `prove_batch` with `BackendPcs`, against stock
//! Plonky3 (`Radix2DitParallel`, the Keccak `MerkleTreeMmcs`) with the same parameters. Each
//! batch mixes the Fibonacci AIR, Plonky3's Keccak-f AIR and its BLAKE3 or Poseidon2 AIR at
//! several heights, one of them with lookups between its tables (the permutation traces p3-lookup
//! adds are a second mixed-height commitment). Each proof is checked byte for byte against
//! stock's, and `verify_batch` with the stock configuration accepts it (deserialized from those
//! bytes) and refuses it with a bit flipped or a wrong public value.

mod common;

use std::sync::Arc;

use backend_api::Backend;
use backend_cpu::CpuBackend;
use common::batch::{Batch, Shape, check_against, prove};
use common::stark::{config, fused_config};
use p3_dft::Radix2DitParallel;
use p3_uni_stark::StarkGenericConfig;
use plonky3_adapter::{BackendDft, BackendMmcs};

/// Six tables of five heights, two sharing one: 2^3 (BLAKE3), 2^4, 2^5 (Poseidon2), 2^6
/// (Fibonacci and Keccak-f), 2^9. No lookups.
fn tables() -> Vec<Shape> {
    vec![
        Shape::Fibonacci { pairs: 4, rows: 1 << 6 },
        Shape::Keccak { hashes: 2 },
        Shape::Fibonacci { pairs: 1, rows: 1 << 9 },
        Shape::Blake3 { rows: 1 << 3 },
        Shape::Poseidon2 { rows: 1 << 5 },
        Shape::Fibonacci { pairs: 2, rows: 1 << 4 },
    ]
}

/// Six tables of four heights with lookups on two buses: two Fibonacci tables send their rows, two
/// tables of their heights (2^5, 2^8) receive them, beside Keccak-f (2^5) and BLAKE3 (2^4).
fn tables_with_lookups() -> Vec<Shape> {
    vec![
        Shape::FibonacciLookup { pairs: 2, rows: 1 << 5, bus: "short" },
        Shape::Keccak { hashes: 1 },
        Shape::FibonacciLookup { pairs: 1, rows: 1 << 8, bus: "tall" },
        Shape::Blake3 { rows: 1 << 4 },
    ]
}

/// Proves each batch with `BackendPcs` on `backend` and checks it is stock's proof, byte for
/// byte, and that the stock verifier accepts it.
fn batch_proofs_are_stock<B: Backend + 'static>(backend: Arc<B>, batches: &[Vec<Shape>]) {
    let stock = config(Radix2DitParallel::default());
    let ours = fused_config(BackendDft::new(Arc::clone(&backend)), BackendMmcs::new(backend, 0));
    for (b, shapes) in batches.iter().enumerate() {
        let batch = Batch::new(shapes);
        let want = check_against(&prove(&stock, &batch), &stock, &batch);
        let got = check_against(&prove(&ours, &batch), &stock, &batch);
        assert!(got == want, "batch {b} ({:?}): the proofs differ", batch.dims());
    }
    let stats = ours.pcs().stats();
    assert_eq!((stats.device_errors, stats.host_openings, stats.admission_refusals), (0, 0, 0), "{stats:?}");
}

#[test]
fn cpu_backend_batch_proofs_are_byte_identical_to_stock() {
    batch_proofs_are_stock(Arc::new(CpuBackend::new()), &[tables(), tables_with_lookups()]);
}

#[test]
fn toy_port_batch_proofs_are_byte_identical_to_stock() {
    batch_proofs_are_stock(Arc::new(toy_backend::ToyBackend::new()), &[tables_with_lookups()]);
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_backend_batch_proofs_are_byte_identical_to_stock() {
    use backend_wgpu::{WgpuBackend, WgpuOptions};
    match WgpuBackend::new(WgpuOptions { allow_software: true, ..Default::default() }) {
        Ok(b) => batch_proofs_are_stock(Arc::new(b), &[tables(), tables_with_lookups()]),
        Err(e) => common::skip("plonky3_adapter batch::wgpu", e, "REQUIRE_WGPU"),
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_backend_batch_proofs_are_byte_identical_to_stock() {
    use backend_cuda::CudaBackend;
    match BackendDft::<CudaBackend>::default().backend() {
        Ok(b) => batch_proofs_are_stock(b, &[tables(), tables_with_lookups()]),
        Err(reason) => common::skip("plonky3_adapter batch::cuda", &reason, "REQUIRE_CUDA"),
    }
}
