//! What `BackendDft` gains a Plonky3 prover, each figure paired with stock Plonky3
//! (`Radix2DitParallel` on all host cores) in the same run:
//!
//! - `sweep`: `coset_lde_batch` (and the PCS's `bit_reverse_rows().to_row_major_matrix()`) over
//!   2^`k` x 16 traces, k = 4..=14, blowup 2, as `BackendDft::default()` runs them (`sweep lde`:
//!   the shipped threshold, so no size may be slower than stock) and with the backend threshold
//!   at 0 (`sweep lde, threshold 0`: where the backend starts to win is where the threshold
//!   belongs). The `dft_sweep` bench covers more shapes.
//! - `commit`: `TwoAdicFriPcs::commit` of one random 2^`PCS_LOG_ROWS` (default 16) x `PCS_COLS`
//!   (default 256) trace, blowup 2, Keccak-256 MMCS: the LDE plus Plonky3's CPU Merkle tree
//!   (`pcs commit`), and the same with `BackendMmcs` hashing the leaves and the tree on the backend
//!   (`pcs commit with BackendMmcs`). `mmcs commit` times the Merkle commit alone, of the
//!   2^(`PCS_LOG_ROWS` + 1)-row LDE: Plonky3's `MerkleTreeMmcs` against `BackendMmcs`. The
//!   commitments are compared before timing.
//! - `prove`: a whole p3-uni-stark proof of the Fibonacci AIR with `PROOF_PAIRS` (default 128)
//!   sequences over 2^`PROOF_LOG_ROWS` (default 12) rows, with `BackendDft` (`prove`) and with
//!   `BackendDft` and `BackendMmcs` (`prove with BackendMmcs`); the serialized proofs are compared
//!   first.
//!
//! Each side runs `BENCH_REPS` (default 5) times, alternating, and the best times are compared
//! (`PAIRED ...` lines, as the backend benches print). The backends measured are the CPU
//! backend, and CUDA / wgpu when built with their feature and a device opens; `BENCH_BACKENDS`
//! (e.g. `cuda,cpu`) picks some of them.

#[path = "../tests/common/stark.rs"]
#[allow(missing_docs)]
mod stark;

use std::time::Instant;

use backend_cpu::CpuBackend;
use p3_commit::{Mmcs, Pcs};
use p3_dft::{Radix2DitParallel, TwoAdicSubgroupDft};
use p3_field::PrimeCharacteristicRing;
use p3_field::coset::TwoAdicMultiplicativeCoset;
use p3_goldilocks::Goldilocks;
use p3_matrix::Matrix;
use p3_matrix::bitrev::BitReversibleMatrix;
use p3_matrix::dense::RowMajorMatrix;
use plonky3_adapter::{BackendMmcs, DefaultDevice};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use stark::{Challenge, Challenger, FibonacciAir, Val};

use naive_reference::env::env;

/// Alternates `a` and `b` (`setup` makes each run's input outside the timing) `reps` times each,
/// which of the two goes first alternating too, and prints both best times and the ratio
/// stock / ours (> 1: ours is faster).
fn paired<I, A, B>(
    label: &str,
    reps: usize,
    mut setup: impl FnMut() -> I,
    mut a: impl FnMut(I) -> A,
    mut b: impl FnMut(I) -> B,
) {
    let (mut best_a, mut best_b) = (f64::INFINITY, f64::INFINITY);
    for round in 0..reps {
        for first in [round % 2 == 0, round % 2 != 0] {
            let input = setup();
            let t = Instant::now();
            if first {
                drop(a(input));
                best_a = best_a.min(t.elapsed().as_secs_f64());
            } else {
                drop(b(input));
                best_b = best_b.min(t.elapsed().as_secs_f64());
            }
        }
    }
    println!(
        "PAIRED {label}: stock best {:.2} ms, adapter best {:.2} ms, stock/adapter = {:.3} ({reps} alternating runs each)",
        best_a * 1e3,
        best_b * 1e3,
        best_a / best_b
    );
}

fn random_trace(seed: u64, rows: usize, cols: usize) -> RowMajorMatrix<Val> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    RowMajorMatrix::new((0..rows * cols).map(|_| Goldilocks::new(rng.random())).collect(), cols)
}

/// The LDE as the PCS consumes it: bit-reversed rows, as one row-major matrix.
fn pcs_lde<D: TwoAdicSubgroupDft<Val>>(dft: &D, mat: RowMajorMatrix<Val>) -> RowMajorMatrix<Val> {
    dft.coset_lde_batch(mat, 1, Goldilocks::new(7)).bit_reverse_rows().to_row_major_matrix()
}

fn run<B: DefaultDevice>(name: &str) {
    let Some((ours, backend)) = stark::bench_backend::<B>(name) else { return };
    let mmcs = BackendMmcs::new(backend, 0);
    let stock = Radix2DitParallel::<Val>::default();
    let reps = env("BENCH_REPS", 5);

    // The sweep's shapes are cheap and single calls of them noisy: more runs there.
    let all = ours.clone().with_min_backend_elems(0);
    for k in (4..=14).step_by(2) {
        let mat = random_trace(k, 1 << k, 16);
        let want = pcs_lde(&stock, mat.clone());
        assert_eq!(pcs_lde(&ours, mat.clone()), want, "sweep 2^{k}: LDEs differ");
        assert_eq!(pcs_lde(&all, mat.clone()), want, "sweep 2^{k}, threshold 0: LDEs differ");
        paired(
            &format!("{name} sweep lde 2^{k}x16"),
            reps.max(25),
            || mat.clone(),
            |m| pcs_lde(&stock, m),
            |m| pcs_lde(&ours, m),
        );
        paired(
            &format!("{name} sweep lde, threshold 0, 2^{k}x16"),
            reps.max(25),
            || mat.clone(),
            |m| pcs_lde(&stock, m),
            |m| pcs_lde(&all, m),
        );
    }

    let (log_rows, cols) = (env("PCS_LOG_ROWS", 16), env("PCS_COLS", 256));
    let trace = random_trace(1, 1 << log_rows, cols);
    let domain = TwoAdicMultiplicativeCoset::new(Val::ONE, log_rows).expect("a two-adic domain");
    let stock_pcs = stark::pcs(stock.clone(), 1);
    let our_pcs = stark::pcs(ours.clone(), 1);
    let tree_pcs = stark::backend_pcs(ours.clone(), mmcs.clone(), 1);
    let commit_stock =
        |t| <stark::Pcs<_> as Pcs<Challenge, Challenger>>::commit(&stock_pcs, vec![(domain, t)]).expect("commit");
    let commit_ours =
        |t| <stark::Pcs<_> as Pcs<Challenge, Challenger>>::commit(&our_pcs, vec![(domain, t)]).expect("commit");
    let commit_tree =
        |t| <stark::MmcsPcs<_, B> as Pcs<Challenge, Challenger>>::commit(&tree_pcs, vec![(domain, t)]).expect("commit");
    let want = commit_stock(trace.clone()).0;
    assert_eq!(commit_ours(trace.clone()).0, want, "the commitments differ");
    assert_eq!(commit_tree(trace.clone()).0, want, "the commitments with BackendMmcs differ");
    paired(
        &format!("{name} lde 2^{log_rows}x{cols}"),
        reps,
        || trace.clone(),
        |m| pcs_lde(&stock, m),
        |m| pcs_lde(&ours, m),
    );
    paired(&format!("{name} pcs commit 2^{log_rows}x{cols}"), reps, || trace.clone(), commit_stock, commit_ours);
    paired(
        &format!("{name} pcs commit with BackendMmcs 2^{log_rows}x{cols}"),
        reps,
        || trace.clone(),
        commit_stock,
        commit_tree,
    );
    let lde = pcs_lde(&stock, trace.clone());
    let stock_mmcs = stark::val_mmcs();
    assert_eq!(stock_mmcs.commit_matrix(lde.clone()).0, mmcs.commit_matrix(lde.clone()).0, "the Merkle caps differ");
    paired(
        &format!("{name} mmcs commit 2^{}x{cols}", log_rows + 1),
        reps,
        || lde.clone(),
        |m| stock_mmcs.commit_matrix(m),
        |m| mmcs.commit_matrix(m),
    );
    drop((trace, lde));

    let (proof_rows, pairs) = (1usize << env("PROOF_LOG_ROWS", 12), env("PROOF_PAIRS", 128));
    let air = FibonacciAir { pairs };
    let (fib, public) = stark::fibonacci_trace(pairs, proof_rows);
    let (stock_config, our_config) = (stark::config(stock.clone()), stark::config(ours.clone()));
    let prove_stock = |t| p3_uni_stark::prove(&stock_config, &air, t, &public).expect("proof");
    let prove_ours = |t| p3_uni_stark::prove(&our_config, &air, t, &public).expect("proof");
    let (a, b) = (prove_stock(fib.clone()), prove_ours(fib.clone()));
    p3_uni_stark::verify(&our_config, &air, &b, &public).expect("the stock verifier accepts the adapter's proof");
    assert_eq!(postcard::to_allocvec(&a).unwrap(), postcard::to_allocvec(&b).unwrap(), "the proofs differ");
    paired(
        &format!("{name} prove fibonacci 2^{}x{}", proof_rows.trailing_zeros(), 2 * pairs),
        reps,
        || fib.clone(),
        prove_stock,
        prove_ours,
    );
    let tree_config = stark::backend_config(ours.clone(), mmcs.clone());
    let prove_tree = |t| p3_uni_stark::prove(&tree_config, &air, t, &public).expect("proof");
    let c = prove_tree(fib.clone());
    assert_eq!(postcard::to_allocvec(&a).unwrap(), postcard::to_allocvec(&c).unwrap(), "the proofs differ");
    paired(
        &format!("{name} prove with BackendMmcs fibonacci 2^{}x{}", proof_rows.trailing_zeros(), 2 * pairs),
        reps,
        || fib.clone(),
        prove_stock,
        prove_tree,
    );
    println!("STATS {name}: {:?} {:?}", ours.stats(), mmcs.stats());
}

fn main() {
    println!("host threads: {}", std::thread::available_parallelism().map_or(0, |n| n.get()));
    run::<CpuBackend>("cpu");
    #[cfg(feature = "cuda")]
    run::<backend_cuda::CudaBackend>("cuda");
    #[cfg(feature = "wgpu")]
    run::<backend_wgpu::WgpuBackend>("wgpu");
}
