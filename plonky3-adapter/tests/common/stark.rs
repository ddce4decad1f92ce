//! A p3-uni-stark setup over Goldilocks with a Keccak-256 MMCS, generic over the DFT (and with
//! `BackendMmcs` in place of Plonky3's MMCS), and a Fibonacci AIR of any width (`pairs`
//! independent Fibonacci sequences side by side), shared by the proof tests and the PCS
//! benchmark.

#![allow(dead_code)]

use backend_api::Backend;
use p3_air::{Air, AirBuilder, BaseAir, WindowAccess};
use p3_challenger::{HashChallenger, SerializingChallenger64};
use p3_commit::ExtensionMmcs;
use p3_dft::TwoAdicSubgroupDft;
use p3_field::coset::TwoAdicMultiplicativeCoset;
use p3_field::extension::BinomialExtensionField;
use p3_field::{PrimeCharacteristicRing, PrimeField64};
use p3_fri::{FriParameters, TwoAdicFriPcs};
use p3_goldilocks::Goldilocks;
use p3_keccak::Keccak256Hash;
use p3_matrix::dense::RowMajorMatrix;
use p3_merkle_tree::MerkleTreeMmcs;
use p3_symmetric::{CompressionFunctionFromHasher, SerializingHasher};
use p3_uni_stark::{StarkConfig, StarkGenericConfig};
use plonky3_adapter::{BackendDft, BackendExtensionMmcs, BackendMmcs, BackendPcs};

/// The base field.
pub type Val = Goldilocks;
/// The challenge field.
pub type Challenge = BinomialExtensionField<Val, 2>;
/// Rows hashed as canonical u64 little-endian words with Keccak-256 (0x01 padding).
pub type FieldHash = SerializingHasher<Keccak256Hash>;
/// Inner nodes: Keccak-256(left || right).
pub type Compress = CompressionFunctionFromHasher<Keccak256Hash, 2, 32>;
/// The Keccak-256 MMCS over Goldilocks rows.
pub type ValMmcs = MerkleTreeMmcs<Val, u8, FieldHash, Compress, 2, 32>;
/// FRI's MMCS over the challenge field.
pub type ChallengeMmcs = ExtensionMmcs<Val, Challenge, ValMmcs>;
/// A Keccak-256 Fiat-Shamir transcript.
pub type Challenger = SerializingChallenger64<Val, HashChallenger<u8, Keccak256Hash, 32>>;
/// The two-adic FRI PCS over DFT `D`.
pub type Pcs<D> = TwoAdicFriPcs<Val, D, ValMmcs, ChallengeMmcs>;
/// The STARK configuration over DFT `D`.
pub type Config<D> = StarkConfig<Pcs<D>, Challenge, Challenger>;

/// The MMCS: Keccak-256 leaves and nodes, a cap of one root.
pub fn val_mmcs() -> ValMmcs {
    ValMmcs::new(FieldHash::new(Keccak256Hash {}), Compress::new(Keccak256Hash {}), 0)
}

/// The PCS with `dft`, blowup 2^`log_blowup`, and test-strength FRI parameters without
/// proof-of-work: Plonky3's grinding searches for a witness with rayon's `find_any`, so on a
/// many-core host two runs (even two stock ones) may find different witnesses and serialize
/// different, equally valid proofs. Without grinding a proof is a function of its inputs, which
/// is what a byte-for-byte comparison needs (seen on the 16-core H200 host, 2026-12-03).
pub fn pcs<D: TwoAdicSubgroupDft<Val>>(dft: D, log_blowup: usize) -> Pcs<D> {
    Pcs::new(dft, val_mmcs(), fri(ChallengeMmcs::new(val_mmcs()), log_blowup))
}

/// The FRI parameters of [`pcs`] over the challenge MMCS `mmcs`.
pub fn fri<M>(mmcs: M, log_blowup: usize) -> FriParameters<M> {
    FriParameters {
        log_blowup,
        log_final_poly_len: 0,
        max_log_arity: 1,
        num_queries: 40,
        batch_proof_of_work_bits: 0,
        commit_proof_of_work_bits: 0,
        query_proof_of_work_bits: 0,
        mmcs,
    }
}

/// FRI's MMCS over `BackendMmcs`.
pub type BackendChallengeMmcs<B> = ExtensionMmcs<Val, Challenge, BackendMmcs<B>>;
/// The two-adic FRI PCS over DFT `D` with the Merkle trees on backend `B`.
pub type MmcsPcs<D, B> = TwoAdicFriPcs<Val, D, BackendMmcs<B>, BackendChallengeMmcs<B>>;
/// The STARK configuration of [`MmcsPcs`].
pub type BackendConfig<D, B> = StarkConfig<MmcsPcs<D, B>, Challenge, Challenger>;
/// FRI's MMCS whose layers the fused PCS folds and commits on the device.
pub type DeviceChallengeMmcs<B> = BackendExtensionMmcs<B, Challenge>;
/// The fused PCS on backend `B`, FRI on the device (or, with `F = BackendChallengeMmcs<B>`, FRI's
/// folds on the host as stock).
pub type FusedPcs<B, F = DeviceChallengeMmcs<B>> = BackendPcs<B, F>;
/// The STARK configuration of [`FusedPcs`].
pub type FusedConfig<B, F = DeviceChallengeMmcs<B>> = StarkConfig<FusedPcs<B, F>, Challenge, Challenger>;

/// [`pcs`] with `mmcs` (cap height 0, as [`val_mmcs`]) for the trace, the quotient and FRI.
pub fn backend_pcs<D: TwoAdicSubgroupDft<Val>, B: Backend>(
    dft: D,
    mmcs: BackendMmcs<B>,
    log_blowup: usize,
) -> MmcsPcs<D, B> {
    MmcsPcs::new(dft, mmcs.clone(), fri(ExtensionMmcs::new(mmcs), log_blowup))
}

/// The fused PCS with `dft` and `mmcs` (cap height 0) for the trace, the quotient and FRI,
/// blowup 2.
pub fn fused_config<B: Backend + 'static>(dft: BackendDft<B>, mmcs: BackendMmcs<B>) -> FusedConfig<B> {
    fused_config_with(dft, mmcs, true)
}

/// [`fused_config`] with the openings on the device or (`device_openings` false) on the host.
pub fn fused_config_with<B: Backend + 'static>(
    dft: BackendDft<B>,
    mmcs: BackendMmcs<B>,
    device_openings: bool,
) -> FusedConfig<B> {
    let pcs =
        FusedPcs::new(dft, mmcs.clone(), fri(BackendExtensionMmcs::new(mmcs), 1)).with_device_openings(device_openings);
    FusedConfig::new(pcs, Challenger::from_hasher(vec![], Keccak256Hash {}))
}

/// [`fused_config`] with Plonky3's `ExtensionMmcs` as FRI's MMCS: FRI's folds on the host, as
/// `prove_fri` runs them.
pub fn fused_config_host_fri<B: Backend + 'static>(
    dft: BackendDft<B>,
    mmcs: BackendMmcs<B>,
    device_openings: bool,
) -> FusedConfig<B, BackendChallengeMmcs<B>> {
    let pcs = FusedPcs::new(dft, mmcs.clone(), fri(ExtensionMmcs::new(mmcs), 1)).with_device_openings(device_openings);
    FusedConfig::new(pcs, Challenger::from_hasher(vec![], Keccak256Hash {}))
}

/// [`config`] with `mmcs`.
pub fn backend_config<D: TwoAdicSubgroupDft<Val>, B: Backend>(dft: D, mmcs: BackendMmcs<B>) -> BackendConfig<D, B> {
    BackendConfig::new(backend_pcs(dft, mmcs, 1), Challenger::from_hasher(vec![], Keccak256Hash {}))
}

/// The STARK configuration with `dft` and blowup 2.
pub fn config<D: TwoAdicSubgroupDft<Val>>(dft: D) -> Config<D> {
    Config::new(pcs(dft, 1), Challenger::from_hasher(vec![], Keccak256Hash {}))
}

/// `pairs` Fibonacci sequences side by side: columns `(2k, 2k+1)` hold `(a_i, b_i)` with
/// `a_0 = k`, `b_0 = k + 1`, `a_{i+1} = b_i`, `b_{i+1} = a_i + b_i`. Public values: the last `b`
/// of the first pair.
#[derive(Clone, Copy, Debug)]
pub struct FibonacciAir {
    /// Number of sequences (the trace has `2 * pairs` columns).
    pub pairs: usize,
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
            let (a_next, b_next) = (next[2 * k], next[2 * k + 1]);
            builder.when_first_row().assert_eq(a, AB::Expr::from_u64(k as u64));
            builder.when_first_row().assert_eq(b, AB::Expr::from_u64(k as u64 + 1));
            builder.when_transition().assert_eq(b, a_next);
            builder.when_transition().assert_eq(a + b, b_next);
        }
        builder.when_last_row().assert_eq(local[1], last_b);
    }
}

/// The Fibonacci trace of `rows` rows (a power of two) and its public value.
pub fn fibonacci_trace(pairs: usize, rows: usize) -> (RowMajorMatrix<Val>, Vec<Val>) {
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
    debug_assert!(last_b.as_canonical_u64() < 0xFFFF_FFFF_0000_0001);
    (RowMajorMatrix::new(values, width), vec![last_b])
}

/// Proves the `pairs`-wide Fibonacci AIR over `rows` rows with `dft`; returns the serialized proof
/// after checking that the stock verifier accepts it and rejects a wrong public value.
pub fn prove_and_verify<D: TwoAdicSubgroupDft<Val> + Sync>(dft: D, pairs: usize, rows: usize) -> Vec<u8> {
    let config = config(dft);
    let air = FibonacciAir { pairs };
    let (trace, public) = fibonacci_trace(pairs, rows);
    let proof = p3_uni_stark::prove(&config, &air, trace, &public).expect("proving succeeds");
    p3_uni_stark::verify(&config, &air, &proof, &public).expect("the stock verifier accepts the proof");
    let wrong = vec![public[0] + Val::new(1)];
    assert!(p3_uni_stark::verify(&config, &air, &proof, &wrong).is_err(), "a wrong public value verified");
    postcard::to_allocvec(&proof).expect("the proof serializes")
}

/// Proves the Fibonacci AIR with `dft` and the Merkle trees on `mmcs`'s backend; returns the
/// serialized proof after checking that the stock verifier, with the stock configuration types,
/// accepts the proof deserialized from those bytes and rejects a wrong public value.
pub fn prove_with_mmcs<D: TwoAdicSubgroupDft<Val> + Sync, B: Backend>(
    dft: D,
    mmcs: BackendMmcs<B>,
    pairs: usize,
    rows: usize,
) -> Vec<u8> {
    let ours = backend_config(dft, mmcs);
    let air = FibonacciAir { pairs };
    let (trace, public) = fibonacci_trace(pairs, rows);
    let proof = p3_uni_stark::prove(&ours, &air, trace, &public).expect("proving succeeds");
    let bytes = postcard::to_allocvec(&proof).expect("the proof serializes");
    let stock_config = config(p3_dft::Radix2DitParallel::<Val>::default());
    let stock_proof: p3_uni_stark::Proof<Config<p3_dft::Radix2DitParallel<Val>>> =
        postcard::from_bytes(&bytes).expect("the proof deserializes as a stock proof");
    p3_uni_stark::verify(&stock_config, &air, &stock_proof, &public).expect("the stock verifier accepts the proof");
    let wrong = vec![public[0] + Val::new(1)];
    assert!(p3_uni_stark::verify(&stock_config, &air, &stock_proof, &wrong).is_err(), "a wrong public value verified");
    bytes
}

/// The stock proof of the same statement (Plonky3's `Radix2DitParallel`).
pub fn stock(pairs: usize, rows: usize) -> Vec<u8> {
    prove_and_verify(p3_dft::Radix2DitParallel::<Val>::default(), pairs, rows)
}

/// Proves `air` over `trace` with `config`; returns the serialized proof after checking that the
/// stock verifier of the Keccak configuration ([`config`]) accepts it ([`prove_checked_against`]).
pub fn prove_checked<SC, A>(config: &SC, air: &A, trace: RowMajorMatrix<Val>, public: &[Val]) -> Vec<u8>
where
    SC: StarkGenericConfig<
            Pcs: p3_commit::Pcs<Challenge, Challenger, Domain = TwoAdicMultiplicativeCoset<Val>>,
            Challenge = Challenge,
            Challenger = Challenger,
        >,
    A: p3_uni_stark::QuotientAir<SC>
        + for<'a> Air<p3_air::DebugConstraintBuilder<'a, Val>>
        + Air<p3_uni_stark::SymbolicAirBuilder<Val>>
        + for<'a> Air<p3_uni_stark::VerifierConstraintFolder<'a, Config<p3_dft::Radix2DitParallel<Val>>>>,
    p3_uni_stark::Proof<SC>: serde::Serialize,
{
    prove_checked_against(config, &config_for_verifier(), air, trace, public)
}

/// Proves `air` over `trace` with `config`; returns the serialized proof after checking that the
/// stock verifier, with the stock configuration `stock` (its types and parameters), accepts the
/// proof deserialized from those bytes, and refuses the same bytes with one bit flipped in the
/// middle (which must not deserialize, or not verify).
pub fn prove_checked_against<SC, V, A>(
    config: &SC,
    stock: &V,
    air: &A,
    trace: RowMajorMatrix<Val>,
    public: &[Val],
) -> Vec<u8>
where
    SC: StarkGenericConfig<
            Pcs: p3_commit::Pcs<Challenge, SC::Challenger, Domain = TwoAdicMultiplicativeCoset<Val>>,
            Challenge = Challenge,
        >,
    SC::Challenger: p3_challenger::GrindingChallenger<Witness = Val>,
    V: StarkGenericConfig<
            Pcs: p3_commit::Pcs<Challenge, V::Challenger, Domain = TwoAdicMultiplicativeCoset<Val>>,
            Challenge = Challenge,
        >,
    V::Challenger: p3_challenger::GrindingChallenger<Witness = Val>,
    A: p3_uni_stark::QuotientAir<SC>
        + for<'a> Air<p3_air::DebugConstraintBuilder<'a, Val>>
        + Air<p3_uni_stark::SymbolicAirBuilder<Val>>
        + for<'a> Air<p3_uni_stark::VerifierConstraintFolder<'a, V>>,
    p3_uni_stark::Proof<SC>: serde::Serialize,
    p3_uni_stark::Proof<V>: serde::de::DeserializeOwned,
{
    let proof = p3_uni_stark::prove(config, air, trace, public).expect("proving succeeds");
    check_against(&proof, stock, air, public)
}

/// [`prove_checked_against`] through [`plonky3_adapter::prove`], the quotient on the device where
/// the PCS holds the trace's LDE there.
pub fn device_prove_checked_against<SC, V, A>(
    config: &SC,
    stock: &V,
    air: &A,
    trace: RowMajorMatrix<Val>,
    public: &[Val],
) -> Vec<u8>
where
    SC: StarkGenericConfig<Challenge = Challenge>,
    SC::Pcs: plonky3_adapter::DeviceQuotientPcs<Challenge, SC::Challenger>,
    SC::Challenger: p3_challenger::GrindingChallenger<Witness = Val>,
    V: StarkGenericConfig<
            Pcs: p3_commit::Pcs<Challenge, V::Challenger, Domain = TwoAdicMultiplicativeCoset<Val>>,
            Challenge = Challenge,
        >,
    V::Challenger: p3_challenger::GrindingChallenger<Witness = Val>,
    A: p3_uni_stark::QuotientAir<SC>
        + for<'a> Air<p3_air::DebugConstraintBuilder<'a, Val>>
        + Air<p3_uni_stark::SymbolicAirBuilder<Val>>
        + for<'a> Air<p3_uni_stark::VerifierConstraintFolder<'a, V>>,
    p3_uni_stark::Proof<SC>: serde::Serialize,
    p3_uni_stark::Proof<V>: serde::de::DeserializeOwned,
{
    let proof = plonky3_adapter::prove(config, air, trace, public).expect("proving succeeds");
    check_against(&proof, stock, air, public)
}

/// The proof's bytes, after checking that the stock verifier of `stock` accepts the proof
/// deserialized from them and refuses them with one bit flipped in the middle.
fn check_against<SC, V, A>(proof: &p3_uni_stark::Proof<SC>, stock: &V, air: &A, public: &[Val]) -> Vec<u8>
where
    SC: StarkGenericConfig,
    V: StarkGenericConfig<
            Pcs: p3_commit::Pcs<Challenge, V::Challenger, Domain = TwoAdicMultiplicativeCoset<Val>>,
            Challenge = Challenge,
        >,
    V::Challenger: p3_challenger::GrindingChallenger<Witness = Val>,
    A: Air<p3_uni_stark::SymbolicAirBuilder<Val>> + for<'a> Air<p3_uni_stark::VerifierConstraintFolder<'a, V>>,
    p3_uni_stark::Proof<SC>: serde::Serialize,
    p3_uni_stark::Proof<V>: serde::de::DeserializeOwned,
{
    let bytes = postcard::to_allocvec(proof).expect("the proof serializes");
    let stock_proof: p3_uni_stark::Proof<V> =
        postcard::from_bytes(&bytes).expect("the proof deserializes as a stock proof");
    p3_uni_stark::verify(stock, air, &stock_proof, public).expect("the stock verifier accepts the proof");
    let mut flipped = bytes.clone();
    flipped[bytes.len() / 2] ^= 0x10;
    let refused = postcard::from_bytes::<p3_uni_stark::Proof<V>>(&flipped)
        .map_or(true, |p| p3_uni_stark::verify(stock, air, &p, public).is_err());
    assert!(refused, "a proof with a flipped bit verified");
    bytes
}

/// The Poseidon2 configuration recursive Goldilocks provers declare: Plonky3's Poseidon2 MMCS
/// ([`Poseidon2MerkleMmcs`]) and a duplex challenger over the same permutation.
pub mod poseidon2 {
    use super::*;
    use p3_challenger::DuplexChallenger;
    use p3_goldilocks::{Poseidon2Goldilocks, default_goldilocks_poseidon2_8};
    use plonky3_adapter::{MmcsHash, Poseidon2, Poseidon2MerkleMmcs};

    /// The Fiat-Shamir transcript: a duplex sponge over the width-8 permutation.
    pub type Challenger = DuplexChallenger<Val, Poseidon2Goldilocks<8>, 8, 4>;
    /// Stock Plonky3's PCS over the Poseidon2 MMCS.
    pub type StockPcs = TwoAdicFriPcs<
        Val,
        p3_dft::Radix2DitParallel<Val>,
        Poseidon2MerkleMmcs,
        ExtensionMmcs<Val, Challenge, Poseidon2MerkleMmcs>,
    >;
    /// Stock Plonky3's configuration.
    pub type StockConfig = StarkConfig<StockPcs, Challenge, Challenger>;
    /// The fused PCS with Poseidon2 trees on backend `B`.
    pub type FusedPcs<B> = BackendPcs<B, BackendExtensionMmcs<B, Challenge, Poseidon2>, Poseidon2>;
    /// Its configuration.
    pub type FusedConfig<B> = StarkConfig<FusedPcs<B>, Challenge, Challenger>;

    fn challenger() -> Challenger {
        Challenger::new(default_goldilocks_poseidon2_8())
    }

    /// Stock Plonky3 with the Poseidon2 MMCS, blowup 2.
    pub fn stock() -> StockConfig {
        let mmcs = Poseidon2::stock(0);
        let pcs = StockPcs::new(p3_dft::Radix2DitParallel::default(), mmcs.clone(), fri(ExtensionMmcs::new(mmcs), 1));
        StockConfig::new(pcs, challenger())
    }

    /// The fused PCS on `backend` with the Poseidon2 MMCS, blowup 2.
    pub fn fused<B: Backend + 'static>(backend: std::sync::Arc<B>) -> FusedConfig<B> {
        let mmcs = BackendMmcs::<B, Poseidon2>::with_hash(std::sync::Arc::clone(&backend), 0);
        let pcs = FusedPcs::new(BackendDft::new(backend), mmcs.clone(), fri(BackendExtensionMmcs::new(mmcs), 1));
        FusedConfig::new(pcs, challenger())
    }
}

/// The stock configuration the verifier side uses.
fn config_for_verifier() -> Config<p3_dft::Radix2DitParallel<Val>> {
    config(p3_dft::Radix2DitParallel::<Val>::default())
}

/// The Keccak-f AIR's trace of `hashes` permutations of seeded inputs (24 rows each, padded to a
/// power of two).
pub fn keccak_trace(hashes: usize) -> RowMajorMatrix<Val> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(hashes as u64);
    let inputs: Vec<[u64; 25]> = (0..hashes).map(|_| std::array::from_fn(|_| rng.random())).collect();
    p3_keccak_air::generate_trace_rows::<Val>(inputs, 1)
}

/// For the benches: `B`'s default DFT and its backend, or `None` when `BENCH_BACKENDS` (e.g.
/// `cuda,cpu`) leaves `name` out or no device opens (which prints a `SKIPPED` line).
pub fn bench_backend<B: plonky3_adapter::DefaultDevice>(name: &str) -> Option<(BackendDft<B>, std::sync::Arc<B>)> {
    if std::env::var("BENCH_BACKENDS").is_ok_and(|list| !list.split(',').any(|b| b == name)) {
        return None;
    }
    let dft = BackendDft::<B>::default();
    match dft.backend() {
        Ok(backend) => {
            println!("BACKEND {name}: {:?}", backend.info());
            Some((dft, backend))
        }
        Err(reason) => {
            println!("SKIPPED bench {name}: {reason}");
            None
        }
    }
}

/// Plonky3's Poseidon2 AIR over Goldilocks: width 8, S-box degree 7 with one register per S-box
/// (constraint degree 3), 4 + 4 full and 22 partial rounds: the permutation Goldilocks Poseidon2
/// hashes with.
pub type Poseidon2Air =
    p3_poseidon2_air::Poseidon2Air<Val, p3_goldilocks::GenericPoseidon2LinearLayersGoldilocks, 8, 7, 1, 4, 22>;

/// The [`Poseidon2Air`] with Plonky3's Goldilocks Poseidon2 round constants.
pub fn poseidon2_air() -> Poseidon2Air {
    use p3_goldilocks::{
        GOLDILOCKS_POSEIDON2_RC_8_EXTERNAL_FINAL, GOLDILOCKS_POSEIDON2_RC_8_EXTERNAL_INITIAL,
        GOLDILOCKS_POSEIDON2_RC_8_INTERNAL,
    };
    Poseidon2Air::new(p3_poseidon2_air::RoundConstants::new(
        GOLDILOCKS_POSEIDON2_RC_8_EXTERNAL_INITIAL,
        GOLDILOCKS_POSEIDON2_RC_8_INTERNAL,
        GOLDILOCKS_POSEIDON2_RC_8_EXTERNAL_FINAL,
    ))
}

/// The Poseidon2 AIR's trace of `hashes` permutations (one row each) of seeded inputs.
pub fn poseidon2_trace(air: &Poseidon2Air, hashes: usize) -> RowMajorMatrix<Val> {
    air.generate_random_trace_rows(hashes, 1)
}

/// The BLAKE3 AIR's trace of `hashes` compressions (one row each) of seeded inputs.
pub fn blake3_trace(hashes: usize) -> RowMajorMatrix<Val> {
    p3_blake3_air::Blake3Air {}.generate_random_trace_rows(hashes, 1)
}
