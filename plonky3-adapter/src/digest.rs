//! The hashes [`BackendMmcs`](crate::BackendMmcs) runs on a backend, each with the Plonky3 MMCS it
//! reproduces byte for byte.

use std::fmt;

use backend_api::{DIGEST_WORDS, HashKind, digests_from_words};
use p3_commit::Mmcs;
use p3_field::Field;
use p3_goldilocks::{Goldilocks, Poseidon2Goldilocks, default_goldilocks_poseidon2_8};
use p3_keccak::Keccak256Hash;
use p3_merkle_tree::{MerkleCap, MerkleTreeError, MerkleTreeMmcs, PrunedMerklePaths};
use p3_symmetric::{
    CompressionFunctionFromHasher, CryptographicHasher, PaddingFreeSponge, PseudoCompressionFunction,
    SerializingHasher, TruncatedPermutation,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Plonky3's Keccak-256 MMCS over Goldilocks rows, the one [`BackendMmcs`](crate::BackendMmcs)
/// reproduces by default: leaves are Keccak-256 over a row's canonical `u64` little-endian words
/// (`SerializingHasher<Keccak256Hash>`), inner nodes Keccak-256 over `left || right`
/// (`CompressionFunctionFromHasher<Keccak256Hash, 2, 32>`), a binary tree of 32-byte digests.
pub type KeccakMerkleMmcs = MerkleTreeMmcs<
    Goldilocks,
    u8,
    SerializingHasher<Keccak256Hash>,
    CompressionFunctionFromHasher<Keccak256Hash, 2, 32>,
    2,
    32,
>;

/// Plonky3's Poseidon2 MMCS over Goldilocks rows, as recursive Goldilocks provers declare it:
/// the width-8 permutation `default_goldilocks_poseidon2_8()`, leaves through the padding-free
/// sponge of rate 4 (`PaddingFreeSponge<_, 8, 4, 4>`), nodes through the truncated permutation
/// (`TruncatedPermutation<_, 2, 4, 8>`), digests of 4 elements.
pub type Poseidon2MerkleMmcs = MerkleTreeMmcs<
    <Goldilocks as Field>::Packing,
    <Goldilocks as Field>::Packing,
    PaddingFreeSponge<Poseidon2Goldilocks<8>, 8, 4, 4>,
    TruncatedPermutation<Poseidon2Goldilocks<8>, 2, 4, 8>,
    2,
    4,
>;

/// One 32-byte Keccak-256 digest, as Plonky3's byte MMCS holds it.
pub type Digest = [u8; 32];

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Keccak256 {}
    impl Sealed for super::Poseidon2 {}
}

/// A hash whose leaves and tree a backend computes for [`BackendMmcs`](crate::BackendMmcs):
/// [`Keccak256`] or [`Poseidon2`].
pub trait MmcsHash: sealed::Sealed + Send + Sync + 'static {
    /// The backend's hash (CONVENTIONS.md, "Hash functions").
    const KIND: HashKind;
    /// Whether [`crate::BackendPcs`] builds the trees of its unfused commits below its DFT's
    /// threshold on the host ([`crate::BackendMmcs::with_min_device_elems`]): where the host
    /// hashes fast (Keccak-256 on many cores), a tree as small as an LDE the device does not pay
    /// for is no faster on the device; where the host hashes slowly (Poseidon2), the device wins
    /// at every size the prove bench measures, and the trees go there.
    const SMALL_TREES_ON_HOST: bool;
    /// One digest, as Plonky3's MMCS holds it.
    type Digest: Copy + PartialEq + fmt::Debug + Send + Sync + Serialize + DeserializeOwned;
    /// Plonky3's MMCS with this hash, whose commitments, proofs and bytes are reproduced.
    type Stock: Mmcs<
            Goldilocks,
            Commitment = MerkleCap<Goldilocks, Self::Digest>,
            Proof = Vec<Self::Digest>,
            MultiProof: Send + Sync,
            Error = MerkleTreeError,
        > + Clone
        + Send
        + Sync;

    /// Plonky3's MMCS with a cap of `2^cap_height` digests.
    fn stock(cap_height: usize) -> Self::Stock;

    /// The digests held by `words`, 4 backend words each (CONVENTIONS.md, "Digest bytes").
    fn from_words(words: &[u64]) -> Vec<Self::Digest>;

    /// Plonky3's leaf digest of the concatenated rows `row`.
    fn hash_row(row: impl Iterator<Item = Goldilocks>) -> Self::Digest;

    /// Plonky3's inner node over two children.
    fn compress(left: Self::Digest, right: Self::Digest) -> Self::Digest;

    /// Plonky3's multi-opening proof holding `siblings`, in the order it sends them.
    fn multi_proof(siblings: Vec<Self::Digest>) -> <Self::Stock as Mmcs<Goldilocks>>::MultiProof;
}

/// Keccak-256 ([`KeccakMerkleMmcs`]): the byte hash of Plonky3's Keccak configurations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Keccak256;

impl MmcsHash for Keccak256 {
    const KIND: HashKind = HashKind::Keccak256;
    const SMALL_TREES_ON_HOST: bool = true;
    type Digest = Digest;
    type Stock = KeccakMerkleMmcs;

    fn stock(cap_height: usize) -> KeccakMerkleMmcs {
        KeccakMerkleMmcs::new(
            SerializingHasher::new(Keccak256Hash {}),
            CompressionFunctionFromHasher::new(Keccak256Hash {}),
            cap_height,
        )
    }

    fn from_words(words: &[u64]) -> Vec<Digest> {
        digests_from_words(words)
    }

    fn hash_row(row: impl Iterator<Item = Goldilocks>) -> Digest {
        CryptographicHasher::<Goldilocks, Digest>::hash_iter(&SerializingHasher::new(Keccak256Hash {}), row)
    }

    fn compress(left: Digest, right: Digest) -> Digest {
        CompressionFunctionFromHasher::<Keccak256Hash, 2, 32>::new(Keccak256Hash {}).compress([left, right])
    }

    fn multi_proof(siblings: Vec<Digest>) -> PrunedMerklePaths<u8, 32> {
        PrunedMerklePaths { sibling_hashes: siblings }
    }
}

/// Goldilocks Poseidon2 of width 8 ([`Poseidon2MerkleMmcs`]): the algebraic hash of Plonky3's
/// recursive Goldilocks configurations. A digest is 4 canonical elements, the backend's 4 words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Poseidon2;

/// Plonky3's sponge and compression over `default_goldilocks_poseidon2_8()`.
fn poseidon2()
-> &'static (PaddingFreeSponge<Poseidon2Goldilocks<8>, 8, 4, 4>, TruncatedPermutation<Poseidon2Goldilocks<8>, 2, 4, 8>)
{
    static INSTANCE: std::sync::OnceLock<(
        PaddingFreeSponge<Poseidon2Goldilocks<8>, 8, 4, 4>,
        TruncatedPermutation<Poseidon2Goldilocks<8>, 2, 4, 8>,
    )> = std::sync::OnceLock::new();
    INSTANCE.get_or_init(|| {
        let perm = default_goldilocks_poseidon2_8();
        (PaddingFreeSponge::new(perm.clone()), TruncatedPermutation::new(perm))
    })
}

impl MmcsHash for Poseidon2 {
    const KIND: HashKind = HashKind::Poseidon2;
    /// The Poseidon2 statement of the prove bench (Fibonacci 2^12 x 256, every trace below the
    /// DFT's threshold) ran 4.26x stock on CUDA and 1.93x on wgpu with its trees on an H100
    /// (BENCHMARKS.md, 2026-12-07).
    const SMALL_TREES_ON_HOST: bool = false;
    type Digest = [Goldilocks; 4];
    type Stock = Poseidon2MerkleMmcs;

    fn stock(cap_height: usize) -> Poseidon2MerkleMmcs {
        let (sponge, compress) = poseidon2().clone();
        Poseidon2MerkleMmcs::new(sponge, compress, cap_height)
    }

    fn from_words(words: &[u64]) -> Vec<[Goldilocks; 4]> {
        words.chunks_exact(DIGEST_WORDS).map(|d| std::array::from_fn(|i| Goldilocks::new(d[i]))).collect()
    }

    fn hash_row(row: impl Iterator<Item = Goldilocks>) -> [Goldilocks; 4] {
        poseidon2().0.hash_iter(row)
    }

    fn compress(left: [Goldilocks; 4], right: [Goldilocks; 4]) -> [Goldilocks; 4] {
        poseidon2().1.compress([left, right])
    }

    fn multi_proof(siblings: Vec<[Goldilocks; 4]>) -> PrunedMerklePaths<Goldilocks, 4> {
        PrunedMerklePaths { sibling_hashes: siblings }
    }
}

// `Poseidon2::from_words` reads a digest as its 4 elements: one backend word each.
const _: () = assert!(DIGEST_WORDS == 4);

#[cfg(test)]
mod tests {
    use super::*;
    use p3_field::PrimeField64;

    #[test]
    fn poseidon2_digest_words_are_its_elements_in_order() {
        let words = [1, 2, 3, 0xFFFF_FFFF_0000_0000, 5, 6, 7, 8];
        let d = Poseidon2::from_words(&words);
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].map(|x| x.as_canonical_u64()), [1, 2, 3, 0xFFFF_FFFF_0000_0000]);
        assert_eq!(d[1].map(|x| x.as_canonical_u64()), [5, 6, 7, 8]);
    }
}
