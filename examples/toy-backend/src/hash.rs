//! Leaf hashing: the preimage bytes of each layout (CONVENTIONS.md, "Leaves"), hashed with the
//! `sha3` and `blake3` crates, or read back as field elements for Plonky3's Poseidon2.

use std::sync::OnceLock;

use backend_api::field::{bit_reverse, canonical};
use backend_api::{DIGEST_WORDS, HashKind, LeafLayout, LeafSpec, MatrixShape, Result, digest_to_words, validate};
use p3_field::PrimeField64;
use p3_goldilocks::{Goldilocks, Poseidon2Goldilocks, default_goldilocks_poseidon2_8};
use p3_symmetric::{CryptographicHasher, PaddingFreeSponge, PseudoCompressionFunction, TruncatedPermutation};
use sha3::Digest;

/// The little-endian 8-byte words of `bytes` as field elements (each read mod p).
fn elements(bytes: &[u8]) -> impl Iterator<Item = Goldilocks> + '_ {
    bytes.chunks_exact(8).map(|b| Goldilocks::new(canonical(u64::from_le_bytes(b.try_into().expect("8 bytes")))))
}

/// A Poseidon2 digest's 32 bytes: its 4 elements, canonical, little-endian.
fn poseidon2_bytes(digest: [Goldilocks; 4]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (o, x) in out.chunks_exact_mut(8).zip(digest) {
        o.copy_from_slice(&x.as_canonical_u64().to_le_bytes());
    }
    out
}

type Sponge = PaddingFreeSponge<Poseidon2Goldilocks<8>, 8, 4, 4>;
type Compression = TruncatedPermutation<Poseidon2Goldilocks<8>, 2, 4, 8>;

/// Plonky3's Poseidon2 sponge and compression, built once (building one copies the round
/// constants).
fn poseidon2() -> &'static (Sponge, Compression) {
    static INSTANCE: OnceLock<(Sponge, Compression)> = OnceLock::new();
    INSTANCE.get_or_init(|| {
        let perm = default_goldilocks_poseidon2_8();
        (Sponge::new(perm.clone()), Compression::new(perm))
    })
}

/// The digest of a leaf preimage: the byte hashes over `bytes`; Poseidon2's padding-free sponge
/// of rate 4 over its elements.
pub(crate) fn leaf_digest(hash: HashKind, bytes: &[u8]) -> [u8; 32] {
    match hash {
        HashKind::Keccak256 => sha3::Keccak256::digest(bytes).into(),
        HashKind::Blake3 => *blake3::hash(bytes).as_bytes(),
        HashKind::Poseidon2 => poseidon2_bytes(poseidon2().0.hash_iter(elements(bytes))),
    }
}

/// The parent of two digests (`children` is `left || right`, 64 bytes): `H(left || right)` for
/// the byte hashes, Poseidon2's truncated permutation of the 8 elements.
pub(crate) fn node_digest(hash: HashKind, children: &[u8; 64]) -> [u8; 32] {
    match hash {
        HashKind::Keccak256 | HashKind::Blake3 => leaf_digest(hash, children),
        HashKind::Poseidon2 => {
            let mut halves = elements(children);
            let mut half = || -> [Goldilocks; 4] { std::array::from_fn(|_| halves.next().expect("8 elements")) };
            let (left, right) = (half(), half());
            poseidon2_bytes(poseidon2().1.compress([left, right]))
        }
    }
}

/// [`crate::ToyBackend::hash_leaves_into`] over host slices.
///
/// # Errors
/// As [`validate::hash_leaves`].
pub(crate) fn hash_leaves_into(
    matrix: &[u64],
    shape: MatrixShape,
    spec: &LeafSpec,
    out: &mut [u64],
    out_digest: usize,
) -> Result<()> {
    let validate::LeafOutput { leaves, start } =
        validate::hash_leaves(shape, spec, matrix.len(), out.len(), out_digest)?;
    let cols = spec.cols();
    let row = |r: usize| &matrix[r * shape.cols() + cols.start..r * shape.cols() + cols.end];
    let mut bytes = Vec::with_capacity(spec.leaf_bytes());
    for (leaf, digest) in out[start..start + leaves * DIGEST_WORDS].chunks_exact_mut(DIGEST_WORDS).enumerate() {
        bytes.clear();
        match spec.layout() {
            LeafLayout::Rows => bytes.extend(row(leaf).iter().flat_map(|&x| canonical(x).to_le_bytes())),
            LeafLayout::LambdaVmPairs => {
                let bits = shape.rows().trailing_zeros();
                for r in [bit_reverse(2 * leaf, bits), bit_reverse(2 * leaf + 1, bits)] {
                    bytes.extend(row(r).iter().flat_map(|&x| canonical(x).to_be_bytes()));
                }
            }
        }
        digest.copy_from_slice(&digest_to_words(&leaf_digest(spec.hash(), &bytes)));
    }
    Ok(())
}
