//! The CPU backend's Poseidon2 root equals Plonky3's own `MerkleTreeMmcs::commit` root over the
//! same matrix: `PaddingFreeSponge<Poseidon2Goldilocks<8>, 8, 4, 4>` leaves,
//! `TruncatedPermutation<Poseidon2Goldilocks<8>, 2, 4, 8>` nodes, binary tree, cap height 0 (the
//! configuration of Plonky3's Goldilocks examples). Power-of-two heights, since that is where the
//! two trees are defined alike (Plonky3 pads an odd layer with zero digests, this project repeats
//! the last leaf: CONVENTIONS.md).

use backend_api::{Backend, HashKind, LeafLayout, LeafSpec, MatrixShape};
use backend_cpu::CpuBackend;
use p3_commit::Mmcs;
use p3_field::{Field, PrimeField64};
use p3_goldilocks::{Goldilocks, Poseidon2Goldilocks, default_goldilocks_poseidon2_8};
use p3_matrix::dense::RowMajorMatrix;
use p3_merkle_tree::MerkleTreeMmcs;
use p3_symmetric::{PaddingFreeSponge, TruncatedPermutation};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type Perm = Poseidon2Goldilocks<8>;
type Sponge = PaddingFreeSponge<Perm, 8, 4, 4>;
type Compression = TruncatedPermutation<Perm, 2, 4, 8>;
type Packed = <Goldilocks as Field>::Packing;
type Poseidon2Mmcs = MerkleTreeMmcs<Packed, Packed, Sponge, Compression, 2, 4>;

fn plonky3_root(matrix: &[u64], cols: usize) -> [u64; 4] {
    let perm = default_goldilocks_poseidon2_8();
    let mmcs = Poseidon2Mmcs::new(Sponge::new(perm.clone()), Compression::new(perm), 0);
    let values = matrix.iter().map(|&x| Goldilocks::new(x)).collect();
    let (cap, _) = mmcs.commit_matrix(RowMajorMatrix::new(values, cols));
    let roots = cap.roots();
    assert_eq!(roots.len(), 1, "cap height 0 is one root");
    roots[0].map(|x| x.as_canonical_u64())
}

fn our_root(backend: &CpuBackend, matrix: &[u64], rows: usize, cols: usize) -> [u64; 4] {
    let shape = MatrixShape::new(rows, cols).unwrap();
    let spec = LeafSpec::new(HashKind::Poseidon2, LeafLayout::Rows, 0..cols).unwrap();
    let buf = backend.upload(matrix).unwrap();
    let leaves = backend.hash_leaves(&buf, shape, &spec).unwrap();
    let nodes = backend.merkle_tree(&leaves, HashKind::Poseidon2).unwrap();
    let mut root = [0u64; 4];
    backend.download(&nodes, 0, &mut root).unwrap();
    root
}

#[test]
fn poseidon2_roots_equal_plonky3s_merkle_tree_mmcs() {
    const P: u64 = 0xFFFF_FFFF_0000_0001;
    let backend = CpuBackend::new();
    let mut rng = ChaCha8Rng::seed_from_u64(33);
    // Heights 1 to 2^10; widths below, at and above the rate of 4 and several blocks long.
    for (log_rows, cols) in [(0, 1), (0, 4), (1, 3), (2, 5), (3, 8), (5, 1), (6, 17), (8, 4), (10, 33), (4, 316)] {
        let rows = 1usize << log_rows;
        for non_canonical in [false, true] {
            let matrix: Vec<u64> = (0..rows * cols)
                .map(|_| {
                    if non_canonical && rng.random_bool(0.3) {
                        P + rng.random_range(0..=u64::MAX - P)
                    } else {
                        rng.random_range(0..P)
                    }
                })
                .collect();
            // Plonky3's field type holds canonical values; ours reads any u64 mod p.
            let canonical: Vec<u64> = matrix.iter().map(|&x| x % P).collect();
            assert_eq!(
                our_root(&backend, &matrix, rows, cols),
                plonky3_root(&canonical, cols),
                "{rows} x {cols}, non-canonical: {non_canonical}"
            );
        }
    }
}
