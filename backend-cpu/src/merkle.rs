//! Merkle trees over the `2L - 1` node array (CONVENTIONS.md, "Merkle tree").
//!
//! The leaves are padded to `L` by repeating the last leaf digest; then each level is filled from
//! the one below, `node[p] = H(node[2p+1] || node[2p+2])` over 64 bytes, the parents of one level
//! in parallel. A level's parents and children are disjoint index ranges, so `split_at_mut`
//! hands rayon the parents mutably and the children shared.
//!
//! Keccak-256 hashes [`KECCAK_NODE_GROUP`] parents per call of `p3-keccak`'s batched sponge (one
//! parent per SIMD lane of the widest Keccak-f the running CPU has): a level's children are
//! already the parents' 64-byte preimages end to end.

use backend_api::{DIGEST_WORDS, HashKind, Result, TreeShape, digest_to_words, validate};
use rayon::prelude::*;

use crate::hash::{Hasher32, KECCAK_GROUP, keccak256_many};
use crate::poseidon2;

/// [`crate::CpuBackend::merkle_tree_in_place`] over a host slice of node words.
///
/// # Errors
/// [`Error::LengthMismatch`] when `nodes`
/// is not `tree.words()` long.
pub(crate) fn merkle_tree_in_place(nodes: &mut [u64], tree: TreeShape, hash: HashKind) -> Result<()> {
    validate::merkle_tree(tree, nodes.len())?;
    let padded = tree.padded_leaves();
    let first = tree.first_leaf();
    // Pad [first + leaves, 2L - 1) with the last leaf.
    let last = first + tree.leaves() - 1;
    let (head, pad) = nodes.split_at_mut((last + 1) * DIGEST_WORDS);
    let last_leaf = &head[last * DIGEST_WORDS..];
    pad.par_chunks_mut(DIGEST_WORDS).with_min_len(1024).for_each(|d| d.copy_from_slice(last_leaf));
    // Level by level: parents [w - 1, 2w - 1) from children [2w - 1, 4w - 1), for w = L/2 .. 1.
    let mut width = padded / 2;
    while width >= 1 {
        let (upper, lower) = nodes.split_at_mut((2 * width - 1) * DIGEST_WORDS);
        let parents = &mut upper[(width - 1) * DIGEST_WORDS..];
        let children = &lower[..2 * width * DIGEST_WORDS];
        match hash {
            HashKind::Keccak256 => keccak_parents(parents, children),
            HashKind::Blake3 => byte_parents::<blake3::Hasher>(parents, children),
            HashKind::Poseidon2 => poseidon2_parents(parents, children),
        }
        width /= 2;
    }
    Ok(())
}

/// Keccak-256 parents per rayon item: whole lane groups of the batched sponge.
const KECCAK_NODE_GROUP: usize = 4 * KECCAK_GROUP;

/// One level of Keccak-256, [`KECCAK_NODE_GROUP`] parents per batched call.
fn keccak_parents(parents: &mut [u64], children: &[u64]) {
    let group = KECCAK_NODE_GROUP * DIGEST_WORDS;
    parents.par_chunks_mut(group).zip(children.par_chunks(2 * group)).for_each(|(p, c)| {
        if cfg!(target_endian = "little") {
            // The child words in little-endian memory are the digest bytes themselves.
            keccak256_many(bytemuck::cast_slice(c), p);
        } else {
            let mut bytes = [0u8; KECCAK_NODE_GROUP * 2 * DIGEST_WORDS * 8];
            let bytes = &mut bytes[..c.len() * 8];
            for (b, w) in bytes.chunks_exact_mut(8).zip(c) {
                b.copy_from_slice(&w.to_le_bytes());
            }
            keccak256_many(bytes, p);
        }
    });
}

/// One level of a byte hash: `parent = H(left || right)` over the 64 bytes of the two digests.
fn byte_parents<H: Hasher32>(parents: &mut [u64], children: &[u64]) {
    parents.par_chunks_mut(DIGEST_WORDS).zip(children.par_chunks(2 * DIGEST_WORDS)).with_min_len(64).for_each(
        |(p, c)| {
            let mut bytes = [0u8; 2 * DIGEST_WORDS * 8];
            for (b, w) in bytes.chunks_exact_mut(8).zip(c) {
                b.copy_from_slice(&w.to_le_bytes());
            }
            p.copy_from_slice(&digest_to_words(&H::one_shot(&bytes)));
        },
    );
}

/// One level of Poseidon2: the compression of `left || right`, `poseidon2::LANES` parents per
/// packed call (each child word read mod p).
fn poseidon2_parents(parents: &mut [u64], children: &[u64]) {
    let group = poseidon2::LANES * DIGEST_WORDS;
    parents.par_chunks_mut(group).zip(children.par_chunks(2 * group)).with_min_len(16).for_each(|(p, c)| {
        if p.len() == group {
            poseidon2::parents_packed(c, p);
        } else {
            for (d, pair) in p.chunks_exact_mut(DIGEST_WORDS).zip(c.chunks_exact(2 * DIGEST_WORDS)) {
                d.copy_from_slice(&poseidon2::parent(pair));
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use backend_api::{Error, digests_from_words};
    use sha3::Digest;

    /// The reference: a recursive root over the padded leaf list, with the crates directly.
    fn root(leaves: &[[u8; 32]], hash: HashKind) -> [u8; 32] {
        if leaves.len() == 1 {
            return leaves[0];
        }
        let (l, r) = leaves.split_at(leaves.len() / 2);
        let (l, r) = (root(l, hash), root(r, hash));
        let pre = [l, r].concat();
        match hash {
            HashKind::Keccak256 => sha3::Keccak256::digest(&pre).into(),
            HashKind::Blake3 => *blake3::hash(&pre).as_bytes(),
            // The naive compression (each child word read mod p: blake3 digests are not canonical).
            HashKind::Poseidon2 => naive_reference::parent(hash, &l, &r),
        }
    }

    #[test]
    fn roots_and_padding_match_a_recursive_reference() {
        for leaves in [1usize, 2, 3, 4, 5, 7, 8, 9, 33, 1000] {
            let digests: Vec<[u8; 32]> =
                (0..leaves).map(|i| *blake3::hash(&(i as u64).to_le_bytes()).as_bytes()).collect();
            let tree = TreeShape::new(leaves).unwrap();
            for hash in HashKind::ALL {
                let mut nodes = vec![0u64; tree.words()];
                for (i, d) in digests.iter().enumerate() {
                    let at = (tree.first_leaf() + i) * DIGEST_WORDS;
                    nodes[at..at + DIGEST_WORDS].copy_from_slice(&digest_to_words(d));
                }
                merkle_tree_in_place(&mut nodes, tree, hash).unwrap();
                let mut padded = digests.clone();
                padded.resize(tree.padded_leaves(), *digests.last().unwrap());
                let all = digests_from_words(&nodes);
                assert_eq!(all[0], root(&padded, hash), "{leaves} leaves, {hash}");
                assert_eq!(&all[tree.first_leaf()..], padded.as_slice(), "{leaves} leaves padded");
                // Every inner node is the hash of its two children.
                for p in 0..tree.first_leaf() {
                    assert_eq!(all[p], root(&[all[2 * p + 1], all[2 * p + 2]], hash));
                }
            }
        }
    }

    #[test]
    fn keccak_levels_match_the_sha3_crate_at_every_group_edge() {
        // Parent counts around the lane count and the rayon group, children with every bit set
        // among random ones: each parent is the Keccak-256 of its children's 64 bytes.
        let (l, g) = (KECCAK_GROUP, KECCAK_NODE_GROUP);
        for parents in [1, l - 1, l, l + 1, g - 1, g, g + 1, 2 * g + l + 1] {
            let children: Vec<u64> = (0..2 * parents * DIGEST_WORDS)
                .map(|i| if i % 11 == 3 { u64::MAX } else { (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) })
                .collect();
            let mut out = vec![0u64; parents * DIGEST_WORDS];
            keccak_parents(&mut out, &children);
            for (k, (p, c)) in
                digests_from_words(&out).iter().zip(digests_from_words(&children).chunks_exact(2)).enumerate()
            {
                let expect: [u8; 32] = sha3::Keccak256::digest([c[0], c[1]].concat()).into();
                assert_eq!(*p, expect, "{parents} parents, parent {k}");
            }
        }
    }

    #[test]
    fn bad_calls_are_errors() {
        let mut nodes = vec![0u64; 3 * DIGEST_WORDS];
        let err = merkle_tree_in_place(&mut nodes, TreeShape::new(4).unwrap(), HashKind::Blake3).unwrap_err();
        assert!(matches!(err, Error::LengthMismatch { expected: 28, actual: 12, .. }), "{err}");
    }
}
