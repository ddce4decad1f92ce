//! Leaf hashing through the backend against the raw crates hashing the same preimages.
//!
//! The raw side serialises every leaf up front and then runs one `Keccak256::digest` /
//! `blake3::hash` per leaf, rayon-parallel over leaves exactly like the backend. The matrix is
//! 2^`BENCH_HASH_LOG_ROWS` (default 16) rows x `BENCH_HASH_COLS` (default 316) canonical values;
//! `BENCH_HASH_ROWS_ONLY=1` skips the `lambda-vm-pairs` layout.

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

fn benches(c: &mut Criterion) {
    let shape =
        MatrixShape::new(1 << env("BENCH_HASH_LOG_ROWS", 16), env("BENCH_HASH_COLS", 316)).expect("bench shape");
    bench_leaves(c, &CpuBackend::new(), shape);
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
}
