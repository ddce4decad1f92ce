//! Checks of [`Backend::merkle_tree`] and [`Backend::merkle_tree_in_place`] against the naive node
//! array and the recursive root.

use backend_api::{Backend, DIGEST_WORDS, Error, HashKind, TreeShape};

use crate::hash::ensure_digests_eq;
use crate::{Context as _, Gen, Outcome, ensure, ensure_live, ensure_words_eq, expect_error, reference};

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
    ensure_digests_eq(format_args!("{what}: node array"), &expected, &got)?;
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
            ensure_digests_eq(&what, &reference::merkle_nodes(&digests, kind), &got)?;
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
