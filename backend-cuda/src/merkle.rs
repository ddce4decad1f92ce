//! Merkle trees (merkle.cu): pad the leaves with the last one, then one launch per level from the
//! leaves up, and the top levels (at most 1024 parents) in a single block.

use backend_api::DeviceBuffer as _;
use backend_api::{HashKind, Result, TreeShape, validate};

use crate::context::Device;
use crate::launch::{LaunchArgs, LaunchConfig};
use crate::memory::CudaBuffer;
use crate::module::Source;

/// Levels with at most this many parents run in one block (`merkle_top_*`, 1024 threads).
const TOP: usize = 1024;
const BLOCK: u32 = 256;

/// The kernels of `hash`'s levels: one launch per level, and the top levels in one block.
pub(crate) fn level_kernels(hash: HashKind) -> (&'static str, &'static str) {
    match hash {
        HashKind::Keccak256 => ("merkle_level_keccak", "merkle_top_keccak"),
        HashKind::Blake3 => ("merkle_level_blake3", "merkle_top_blake3"),
        HashKind::Poseidon2 => ("merkle_level_poseidon2", "merkle_top_poseidon2"),
    }
}

/// [`backend_api::Backend::merkle_tree_in_place`].
pub(crate) fn merkle_tree_in_place(
    device: &Device,
    nodes: &mut CudaBuffer,
    tree: TreeShape,
    hash: HashKind,
) -> Result<()> {
    validate::merkle_tree(tree, nodes.len())?;
    let padded = tree.padded_leaves();
    let ptr = nodes.ptr();
    if tree.leaves() < padded {
        let kernel = device.kernel(Source::Merkle, "merkle_pad", 0)?;
        let (p, first, leaves, l) = (ptr, tree.first_leaf() as u64, tree.leaves() as u64, padded as u64);
        let grid = ((padded - tree.leaves()) * 4).div_ceil(BLOCK as usize).clamp(1, 1 << 16) as u32;
        let args = LaunchArgs::new().arg(&p).arg(&first).arg(&leaves).arg(&l);
        // SAFETY: (u64*, u64, u64, u64) as declared; the pad slots and the last leaf are inside the
        // node array, whose length was checked.
        unsafe { device.launch(&kernel, LaunchConfig::linear(grid, BLOCK, 0), args)? };
    }
    let (level, top) = level_kernels(hash);
    // The level with `width` parents is nodes [width - 1, 2 * width - 1).
    let mut width = padded / 2;
    if width > TOP {
        let kernel = device.kernel(Source::Merkle, level, 0)?;
        while width > TOP {
            let (p, first, count) = (ptr, (width - 1) as u64, width as u64);
            let grid = width.div_ceil(BLOCK as usize).min(1 << 20) as u32;
            let args = LaunchArgs::new().arg(&p).arg(&first).arg(&count);
            // SAFETY: (u64*, u64, u64) as declared; parents and children are inside the node array.
            unsafe { device.launch(&kernel, LaunchConfig::linear(grid, BLOCK, 0), args)? };
            width /= 2;
        }
    }
    if width >= 1 {
        let kernel = device.kernel(Source::Merkle, top, 0)?;
        let (p, count) = (ptr, width as u64);
        let threads = width.max(32) as u32;
        let args = LaunchArgs::new().arg(&p).arg(&count);
        // SAFETY: (u64*, u64) as declared; `width` <= 1024 parents, one block of `width` threads
        // (at least a warp), all inside the node array.
        unsafe { device.launch(&kernel, LaunchConfig::linear(1, threads, 0), args)? };
    }
    Ok(())
}
