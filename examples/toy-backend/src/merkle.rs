//! Merkle trees over the `2L - 1` node array (CONVENTIONS.md, "Merkle tree"): the leaves padded
//! to `L` by repeating the last leaf digest, then `node[p] = H(node[2p+1] || node[2p+2])` from
//! the last parent up to the root (Poseidon2: the compression of `left || right`).

use backend_api::{DIGEST_WORDS, HashKind, Result, TreeShape, digest_to_words, validate};

use crate::hash::node_digest;

/// [`crate::ToyBackend::merkle_tree_in_place`] over a host slice of node words.
///
/// # Errors
/// [`Error::LengthMismatch`] when `nodes` is not `tree.words()` long.
pub(crate) fn merkle_tree_in_place(nodes: &mut [u64], tree: TreeShape, hash: HashKind) -> Result<()> {
    validate::merkle_tree(tree, nodes.len())?;
    let last = (tree.first_leaf() + tree.leaves() - 1) * DIGEST_WORDS;
    for pad in (last + DIGEST_WORDS..nodes.len()).step_by(DIGEST_WORDS) {
        nodes.copy_within(last..last + DIGEST_WORDS, pad);
    }
    let mut children = [0u8; 2 * DIGEST_WORDS * 8];
    for p in (0..tree.first_leaf()).rev() {
        let words = &nodes[(2 * p + 1) * DIGEST_WORDS..(2 * p + 3) * DIGEST_WORDS];
        for (b, w) in children.chunks_exact_mut(8).zip(words) {
            b.copy_from_slice(&w.to_le_bytes());
        }
        nodes[p * DIGEST_WORDS..(p + 1) * DIGEST_WORDS]
            .copy_from_slice(&digest_to_words(&node_digest(hash, &children)));
    }
    Ok(())
}
