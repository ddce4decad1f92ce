//! Merkle trees over a node array (`shaders/wgsl/merkle.wgsl`): the padding leaves are copies of
//! the last leaf, then one dispatch (or a few, per segment) per level, from the leaves up; wgpu
//! orders the dispatches, so each level sees the one below it complete. A parent is Keccak-256
//! or BLAKE3 of its children's 64 bytes, or, for Poseidon2, the first 4 elements of the
//! permutation of the children's 8 words, each read mod p (Plonky3's `TruncatedPermutation`).

use backend_api::{DIGEST_WORDS, DeviceBuffer as _, HashKind, Result, TreeShape, validate};

use crate::context::{Gpu, Kernel, Module, Space, Table, Window};
use crate::memory::WgpuBuffer;

const KECCAK: Kernel = Kernel { module: Module::Merkle, entry: "merkle_keccak", items_per_group: 64 };
const BLAKE3: Kernel = Kernel { module: Module::Merkle, entry: "merkle_blake3", items_per_group: 64 };
const POSEIDON2: Kernel = Kernel { module: Module::Merkle, entry: "merkle_poseidon2", items_per_group: 64 };
const PAD: Kernel = Kernel { module: Module::Merkle, entry: "merkle_pad", items_per_group: 64 };

/// The kernels [`merkle_tree_in_place`] launches for `hash`: the padding copy and the levels.
pub(crate) fn kernels(hash: HashKind) -> [Kernel; 2] {
    [
        PAD,
        match hash {
            HashKind::Keccak256 => KECCAK,
            HashKind::Blake3 => BLAKE3,
            HashKind::Poseidon2 => POSEIDON2,
        },
    ]
}

/// [`backend_api::Backend::merkle_tree_in_place`].
pub(crate) fn merkle_tree_in_place(gpu: &Gpu, nodes: &mut WgpuBuffer, tree: TreeShape, hash: HashKind) -> Result<()> {
    validate::merkle_tree(tree, nodes.len())?;
    let op = "merkle_tree";
    let (space, _) = Space::new(gpu, &[&nodes.segs])?;
    let dw = DIGEST_WORDS as u64;
    let s = gpu.seg_elems() as u64;
    let chunk = (s / (2 * dw)).max(1);
    let padded = tree.padded_leaves() as u64;
    let first_leaf = tree.first_leaf() as u64;
    let mut rec = gpu.recorder(op);
    if (tree.leaves() as u64) < padded {
        let src = first_leaf + tree.leaves() as u64 - 1;
        let mut d = src + 1;
        let end = first_leaf + padded;
        while d < end {
            let n = chunk.min(end - d);
            let a = space.window::<4>(&[(src * dw, (src + 1) * dw), (d * dw, (d + n) * dw)], op)?;
            rec.dispatch(PAD, n as u32, &[src as u32, d as u32], a, Window::empty(), Table::None)?;
            d += n;
        }
    }
    let [_, kernel] = kernels(hash);
    // Level with `width` nodes starting at `lo`: its parents are [(lo - 1) / 2, +width / 2).
    let (mut lo, mut width) = (first_leaf, padded);
    while width > 1 {
        let parents = width / 2;
        let p_lo = (lo - 1) / 2;
        let mut p = p_lo;
        while p < p_lo + parents {
            let n = chunk.min(p_lo + parents - p);
            let spans = [(p * dw, (p + n) * dw), ((2 * p + 1) * dw, (2 * (p + n) + 1) * dw)];
            let a = space.window::<4>(&spans, op)?;
            rec.dispatch(kernel, n as u32, &[p as u32], a, Window::empty(), Table::None)?;
            p += n;
        }
        lo = p_lo;
        width = parents;
    }
    rec.flush()
}
