//! `BackendPcs` commits against stock `TwoAdicFriPcs` (Plonky3's `Radix2DitParallel` and Keccak
//! `MerkleTreeMmcs`): the same commitment and the same committed LDEs, on the fused path (one
//! matrix, several matrices of one coset, matrices of several heights) and on every way around it
//! (several cosets of one height, below the
//! threshold, two backend instances, a device error, a memory admission's refusal, committed the
//! stock way or failed with the typed error); openings
//! of several matrices of one device LDE, with the same opened values and proof bytes; and FRI's
//! layers folded and committed on the device (`BackendExtensionMmcs`) under several folding
//! schedules, with the same proof bytes.

mod common;

use std::sync::Arc;

use backend_api::Backend;
use backend_cpu::CpuBackend;
use common::matrix;
use common::stark::{BackendChallengeMmcs, Challenge, Challenger, Val, pcs, val_mmcs};
use p3_commit::{ExtensionMmcs, Mmcs, Pcs, PolynomialSpace, UnivariateStarkPcs};
use p3_dft::Radix2DitParallel;
use p3_field::coset::TwoAdicMultiplicativeCoset;
use p3_field::{Field, PrimeCharacteristicRing};
use p3_fri::FriParameters;
use p3_matrix::Matrix;
use p3_matrix::dense::RowMajorMatrix;
use plonky3_adapter::{BackendDft, BackendExtensionMmcs, BackendMmcs, BackendPcs, OnRefusal, PcsError, PcsStats};
use toy_backend::ToyBackend;

type Fused<B> = BackendPcs<B, BackendChallengeMmcs<B>>;

/// The fused PCS over `dft` and `mmcs`, blowup 2^`log_blowup`.
fn fused<B: Backend + 'static>(dft: BackendDft<B>, mmcs: BackendMmcs<B>, log_blowup: usize) -> Fused<B> {
    let fri = FriParameters {
        log_blowup,
        log_final_poly_len: 0,
        max_log_arity: 1,
        num_queries: 2,
        commit_proof_of_work_bits: 0,
        batch_proof_of_work_bits: 0,
        query_proof_of_work_bits: 0,
        mmcs: ExtensionMmcs::new(mmcs.clone()),
    };
    Fused::new(dft, mmcs, fri)
}

/// [`fused`] with the DFT and the MMCS on one `backend`, every LDE on it (threshold 0).
fn on<B: Backend + 'static>(backend: Arc<B>, log_blowup: usize) -> Fused<B> {
    fused(BackendDft::new(Arc::clone(&backend)), BackendMmcs::new(backend, 0), log_blowup)
}

/// The domain of `rows` rows on the coset `shift * H` (`shift = 1`: the subgroup).
fn domain(rows: usize, shift: Val) -> TwoAdicMultiplicativeCoset<Val> {
    TwoAdicMultiplicativeCoset::new(shift, rows.trailing_zeros() as usize).unwrap()
}

/// The stock PCS of these tests.
type StockPcs = common::stark::Pcs<Radix2DitParallel<Val>>;

/// A commit's commitment and prover data under the PCS `P`.
type Committed<P> = (<P as Pcs<Challenge, Challenger>>::Commitment, <P as Pcs<Challenge, Challenger>>::ProverData);

/// The stock PCS and `ours` on one commit: the commitments' bytes and every committed LDE equal
/// (`what` names the commit in a failure), and what `ours` counted since `before`.
fn same_commit<B: Backend + 'static>(
    ours: &Fused<B>,
    before: PcsStats,
    (want_cap, want_data): &Committed<StockPcs>,
    (cap, data): &Committed<Fused<B>>,
    what: &str,
) -> PcsStats {
    assert_eq!(
        postcard::to_allocvec(cap).unwrap(),
        postcard::to_allocvec(want_cap).unwrap(),
        "{what}: the commitments differ"
    );
    let want = val_mmcs().get_matrices(want_data);
    let got = ours.mmcs().get_matrices(data);
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!((g.height(), g.width()), (w.height(), w.width()), "{what}: matrix {i}");
        assert!(g.values == w.values, "{what}: matrix {i}: the committed LDEs differ");
    }
    let after = ours.stats();
    PcsStats {
        fused_commits: after.fused_commits - before.fused_commits,
        fused_mixed_commits: after.fused_mixed_commits - before.fused_mixed_commits,
        stock_commits: after.stock_commits - before.stock_commits,
        device_errors: after.device_errors - before.device_errors,
        device_openings: after.device_openings - before.device_openings,
        host_openings: after.host_openings - before.host_openings,
        device_reductions: after.device_reductions - before.device_reductions,
        admission_refusals: after.admission_refusals - before.admission_refusals,
        device_fri_rounds: after.device_fri_rounds - before.device_fri_rounds,
        host_fri_rounds: after.host_fri_rounds - before.host_fri_rounds,
        device_quotients: after.device_quotients - before.device_quotients,
        device_quotient_commits: after.device_quotient_commits - before.device_quotient_commits,
        host_quotients: after.host_quotients - before.host_quotients,
    }
}

/// Commits `inputs` with `ours` and with stock `TwoAdicFriPcs`, compares the commitments' bytes
/// and every committed LDE, and returns what `ours` counted for this commit.
fn same_as_stock<B: Backend + 'static>(
    ours: &Fused<B>,
    log_blowup: usize,
    inputs: &[(TwoAdicMultiplicativeCoset<Val>, RowMajorMatrix<Val>)],
) -> PcsStats {
    let before = ours.stats();
    let stock = pcs(Radix2DitParallel::<Val>::default(), log_blowup);
    let want = Pcs::<Challenge, Challenger>::commit(&stock, inputs.to_vec()).unwrap();
    let got = Pcs::<Challenge, Challenger>::commit(ours, inputs.to_vec()).unwrap();
    same_commit(ours, before, &want, &got, "the commit")
}

/// `commit_quotient` of `values` over `quotient_domain` in `num_chunks` chunks with `ours` and
/// with stock `TwoAdicFriPcs`: the same commitment and the same committed chunk LDEs; returns what
/// `ours` counted for it.
fn same_quotient_commit_as_stock<B: Backend + 'static>(
    ours: &Fused<B>,
    log_blowup: usize,
    quotient_domain: TwoAdicMultiplicativeCoset<Val>,
    values: &RowMajorMatrix<Val>,
    num_chunks: usize,
) -> PcsStats {
    let before = ours.stats();
    let stock = pcs(Radix2DitParallel::<Val>::default(), log_blowup);
    let want = UnivariateStarkPcs::<Challenge, Challenger>::commit_quotient(
        &stock,
        quotient_domain,
        values.clone(),
        num_chunks,
    )
    .unwrap();
    let got =
        UnivariateStarkPcs::<Challenge, Challenger>::commit_quotient(ours, quotient_domain, values.clone(), num_chunks)
            .unwrap();
    let what = format!("{} points x {} in {num_chunks} chunks, blowup 2^{log_blowup}", values.height(), values.width());
    same_commit(ours, before, &want, &got, &what)
}

const QUOTIENT_ON_DEVICE: PcsStats = PcsStats { device_quotient_commits: 1, ..PcsStats::ZERO };

/// The quotient domain p3-uni-stark takes for `2^log_points` points in `num_chunks` chunks: the
/// coset disjoint from the trace's subgroup.
fn quotient_domain(log_points: usize, num_chunks: usize) -> TwoAdicMultiplicativeCoset<Val> {
    domain((1 << log_points) / num_chunks, Val::ONE).create_disjoint_domain(1 << log_points)
}

/// The quotient's chunks committed on the device (the values uploaded once), one to eight chunks,
/// a chunk of one row, quadratic and cubic values with non-canonical words, blowups 2 to 8: stock's
/// commitment and LDEs, each time.
fn quotient_commits_on_device_match_stock<B: Backend + 'static>(backend: Arc<B>) {
    for (seed, (log_blowup, log_points, num_chunks, degree)) in
        [(1, 4, 1, 2), (1, 6, 2, 2), (2, 7, 4, 2), (1, 5, 8, 1), (3, 3, 8, 2), (1, 9, 2, 3)].into_iter().enumerate()
    {
        let ours = on(Arc::clone(&backend), log_blowup);
        let values = matrix(100 + seed as u64, 1 << log_points, degree);
        let domain = quotient_domain(log_points, num_chunks);
        assert_eq!(
            same_quotient_commit_as_stock(&ours, log_blowup, domain, &values, num_chunks),
            QUOTIENT_ON_DEVICE,
            "2^{log_points} points x {degree} in {num_chunks} chunks, blowup 2^{log_blowup}"
        );
    }
    assert_eq!(backend.memory().live, 0, "the quotient commits' buffers were not released (prover data dropped)");
}

#[test]
fn cpu_quotient_commits_on_the_device_match_stock() {
    quotient_commits_on_device_match_stock(Arc::new(CpuBackend::new()));
}

#[test]
fn toy_port_quotient_commits_on_the_device_match_stock() {
    quotient_commits_on_device_match_stock(Arc::new(ToyBackend::new()));
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_quotient_commits_on_the_device_match_stock() {
    use backend_wgpu::{WgpuBackend, WgpuOptions};
    match WgpuBackend::new(WgpuOptions { allow_software: true, ..Default::default() }) {
        Ok(b) => quotient_commits_on_device_match_stock(Arc::new(b)),
        Err(e) => common::skip("plonky3_adapter pcs::wgpu quotient commits", e, "REQUIRE_WGPU"),
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_quotient_commits_on_the_device_match_stock() {
    // An instance of its own: the check counts its live device bytes.
    match backend_cuda::CudaBackend::new(0) {
        Ok(b) => quotient_commits_on_device_match_stock(Arc::new(b)),
        Err(e) => common::skip("plonky3_adapter pcs::cuda quotient commits", e, "REQUIRE_CUDA"),
    }
}

/// A quotient commit the device does not take goes the stock way with stock's bytes: below the
/// DFT's threshold, the DFT and the MMCS on two instances, a device error (a port too small for
/// the chunks' LDEs), a memory admission's refusal.
#[test]
fn quotient_commits_the_device_does_not_take_go_the_stock_way() {
    let stock_after = |extra: PcsStats| PcsStats { stock_commits: 1, ..extra };
    let values = matrix(200, 1 << 8, 2);
    let domain = quotient_domain(8, 2);
    let backend = Arc::new(CpuBackend::new());
    // The chunks side by side are 2^7 x 4 words.
    let high = fused(
        BackendDft::new(Arc::clone(&backend)).with_min_backend_elems((1 << 7) * 4 + 1),
        BackendMmcs::new(Arc::clone(&backend), 0),
        1,
    );
    assert_eq!(same_quotient_commit_as_stock(&high, 1, domain, &values, 2), stock_after(PcsStats::ZERO));
    let at = fused(
        BackendDft::new(Arc::clone(&backend)).with_min_backend_elems((1 << 7) * 4),
        BackendMmcs::new(Arc::clone(&backend), 0),
        1,
    );
    assert_eq!(same_quotient_commit_as_stock(&at, 1, domain, &values, 2), QUOTIENT_ON_DEVICE);
    let two = fused(BackendDft::new(Arc::new(CpuBackend::new())), BackendMmcs::new(Arc::clone(&backend), 0), 1);
    assert_eq!(same_quotient_commit_as_stock(&two, 1, domain, &values, 2), stock_after(PcsStats::ZERO));

    // 12 KiB of port memory: the 4 KiB of values go up, a chunk's 2^8 x 4 LDE (8 KiB) and the
    // LDE being assembled (8 KiB) do not fit beside them.
    let small = Arc::new(ToyBackend::with_memory(12 << 10));
    let ours = on(Arc::clone(&small), 1);
    assert_eq!(
        same_quotient_commit_as_stock(&ours, 1, domain, &values, 2),
        stock_after(PcsStats { device_errors: 1, ..PcsStats::ZERO })
    );
    assert_eq!(small.memory().live, 0, "the failed quotient commit released its buffers");

    // A budget below the model (the LDE assembled alone is 8 KiB).
    let refused = on(backend, 1).with_admission(commit::Admission::new(4 << 10));
    assert_eq!(
        same_quotient_commit_as_stock(&refused, 1, domain, &values, 2),
        stock_after(PcsStats { admission_refusals: 1, ..PcsStats::ZERO })
    );
}

#[test]
fn the_quotient_commit_model_counts_the_values_and_a_chunks_lde() {
    // 2^8 points of degree 2 in 2 chunks at blowup 2: the chunks side by side are 2^7 x 4, their
    // LDE 2^8 x 4 (8 KiB).
    let lde = backend_api::LdeParams::new(backend_api::MatrixShape::new(1 << 7, 4).unwrap(), 2, 7).unwrap();
    let model = plonky3_adapter::quotient_commit_model(&lde).unwrap();
    let fused = plonky3_adapter::fused_commit_model(&lde).unwrap();
    assert_eq!((model.lde, model.trees, model.twiddles), (fused.lde, fused.trees, fused.twiddles));
    // The values (4 KiB) and one chunk's LDE (8 KiB) beside the larger of the commit's own
    // temporaries and the transposes' scratch (at most the 8 KiB matrix plus a run).
    assert!(model.scratch >= (4 << 10) + (8 << 10) + fused.scratch, "{model:?} {fused:?}");
    assert!(model.scratch <= (4 << 10) + (8 << 10) + fused.scratch.max((8 << 10) + (5 << 8) * 8), "{model:?}");
}

const FUSED: PcsStats = PcsStats { fused_commits: 1, ..PcsStats::ZERO };
const STOCK: PcsStats = PcsStats { stock_commits: 1, ..PcsStats::ZERO };

/// One matrix, and several of one coset (a leaf then covers a row of each, in order), with
/// non-canonical words, on the subgroup and on a coset, at blowups 2 and 8: fused, as stock.
fn one_coset_commits_fuse<B: Backend + 'static>(backend: Arc<B>) {
    let shift = Val::GENERATOR.exp_u64(5);
    for log_blowup in [1, 3] {
        let ours = on(Arc::clone(&backend), log_blowup);
        for (rows, widths, shift) in [
            (1usize, vec![2], Val::ONE),
            (2, vec![1], shift),
            (1 << 6, vec![7], Val::ONE),
            (1 << 9, vec![3, 1, 5], shift),
            (1 << 4, vec![1, 1], Val::ONE),
        ] {
            // Twice, with other values the second time: that commit may download into the
            // host matrix the first one's dropped prover data kept, and must not see its values.
            for round in 0..2u64 {
                let inputs: Vec<_> = widths
                    .iter()
                    .enumerate()
                    .map(|(i, &w)| (domain(rows, shift), matrix(i as u64 + rows as u64 + 1000 * round, rows, w)))
                    .collect();
                let what = format!("{rows} rows x {widths:?}, blowup 2^{log_blowup}, round {round}");
                assert_eq!(same_as_stock(&ours, log_blowup, &inputs), FUSED, "{what}");
            }
        }
    }
    assert_eq!(backend.memory().live, 0, "the fused commits' buffers were not released (prover data dropped)");
    let shown = format!("{:?}", on(backend, 1));
    assert!(shown.contains("BackendPcs") && shown.contains("fused_commits: 0"), "{shown}");
}

#[test]
fn cpu_one_coset_commits_fuse_and_match_stock() {
    one_coset_commits_fuse(Arc::new(CpuBackend::new()));
}

#[test]
fn toy_port_one_coset_commits_fuse_and_match_stock() {
    one_coset_commits_fuse(Arc::new(ToyBackend::new()));
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_one_coset_commits_fuse_and_match_stock() {
    use backend_wgpu::{WgpuBackend, WgpuOptions};
    match WgpuBackend::new(WgpuOptions { allow_software: true, ..Default::default() }) {
        Ok(b) => one_coset_commits_fuse(Arc::new(b)),
        Err(e) => common::skip("plonky3_adapter pcs::wgpu", e, "REQUIRE_WGPU"),
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_one_coset_commits_fuse_and_match_stock() {
    // An instance of its own: the check counts its live device bytes, which the process-wide
    // device shares with the tests running beside it.
    match backend_cuda::CudaBackend::new(0) {
        Ok(b) => one_coset_commits_fuse(Arc::new(b)),
        Err(e) => common::skip("plonky3_adapter pcs::cuda", e, "REQUIRE_CUDA"),
    }
}

/// Matrices of several heights in one commit (a p3-batch-stark proof's traces: one per table),
/// given in no order of height, two of them sharing one, each height on one coset, with
/// non-canonical words, at blowups 2 and 8: fused (one LDE per height and one tree), as stock; the
/// commit of one height per coset too.
fn mixed_height_commits_fuse<B: Backend + 'static>(backend: Arc<B>) {
    let shift = Val::GENERATOR.exp_u64(5);
    const MIXED: PcsStats = PcsStats { fused_commits: 1, fused_mixed_commits: 1, ..PcsStats::ZERO };
    for log_blowup in [1, 3] {
        let ours = on(Arc::clone(&backend), log_blowup);
        for shifts in [[Val::ONE; 3], [Val::ONE, shift, Val::GENERATOR]] {
            // (rows, width, which of `shifts`): 2^6 twice, 2^4 twice, 2^9 and 1 row once.
            let shapes =
                [(1usize << 6, 3, 0), (1 << 4, 2, 1), (1 << 9, 1, 2), (1 << 6, 5, 0), (1, 2, 1), (1 << 4, 1, 1)];
            let inputs: Vec<_> = shapes
                .iter()
                .enumerate()
                .map(|(i, &(rows, w, s))| (domain(rows, shifts[s]), matrix(40 + i as u64, rows, w)))
                .collect();
            let what = format!("{shapes:?} on {shifts:?}, blowup 2^{log_blowup}");
            assert_eq!(same_as_stock(&ours, log_blowup, &inputs), MIXED, "{what}");
        }
    }
    assert_eq!(backend.memory().live, 0, "the fused commits' buffers were not released (prover data dropped)");
}

#[test]
fn cpu_mixed_height_commits_fuse_and_match_stock() {
    mixed_height_commits_fuse(Arc::new(CpuBackend::new()));
}

#[test]
fn toy_port_mixed_height_commits_fuse_and_match_stock() {
    mixed_height_commits_fuse(Arc::new(ToyBackend::new()));
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_mixed_height_commits_fuse_and_match_stock() {
    use backend_wgpu::{WgpuBackend, WgpuOptions};
    match WgpuBackend::new(WgpuOptions { allow_software: true, ..Default::default() }) {
        Ok(b) => mixed_height_commits_fuse(Arc::new(b)),
        Err(e) => common::skip("plonky3_adapter pcs::wgpu mixed heights", e, "REQUIRE_WGPU"),
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_mixed_height_commits_fuse_and_match_stock() {
    // An instance of its own: the check counts its live device bytes.
    match backend_cuda::CudaBackend::new(0) {
        Ok(b) => mixed_height_commits_fuse(Arc::new(b)),
        Err(e) => common::skip("plonky3_adapter pcs::cuda mixed heights", e, "REQUIRE_CUDA"),
    }
}

#[test]
fn commits_the_fused_path_does_not_take_go_the_stock_way_with_the_same_result() {
    let backend = Arc::new(CpuBackend::new());
    let ours = on(Arc::clone(&backend), 1);
    let shift = Val::GENERATOR.exp_u64(3);
    // Two cosets (as a quotient's chunks): stock.
    let cosets = [(domain(1 << 5, Val::ONE), matrix(1, 1 << 5, 2)), (domain(1 << 5, shift), matrix(2, 1 << 5, 3))];
    assert_eq!(same_as_stock(&ours, 1, &cosets), STOCK);
    // Two heights, one of them on two cosets: stock.
    let heights = [
        (domain(1 << 5, Val::ONE), matrix(3, 1 << 5, 2)),
        (domain(1 << 3, Val::ONE), matrix(4, 1 << 3, 1)),
        (domain(1 << 3, shift), matrix(5, 1 << 3, 1)),
    ];
    assert_eq!(same_as_stock(&ours, 1, &heights), STOCK);
    // Below the DFT's threshold: stock; at it: fused.
    let input = [(domain(1 << 6, Val::ONE), matrix(6, 1 << 6, 4))];
    let dft = BackendDft::new(Arc::clone(&backend)).with_min_backend_elems((1 << 6) * 4 + 1);
    let high = fused(dft, BackendMmcs::new(Arc::clone(&backend), 0), 1);
    assert_eq!(same_as_stock(&high, 1, &input), STOCK);
    let dft = BackendDft::new(Arc::clone(&backend)).with_min_backend_elems((1 << 6) * 4);
    let at = fused(dft, BackendMmcs::new(Arc::clone(&backend), 0), 1);
    assert_eq!(same_as_stock(&at, 1, &input), FUSED);
    // The DFT and the MMCS on two instances (a buffer of one is foreign to the other): stock.
    let two = fused(BackendDft::new(Arc::new(CpuBackend::new())), BackendMmcs::new(backend, 0), 1);
    assert_eq!(same_as_stock(&two, 1, &input), STOCK);
}

#[test]
fn a_device_error_in_the_fused_commit_commits_the_stock_way() {
    // 48 KiB of port memory: the 2^10 x 4 trace's LDE (64 KiB) does not fit; the stock path's
    // DFT and MMCS then fall back to the host in turn, and the commitment is unchanged.
    let backend = Arc::new(ToyBackend::with_memory(48 << 10));
    let ours = on(Arc::clone(&backend), 1);
    let input = [(domain(1 << 10, Val::ONE), matrix(7, 1 << 10, 4))];
    assert_eq!(same_as_stock(&ours, 1, &input), PcsStats { stock_commits: 1, device_errors: 1, ..PcsStats::ZERO });
    assert_eq!(backend.memory().live, 0);
}

/// The bytes the fused commit of `input` (one matrix, blowup 2) keeps on a backend with the
/// opening products: its LDE and its tree.
fn kept_bytes(rows: usize, cols: usize) -> usize {
    let lde = backend_api::MatrixShape::new(2 * rows, cols).unwrap();
    lde.bytes() + backend_api::TreeShape::new(2 * rows).unwrap().bytes()
}

/// The memory model of a fused commit of a `rows x cols` trace at blowup 2, to hold an
/// admission's budget from outside a commit.
fn model(rows: usize, cols: usize) -> commit::memory::MemoryModel {
    let lde = backend_api::LdeParams::new(backend_api::MatrixShape::new(rows, cols).unwrap(), 2, 7).unwrap();
    plonky3_adapter::fused_commit_model(&lde).unwrap()
}

#[test]
fn an_admitted_fused_commit_holds_what_it_keeps_until_its_prover_data_drops() {
    let admission = commit::Admission::new(1 << 30);
    let ours = on(Arc::new(CpuBackend::new()), 1).with_admission(admission.clone());
    let input = vec![(domain(1 << 10, Val::ONE), matrix(8, 1 << 10, 4))];
    let (_, data) = Pcs::<Challenge, Challenger>::commit(&ours, input).unwrap();
    assert!(data.holds_device_lde());
    assert_eq!(admission.in_flight(), kept_bytes(1 << 10, 4), "the LDE and its tree stay admitted");
    drop(data);
    assert_eq!(admission.in_flight(), 0);
    // Without the device openings only the tree stays.
    let ours = ours.with_device_openings(false);
    let (_, data) =
        Pcs::<Challenge, Challenger>::commit(&ours, vec![(domain(1 << 10, Val::ONE), matrix(9, 1 << 10, 4))]).unwrap();
    assert!(!data.holds_device_lde());
    assert_eq!(admission.in_flight(), backend_api::TreeShape::new(1 << 11).unwrap().bytes());
    drop(data);
    assert_eq!(admission.in_flight(), 0);
    assert_eq!(ours.stats(), PcsStats { fused_commits: 2, ..PcsStats::ZERO });
}

#[test]
fn a_refused_fused_commit_commits_the_stock_way() {
    // A budget below the model (a 2^11 x 4 LDE alone is 64 KiB): refused at once.
    let ours = on(Arc::new(CpuBackend::new()), 1).with_admission(commit::Admission::new(32 << 10));
    let input = [(domain(1 << 10, Val::ONE), matrix(10, 1 << 10, 4))];
    assert_eq!(same_as_stock(&ours, 1, &input), PcsStats { stock_commits: 1, admission_refusals: 1, ..PcsStats::ZERO });
}

#[test]
fn a_refused_fused_commit_fails_with_the_typed_error_when_asked_to() {
    use std::time::Duration;
    // Refused at once: a budget below the model (the 2^11 x 4 LDE alone is 64 KiB).
    let backend = Arc::new(CpuBackend::new());
    let ours = on(Arc::clone(&backend), 1)
        .with_admission(commit::Admission::new(32 << 10))
        .on_admission_refusal(OnRefusal::Fail);
    let input = vec![(domain(1 << 10, Val::ONE), matrix(12, 1 << 10, 4))];
    let err = Pcs::<Challenge, Challenger>::commit(&ours, input.clone()).map(drop).unwrap_err();
    let PcsError::NotAdmitted { backend: name, trace, heights, blowup, source } = &err else {
        panic!("expected NotAdmitted, got {err:?}");
    };
    assert_eq!((*name, *trace, *heights, *blowup), ("cpu", backend_api::MatrixShape::new(1 << 10, 4).unwrap(), 1, 2));
    assert!(matches!(**source, commit::ProverError::Refused(_)), "{source:?}");
    assert!(err.is_not_admitted() && err.to_string().contains("not admitted"), "{err}");
    assert_eq!(ours.stats(), PcsStats { admission_refusals: 1, ..PcsStats::ZERO }, "nothing committed");
    assert_eq!(backend.memory().live, 0, "nothing allocated");

    // A wait that times out fails the same way, with the wait's own error.
    let one = model(1 << 10, 4);
    let admission = commit::Admission::waiting(one.total() * 3 / 2, Duration::from_millis(100), "test device");
    let _held = admission.admit(&one).unwrap();
    let ours = on(Arc::clone(&backend), 1).with_admission(admission).on_admission_refusal(OnRefusal::Fail);
    let err = Pcs::<Challenge, Challenger>::commit(&ours, input.clone()).map(drop).unwrap_err();
    assert!(
        matches!(&err, PcsError::NotAdmitted { source, .. } if matches!(**source, commit::ProverError::WaitTimedOut { .. })),
        "{err:?}"
    );

    // The default commits the stock way instead.
    let ours = on(backend, 1).with_admission(commit::Admission::new(32 << 10));
    assert_eq!(same_as_stock(&ours, 1, &input), PcsStats { stock_commits: 1, admission_refusals: 1, ..PcsStats::ZERO });
}

#[test]
fn a_waiting_admission_fuses_once_memory_is_released_and_gives_up_at_its_timeout() {
    use std::time::Duration;
    // Room for one such commit, not two.
    let one = model(1 << 10, 4);
    let budget = one.total() * 3 / 2;
    let input = [(domain(1 << 10, Val::ONE), matrix(11, 1 << 10, 4))];
    // One commit's bytes are held elsewhere and released after 300 ms: the commit waits, then fuses.
    let admission = commit::Admission::waiting(budget, Duration::from_secs(20), "test device");
    let ticket = admission.admit(&one).unwrap();
    let ours = on(Arc::new(CpuBackend::new()), 1).with_admission(admission.clone());
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        drop(ticket);
    });
    let start = std::time::Instant::now();
    assert_eq!(same_as_stock(&ours, 1, &input), FUSED);
    assert!(start.elapsed() >= Duration::from_millis(250), "the commit did not wait: {:?}", start.elapsed());
    release.join().unwrap();
    // Held for good, with a 200 ms timeout: the commit gives up and goes the stock way.
    let admission = commit::Admission::waiting(budget, Duration::from_millis(200), "test device");
    let _ticket = admission.admit(&one).unwrap();
    let ours = on(Arc::new(CpuBackend::new()), 1).with_admission(admission);
    assert_eq!(same_as_stock(&ours, 1, &input), PcsStats { stock_commits: 1, admission_refusals: 1, ..PcsStats::ZERO });
}

/// Openings of two commitments, one of two matrices side by side in one device LDE (each opened
/// at its own points) and one of another height, on `backend` with its products against stock
/// `TwoAdicFriPcs` with the same FRI parameters: the same opened values and proof bytes, and
/// every product on the device (the second matrix's columns sit after the first's in the LDE).
fn several_matrices_open_as_stock<B: Backend + 'static>(backend: Arc<B>) {
    use p3_commit::OpeningRequest;
    use p3_field::BasedVectorSpace;
    use p3_keccak::Keccak256Hash;
    let log_blowup = 1;
    let stock = pcs(Radix2DitParallel::<Val>::default(), log_blowup);
    let mmcs = BackendMmcs::new(Arc::clone(&backend), 0);
    let fri = common::stark::fri(ExtensionMmcs::new(mmcs.clone()), log_blowup);
    let ours = Fused::new(BackendDft::new(backend), mmcs, fri);
    let side_by_side =
        vec![(domain(1 << 6, Val::ONE), matrix(14, 1 << 6, 3)), (domain(1 << 6, Val::ONE), matrix(15, 1 << 6, 5))];
    let shorter = vec![(domain(1 << 5, Val::ONE), matrix(16, 1 << 5, 2))];
    let point = |a: u64, b: u64| Challenge::from_basis_coefficients_slice(&[Val::new(a), Val::new(b)]).unwrap();
    // Five points: more than one call's vectors hold (4 points of 2 coordinates), so two calls.
    let points_a =
        vec![vec![point(3, 5), point(7, 11), point(19, 23), point(29, 31), point(37, 41)], vec![point(3, 5)]];
    let points_b = vec![vec![point(13, 17)]];
    let mut results = Vec::new();
    let before = ours.stats();
    for side in [0, 1] {
        let commit = |evaluations: Vec<_>| {
            if side == 0 {
                let (_, data) = Pcs::<Challenge, Challenger>::commit(&stock, evaluations).unwrap();
                (Some(data), None)
            } else {
                let (_, data) = Pcs::<Challenge, Challenger>::commit(&ours, evaluations).unwrap();
                assert!(data.holds_device_lde());
                (None, Some(data))
            }
        };
        let (stock_a, ours_a) = commit(side_by_side.clone());
        let (stock_b, ours_b) = commit(shorter.clone());
        let mut challenger = Challenger::from_hasher(vec![], Keccak256Hash {});
        let (values, proof) = if side == 0 {
            let requests = vec![
                OpeningRequest { prover_data: stock_a.as_ref().unwrap(), points: points_a.clone() },
                OpeningRequest { prover_data: stock_b.as_ref().unwrap(), points: points_b.clone() },
            ];
            let (v, p) = Pcs::<Challenge, Challenger>::open(&stock, requests, &mut challenger).unwrap();
            (v, postcard::to_allocvec(&p).unwrap())
        } else {
            let requests = vec![
                OpeningRequest { prover_data: ours_a.as_ref().unwrap(), points: points_a.clone() },
                OpeningRequest { prover_data: ours_b.as_ref().unwrap(), points: points_b.clone() },
            ];
            let (v, p) = Pcs::<Challenge, Challenger>::open(&ours, requests, &mut challenger).unwrap();
            (v, postcard::to_allocvec(&p).unwrap())
        };
        results.push((values, proof));
    }
    assert_eq!(results[0].0, results[1].0, "the opened values differ");
    assert!(results[0].1 == results[1].1, "the opening proofs differ");
    let after = ours.stats();
    // Evaluations: calls of at most 4 points, 2 + 1 + 1; row reductions: one per matrix, 3.
    assert_eq!(after.device_openings - before.device_openings, 7, "{after:?}");
    assert_eq!((after.host_openings, after.device_errors), (0, 0), "{after:?}");
}

#[test]
fn cpu_openings_of_several_matrices_match_stock() {
    several_matrices_open_as_stock(Arc::new(CpuBackend::new()));
}

#[test]
fn toy_port_openings_of_several_matrices_match_stock() {
    several_matrices_open_as_stock(Arc::new(ToyBackend::new()));
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_openings_of_several_matrices_match_stock() {
    use backend_wgpu::{WgpuBackend, WgpuOptions};
    match WgpuBackend::new(WgpuOptions { allow_software: true, ..Default::default() }) {
        Ok(b) => several_matrices_open_as_stock(Arc::new(b)),
        Err(e) => common::skip("plonky3_adapter pcs::wgpu openings", e, "REQUIRE_WGPU"),
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_openings_of_several_matrices_match_stock() {
    use backend_cuda::CudaBackend;
    match BackendDft::<CudaBackend>::default().backend() {
        Ok(b) => several_matrices_open_as_stock(b),
        Err(reason) => common::skip("plonky3_adapter pcs::cuda openings", &reason, "REQUIRE_CUDA"),
    }
}

#[test]
fn the_fused_commit_model_counts_its_temporaries_and_never_overflows() {
    // A 2^10 x 4 trace at blowup 2: one 64 KiB chunk of staging, as large as the leaves'
    // reordering buffer (2^11 digests of 32 B), so the scratch term is 64 KiB.
    let small = model(1 << 10, 4);
    assert_eq!(small.scratch, 64 << 10, "{small:?}");
    assert!(small.total() >= small.lde + small.trees + small.scratch);
    // Shapes near the limits: a model or a typed error, never a panic or a wrapped sum.
    for (log_rows, log_cols) in [(31, 20), (31, 28), (30, 31), (20, 40)] {
        let Ok(shape) = backend_api::MatrixShape::new(1 << log_rows, 1 << log_cols) else { continue };
        let Ok(lde) = backend_api::LdeParams::new(shape, 2, 7) else { continue };
        match plonky3_adapter::fused_commit_model(&lde) {
            Ok(m) => assert!(m.total() >= m.lde && m.scratch > 0, "2^{log_rows} x 2^{log_cols}: {m:?}"),
            Err(e) => assert!(e.to_string().contains("overflow"), "2^{log_rows} x 2^{log_cols}: {e}"),
        }
    }
}

/// FRI's parameters with `mmcs`: blowup 2, a final polynomial of `2^log_final_poly_len`
/// coefficients, rounds of arity up to `2^max_log_arity`, 5 queries, no grinding.
fn fri_params<M>(mmcs: M, max_log_arity: usize, log_final_poly_len: usize) -> FriParameters<M> {
    FriParameters { log_final_poly_len, max_log_arity, num_queries: 5, ..common::stark::fri(mmcs, 1) }
}

/// Openings of three commitments of three heights (so that FRI rolls two shorter inputs into its
/// folds) with `BackendExtensionMmcs` as FRI's MMCS, under schedules of arity 2, 4 and 8 and final
/// polynomials of 1 and 2 coefficients, against stock `TwoAdicFriPcs` (Keccak `MerkleTreeMmcs`,
/// `ExtensionMmcs`) with the same parameters: the same opened values and proof bytes, every
/// round folded on `backend`.
fn fri_layers_on_device_match_stock<B: Backend + 'static>(backend: Arc<B>) {
    fri_layers_match_stock(backend, 0);
}

/// [`fri_layers_on_device_match_stock`] with the DFT's threshold at `min_backend_elems`: at 0
/// every commit fuses and every round folds on the device; above the inputs (a small proof) the
/// commits' trees are built on the host and the openings and FRI are stock's own, no round on
/// the device.
fn fri_layers_match_stock<B: Backend + 'static>(backend: Arc<B>, min_backend_elems: usize) {
    use common::stark::ChallengeMmcs;
    use p3_commit::OpeningRequest;
    use p3_field::BasedVectorSpace;
    use p3_keccak::Keccak256Hash;
    type Stock = p3_fri::TwoAdicFriPcs<Val, Radix2DitParallel<Val>, common::stark::ValMmcs, ChallengeMmcs>;
    let inputs = [
        vec![(domain(1 << 7, Val::ONE), matrix(21, 1 << 7, 3))],
        vec![(domain(1 << 6, Val::ONE), matrix(22, 1 << 6, 2))],
        vec![(domain(1 << 4, Val::ONE), matrix(23, 1 << 4, 4))],
    ];
    let point = |a: u64, b: u64| Challenge::from_basis_coefficients_slice(&[Val::new(a), Val::new(b)]).unwrap();
    let points = [vec![vec![point(3, 5)]], vec![vec![point(7, 11)]], vec![vec![point(3, 5), point(13, 17)]]];
    for (max_log_arity, log_final_poly_len) in [(1, 0), (2, 1), (3, 0), (3, 2)] {
        let stock = Stock::new(
            Radix2DitParallel::default(),
            val_mmcs(),
            fri_params(ChallengeMmcs::new(val_mmcs()), max_log_arity, log_final_poly_len),
        );
        let mmcs = BackendMmcs::new(Arc::clone(&backend), 0);
        let fri = fri_params(BackendExtensionMmcs::new(mmcs.clone()), max_log_arity, log_final_poly_len);
        let dft = BackendDft::new(Arc::clone(&backend)).with_min_backend_elems(min_backend_elems);
        let ours = BackendPcs::new(dft, mmcs, fri);
        let what = format!(
            "max_log_arity {max_log_arity}, log_final_poly_len {log_final_poly_len}, threshold {min_backend_elems}"
        );

        let stock_data: Vec<_> =
            inputs.iter().map(|i| Pcs::<Challenge, Challenger>::commit(&stock, i.clone()).unwrap().1).collect();
        let requests = stock_data
            .iter()
            .zip(&points)
            .map(|(prover_data, points)| OpeningRequest { prover_data, points: points.clone() })
            .collect();
        let mut challenger = Challenger::from_hasher(vec![], Keccak256Hash {});
        let (want_values, want) = Pcs::<Challenge, Challenger>::open(&stock, requests, &mut challenger).unwrap();

        let (before, trees_before) = (ours.stats(), ours.mmcs().stats());
        let our_data: Vec<_> =
            inputs.iter().map(|i| Pcs::<Challenge, Challenger>::commit(&ours, i.clone()).unwrap().1).collect();
        let small = min_backend_elems > 0;
        let host_trees = ours.mmcs().stats().host_commits - trees_before.host_commits;
        assert_eq!(host_trees, if small { inputs.len() } else { 0 }, "{what}: trees built on the host");
        assert!(our_data.iter().all(|d| d.is_on_device() != small), "{what}");
        let requests = our_data
            .iter()
            .zip(&points)
            .map(|(prover_data, points)| OpeningRequest { prover_data, points: points.clone() })
            .collect();
        let mut challenger = Challenger::from_hasher(vec![], Keccak256Hash {});
        let (values, proof) = Pcs::<Challenge, Challenger>::open(&ours, requests, &mut challenger).unwrap();
        assert_eq!(values, want_values, "{what}: the opened values differ");
        assert!(
            postcard::to_allocvec(&proof).unwrap() == postcard::to_allocvec(&want).unwrap(),
            "{what}: the proofs differ"
        );
        let (after, trees) = (ours.stats(), ours.mmcs().stats());
        let rounds = proof.commit_phase_commits.len();
        assert!(rounds >= 1, "{what}");
        // A small proof's FRI layers are smaller still: on the host, as the commits were (the FRI
        // MMCS shares the commits' MMCS and its counters).
        if small {
            assert_eq!(
                (trees.host_commits - trees_before.host_commits, trees.device_commits - trees_before.device_commits),
                (inputs.len() + rounds, 0),
                "{what}: FRI's layers were not committed on the host: {trees:?}"
            );
        }
        assert_eq!(
            (after.device_fri_rounds - before.device_fri_rounds, after.host_fri_rounds - before.host_fri_rounds),
            (if small { 0 } else { rounds }, 0),
            "{what}: {after:?}"
        );
        assert_eq!(after.fused_commits - before.fused_commits, if small { 0 } else { inputs.len() }, "{what}");
    }
}

#[test]
fn small_proofs_commit_open_and_fold_the_stock_way_with_the_same_bytes() {
    // Every input (at most 128 x 4 before its LDE) below a threshold of 2^12 trace elements.
    fri_layers_match_stock(Arc::new(CpuBackend::new()), 1 << 12);
    fri_layers_match_stock(Arc::new(ToyBackend::new()), 1 << 12);
}

#[test]
fn small_poseidon2_trees_stay_on_the_device() {
    // Poseidon2 hashes slowly on the host: below the DFT's threshold the commit is unfused, but
    // its tree is still built on the backend, with Plonky3's commitment.
    use common::stark::poseidon2::{Challenger as P2Challenger, FusedPcs};
    use plonky3_adapter::Poseidon2;
    let backend = Arc::new(ToyBackend::new());
    let mmcs = BackendMmcs::<_, Poseidon2>::with_hash(Arc::clone(&backend), 0);
    let dft = BackendDft::new(Arc::clone(&backend)).with_min_backend_elems(1 << 12);
    let fri = common::stark::fri(BackendExtensionMmcs::new(mmcs.clone()), 1);
    let ours = FusedPcs::new(dft, mmcs, fri);
    let input = vec![(domain(1 << 6, Val::ONE), matrix(31, 1 << 6, 4))];
    let (cap, data) = Pcs::<Challenge, P2Challenger>::commit(&ours, input.clone()).unwrap();
    let stock = common::stark::poseidon2::stock();
    let (want, _) =
        Pcs::<Challenge, P2Challenger>::commit(p3_uni_stark::StarkGenericConfig::pcs(&stock), input).unwrap();
    assert_eq!(postcard::to_allocvec(&cap).unwrap(), postcard::to_allocvec(&want).unwrap());
    assert!(data.is_on_device());
    let (stats, trees) = (ours.stats(), ours.mmcs().stats());
    assert_eq!((stats.fused_commits, stats.stock_commits), (0, 1), "{stats:?}");
    assert_eq!((trees.device_commits, trees.host_commits), (1, 0), "{trees:?}");
}

#[test]
fn cpu_fri_layers_on_the_device_match_stock() {
    fri_layers_on_device_match_stock(Arc::new(CpuBackend::new()));
}

#[test]
fn toy_port_fri_layers_on_the_device_match_stock() {
    fri_layers_on_device_match_stock(Arc::new(ToyBackend::new()));
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_fri_layers_on_the_device_match_stock() {
    use backend_wgpu::{WgpuBackend, WgpuOptions};
    match WgpuBackend::new(WgpuOptions { allow_software: true, ..Default::default() }) {
        Ok(b) => fri_layers_on_device_match_stock(Arc::new(b)),
        Err(e) => common::skip("plonky3_adapter pcs::wgpu FRI", e, "REQUIRE_WGPU"),
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_fri_layers_on_the_device_match_stock() {
    use backend_cuda::CudaBackend;
    match BackendDft::<CudaBackend>::default().backend() {
        Ok(b) => fri_layers_on_device_match_stock(b),
        Err(reason) => common::skip("plonky3_adapter pcs::cuda FRI", &reason, "REQUIRE_CUDA"),
    }
}
