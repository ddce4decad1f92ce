//! Leaf hashing through the backend against the raw crates hashing the same preimages.
//!
//! The raw side serialises every leaf up front and then runs one `Keccak256::digest` /
//! `blake3::hash` per leaf, rayon-parallel over leaves exactly like the backend. The matrix is
//! 2^`BENCH_HASH_LOG_ROWS` (default 16) rows x `BENCH_HASH_COLS` (default 316) canonical values;
//! `BENCH_HASH_ROWS_ONLY=1` skips the `lambda-vm-pairs` layout.
//!
//! `PAIRED keccak_lanes/...` times, on one thread, `p3-keccak`'s batched Keccak-256 (one message
//! per SIMD lane of the Keccak-f it picks at run time) against the `sha3` crate one message at a
//! time, over `n` messages of a Merkle node's 64 bytes and of a default leaf's bytes: where the
//! batched call stops winning as `n` falls below the lane count. `PAIRED keccak_f/...` times the
//! packed permutation the build enables (`p3_keccak::VECTOR_LEN` lanes: SSE2's two without
//! `-C target-cpu`) against as many scalar ones, which is what a CPU without AVX2 would get.

use std::hint::black_box;
use std::time::Duration;

use backend_api::field::P;
use backend_api::{Backend, DIGEST_WORDS, HashKind, LeafLayout, LeafSpec, MatrixShape};
use backend_cpu::CpuBackend;
use criterion::{Criterion, Throughput};

mod common;
use common::{env, paired};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use sha3::Digest;

/// The leaf preimages, concatenated, built element by element.
fn preimages(m: &[u64], shape: MatrixShape, layout: LeafLayout) -> Vec<u8> {
    let row = |r: usize| &m[r * shape.cols()..(r + 1) * shape.cols()];
    match layout {
        LeafLayout::Rows => m.iter().flat_map(|x| x.to_le_bytes()).collect(),
        LeafLayout::LambdaVmPairs => {
            let bits = shape.rows().ilog2();
            let br = |i: usize| i.reverse_bits() >> (usize::BITS - bits);
            (0..shape.rows() / 2)
                .flat_map(|i| row(br(2 * i)).iter().chain(row(br(2 * i + 1))).flat_map(|x| x.to_be_bytes()))
                .collect()
        }
    }
}

fn raw(hash: HashKind, bytes: &[u8], leaf_bytes: usize, out: &mut [u64]) {
    out.par_chunks_mut(DIGEST_WORDS).with_min_len(16).enumerate().for_each(|(i, o)| {
        let leaf = &bytes[i * leaf_bytes..(i + 1) * leaf_bytes];
        let d: [u8; 32] = match hash {
            HashKind::Keccak256 => sha3::Keccak256::digest(leaf).into(),
            HashKind::Blake3 => blake3::hash(leaf).into(),
            HashKind::Poseidon2 => unreachable!("bench_leaves skips Poseidon2"),
        };
        o.copy_from_slice(&backend_api::digest_to_words(&d));
    });
}

fn bench_leaves<B: Backend>(c: &mut Criterion, backend: &B, shape: MatrixShape) {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let host: Vec<u64> = (0..shape.len()).map(|_| rng.random_range(0..P)).collect();
    let matrix = backend.upload(&host).expect("upload");
    let layouts: &[LeafLayout] =
        if std::env::var("BENCH_HASH_ROWS_ONLY").is_ok() { &[LeafLayout::Rows] } else { &LeafLayout::ALL };
    for &layout in layouts {
        let bytes = preimages(&host, shape, layout);
        // Poseidon2 has no byte-crate counterpart here: `poseidon2_plonky3` times it against Plonky3.
        for hash in HashKind::ALL.into_iter().filter(|h| !h.is_algebraic()) {
            let spec = LeafSpec::new(hash, layout, 0..shape.cols()).expect("spec");
            let leaves = spec.validate(shape).expect("spec");
            let mut out = backend.alloc(leaves * DIGEST_WORDS).expect("alloc");
            let mut raw_out = vec![0u64; leaves * DIGEST_WORDS];
            let mut g = c.benchmark_group(format!("hash_leaves/{}x{}/{layout}/{hash}", shape.rows(), shape.cols()));
            g.throughput(Throughput::Bytes(shape.bytes() as u64));
            g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
            g.bench_function(backend.info().backend, |b| {
                b.iter(|| backend.hash_leaves_into(&matrix, shape, &spec, &mut out, 0).expect("hash"))
            });
            g.bench_function("raw_crate", |b| b.iter(|| raw(hash, black_box(&bytes), spec.leaf_bytes(), &mut raw_out)));
            g.finish();
            let reps = env("BENCH_PAIRED_REPS", 7);
            paired(
                &format!("hash_leaves/{}x{}/{layout}/{hash}", shape.rows(), shape.cols()),
                reps,
                ["cpu", "raw"],
                |side| {
                    if side == 0 {
                        backend.hash_leaves_into(&matrix, shape, &spec, &mut out, 0).expect("hash");
                    } else {
                        raw(hash, black_box(&bytes), spec.leaf_bytes(), &mut raw_out);
                    }
                },
            );
            // Same work, same answer.
            assert_eq!(backend.download_vec(&out).expect("download"), raw_out, "{layout} {hash}");
        }
    }
}

fn bench_keccak_lanes(leaf_bytes: usize) {
    use p3_symmetric::CryptographicHasher;
    let lanes = <p3_keccak::Keccak256Hash as CryptographicHasher<u8, [u8; 32]>>::LANES;
    let reps = env("BENCH_PAIRED_REPS", 7);
    for len in [64, leaf_bytes] {
        for n in [1, 2, lanes / 2, lanes, 64 * lanes] {
            let messages: Vec<u8> = (0..n * len).map(|i| (i * 31 + 7) as u8).collect();
            let (mut batched, mut scalar) = (vec![[0u8; 32]; n], vec![[0u8; 32]; n]);
            // Enough calls for a measurable time, the same on both sides.
            let calls = (1 << 22) / (n * len.div_ceil(136) * 136);
            paired(&format!("keccak_lanes/{len}B/x{n}"), reps, ["batched", "sha3"], |side| {
                for _ in 0..calls.max(1) {
                    if side == 0 {
                        p3_keccak::Keccak256Hash.hash_many(black_box(&messages), &mut batched);
                    } else {
                        for (d, m) in scalar.iter_mut().zip(black_box(&messages).chunks_exact(len)) {
                            *d = sha3::Keccak256::digest(m).into();
                        }
                    }
                }
            });
            assert_eq!(batched, scalar, "{len} bytes x{n}");
        }
    }
}

fn bench_keccak_f() {
    use p3_keccak::{KeccakF, VECTOR_LEN};
    use p3_symmetric::Permutation;
    let mut packed = [[0u64; VECTOR_LEN]; 25];
    let mut scalar = [[0u64; 25]; VECTOR_LEN];
    paired(&format!("keccak_f/x{VECTOR_LEN}"), env("BENCH_PAIRED_REPS", 7), ["packed", "scalar"], |side| {
        for _ in 0..20_000 {
            if side == 0 {
                KeccakF.permute_mut(black_box(&mut packed));
            } else {
                for s in black_box(&mut scalar) {
                    KeccakF.permute_mut(s);
                }
            }
        }
    });
    let lanes: [[u64; 25]; VECTOR_LEN] = std::array::from_fn(|l| std::array::from_fn(|w| packed[w][l]));
    assert_eq!(lanes, scalar, "the packed and scalar permutations agree");
}

fn benches(c: &mut Criterion) {
    let shape =
        MatrixShape::new(1 << env("BENCH_HASH_LOG_ROWS", 16), env("BENCH_HASH_COLS", 316)).expect("bench shape");
    bench_keccak_f();
    bench_keccak_lanes(shape.cols() * 8);
    bench_leaves(c, &CpuBackend::new(), shape);
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
}
