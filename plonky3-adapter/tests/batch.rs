//! Many tables in one proof: p3-batch-stark's `prove_batch` and `plonky3_adapter::prove_batch`
//! with `BackendPcs`, against stock Plonky3 (`Radix2DitParallel`, the Keccak `MerkleTreeMmcs`)
//! with the same parameters. Each batch mixes the Fibonacci AIR, Plonky3's Keccak-f AIR and its
//! BLAKE3 or Poseidon2 AIR at several heights; one has a table with a preprocessed column (a third
//! commitment), the other lookups between its tables (the permutation traces p3-lookup adds are a
//! second mixed-height commitment). Each proof is checked byte for byte against
//! stock's, and `verify_batch` with the stock configuration accepts it (deserialized from those
//! bytes) and refuses it with a bit flipped or a wrong public value.

mod common;

use std::sync::Arc;

use backend_api::Backend;
use backend_cpu::CpuBackend;
use common::batch::{Batch, Shape, Table, check_against, prove, prove_on_device};
use common::stark::{config, fused_config};
use p3_dft::Radix2DitParallel;
use p3_uni_stark::StarkGenericConfig;
use plonky3_adapter::{BackendDft, BackendMmcs};

/// Seven tables of five heights, two sharing two of them: 2^3 (BLAKE3), 2^4, 2^5 (Poseidon2 and
/// a table with a preprocessed column), 2^6 (Fibonacci and Keccak-f), 2^9. No lookups.
fn tables() -> Vec<Shape> {
    vec![
        Shape::Fibonacci { pairs: 4, rows: 1 << 6 },
        Shape::Keccak { hashes: 2 },
        Shape::Fibonacci { pairs: 1, rows: 1 << 9 },
        Shape::Blake3 { rows: 1 << 3 },
        Shape::Poseidon2 { rows: 1 << 5 },
        Shape::Counter { rows: 1 << 5 },
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
/// (and reduced there where `reductions`: the backend implements `reduce_openings`). Then proves
/// each batch again with [`plonky3_adapter::prove_batch`]: the same bytes, each table without
/// lookups evaluating its quotient on the device (a table sharing its height with another reads
/// its columns from the middle of that height's LDE), the tables with lookups on the host, and
/// every table's quotient chunks committed on the device in one commitment and opened there.
fn batch_proofs_are_stock<B: Backend + 'static>(backend: Arc<B>, batches: &[Vec<Shape>], reductions: bool) {
    let stock = config(Radix2DitParallel::default());
    let ours = fused_config(BackendDft::new(Arc::clone(&backend)), BackendMmcs::new(Arc::clone(&backend), 0));
    let device = fused_config(BackendDft::new(Arc::clone(&backend)), BackendMmcs::new(backend, 0));
    let (mut fused, mut mixed, mut matrices, mut chunks, mut host, mut tables) = (0, 0, 0, 0, 0, 0);
    for (b, shapes) in batches.iter().enumerate() {
        let batch = Batch::new(shapes);
        let want = check_against(&prove(&stock, &batch), &stock, &batch);
        let got = check_against(&prove(&ours, &batch), &stock, &batch);
        assert!(got == want, "batch {b} ({:?}): the proofs differ", batch.dims());
        let on_device = prove_on_device(&device, &batch);
        chunks +=
            on_device.opened_values.instances.iter().map(|i| i.base_opened_values.quotient_chunks.len()).sum::<usize>();
        let got = check_against(&on_device, &stock, &batch);
        assert!(got == want, "batch {b} ({:?}): plonky3_adapter::prove_batch's proof differs", batch.dims());
        let with_lookups = batch.lookup_tables();
        let preprocessed = batch.tables.iter().filter(|t| matches!(t, Table::Counter(_))).count();
        // The traces' and the permutation traces' commits are of several heights; the preprocessed
        // columns' (of one height here) is a commit too.
        mixed += 1 + usize::from(with_lookups > 0);
        fused += 1 + usize::from(with_lookups > 0) + usize::from(preprocessed > 0);
        matrices += batch.tables.len() + with_lookups + preprocessed;
        // Tables with lookups or preprocessed columns evaluate their quotients on the host.
        host += with_lookups + preprocessed;
        tables += batch.tables.len();
    }
    let stats = ours.pcs().stats();
    assert_eq!((stats.device_errors, stats.host_openings, stats.admission_refusals), (0, 0, 0), "{stats:?}");
    // Every batch's tables have several heights; the quotient chunks' commit (`commit_ldes`, of
    // LDEs p3-batch-stark computed on the host) is the stock one.
    assert_eq!(
        (stats.fused_commits, stats.fused_mixed_commits, stats.stock_commits),
        (fused, mixed, batches.len()),
        "{stats:?}"
    );
    // Per matrix: its evaluations at its points (one call) and its rows' reduction.
    assert_eq!(stats.device_openings, 2 * matrices, "{stats:?}");
    assert_eq!(stats.device_reductions, if reductions { matrices } else { 0 }, "{stats:?}");
    let trees = ours.pcs().mmcs().stats();
    assert_eq!((trees.host_commits, trees.device_errors), (0, 0), "{trees:?}");

    let stats = device.pcs().stats();
    assert_eq!((stats.device_errors, stats.host_openings, stats.admission_refusals), (0, 0, 0), "{stats:?}");
    assert_eq!((stats.device_quotients, stats.host_quotients), (tables - host, host), "{stats:?}");
    assert_eq!(
        (stats.fused_commits, stats.device_quotient_commits, stats.stock_commits),
        (fused, batches.len(), 0),
        "{stats:?}"
    );
    // The quotient chunks' openings are the device's too.
    assert_eq!(stats.device_openings, 2 * (matrices + chunks), "{stats:?}");
    assert_eq!(stats.device_reductions, if reductions { matrices + chunks } else { 0 }, "{stats:?}");
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

    // The same through plonky3_adapter::prove_batch, whose traces' commit borrows them.
    let failing = with(OnRefusal::Fail);
    match common::batch::try_prove_on_device(&failing, &batch) {
        Err(ProvingError::Pcs { phase, source: PcsError::NotAdmitted { heights, .. } }) => {
            assert_eq!((phase, heights), ("trace commitment", 3));
        }
        Err(other) => panic!("expected the trace commitment's NotAdmitted, got {other:?}"),
        Ok(_) => panic!("a batch whose fused commit was refused was proved under OnRefusal::Fail"),
    }

    let stock = config(Radix2DitParallel::default());
    let want = check_against(&prove(&stock, &batch), &stock, &batch);
    let stock_way = with(OnRefusal::CommitStock);
    assert!(check_against(&prove(&stock_way, &batch), &stock, &batch) == want, "the proofs differ");
    let stats = stock_way.pcs().stats();
    // The traces' commit is refused; the permutation traces' (two heights, smaller) is admitted.
    assert_eq!((stats.admission_refusals, stats.fused_commits, stats.stock_commits), (1, 1, 2), "{stats:?}");
    let stock_way = with(OnRefusal::CommitStock);
    let got = check_against(&prove_on_device(&stock_way, &batch), &stock, &batch);
    assert!(got == want, "plonky3_adapter::prove_batch's proof differs");
    let stats = stock_way.pcs().stats();
    // The traces (refused) on the host: every quotient there too, and their commit stock's.
    assert_eq!(
        (stats.admission_refusals, stats.fused_commits, stats.stock_commits, stats.host_quotients),
        (1, 1, 2, batch.tables.len()),
        "{stats:?}"
    );
}

/// The quotients' commit of [`plonky3_adapter::prove_batch`] is `TwoAdicFriPcs::commit_ldes` of
/// each table's `get_quotient_ldes`, stock's commitment: three tables of two heights and one or
/// two chunks (two of them share a height, so their chunks are assembled side by side, in the
/// batch's order around the other table's). When any allocation of the device commit fails, the
/// values come down and are committed the stock way, with the same commitment and the error
/// counted; when the first upload of a host table's values fails, too.
#[test]
fn a_batch_quotient_commit_is_stock_and_survives_a_failed_allocation_anywhere() {
    use common::stark::{Challenge, Challenger, Val, pcs};
    use p3_commit::{Pcs, PolynomialSpace, UnivariateStarkPcs};
    use p3_field::PrimeField64;
    use p3_matrix::dense::RowMajorMatrix;
    use plonky3_adapter::{DeviceQuotientPcs, QuotientValues};
    use rand::{Rng, SeedableRng};

    let stock = pcs(Radix2DitParallel::default(), 1);
    let backend = Arc::new(CpuBackend::new());
    let ours = fused_config(BackendDft::new(Arc::clone(&backend)), BackendMmcs::new(Arc::clone(&backend), 0));
    let ours = ours.pcs();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(51);
    // (trace height, chunks): the first and the last share their LDE's height.
    let tables: Vec<(RowMajorMatrix<Val>, _, usize)> = [(1 << 6, 2), (1 << 4, 2), (1 << 6, 1)]
        .into_iter()
        .map(|(height, chunks)| {
            let domain = Pcs::<Challenge, Challenger>::natural_domain_for_degree(&stock, height)
                .create_disjoint_domain(height * chunks);
            let values = (0..domain.size() * 2).map(|_| Val::new(rng.random_range(0..Val::ORDER_U64))).collect();
            (RowMajorMatrix::new(values, 2), domain, chunks)
        })
        .collect();
    let ldes = tables
        .iter()
        .flat_map(|(m, domain, chunks)| {
            let evaluations = domain.split_domains(*chunks).into_iter().zip(domain.split_evals(*chunks, m.clone()));
            UnivariateStarkPcs::<Challenge, Challenger>::get_quotient_ldes(&stock, evaluations, *chunks).unwrap()
        })
        .collect();
    let (want, _) = UnivariateStarkPcs::<Challenge, Challenger>::commit_ldes(&stock, ldes).unwrap();
    let commit = || {
        let quotients = tables.iter().map(|(m, d, c)| (QuotientValues::Host(m.clone()), *d, *c)).collect();
        DeviceQuotientPcs::<Challenge, Challenger>::commit_device_quotients(ours, quotients).unwrap().0
    };

    let before = backend.tracker().counters().allocations;
    assert_eq!(commit(), want, "the device commit");
    let allocations = backend.tracker().counters().allocations - before;
    let stats = ours.stats();
    assert_eq!((stats.device_quotient_commits, stats.stock_commits, stats.device_errors), (1, 0, 0), "{stats:?}");
    assert!(allocations > 3, "the three uploads and the commit's own: {allocations}");
    for at in 0..allocations {
        backend.tracker().fail_at(backend.tracker().counters().allocations + at);
        assert_eq!(commit(), want, "allocation {at} of {allocations} failed");
        backend.tracker().disarm();
    }
    let stats = ours.stats();
    // Each call committed once, on the device or the stock way. The first three failures are the
    // uploads (no device error: the commit never started); every other stock commit follows a
    // counted device error. (A failed allocation the backend has a fallback for, such as a
    // transpose's scratch, leaves the commit on the device.)
    assert_eq!(stats.device_quotient_commits + stats.stock_commits, 1 + allocations, "{stats:?}");
    assert!(stats.device_errors + 3 >= allocations - 1, "{stats:?}");
    assert_eq!((stats.stock_commits, stats.admission_refusals), (stats.device_errors + 3, 0), "{stats:?}");
}
