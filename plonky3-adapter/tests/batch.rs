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
/// byte, and that the stock verifier accepts it: the traces' commit and the permutation traces'
/// fused on the device across their heights, every trace's and permutation trace's openings there
/// (and reduced there where `reductions`: the backend implements `reduce_openings`).
fn batch_proofs_are_stock<B: Backend + 'static>(backend: Arc<B>, batches: &[Vec<Shape>], reductions: bool) {
    let stock = config(Radix2DitParallel::default());
    let ours = fused_config(BackendDft::new(Arc::clone(&backend)), BackendMmcs::new(backend, 0));
    let (mut fused, mut matrices) = (0, 0);
    for (b, shapes) in batches.iter().enumerate() {
        let batch = Batch::new(shapes);
        let want = check_against(&prove(&stock, &batch), &stock, &batch);
        let got = check_against(&prove(&ours, &batch), &stock, &batch);
        assert!(got == want, "batch {b} ({:?}): the proofs differ", batch.dims());
        let lookups = batch.lookup_tables();
        fused += 1 + usize::from(lookups > 0);
        matrices += batch.tables.len() + lookups;
    }
    let stats = ours.pcs().stats();
    assert_eq!((stats.device_errors, stats.host_openings, stats.admission_refusals), (0, 0, 0), "{stats:?}");
    // Every batch's tables have several heights; the quotient chunks' commit (`commit_ldes`, of
    // LDEs p3-batch-stark computed on the host) is the stock one.
    assert_eq!(
        (stats.fused_commits, stats.fused_mixed_commits, stats.stock_commits),
        (fused, fused, batches.len()),
        "{stats:?}"
    );
    // Per matrix: its evaluations at its points (one call) and its rows' reduction.
    assert_eq!(stats.device_openings, 2 * matrices, "{stats:?}");
    assert_eq!(stats.device_reductions, if reductions { matrices } else { 0 }, "{stats:?}");
    let trees = ours.pcs().mmcs().stats();
    assert_eq!((trees.host_commits, trees.device_errors), (0, 0), "{trees:?}");
}

#[test]
fn cpu_backend_batch_proofs_are_byte_identical_to_stock() {
    batch_proofs_are_stock(Arc::new(CpuBackend::new()), &[tables(), tables_with_lookups()], true);
}

#[test]
fn toy_port_batch_proofs_are_byte_identical_to_stock() {
    batch_proofs_are_stock(Arc::new(toy_backend::ToyBackend::new()), &[tables_with_lookups()], true);
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_backend_batch_proofs_are_byte_identical_to_stock() {
    use backend_wgpu::{WgpuBackend, WgpuOptions};
    match WgpuBackend::new(WgpuOptions { allow_software: true, ..Default::default() }) {
        Ok(b) => batch_proofs_are_stock(Arc::new(b), &[tables(), tables_with_lookups()], true),
        Err(e) => common::skip("plonky3_adapter batch::wgpu", e, "REQUIRE_WGPU"),
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_backend_batch_proofs_are_byte_identical_to_stock() {
    use backend_cuda::CudaBackend;
    match BackendDft::<CudaBackend>::default().backend() {
        Ok(b) => batch_proofs_are_stock(b, &[tables(), tables_with_lookups()], true),
        Err(reason) => common::skip("plonky3_adapter batch::cuda", &reason, "REQUIRE_CUDA"),
    }
}

/// A batch whose fused trace commit does not fit the memory admission's budget (the model of its
/// three heights, [`plonky3_adapter::fused_heights_model`], less one byte) fails the proof with
/// the typed error in p3-batch-stark's trace commitment phase under `OnRefusal::Fail`, and under
/// the default is stock's proof, committed the stock way.
#[test]
fn a_batch_over_the_memory_budget_fails_with_the_typed_error_or_proves_the_stock_way() {
    use backend_api::{LdeParams, MatrixShape};
    use common::stark::{Challenger, FusedConfig, FusedPcs, fri};
    use p3_keccak::Keccak256Hash;
    use p3_uni_stark::ProvingError;
    use plonky3_adapter::{BackendExtensionMmcs, OnRefusal, PcsError};

    let batch = Batch::new(&tables_with_lookups());
    // The traces side by side per height, tallest first, on the coset of Goldilocks' generator 7.
    let mut heights = std::collections::BTreeMap::<std::cmp::Reverse<usize>, usize>::new();
    for (rows, cols) in batch.dims() {
        *heights.entry(std::cmp::Reverse(rows)).or_default() += cols;
    }
    let params: Vec<LdeParams> = heights
        .iter()
        .map(|(&std::cmp::Reverse(rows), &cols)| LdeParams::new(MatrixShape::new(rows, cols).unwrap(), 2, 7).unwrap())
        .collect();
    assert_eq!(params.len(), 3);
    let budget = plonky3_adapter::fused_heights_model(&params).unwrap().total() - 1;
    let with = |on_refusal| {
        let backend = Arc::new(CpuBackend::new());
        let mmcs = BackendMmcs::new(Arc::clone(&backend), 0);
        let pcs = FusedPcs::new(BackendDft::new(backend), mmcs.clone(), fri(BackendExtensionMmcs::new(mmcs), 1))
            .with_admission(commit::Admission::new(budget))
            .on_admission_refusal(on_refusal);
        FusedConfig::new(pcs, Challenger::from_hasher(vec![], Keccak256Hash {}))
    };
    let failing = with(OnRefusal::Fail);
    match common::batch::try_prove(&failing, &batch) {
        Err(ProvingError::Pcs { phase, source: PcsError::NotAdmitted { backend, trace, heights, blowup, .. } }) => {
            assert_eq!((phase, backend, trace, heights, blowup), ("trace commitment", "cpu", params[0].trace(), 3, 2));
        }
        Err(other) => panic!("expected the trace commitment's NotAdmitted, got {other:?}"),
        Ok(_) => panic!("a batch whose fused commit was refused was proved under OnRefusal::Fail"),
    }
    assert_eq!(failing.pcs().stats().admission_refusals, 1);

    let stock_way = with(OnRefusal::CommitStock);
    let stock = config(Radix2DitParallel::default());
    let want = check_against(&prove(&stock, &batch), &stock, &batch);
    assert!(check_against(&prove(&stock_way, &batch), &stock, &batch) == want, "the proofs differ");
    let stats = stock_way.pcs().stats();
    // The traces' commit is refused; the permutation traces' (two heights, smaller) is admitted.
    assert_eq!((stats.admission_refusals, stats.fused_commits, stats.stock_commits), (1, 1, 2), "{stats:?}");
}
