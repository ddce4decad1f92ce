//! Leaf hashing: the preimage bytes of each layout (CONVENTIONS.md, "Leaves"), hashed with the
//! `sha3` and `blake3` crates.

use backend_api::field::{bit_reverse, canonical};
use backend_api::{DIGEST_WORDS, HashKind, LeafLayout, LeafSpec, MatrixShape, Result, digest_to_words, validate};
use sha3::Digest;

/// One 32-byte digest of `bytes`.
pub(crate) fn hash_bytes(hash: HashKind, bytes: &[u8]) -> [u8; 32] {
    match hash {
        HashKind::Keccak256 => sha3::Keccak256::digest(bytes).into(),
        HashKind::Blake3 => *blake3::hash(bytes).as_bytes(),
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
        digest.copy_from_slice(&digest_to_words(&hash_bytes(spec.hash(), &bytes)));
    }
    Ok(())
}
