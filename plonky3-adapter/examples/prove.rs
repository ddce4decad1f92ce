//! A complete Plonky3 uni-stark prover over Goldilocks whose LDEs and Merkle trees run on one of
//! this workspace's backends: the Keccak-256 MMCS, the Fiat-Shamir challenger, FRI parameters,
//! the PCS (`BackendPcs` over `BackendDft` and `BackendMmcs`: the trace commit fused on the
//! backend; `BackendExtensionMmcs` as FRI's MMCS: FRI's layers folded and committed there), a
//! Fibonacci AIR, prove with `plonky3_adapter::prove` (the quotient evaluated on the backend too),
//! verify with the stock verifier, and a byte comparison with the proof stock Plonky3 (`Radix2DitParallel`,
//! `MerkleTreeMmcs`) makes of the same statement.
//!
//! ```text
//! cargo run -p plonky3-adapter --example prove                                  # CPU backend
//! cargo run -p plonky3-adapter --example prove --features wgpu -- --backend wgpu
//! cargo run -p plonky3-adapter --example prove --features cuda -- --backend cuda
//! ```
//!
//! Options: `--backend cpu|wgpu|cuda` (default `cpu`; `wgpu` accepts software adapters such as
//! llvmpipe), `--log-rows N` (trace height 2^N, default 10), `--pairs K` (K Fibonacci sequences,
//! 2K columns, default 8). Exits with 1 when the proof does not verify or differs from stock
//! Plonky3's, and with 2 on bad arguments or a backend that cannot be opened.

use std::process::ExitCode;
use std::sync::Arc;

use backend_api::Backend;
use backend_cpu::CpuBackend;
use p3_air::{Air, AirBuilder, BaseAir, WindowAccess};
use p3_challenger::{HashChallenger, SerializingChallenger64};
use p3_commit::ExtensionMmcs;
use p3_dft::{Radix2DitParallel, TwoAdicSubgroupDft};
use p3_field::PrimeCharacteristicRing;
use p3_field::extension::BinomialExtensionField;
use p3_fri::{FriParameters, TwoAdicFriPcs};
use p3_goldilocks::Goldilocks;
use p3_keccak::Keccak256Hash;
use p3_matrix::dense::RowMajorMatrix;
use p3_merkle_tree::MerkleTreeMmcs;
use p3_symmetric::{CompressionFunctionFromHasher, SerializingHasher};
use p3_uni_stark::{Proof, StarkConfig, prove, verify};
use plonky3_adapter::{BackendDft, BackendExtensionMmcs, BackendMmcs, BackendPcs};

// --- The configuration: what a Plonky3 prover over Goldilocks with Keccak-256 declares. -------

type Val = Goldilocks;
/// The challenge field: Goldilocks' quadratic extension.
type Challenge = BinomialExtensionField<Val, 2>;
/// Leaves: a row's canonical u64 little-endian words, Keccak-256. Nodes: Keccak-256(left || right).
type ValMmcs = MerkleTreeMmcs<
    Val,
    u8,
    SerializingHasher<Keccak256Hash>,
    CompressionFunctionFromHasher<Keccak256Hash, 2, 32>,
    2,
    32,
>;
type Challenger = SerializingChallenger64<Val, HashChallenger<u8, Keccak256Hash, 32>>;
/// The PCS over a DFT and an MMCS for the trace and quotient; FRI's MMCS is its extension.
type Pcs<Dft, Mmcs> = TwoAdicFriPcs<Val, Dft, Mmcs, ExtensionMmcs<Val, Challenge, Mmcs>>;
type Config<Dft, Mmcs> = StarkConfig<Pcs<Dft, Mmcs>, Challenge, Challenger>;
/// Stock Plonky3.
type StockConfig = Config<Radix2DitParallel<Val>, ValMmcs>;
/// The same configuration with the LDEs and the Merkle trees on backend `B`, and the trace commit
/// fused there: `BackendPcs` in place of `TwoAdicFriPcs`.
type BackendConfig<B> = StarkConfig<BackendPcs<B, BackendExtensionMmcs<B, Challenge>>, Challenge, Challenger>;

/// The stock MMCS: cap height 0, the commitment is one root.
fn stock_mmcs() -> ValMmcs {
    ValMmcs::new(SerializingHasher::new(Keccak256Hash {}), CompressionFunctionFromHasher::new(Keccak256Hash {}), 0)
}

/// FRI's parameters over `mmcs`, the same for stock Plonky3 and the backend.
fn fri<M>(mmcs: M) -> FriParameters<M> {
    FriParameters {
        log_blowup: 1,
        log_final_poly_len: 0,
        max_log_arity: 1,
        num_queries: 100,
        // With proof-of-work bits, Plonky3 grinds with rayon's `find_any` and two runs (stock
        // ones too) may give different, equally valid proofs; 0 makes the byte comparison hold.
        commit_proof_of_work_bits: 0,
        batch_proof_of_work_bits: 0,
        query_proof_of_work_bits: 0,
        mmcs,
    }
}

/// The stock STARK configuration over `dft` and `val_mmcs`.
fn config<Dft: TwoAdicSubgroupDft<Val>, Mmcs: Clone>(dft: Dft, val_mmcs: Mmcs) -> Config<Dft, Mmcs> {
    let pcs = TwoAdicFriPcs::new(dft, val_mmcs.clone(), fri(ExtensionMmcs::new(val_mmcs)));
    Config::new(pcs, Challenger::from_hasher(vec![], Keccak256Hash {}))
}

/// The configuration on `backend`: the lines that differ from stock Plonky3 are the DFT
/// (`BackendDft` for `Radix2DitParallel`), the MMCS (`BackendMmcs::new(backend, 0)` for
/// `stock_mmcs()`), FRI's MMCS (`BackendExtensionMmcs` for `ExtensionMmcs`) and the PCS
/// (`BackendPcs::new` for `TwoAdicFriPcs::new`, the same arguments).
fn backend_config<B: Backend + 'static>(dft: BackendDft<B>, val_mmcs: BackendMmcs<B>) -> BackendConfig<B> {
    let pcs = BackendPcs::new(dft, val_mmcs.clone(), fri(BackendExtensionMmcs::new(val_mmcs)));
    StarkConfig::new(pcs, Challenger::from_hasher(vec![], Keccak256Hash {}))
}

// --- The statement: `pairs` Fibonacci sequences side by side. ---------------------------------

/// Columns `(2k, 2k+1)` hold `(a_i, b_i)` with `a_0 = k`, `b_0 = k + 1`, `a_{i+1} = b_i`,
/// `b_{i+1} = a_i + b_i`. Public value: the last `b` of the first sequence.
struct FibonacciAir {
    pairs: usize,
}

impl<F> BaseAir<F> for FibonacciAir {
    fn width(&self) -> usize {
        2 * self.pairs
    }

    fn num_public_values(&self) -> usize {
        1
    }

    fn max_constraint_degree(&self) -> Option<usize> {
        Some(2)
    }
}

impl<AB: AirBuilder> Air<AB> for FibonacciAir {
    fn eval(&self, builder: &mut AB) {
        let main = builder.main();
        let last_b = builder.public_values()[0];
        let local: &[AB::Var] = main.current_slice();
        let next: &[AB::Var] = main.next_slice();
        for k in 0..self.pairs {
            let (a, b) = (local[2 * k], local[2 * k + 1]);
            builder.when_first_row().assert_eq(a, AB::Expr::from_u64(k as u64));
            builder.when_first_row().assert_eq(b, AB::Expr::from_u64(k as u64 + 1));
            builder.when_transition().assert_eq(b, next[2 * k]);
            builder.when_transition().assert_eq(a + b, next[2 * k + 1]);
        }
        builder.when_last_row().assert_eq(local[1], last_b);
    }
}

/// The trace of `rows` rows and its public value.
fn fibonacci_trace(pairs: usize, rows: usize) -> (RowMajorMatrix<Val>, Vec<Val>) {
    let width = 2 * pairs;
    let mut values = Val::zero_vec(rows * width);
    for k in 0..pairs {
        values[2 * k] = Val::from_u64(k as u64);
        values[2 * k + 1] = Val::from_u64(k as u64 + 1);
    }
    for r in 1..rows {
        let (prev, cur) = values[(r - 1) * width..(r + 1) * width].split_at_mut(width);
        for k in 0..pairs {
            cur[2 * k] = prev[2 * k + 1];
            cur[2 * k + 1] = prev[2 * k] + prev[2 * k + 1];
        }
    }
    let last_b = values[(rows - 1) * width + 1];
    (RowMajorMatrix::new(values, width), vec![last_b])
}

/// Proves with `config` and returns the postcard-serialized proof: `plonky3_adapter::prove` in
/// place of `p3_uni_stark::prove` (the same arguments), so the quotient runs on the backend too.
fn prove_bytes<B: Backend + 'static>(config: &BackendConfig<B>, pairs: usize, rows: usize) -> Result<Vec<u8>, String> {
    let (trace, public) = fibonacci_trace(pairs, rows);
    let proof = plonky3_adapter::prove(config, &FibonacciAir { pairs }, trace, &public)
        .map_err(|e| format!("proving failed: {e:?}"))?;
    postcard::to_allocvec(&proof).map_err(|e| format!("the proof does not serialize: {e}"))
}

/// Deserializes `bytes` as a stock proof and checks it with the stock verifier.
fn stock_verify(bytes: &[u8], pairs: usize, rows: usize) -> Result<(), String> {
    let proof: Proof<StockConfig> =
        postcard::from_bytes(bytes).map_err(|e| format!("the proof does not deserialize: {e}"))?;
    let (_, public) = fibonacci_trace(pairs, rows);
    let config = config(Radix2DitParallel::<Val>::default(), stock_mmcs());
    verify(&config, &FibonacciAir { pairs }, &proof, &public).map_err(|e| format!("the proof does not verify: {e:?}"))
}

/// Stock Plonky3's proof of the same statement, verified, serialized.
fn stock_proof(pairs: usize, rows: usize) -> Result<Vec<u8>, String> {
    let config = config(Radix2DitParallel::<Val>::default(), stock_mmcs());
    let (trace, public) = fibonacci_trace(pairs, rows);
    let proof =
        prove(&config, &FibonacciAir { pairs }, trace, &public).map_err(|e| format!("proving failed: {e:?}"))?;
    verify(&config, &FibonacciAir { pairs }, &proof, &public)
        .map_err(|e| format!("the proof does not verify: {e:?}"))?;
    postcard::to_allocvec(&proof).map_err(|e| format!("the proof does not serialize: {e}"))
}

/// The example on `backend`: prove with it, verify with the stock verifier, prove with stock
/// Plonky3, compare.
fn run<B: Backend + 'static>(backend: Arc<B>, pairs: usize, log_rows: u32) -> Result<(), Failure> {
    let info = backend.info();
    println!("backend: {} ({})", info.backend, info.device);
    let rows = 1usize << log_rows;
    println!("statement: Fibonacci AIR, {pairs} sequences ({} columns) x 2^{log_rows} rows", 2 * pairs);

    let dft = BackendDft::new(Arc::clone(&backend));
    let mmcs = BackendMmcs::new(backend, 0);
    let config = backend_config(dft.clone(), mmcs.clone());
    let ours = prove_bytes(&config, pairs, rows).map_err(Failure::Proof)?;
    stock_verify(&ours, pairs, rows).map_err(Failure::Proof)?;
    let stats = dft.stats();
    println!(
        "LDEs: {} on the backend, {} on Plonky3's CPU DFT, {} device errors",
        stats.backend_ldes, stats.cpu_ldes, stats.device_errors
    );
    let trees = mmcs.stats();
    println!(
        "Merkle commits: {} on the backend, {} on the host, {} device errors, {} digest downloads for openings",
        trees.device_commits, trees.host_commits, trees.device_errors, trees.digest_downloads
    );
    let pcs = p3_uni_stark::StarkGenericConfig::pcs(&config).stats();
    println!(
        "PCS commits: {} fused on the backend, {} through TwoAdicFriPcs, {} device errors",
        pcs.fused_commits, pcs.stock_commits, pcs.device_errors
    );
    println!(
        "quotients: {} on the backend, {} on the host; {} committed on the backend",
        pcs.device_quotients, pcs.host_quotients, pcs.device_quotient_commits
    );
    let stock = stock_proof(pairs, rows).map_err(Failure::Proof)?;
    if ours != stock {
        return Err(Failure::Proof(format!(
            "the proof ({} bytes) differs from stock Plonky3's ({} bytes)",
            ours.len(),
            stock.len()
        )));
    }
    println!("OK: the proof verified and is byte-identical to stock Plonky3's ({} bytes)", ours.len());
    Ok(())
}

enum Failure {
    /// Bad arguments, or a backend that cannot be opened (exit 2).
    Setup(String),
    /// The proof did not verify or differs from stock Plonky3's (exit 1).
    Proof(String),
}

fn parse<T: std::str::FromStr>(flag: &str, value: Option<String>) -> Result<T, Failure> {
    let value = value.ok_or_else(|| Failure::Setup(format!("{flag} needs a value")))?;
    value.parse().map_err(|_| Failure::Setup(format!("{flag} {value}: not a number")))
}

/// A backend whose crate feature is off in this build.
#[cfg(not(all(feature = "wgpu", feature = "cuda")))]
fn not_compiled_in(backend: &str) -> Failure {
    Failure::Setup(format!("--backend {backend} is not compiled in: run with `--features {backend}`"))
}

fn main_inner() -> Result<(), Failure> {
    let (mut backend, mut log_rows, mut pairs) = (String::from("cpu"), 10u32, 8usize);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--backend" => backend = args.next().ok_or_else(|| Failure::Setup("--backend needs a value".into()))?,
            "--log-rows" => log_rows = parse("--log-rows", args.next())?,
            "--pairs" => pairs = parse("--pairs", args.next())?,
            other => {
                return Err(Failure::Setup(format!(
                    "unknown argument {other:?}; options: --backend cpu|wgpu|cuda, --log-rows N, --pairs K"
                )));
            }
        }
    }
    if !(1..=22).contains(&log_rows) || !(1..=256).contains(&pairs) {
        return Err(Failure::Setup(format!(
            "--log-rows {log_rows} --pairs {pairs}: use 1..=22 rows bits and 1..=256 pairs"
        )));
    }
    match backend.as_str() {
        "cpu" => run(Arc::new(CpuBackend::new()), pairs, log_rows),
        #[cfg(feature = "wgpu")]
        "wgpu" => {
            let options = backend_wgpu::WgpuOptions { allow_software: true, ..Default::default() };
            let wgpu = backend_wgpu::WgpuBackend::new(options).map_err(|e| Failure::Setup(e.to_string()))?;
            run(Arc::new(wgpu), pairs, log_rows)
        }
        #[cfg(feature = "cuda")]
        "cuda" => {
            let cuda = backend_cuda::CudaBackend::new(0).map_err(|e| Failure::Setup(e.to_string()))?;
            run(Arc::new(cuda), pairs, log_rows)
        }
        #[cfg(not(feature = "wgpu"))]
        "wgpu" => Err(not_compiled_in("wgpu")),
        #[cfg(not(feature = "cuda"))]
        "cuda" => Err(not_compiled_in("cuda")),
        other => Err(Failure::Setup(format!("--backend {other:?}: use cpu, wgpu or cuda"))),
    }
}

fn main() -> ExitCode {
    match main_inner() {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Proof(e)) => {
            eprintln!("FAILED: {e}");
            ExitCode::from(1)
        }
        Err(Failure::Setup(e)) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
