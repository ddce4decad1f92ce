//! Checks of [`Backend::merkle_tree`] and [`Backend::merkle_tree_in_place`] against the naive node
//! array and the recursive root.

use backend_api::{Backend, DIGEST_WORDS, Error, HashKind, TreeShape, hex};

use crate::hash::ensure_digests_eq;
use crate::{Context as _, Failure, Gen, Outcome, ensure, ensure_live, ensure_words_eq, expect_error, reference};

/// Compares two `2L - 1` node arrays and, when they differ, names the **deepest** differing node:
/// its index, its level (0 = root, `log2 L` = leaves), both digests, and what the difference
/// points to (a leaf or padding slot, or a parent whose children agree: the hash of that node).
///
/// A wrong leaf makes every node above it differ up to the root; the deepest difference is where
/// the error starts.
///
/// # Errors
/// A [`Failure`] naming `what`, the deepest differing node, and how many nodes differ.
pub fn ensure_nodes_eq(what: impl std::fmt::Display, expected: &[[u8; 32]], actual: &[[u8; 32]]) -> Outcome {
    ensure!(expected.len() == actual.len(), "{what}: expected {} nodes, got {}", expected.len(), actual.len());
    let differ = |i: usize| expected[i] != actual[i];
    let Some(deepest) = (0..expected.len()).rev().find(|&i| differ(i)) else {
        return Ok(());
    };
    let count = (0..expected.len()).filter(|&i| differ(i)).count();
    let level = (deepest + 1).ilog2();
    let leaf_level = (expected.len() + 1).ilog2() - 1;
    let cause = if level == leaf_level {
        format!("leaf slot {} (a leaf digest or its padding)", deepest + 1 - (1 << leaf_level))
    } else {
        "its children agree, so H(left || right) of this node is wrong".to_string()
    };
    Err(Failure(format!(
        "{what}: deepest differing node is {deepest} (level {level} of {leaf_level}; {cause}): got {}, expected {} \
         ({count} of {} nodes differ{})",
        hex(&actual[deepest]),
        hex(&expected[deepest]),
        expected.len(),
        if differ(0) { ", the root among them" } else { "" },
    )))
}

/// Leaf counts checked: one leaf, powers of two, and counts the tree pads by repeating the last leaf.
pub const LEAF_COUNTS: [usize; 11] = [1, 2, 3, 4, 5, 8, 13, 64, 1000, 1024, 4097];

/// Builds a tree over random leaf digests with `merkle_tree` and compares the whole node array
/// with the naive one and the root with the recursive one.
///
/// # Errors
/// The first node that differs.
pub fn check_tree<B: Backend>(backend: &B, g: &mut Gen, leaves: usize, kind: HashKind) -> Outcome {
    let what = format!("merkle_tree {kind} over {leaves} leaves");
    let digests = g.digests(leaves);
    let buf = backend.upload(&reference::digests_to_words(&digests)).ctx(format_args!("{what}: upload"))?;
    let nodes = backend.merkle_tree(&buf, kind).ctx(&what)?;
    let got = reference::words_to_digests(&backend.download_vec(&nodes).ctx(format_args!("{what}: download"))?);
    let expected = reference::merkle_nodes(&digests, kind);
    ensure_nodes_eq(format_args!("{what}: node array"), &expected, &got)?;
    let root = reference::merkle_root(&digests, kind);
    ensure_digests_eq(format_args!("{what}: root"), &[root], &got[..1])
}

fn sweep<B: Backend>(backend: &B, name: &str, kind: HashKind) -> Outcome {
    let mut g = Gen::new(name);
    for leaves in LEAF_COUNTS {
        check_tree(backend, &mut g, leaves, kind)?;
    }
    Ok(())
}

/// Keccak-256 trees over 1, 2, 3, 4, 5, 8, 13, 64, 1000, 1024 and 4097 leaves.
///
/// # Errors
/// The first node that differs.
pub fn merkle_tree_keccak<B: Backend>(backend: &B) -> Outcome {
    sweep(backend, "merkle_tree_keccak", HashKind::Keccak256)
}

/// BLAKE3 trees over 1, 2, 3, 4, 5, 8, 13, 64, 1000, 1024 and 4097 leaves.
///
/// # Errors
/// The first node that differs.
pub fn merkle_tree_blake3<B: Backend>(backend: &B) -> Outcome {
    sweep(backend, "merkle_tree_blake3", HashKind::Blake3)
}

/// Poseidon2 trees (the compression of `left || right`) over 1, 2, 3, 4, 5, 8, 13, 64, 1000,
/// 1024 and 4097 leaves; the random leaf digests hold words `>= p`, which are read mod p.
///
/// # Errors
/// The first node that differs.
pub fn merkle_tree_poseidon2<B: Backend>(backend: &B) -> Outcome {
    sweep(backend, "merkle_tree_poseidon2", HashKind::Poseidon2)
}

/// `merkle_tree_in_place` over a node array whose leaves sit at `[L-1, L-1+leaves)` and whose
/// other nodes (inner nodes and the padding slots) hold garbage: every node must be rewritten.
///
/// # Errors
/// The first node that differs.
pub fn merkle_tree_in_place<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("merkle_tree_in_place");
    for kind in HashKind::ALL {
        for leaves in LEAF_COUNTS {
            let what = format!("merkle_tree_in_place {kind} over {leaves} leaves");
            let tree = TreeShape::new(leaves).ctx(&what)?;
            let digests = g.digests(leaves);
            let mut init = g.digests(tree.nodes());
            init[tree.first_leaf()..tree.first_leaf() + leaves].copy_from_slice(&digests);
            let mut nodes = backend.upload(&reference::digests_to_words(&init)).ctx("upload")?;
            backend.merkle_tree_in_place(&mut nodes, tree, kind).ctx(&what)?;
            let got = reference::words_to_digests(&backend.download_vec(&nodes).ctx("download")?);
            ensure_nodes_eq(&what, &reference::merkle_nodes(&digests, kind), &got)?;
        }
    }
    Ok(())
}

/// A node buffer that is not `(2L - 1)` digests is [`Error::LengthMismatch`] and stays untouched;
/// a leaf buffer that is not whole digests is [`Error::InvalidArgument`]; nothing leaks.
///
/// # Errors
/// A call that succeeds, fails with another error, or writes the buffer.
pub fn merkle_tree_errors<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("merkle_tree_errors");
    let baseline = backend.memory().live;
    for (leaves, nodes_len) in [(5usize, 14usize), (5, 16), (1, 2), (8, 14), (3, 8)] {
        let tree = TreeShape::new(leaves).ctx("tree")?;
        ensure!(nodes_len != tree.nodes(), "test bug: {nodes_len} is the right length for {leaves} leaves");
        let init: Vec<u64> = (0..nodes_len * DIGEST_WORDS).map(|_| g.u64()).collect();
        let mut buf = backend.upload(&init).ctx("upload")?;
        for kind in HashKind::ALL {
            let what = format!("merkle_tree_in_place {kind}, {leaves} leaves, {nodes_len} nodes");
            expect_error(backend.merkle_tree_in_place(&mut buf, tree, kind), &what, |e| {
                matches!(e, Error::LengthMismatch { .. })
            })?;
            ensure_words_eq(
                format!("{what}: nodes after the error"),
                &init,
                &backend.download_vec(&buf).ctx("download")?,
            )?;
        }
    }
    let ragged = backend.upload(&[1, 2, 3, 4, 5, 6]).ctx("upload")?;
    expect_error(backend.merkle_tree(&ragged, HashKind::Blake3), "merkle_tree over 6 words (1.5 digests)", |e| {
        matches!(e, Error::InvalidArgument(_))
    })?;
    let empty = backend.alloc(0);
    if let Ok(empty) = empty {
        expect_error(backend.merkle_tree(&empty, HashKind::Keccak256), "merkle_tree over 0 leaves", |e| {
            matches!(e, Error::InvalidArgument(_))
        })?;
    }
    drop(ragged);
    ensure_live(backend, baseline, "merkle_tree_errors")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mismatch_names_the_deepest_differing_node() {
        let mut g = Gen::new("a_mismatch_names_the_deepest_differing_node");
        let leaves = g.digests(5);
        let expected = reference::merkle_nodes(&leaves, HashKind::Blake3);
        assert_eq!(expected.len(), 15);
        ensure_nodes_eq("same", &expected, &expected).unwrap();
        // Leaf 2 wrong: its ancestors 5, 2 and 0 differ too; the deepest is node 7 + 2 = 9.
        let mut wrong_leaves = leaves.clone();
        wrong_leaves[2][0] ^= 1;
        let got = reference::merkle_nodes(&wrong_leaves, HashKind::Blake3);
        let msg = ensure_nodes_eq("leaf", &expected, &got).unwrap_err().0;
        assert!(msg.contains("deepest differing node is 9 (level 3 of 3; leaf slot 2"), "{msg}");
        assert!(msg.contains(&hex(&got[9])) && msg.contains(&hex(&expected[9])), "{msg}");
        assert!(msg.contains("(4 of 15 nodes differ, the root among them)"), "{msg}");
        // Only inner node 4 wrong (children 9 and 10 agree).
        let mut got = expected.clone();
        got[4] = [0; 32];
        let msg = ensure_nodes_eq("inner", &expected, &got).unwrap_err().0;
        assert!(msg.contains("deepest differing node is 4 (level 2 of 3; its children agree"), "{msg}");
        assert!(msg.contains("(1 of 15 nodes differ)"), "{msg}");
    }
}
