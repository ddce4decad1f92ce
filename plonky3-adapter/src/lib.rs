//! Plonky3 drop-in: the backends' coset LDE behind Plonky3's own DFT trait, their Keccak-256
//! leaf hashes and Merkle tree behind its MMCS trait, and both fused behind its PCS trait.
//!
//! A Plonky3 prover over Goldilocks moves its LDE to one of our backends by changing one type:
//! `Radix2DitParallel<Goldilocks>` becomes [`BackendDft<CudaBackend>`](BackendDft) (or
//! `WgpuBackend`, `CpuBackend`, or any port's backend type). It moves its Merkle trees by
//! changing a second: the Keccak-256 `MerkleTreeMmcs` ([`KeccakMerkleMmcs`]) becomes
//! [`BackendMmcs<CudaBackend>`](BackendMmcs). The proof is byte-identical with every
//! proof-of-work bit at 0 ([Byte-identical proofs](#byte-identical-proofs); this crate's tests
//! prove a Fibonacci AIR with p3-uni-stark both ways, on every backend and on the porting guide's
//! toy backend, and compare the serialized proofs) and verifies with Plonky3's stock verifier.
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
//!   storage, so `TwoAdicFriPcs`'s `bit_reverse_rows()` is free; the backend gathers its
//!   natural-order output into bit-reversed order on the device, chunk by chunk, and each chunk
//!   comes down straight into place. `Goldilocks`
//!   is `repr(transparent)` over `u64`: traces and results cross as casts, never element
//!   copies.
//! - **Every backend, ports included.** `BackendDft<B>` is a `TwoAdicSubgroupDft` for every
//!   [`Backend`](backend_api::Backend) `B`; see [Which constructor](#which-constructor).
//! - **Device errors cannot be returned** through `TwoAdicSubgroupDft`: [`OnDeviceError`]
//!   chooses between a CPU fallback with a warning (the default) and a panic carrying the
//!   backend's message. `Mmcs::commit` cannot return one either: [`BackendMmcs`] commits with
//!   Plonky3's own `MerkleTree` on the host, with a warning.
//! - **The Merkle trees move too** with [`BackendMmcs`]: the trace's, the quotient's and every FRI
//!   layer's leaves and tree are computed by the backend, and openings download only the sibling
//!   digests they send; see [Device Merkle trees](#device-merkle-trees-backendmmcs).
//! - **The trace commit fuses** with [`BackendPcs`], `TwoAdicFriPcs` with the same types whose
//!   trace commits run the LDE, the leaves and the tree on the backend in one pass: the trace
//!   goes up once and the LDE comes down once, into the host copy the quotient reads, instead of
//!   coming down from the DFT and going up again for the MMCS. A p3-batch-stark proof's traces
//!   (one per table, of many heights) fuse too: one LDE per height and one tree. Where the
//!   backend has the opening products, the LDE also stays on the device and the openings'
//!   evaluations and row reductions run there; where it also reduces openings
//!   ([`backend_api::Backend::reduce_openings`]), FRI's whole input is summed there.
//! - **The quotient moves** with [`prove`] (for `p3_uni_stark::prove`) and [`prove_batch`] (for
//!   `p3_batch_stark::prove_batch`): the same arguments and proof bytes, the AIR's constraints
//!   compiled once ([`CompiledAir`]) and evaluated over the trace's LDE where it lies, each batch
//!   table over its own columns of its height's LDE, and the quotient's chunks committed there.
//!
//! # Use from Plonky3
//!
//! A uni-stark prover over Goldilocks changes the DFT type of its PCS and, to move its Merkle
//! trees as well, its MMCS type; nothing else. The complete, runnable program (Keccak-256 MMCS,
//! challenger, FRI parameters, an AIR, prove, verify with the stock verifier, compare with stock
//! Plonky3) is this crate's `examples/prove.rs` (`cargo run -p plonky3-adapter --example
//! prove`); its core:
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
//! use p3_uni_stark::StarkConfig;
//! use plonky3_adapter::{BackendDft, BackendMmcs};
//!
//! type Val = Goldilocks;
//! type Challenge = BinomialExtensionField<Val, 2>;
//! // was: MerkleTreeMmcs<Val, u8, SerializingHasher<Keccak256Hash>,
//! //                     CompressionFunctionFromHasher<Keccak256Hash, 2, 32>, 2, 32>
//! type ValMmcs = BackendMmcs<CpuBackend>;
//! type ChallengeMmcs = ExtensionMmcs<Val, Challenge, ValMmcs>;
//! type Dft = BackendDft<CpuBackend>; // was: p3_dft::Radix2DitParallel<Val>
//! type Pcs = TwoAdicFriPcs<Val, Dft, ValMmcs, ChallengeMmcs>;
//! type Challenger = SerializingChallenger64<Val, HashChallenger<u8, Keccak256Hash, 32>>;
//! type Config = StarkConfig<Pcs, Challenge, Challenger>;
//!
//! let backend = Arc::new(CpuBackend::new());
//! // was: ValMmcs::new(SerializingHasher::new(Keccak256Hash {}),
//! //                   CompressionFunctionFromHasher::new(Keccak256Hash {}), 0)
//! let val_mmcs = ValMmcs::new(Arc::clone(&backend), 0); // cap height 0: one root
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
//! let dft = BackendDft::new(backend); // or `Dft::default()`
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
//! # Device Merkle trees: `BackendMmcs`
//!
//! [`BackendMmcs`] is an `Mmcs<Goldilocks>` whose commitment (`MerkleCap`), opening proof and
//! multi-opening proof (`PrunedMerklePaths`) are the types and bytes of Plonky3's MMCS of its
//! hash, at any cap height: [`KeccakMerkleMmcs`] (Keccak-256 bytes, the default,
//! `BackendMmcs::new`) or [`Poseidon2MerkleMmcs`] (the width-8 Goldilocks Poseidon2 of recursive
//! provers, `BackendMmcs::<_, Poseidon2>::with_hash`). What it does, against Plonky3's layout:
//!
//! - **Serialization.** `SerializingHasher<Keccak256Hash>` hashes canonical `u64` little-endian
//!   words with the `0x01`-padded Keccak-256, exactly our `keccak256` over the `rows` leaf layout
//!   (CONVENTIONS.md, "Leaves"), and `CompressionFunctionFromHasher<Keccak256Hash, 2, 32>` is our
//!   `H(left || right)`. Plonky3's Poseidon2 sponge (`PaddingFreeSponge<_, 8, 4, 4>`) and
//!   compression (`TruncatedPermutation<_, 2, 4, 8>`) are our `poseidon2` leaves and nodes, and a
//!   digest's 4 elements are our digest's 4 words (CONVENTIONS.md, "Hash functions"). The PCS
//!   hands the MMCS the LDE already in bit-reversed row order, so leaf `i` is row `i` of the
//!   matrix it receives.
//! - **Several matrices of one height** are one leaf preimage, their rows concatenated in the
//!   order given: one matrix is uploaded straight from its storage, several are concatenated row
//!   by row on the host (in the backend's fastest host memory) and uploaded once, so one leaf spec
//!   covers them.
//! - **Shorter matrices** (Plonky3 injects them at the level of their height:
//!   `node_i = H(H(left || right) || H(rows_i))`) are hashed on the device, interleaved with the
//!   level below by [`Backend::batched_copy`](backend_api::Backend::batched_copy) into the leaves
//!   of a new tree segment, whose next level is then Plonky3's injected level. Mixed heights stay
//!   on the device. (A uni-stark proof of one AIR commits one height per commitment: the trace,
//!   the quotient chunks, one FRI layer; mixed heights come from multi-table provers.)
//! - **Padding.** Plonky3 pads a layer that is not a power of two with zero digests, our tree
//!   repeats the last leaf; so a tallest height that is not a power of two (never the case in a
//!   two-adic PCS) commits with Plonky3's own `MerkleTree` on the host, as does a height whose
//!   matrices all have width 0.
//! - **The cap** is a level of the node array.
//! - **Openings.** The prover data keeps the device node arrays, the top `2^11 - 1` nodes of the
//!   last segment on the host, and the committed matrices (which `get_matrices` returns: the PCS
//!   reads the LDE back). Rows come from the host matrices; the sibling digests below the cached
//!   top are gathered on the device and come down in one transfer per opening.
//! - **Errors.** A device error during a commit commits on the host with a warning; during an
//!   opening, the tree is recomputed on the host from the committed matrices, with a warning.
//!   Plonky3's own panics (heights off its ladder, an opening index past the tallest height)
//!   stay, with its messages.
//!
//! What stays on the host, and the next steps:
//!
//! - **The LDE's host copy.** `TwoAdicFriPcs`'s prover data is the MMCS's over host
//!   `RowMajorMatrix`es, which the quotient (`get_evaluations_on_domain`) and the query openings
//!   read; so even [`BackendPcs`]'s fused commit brings the LDE down once, beside the copy it keeps
//!   on the device for the openings' products.
//! - **FRI and the quotient.** The per-row quotients of the reduced openings and the constraint
//!   quotient are Plonky3's host code. FRI's commit phase (each round's fold and its layer's
//!   Merkle commit) runs on the backend with [`BackendExtensionMmcs`] as FRI's MMCS; with
//!   `ExtensionMmcs` over [`BackendMmcs`], only the layers' Merkle commits do. Each layer comes
//!   down once, as the host copy the query openings read.
//! - **Speed on the CPU.** The CPU backend hashes Keccak leaves and nodes with p3-keccak's
//!   multi-lane Keccak, as Plonky3 does, and reads the committed matrix where it lies
//!   ([`Backend::hash_leaves_from_host`](backend_api::Backend::hash_leaves_from_host)):
//!   `BackendMmcs<CpuBackend>` is the oracle for the GPU backends and a little faster than stock
//!   (this crate's `pcs` bench, `mmcs commit` row: 1.10x of stock's speed at 2^15 x 64, 1.08x at
//!   2^17 x 64, on 2 host cores).

mod batch;
mod bitrev;
mod convert;
mod device;
mod dft;
mod digest;
mod fri;
mod mmcs;
mod open;
mod pcs;
mod prove;
pub mod quotient;
mod reclaim;

pub use batch::prove_batch;
pub use device::{DefaultDevice, register_default, unregister_default};
pub use dft::{BackendDft, DftStats, OnDeviceError};
pub use digest::{Digest, Keccak256, KeccakMerkleMmcs, MmcsHash, Poseidon2, Poseidon2MerkleMmcs};
pub use fri::BackendExtensionMmcs;
pub use mmcs::{BackendMmcs, BackendProverData, MmcsStats};
pub use pcs::{
    BackendPcs, InnerPcs, OnRefusal, PcsError, PcsStats, free_kept_host_matrices, fused_commit_model,
    fused_heights_model, quotient_commit_model,
};
pub use prove::{DeviceQuotient, DeviceQuotientPcs, QuotientValues, prove};
pub use quotient::{CompiledAir, Uncompiled};
