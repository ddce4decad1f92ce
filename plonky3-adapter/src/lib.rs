//! Plonky3 drop-in: the backends' coset LDE behind Plonky3's own DFT trait.
//!
//! A Plonky3 prover over Goldilocks moves its LDE to one of our backends by changing one type:
//! `Radix2DitParallel<Goldilocks>` becomes [`BackendDft<CudaBackend>`](BackendDft) (or
//! `WgpuBackend`, `CpuBackend`, or any port's backend type). The proof is byte-identical with
//! every proof-of-work bit at 0 ([Byte-identical proofs](#byte-identical-proofs); this crate's
//! tests prove a Fibonacci AIR with p3-uni-stark both ways, on every backend and on the porting
//! guide's toy backend, and compare the serialized proofs) and verifies with Plonky3's stock
//! verifier.
//!
//! - **Plonky3 0.9.0-rc.2, pinned exactly** (`=0.9.0-rc.2`): the newest published release, and
//!   the one our LDE was checked against element for element (`coset_lde_batch` of
//!   `Radix2DitParallel`, `Radix2DFTSmallBatch` and `Radix2Bowers`). Plonky3's release
//!   candidates change trait methods between versions (`coset_lde_batch_with_blocks` is new in
//!   this one), so a caret range could compile against a trait this crate was never checked
//!   with.
//! - **Only the LDE moves.** [`BackendDft`] overrides `coset_lde_batch`, the one call of the
//!   PCS commit that costs; every other method (`dft_batch`, inverses, coset DFTs, the
//!   closure-taking LDE variants) is Plonky3's `Radix2DitParallel`, bit for bit. Small traces
//!   also stay there, below a per-backend threshold ([`BackendDft::with_min_backend_elems`];
//!   the built-in backends' measured ones are [`DefaultDevice::MIN_BACKEND_ELEMS`]).
//! - **Cheapest for the PCS.** The result is a `BitReversedMatrixView` over bit-reversed
//!   storage, so `TwoAdicFriPcs`'s `bit_reverse_rows()` is free; the backend's natural-order
//!   output is scattered into bit-reversed order chunk by chunk as it downloads. `Goldilocks`
//!   is `repr(transparent)` over `u64`: traces and results cross as casts, never element
//!   copies.
//! - **Every backend, ports included.** `BackendDft<B>` is a `TwoAdicSubgroupDft` for every
//!   [`Backend`](backend_api::Backend) `B`; see [Which constructor](#which-constructor).
//! - **Device errors cannot be returned** through `TwoAdicSubgroupDft`: [`OnDeviceError`]
//!   chooses between a CPU fallback with a warning (the default) and a panic carrying the
//!   backend's message.
//!
//! # Use from Plonky3
//!
//! A uni-stark prover over Goldilocks changes the DFT type of its PCS and nothing else. The
//! complete, runnable program (Keccak-256 MMCS, challenger, FRI parameters, an AIR, prove,
//! verify, compare with stock Plonky3) is this crate's `examples/prove.rs`
//! (`cargo run -p plonky3-adapter --example prove`); its core:
//!
//! ```
//! use std::sync::Arc;
//!
//! use backend_cpu::CpuBackend;
//! use p3_challenger::{HashChallenger, SerializingChallenger64};
//! use p3_commit::ExtensionMmcs;
//! use p3_field::extension::BinomialExtensionField;
//! use p3_fri::{FriParameters, TwoAdicFriPcs};
//! use p3_goldilocks::Goldilocks;
//! use p3_keccak::Keccak256Hash;
//! use p3_merkle_tree::MerkleTreeMmcs;
//! use p3_symmetric::{CompressionFunctionFromHasher, SerializingHasher};
//! use p3_uni_stark::StarkConfig;
//! use plonky3_adapter::BackendDft;
//!
//! type Val = Goldilocks;
//! type Challenge = BinomialExtensionField<Val, 2>;
//! type ValMmcs = MerkleTreeMmcs<
//!     Val, u8, SerializingHasher<Keccak256Hash>, CompressionFunctionFromHasher<Keccak256Hash, 2, 32>, 2, 32,
//! >;
//! type ChallengeMmcs = ExtensionMmcs<Val, Challenge, ValMmcs>;
//! type Dft = BackendDft<CpuBackend>; // was: p3_dft::Radix2DitParallel<Val>
//! type Pcs = TwoAdicFriPcs<Val, Dft, ValMmcs, ChallengeMmcs>;
//! type Challenger = SerializingChallenger64<Val, HashChallenger<u8, Keccak256Hash, 32>>;
//! type Config = StarkConfig<Pcs, Challenge, Challenger>;
//!
//! let val_mmcs = ValMmcs::new(
//!     SerializingHasher::new(Keccak256Hash {}),
//!     CompressionFunctionFromHasher::new(Keccak256Hash {}),
//!     0, // cap height: one root
//! );
//! let fri = FriParameters {
//!     log_blowup: 1,
//!     log_final_poly_len: 0,
//!     max_log_arity: 1,
//!     num_queries: 100,
//!     // Proof-of-work bits other than 0 make proofs differ between runs; see below.
//!     commit_proof_of_work_bits: 0,
//!     batch_proof_of_work_bits: 0,
//!     query_proof_of_work_bits: 0,
//!     mmcs: ChallengeMmcs::new(val_mmcs.clone()),
//! };
//! let dft = BackendDft::new(Arc::new(CpuBackend::new())); // or `Dft::default()`
//! let pcs = Pcs::new(dft, val_mmcs, fri);
//! let config = Config::new(pcs, Challenger::from_hasher(vec![], Keccak256Hash {}));
//! // p3_uni_stark::prove(&config, &air, trace, &public_values), then verify, as with stock Plonky3.
//! # let _ = config;
//! ```
//!
//! # Which constructor
//!
//! - **[`BackendDft::new`]`(Arc::new(backend))`**: the explicit way, for any backend (a port
//!   such as the porting guide's toy backend included). Every LDE the backend can take goes to
//!   it; [`BackendDft::with_min_backend_elems`] keeps small ones on the CPU.
//! - **`BackendDft::<B>::default()`**, for code that builds its DFT with `Default` (Plonky3's
//!   test helpers, generic provers): a backend registered with [`register_default`], else, for
//!   the built-in backends ([`DefaultDevice`]: `CpuBackend`, `CudaBackend`, `WgpuBackend`), the
//!   process-wide default device with its measured threshold, else (a port nobody registered)
//!   Plonky3's own `Radix2DitParallel`, with one `tracing` warning saying how to register. The
//!   results are the same every way; [`BackendDft::stats`] shows where the LDEs ran.
//!
//! # Byte-identical proofs
//!
//! With every proof-of-work bit at 0 (`commit_proof_of_work_bits`, `batch_proof_of_work_bits`,
//! `query_proof_of_work_bits` of `FriParameters`), a proof is a function of the statement and
//! the configuration, and a `BackendDft` proof is byte-for-byte the proof
//! `Radix2DitParallel` gives (this crate's tests compare the postcard serializations, on every
//! backend and on the toy port). With proof-of-work bits, Plonky3 grinds for its witness with
//! rayon's `find_any`, which returns whichever thread's witness it meets first: two runs may
//! then give different, equally valid proofs, stock Plonky3's included. Such proofs still
//! verify with the stock verifier; only a byte comparison needs the bits at 0.
//!
//! # Design note: a device-resident `Mmcs`
//!
//! `BackendDft` still downloads every LDE, because `TwoAdicFriPcs::commit` hands the DFT's
//! output to `InputMmcs::commit_matrix` as a host `RowMajorMatrix`. The next step keeps the LDE
//! on the device between the DFT and the Merkle tree:
//!
//! - **What the traits allow.** `Mmcs<Goldilocks>` is generic over the committed matrix type
//!   (`commit<M: Matrix<T>>(Vec<M>)`) and its `ProverData<M>` is an associated type, so an Mmcs
//!   may keep anything as prover data: the device LDE buffer and the device node array. But
//!   `TwoAdicFriPcs` fixes `M = RowMajorMatrix<Val>` and calls the DFT and the Mmcs separately;
//!   a device-resident path therefore needs its own `Pcs` (a thin copy of `TwoAdicFriPcs::commit`
//!   that calls the backend's LDE, leaf hash and tree without a download), or a DFT whose
//!   `Evaluations` type is a device-backed matrix that the Mmcs recognises (possible:
//!   `Evaluations: BitReversibleMatrix + 'static` is all the trait asks, but every `Matrix`
//!   method would then need a host path too).
//! - **What openings need.** `open_batch(index, data)` returns the opened rows of every matrix
//!   at the query index and the authentication path: a few rows and `log2(N)` digests per
//!   query. Those are small downloads (`Backend::download` at an offset); `get_matrices` must
//!   still return host matrices (the PCS reads the committed LDE back for
//!   `get_evaluations_on_domain`), so either keep a lazily downloaded host copy or serve those
//!   reads from the device row by row.
//! - **Layout differences** from our `rows` leaf layout and tree (CONVENTIONS.md):
//!   Plonky3 commits the *bit-reversed* LDE (the leaf kernel must read row `br(i)` for leaf `i`,
//!   or the LDE must be bit-reversed on the device first); it pads a layer that is not a power
//!   of two with zero digests instead of repeating the last leaf (irrelevant for power-of-two
//!   heights, which are all a two-adic PCS commits); several matrices of the same height are
//!   concatenated into one leaf preimage (a leaf spec over several buffers); shorter matrices
//!   are hashed and injected at the tree level of their height (`H(H(left || right) || ...)`
//!   per Plonky3's `MerkleTree::new`); and the commitment is a cap of `2^cap_height` digests,
//!   not one root (our node array already holds every level, so a cap is a slice of it).
//! - **Serialization** stays Plonky3's: `SerializingHasher<Keccak256Hash>` hashes canonical
//!   `u64` little-endian words with the `0x01`-padded Keccak-256, exactly our `keccak256` over
//!   the `rows` layout, and `CompressionFunctionFromHasher<Keccak256Hash, 2, 32>` is our
//!   `H(left || right)`. The same byte-identical-proof test would prove it.

mod bitrev;
mod convert;
mod device;
mod dft;
mod mmcs;

pub use device::{DefaultDevice, register_default, unregister_default};
pub use dft::{BackendDft, DftStats, OnDeviceError};
pub use mmcs::{BackendMmcs, BackendProverData, Digest, KeccakMerkleMmcs, MmcsStats};
