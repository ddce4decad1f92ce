//! `BackendMmcs` against Plonky3's own Keccak-256 `MerkleTreeMmcs`, built here independently:
//! over random matrices of many shapes (one matrix, several of one height, mixed heights, height
//! 1, widths 0, non-power-of-two heights, matrices without contiguous storage, the extension-field MMCS
//! FRI uses) and several cap heights, the commitment, every single opening and multi-openings
//! (unsorted, repeated, empty) are the same bytes, the stock verifier accepts them and rejects a
//! tampered one. On the CPU backend, on wgpu (llvmpipe in CI; `SKIPPED` without a Vulkan device,
//! a failure under `REQUIRE_WGPU=1`), on the porting guide's toy backend, and on a toy backend too
//! small for the tree (the host fallback).

mod common;

use std::fmt::Debug;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use backend_api::Backend;
use backend_cpu::CpuBackend;
use common::matrix;
use p3_commit::{BatchOpeningRef, ExtensionMmcs, Mmcs};
use p3_field::extension::BinomialExtensionField;
use p3_goldilocks::Goldilocks;
use p3_keccak::Keccak256Hash;
use p3_matrix::Matrix;
use p3_matrix::dense::RowMajorMatrix;
use p3_symmetric::{CompressionFunctionFromHasher, SerializingHasher};
use plonky3_adapter::{BackendMmcs, Keccak256, KeccakMerkleMmcs, MmcsHash, MmcsStats, Poseidon2, Poseidon2MerkleMmcs};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use toy_backend::ToyBackend;

type Val = Goldilocks;
type Challenge = BinomialExtensionField<Val, 2>;

/// A hash the MMCS is checked with: Plonky3's MMCS of it spelled out as a Plonky3 user declares it
/// (not through the adapter), and a digest changed in one place.
trait Hash: MmcsHash {
    fn spelled_out(cap_height: usize) -> Self::Stock;
    fn tamper(digest: Self::Digest) -> Self::Digest;
}

impl Hash for Keccak256 {
    fn spelled_out(cap_height: usize) -> KeccakMerkleMmcs {
        p3_merkle_tree::MerkleTreeMmcs::new(
            SerializingHasher::new(Keccak256Hash {}),
            CompressionFunctionFromHasher::new(Keccak256Hash {}),
            cap_height,
        )
    }

    fn tamper(digest: [u8; 32]) -> [u8; 32] {
        digest.map(|b| b ^ 1)
    }
}

impl Hash for Poseidon2 {
    fn spelled_out(cap_height: usize) -> Poseidon2MerkleMmcs {
        let perm = p3_goldilocks::default_goldilocks_poseidon2_8();
        p3_merkle_tree::MerkleTreeMmcs::new(
            p3_symmetric::PaddingFreeSponge::new(perm.clone()),
            p3_symmetric::TruncatedPermutation::new(perm),
            cap_height,
        )
    }

    fn tamper(mut digest: [Val; 4]) -> [Val; 4] {
        digest[0] += <Val as p3_field::PrimeCharacteristicRing>::ONE;
        digest
    }
}

fn bytes<T: serde::Serialize>(value: &T) -> Vec<u8> {
    postcard::to_allocvec(value).expect("serializes")
}

/// Heights (and widths) of one commit.
type Shape = &'static [(usize, usize)];

/// The device path's shapes: every height a power of two.
const DEVICE_SHAPES: &[Shape] = &[
    &[(64, 5)],
    &[(32, 3), (32, 1), (32, 7)],
    &[(64, 4), (16, 2), (64, 3), (4, 5), (1, 2), (16, 1)],
    &[(8, 2), (1, 3)],
    &[(2, 1), (1, 1)],
    &[(1, 3)],
    &[(1, 1), (1, 4)],
    &[(8, 65)],
    &[(32, 0), (32, 3), (8, 0), (8, 2)],
];

/// Shapes Plonky3 takes that the device path hands to Plonky3's own `MerkleTree`: a tallest height
/// that is not a power of two (Plonky3 pads with zero digests), or a height with no columns.
const HOST_SHAPES: &[Shape] =
    &[&[(12, 3)], &[(7, 2), (4, 1), (2, 3), (1, 1)], &[(5, 1), (3, 2)], &[(16, 0)], &[(16, 2), (4, 0)]];

fn matrices(seed: u64, shape: Shape) -> Vec<RowMajorMatrix<Val>> {
    shape.iter().enumerate().map(|(i, &(h, w))| matrix(seed * 100 + i as u64, h, w)).collect()
}

/// A row-major matrix that keeps its height at width 0 (a `RowMajorMatrix` of width 0 has none)
/// and serves rows one at a time (no contiguous storage): the MMCS's row-copying path.
#[derive(Clone, Debug)]
struct RowByRow {
    values: Vec<Val>,
    width: usize,
    height: usize,
}

impl Matrix<Val> for RowByRow {
    fn width(&self) -> usize {
        self.width
    }

    fn height(&self) -> usize {
        self.height
    }

    unsafe fn row_unchecked(
        &self,
        r: usize,
    ) -> impl IntoIterator<Item = Val, IntoIter = impl Iterator<Item = Val> + Send + Sync> {
        self.values[r * self.width..(r + 1) * self.width].iter().copied()
    }
}

fn row_by_row(seed: u64, shape: Shape) -> Vec<RowByRow> {
    shape
        .iter()
        .enumerate()
        .map(|(i, &(height, width))| RowByRow {
            values: matrix(seed * 100 + i as u64, height, width).values,
            width,
            height,
        })
        .collect()
}

/// `shape` as `RowByRow` matrices, and as `RowMajorMatrix`es when no width is 0.
fn compare_shape<B: Backend, H: Hash>(
    ours: &BackendMmcs<B, H>,
    stock: &H::Stock,
    seed: u64,
    shape: Shape,
    what: &str,
) -> bool {
    let on_device = compare(ours, stock, row_by_row(seed, shape), what);
    if shape.iter().all(|&(_, w)| w > 0) {
        assert_eq!(compare(ours, stock, matrices(seed, shape), what), on_device, "{what}");
    }
    on_device
}

/// Every index for small trees, a seeded sample of them for larger ones.
fn indices(max_height: usize, seed: u64) -> Vec<usize> {
    if max_height <= 64 {
        return (0..max_height).collect();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..64).map(|_| rng.random_range(0..max_height)).collect()
}

/// Commits `mats` with both MMCSs and compares everything an opening returns; the stock verifier
/// checks ours. Returns whether our commit stayed on the device.
fn compare<B, H, M>(ours: &BackendMmcs<B, H>, stock: &H::Stock, mats: Vec<M>, what: &str) -> bool
where
    B: Backend,
    H: Hash,
    M: Matrix<Val> + Clone,
    <H::Stock as Mmcs<Val>>::MultiProof: serde::Serialize,
{
    let dims: Vec<_> = mats.iter().map(Matrix::dimensions).collect();
    let max_height = dims.iter().map(|d| d.height).max().unwrap();
    let (want_cap, want) = stock.commit(mats.clone());
    let (cap, data) = ours.commit(mats);
    assert_eq!(bytes(&cap), bytes(&want_cap), "{what}: the commitments differ");
    let got: Vec<Vec<Vec<Val>>> =
        ours.get_matrices(&data).iter().map(|m| m.rows().map(Iterator::collect).collect()).collect();
    let expected: Vec<Vec<Vec<Val>>> =
        stock.get_matrices(&want).iter().map(|m| m.rows().map(Iterator::collect).collect()).collect();
    assert_eq!(got, expected, "{what}: get_matrices differs");

    for index in indices(max_height, 1) {
        let (values, proof) = ours.open_batch(index, &data).unpack();
        let (want_values, want_proof) = stock.open_batch(index, &want).unpack();
        assert_eq!(values, want_values, "{what}: opened rows at {index}");
        assert_eq!(proof, want_proof, "{what}: authentication path at {index}");
        stock
            .verify_batch(&cap, &dims, index, BatchOpeningRef::new(&values, &proof))
            .unwrap_or_else(|e| panic!("{what}: the stock verifier refused index {index}: {e:?}"));
        if let Some(first) = proof.first() {
            let mut tampered = proof.clone();
            tampered[0] = H::tamper(*first);
            assert!(stock.verify_batch(&cap, &dims, index, BatchOpeningRef::new(&values, &tampered)).is_err());
        }
    }

    let mut rng = ChaCha8Rng::seed_from_u64(max_height as u64);
    let mut sets: Vec<Vec<usize>> = vec![vec![], vec![0], vec![max_height - 1], (0..max_height).collect()];
    for n in [2, 5, 17] {
        sets.push((0..n).map(|_| rng.random_range(0..max_height)).collect());
    }
    // Repeated and unsorted.
    sets.push(vec![max_height / 2, 0, max_height / 2, max_height - 1, 0]);
    for set in sets {
        let (values, proof) = ours.open_multi_batch(&set, &data);
        let (want_values, want_proof) = stock.open_multi_batch(&set, &want);
        assert_eq!(values, want_values, "{what}: multi-opening rows at {set:?}");
        assert_eq!(bytes(&proof), bytes(&want_proof), "{what}: pruned paths at {set:?}");
        stock
            .verify_multi_batch(&cap, &dims, &set, &values, &proof)
            .unwrap_or_else(|e| panic!("{what}: the stock verifier refused {set:?}: {e:?}"));
    }
    data.is_on_device()
}

/// Every shape at several cap heights (including one past the tree's depth).
fn all_shapes<B: Backend, H: Hash>(backend: Arc<B>, name: &str) -> MmcsStats
where
    <H::Stock as Mmcs<Val>>::MultiProof: serde::Serialize,
{
    let name = format!("{name} {}", H::KIND);
    for cap_height in [0, 1, 3, 9] {
        let ours = BackendMmcs::<B, H>::with_hash(Arc::clone(&backend), cap_height);
        let stock = H::spelled_out(cap_height);
        for (seed, shape) in DEVICE_SHAPES.iter().enumerate() {
            let what = format!("{name} cap {cap_height} {shape:?}");
            assert!(compare_shape(&ours, &stock, seed as u64, shape, &what), "{what}: not on the device");
        }
        for (seed, shape) in HOST_SHAPES.iter().enumerate() {
            let what = format!("{name} cap {cap_height} {shape:?}");
            assert!(!compare_shape(&ours, &stock, 50 + seed as u64, shape, &what), "{what}: on the device?");
        }
        let stats = ours.stats();
        let commits = |shapes: &[Shape]| shapes.iter().map(|s| 1 + usize::from(s.iter().all(|&(_, w)| w > 0))).sum();
        assert_eq!(stats.device_commits, commits(DEVICE_SHAPES), "{name}: {stats:?}");
        assert_eq!(stats.host_commits, commits(HOST_SHAPES), "{name}: {stats:?}");
        assert_eq!(stats.device_errors, 0, "{name}: {stats:?}");
    }
    // A larger tree whose lower levels' digests are gathered and downloaded (the top 2^11 - 1 nodes
    // are kept on the host), and the extension-field MMCS of FRI.
    let ours = BackendMmcs::<B, H>::with_hash(Arc::clone(&backend), 2);
    let stock = H::spelled_out(2);
    compare(&ours, &stock, matrices(7, &[(1 << 12, 3), (1 << 9, 2)]), &format!("{name} 2^12"));
    assert!(ours.stats().digest_downloads > 0, "{name}: {:?}", ours.stats());
    let ext_ours = ExtensionMmcs::<Val, Challenge, _>::new(ours.clone());
    let ext_stock = ExtensionMmcs::<Val, Challenge, _>::new(stock.clone());
    for shape in [&[(32usize, 3usize)][..], &[(16, 2), (4, 1)]] {
        let mats: Vec<RowMajorMatrix<Challenge>> = shape
            .iter()
            .enumerate()
            .map(|(i, &(h, w))| {
                let base = matrix(90 + i as u64, h, 2 * w);
                RowMajorMatrix::new(base.values.chunks_exact(2).map(|c| Challenge::new([c[0], c[1]])).collect(), w)
            })
            .collect();
        compare_ext(&ext_ours, &ext_stock, mats, &format!("{name} extension {shape:?}"));
    }
    ours.stats()
}

/// The extension MMCS of FRI over ours and over stock: the same commitment and openings.
fn compare_ext<O, S>(ours: &O, stock: &S, mats: Vec<RowMajorMatrix<Challenge>>, what: &str)
where
    O: Mmcs<Challenge, Commitment = S::Commitment, MultiProof = S::MultiProof>,
    S: Mmcs<Challenge, Commitment: serde::Serialize, MultiProof: serde::Serialize>,
{
    let max_height = mats.iter().map(Matrix::height).max().unwrap();
    let dims: Vec<_> = mats.iter().map(Matrix::dimensions).collect();
    let (want_cap, want) = stock.commit(mats.clone());
    let (cap, data) = ours.commit(mats);
    assert_eq!(bytes(&cap), bytes(&want_cap), "{what}: the commitments differ");
    let set: Vec<usize> = (0..max_height).rev().step_by(3).collect();
    let (values, proof) = ours.open_multi_batch(&set, &data);
    let (want_values, want_proof) = stock.open_multi_batch(&set, &want);
    assert_eq!(values, want_values, "{what}: rows");
    assert_eq!(bytes(&proof), bytes(&want_proof), "{what}: pruned paths");
    stock.verify_multi_batch(&cap, &dims, &set, &values, &proof).expect("the stock verifier accepts it");
}

/// [`all_shapes`] with each hash.
fn every_hash<B: Backend>(backend: Arc<B>, name: &str) {
    all_shapes::<B, Keccak256>(Arc::clone(&backend), name);
    all_shapes::<B, Poseidon2>(backend, name);
}

#[test]
fn cpu_backend_commits_and_openings_equal_stock() {
    every_hash(Arc::new(CpuBackend::new()), "cpu");
}

#[test]
fn toy_port_commits_and_openings_equal_stock() {
    let backend = Arc::new(ToyBackend::new());
    every_hash(Arc::clone(&backend), "toy");
    assert!(backend.memory().allocations > 0, "{:?}", backend.memory());
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_backend_commits_and_openings_equal_stock() {
    use backend_wgpu::{WgpuBackend, WgpuOptions};
    match WgpuBackend::new(WgpuOptions { allow_software: true, ..Default::default() }) {
        Ok(b) => every_hash(Arc::new(b), "wgpu"),
        Err(e) => common::skip("plonky3_adapter mmcs::wgpu", e, "REQUIRE_WGPU"),
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_backend_commits_and_openings_equal_stock() {
    match backend_cuda::CudaBackend::new(0) {
        Ok(b) => every_hash(Arc::new(b), "cuda"),
        Err(e) => common::skip("plonky3_adapter mmcs::cuda", e, "REQUIRE_CUDA"),
    }
}

#[test]
fn a_backend_out_of_memory_commits_on_the_host_with_the_same_bytes() {
    // 4 KiB of "device": the 64 x 5 matrix (2.5 KiB) fits, its 127-node tree (4 KiB) does not.
    let backend = Arc::new(ToyBackend::with_memory(4 << 10));
    let ours = BackendMmcs::new(Arc::clone(&backend), 0);
    for (seed, shape) in [&[(64usize, 5usize)][..], &[(256, 1)], &[(64, 4), (16, 2)]].into_iter().enumerate() {
        let on_device =
            compare(&ours, &Keccak256::spelled_out(0), matrices(seed as u64, shape), &format!("toy 4 KiB {shape:?}"));
        assert!(!on_device, "{shape:?}");
    }
    let stats = ours.stats();
    assert_eq!((stats.device_commits, stats.host_commits, stats.device_errors), (0, 3, 3), "{stats:?}");
    assert_eq!(backend.memory().live, 0, "the device buffers were not released: {:?}", backend.memory());
}

#[test]
fn commits_below_the_device_threshold_are_built_on_the_host_with_the_same_bytes() {
    // 64 x 4 and 16 x 2: 288 elements in all.
    let backend = Arc::new(ToyBackend::new());
    let stock = Keccak256::spelled_out(0);
    for (min, on_device) in [(0, true), (288, true), (289, false), (usize::MAX, false)] {
        let ours = BackendMmcs::new(Arc::clone(&backend), 0).with_min_device_elems(min);
        assert_eq!(ours.min_device_elems(), min);
        let what = format!("threshold {min}");
        assert_eq!(compare(&ours, &stock, matrices(9, &[(64, 4), (16, 2)]), &what), on_device, "{what}");
        let stats = ours.stats();
        assert_eq!((stats.device_commits, stats.host_commits), (usize::from(on_device), usize::from(!on_device)));
        // A clone keeps the threshold and shares the counters.
        let clone = ours.clone();
        assert_eq!(compare(&clone, &stock, matrices(10, &[(64, 4), (16, 2)]), &what), on_device, "{what}: clone");
        assert_eq!(ours.stats().device_commits + ours.stats().host_commits, 2, "{what}");
    }
    assert_eq!(backend.memory().live, 0, "{:?}", backend.memory());
}

#[test]
fn prover_data_releases_the_device_tree_when_dropped() {
    let backend = Arc::new(ToyBackend::new());
    let ours = BackendMmcs::new(Arc::clone(&backend), 0);
    let (_, data) = ours.commit(matrices(3, &[(64, 4), (16, 2)]));
    assert!(data.is_on_device());
    // Two node arrays (2 * 64 - 1 and 2 * 32 - 1 digests of 32 bytes); the matrices are freed.
    assert_eq!(backend.memory().live, (127 + 63) * 32, "{:?}", backend.memory());
    drop(data);
    assert_eq!(backend.memory().live, 0, "{:?}", backend.memory());
}

/// Runs `f`, expecting a panic, and returns its message.
fn panic_message<R: Debug>(f: impl FnOnce() -> R) -> String {
    let err = catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    err.downcast_ref::<String>().cloned().or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string())).unwrap()
}

#[test]
fn what_plonky3_refuses_is_refused_with_plonky3s_message() {
    let ours = BackendMmcs::new(Arc::new(CpuBackend::new()), 0);
    let stock = Keccak256::spelled_out(0);
    // Heights off the ladder, only empty matrices.
    for shape in [&[(8usize, 1usize), (3, 1)][..], &[(8, 1), (0, 1)], &[(0, 2)], &[(8, 2), (16, 1), (5, 1)]] {
        let want = panic_message(|| stock.commit(row_by_row(1, shape)).0);
        let got = panic_message(|| ours.commit(row_by_row(1, shape)).0);
        assert_eq!(got, want, "{shape:?}");
    }
    // An opening index past the tallest height.
    let (_, data) = ours.commit(matrices(2, &[(16, 2)]));
    let (_, want_data) = stock.commit(matrices(2, &[(16, 2)]));
    let want = panic_message(|| stock.open_batch(16, &want_data).opened_values);
    assert_eq!(panic_message(|| ours.open_batch(16, &data).opened_values), want);
    let want = panic_message(|| stock.open_multi_batch(&[3, 16], &want_data).0);
    assert_eq!(panic_message(|| ours.open_multi_batch(&[3, 16], &data).0), want);
}
