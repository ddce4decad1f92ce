//! Poseidon2 leaves and tree on the CPU backend against Plonky3's own `MerkleTreeMmcs::commit`
//! of the same matrix (width 8: `PaddingFreeSponge<_, 8, 4, 4>`, `TruncatedPermutation<_, 2, 4,
//! 8>`, cap height 0), in one process on the same rayon pool. The two give the same root (the
//! `plonky3_poseidon2` test); this bench checks that again for every shape before timing.
//!
//! Shapes: `BENCH_P2_SHAPES` (default `14x316,16x64`: log2 rows x columns); `BENCH_PAIRED_REPS`
//! (default 5) rounds run both sides once each, alternating which goes first. Plonky3 is timed
//! from its input matrix (copied before the clock) to its commitment; ours from the uploaded
//! matrix to the node array (`hash_leaves`, then `merkle_tree`). The bench prints each side's
//! min and median and the ratio Plonky3 / ours (above 1: ours is faster).
//!
//! Run: `cargo bench -p backend-cpu --bench poseidon2_plonky3`.

use std::hint::black_box;
use std::time::Instant;

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

use naive_reference::env::env;

type Perm = Poseidon2Goldilocks<8>;
type Sponge = PaddingFreeSponge<Perm, 8, 4, 4>;
type Compression = TruncatedPermutation<Perm, 2, 4, 8>;
type Packed = <Goldilocks as Field>::Packing;
type Poseidon2Mmcs = MerkleTreeMmcs<Packed, Packed, Sponge, Compression, 2, 4>;

fn shapes() -> Vec<(u32, usize)> {
    let text = std::env::var("BENCH_P2_SHAPES").unwrap_or_else(|_| "14x316,16x64".into());
    text.split(',')
        .map(|s| {
            let (r, c) = s.trim().split_once('x').unwrap_or_else(|| panic!("BENCH_P2_SHAPES: `{s}` is not LOGxCOLS"));
            (r.parse().expect("log2 rows"), c.parse().expect("columns"))
        })
        .collect()
}

fn stats(mut t: Vec<f64>) -> (f64, f64) {
    t.sort_by(f64::total_cmp);
    (t[0], t[t.len() / 2])
}

fn main() {
    let reps = env("BENCH_PAIRED_REPS", 5).max(1);
    let backend = CpuBackend::new();
    let perm = default_goldilocks_poseidon2_8();
    let mmcs = Poseidon2Mmcs::new(Sponge::new(perm.clone()), Compression::new(perm), 0);
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    println!("threads: {}, packed lanes: {}", rayon::current_num_threads(), <Packed as p3_field::PackedValue>::WIDTH);
    for (log_rows, cols) in shapes() {
        let rows = 1usize << log_rows;
        let values: Vec<u64> = (0..rows * cols).map(|_| rng.random_range(0..0xFFFF_FFFF_0000_0001u64)).collect();
        let field: Vec<Goldilocks> = values.iter().map(|&x| Goldilocks::new(x)).collect();
        let shape = MatrixShape::new(rows, cols).expect("shape");
        let spec = LeafSpec::new(HashKind::Poseidon2, LeafLayout::Rows, 0..cols).expect("spec");
        let matrix = backend.upload(&values).expect("upload");
        let ours = || {
            let leaves = backend.hash_leaves(&matrix, shape, &spec).expect("leaves");
            backend.merkle_tree(&leaves, HashKind::Poseidon2).expect("tree")
        };
        // The same root, checked before anything is timed.
        let mut root = [0u64; 4];
        backend.download(&ours(), 0, &mut root).expect("download");
        let (cap, _) = mmcs.commit_matrix(RowMajorMatrix::new(field.clone(), cols));
        assert_eq!(root, cap.roots()[0].map(|x| x.as_canonical_u64()), "2^{log_rows} x {cols}: roots differ");
        let (mut t_ours, mut t_p3) = (Vec::new(), Vec::new());
        for round in 0..reps {
            for side in [round % 2, 1 - round % 2] {
                if side == 0 {
                    let t = Instant::now();
                    let nodes = ours();
                    t_ours.push(t.elapsed().as_secs_f64());
                    drop(black_box(nodes));
                } else {
                    let input = RowMajorMatrix::new(field.clone(), cols);
                    let t = Instant::now();
                    let out = mmcs.commit_matrix(input);
                    t_p3.push(t.elapsed().as_secs_f64());
                    drop(black_box(out));
                }
            }
        }
        let ((o_min, o_med), (p_min, p_med)) = (stats(t_ours), stats(t_p3));
        println!(
            "2^{log_rows} x {cols}: ours min {:.1} ms median {:.1} ms; Plonky3 MerkleTreeMmcs::commit min {:.1} ms \
             median {:.1} ms; Plonky3 / ours: {:.2}x (mins), {:.2}x (medians)",
            o_min * 1e3,
            o_med * 1e3,
            p_min * 1e3,
            p_med * 1e3,
            p_min / o_min,
            p_med / o_med
        );
    }
}
