//! Leaf hashing: Keccak-256 and BLAKE3 over the rows of a row-major matrix, both layouts, and
//! Poseidon2's padding-free sponge over the rows layout (the only one it defines), any column
//! range (`shaders/wgsl/hash.wgsl`, one invocation per leaf; the Poseidon2 permutation is
//! `shaders/wgsl/poseidon2.wgsl`, every round written out).
//!
//! The matrix is bound through window A, the digests through window B. Rows-layout dispatches
//! cover row ranges that span at most one segment; pairs-layout dispatches cover ranges of
//! `j` (rows `j` and `rows/2 + j`, leaf `br(j)`), two row ranges of at most one segment each,
//! whose digests land anywhere in the call's output range; an output larger than window B is
//! written in digest ranges, one sweep over the rows each (one sweep at production sizes).

use backend_api::{
    DIGEST_WORDS, DeviceBuffer as _, Error, HashKind, LeafLayout, LeafSpec, MatrixShape, Result, validate,
};

use crate::context::{Gpu, Kernel, Module, NAME, Space, Table};
use crate::memory::WgpuBuffer;

const KECCAK: Kernel = Kernel { module: Module::Hash, entry: "leaves_keccak", items_per_group: 64 };
const BLAKE3: Kernel = Kernel { module: Module::Hash, entry: "leaves_blake3", items_per_group: 64 };
const POSEIDON2: Kernel = Kernel { module: Module::Hash, entry: "leaves_poseidon2", items_per_group: 64 };

/// The kernels [`hash_leaves_into`] launches for leaf hash `hash` (both layouts).
pub(crate) fn kernels(hash: HashKind) -> [Kernel; 1] {
    [match hash {
        HashKind::Keccak256 => KECCAK,
        HashKind::Blake3 => BLAKE3,
        HashKind::Poseidon2 => POSEIDON2,
    }]
}

/// The longest leaf, in bytes, that a software adapter (Mesa's llvmpipe) hashes correctly with
/// Keccak-256 or BLAKE3, with a margin: llvmpipe ends an invocation's loops after 65,535
/// iterations in total (`LP_MAX_TGSI_LOOP_ITERATIONS`), silently, and one invocation absorbs a
/// whole leaf. Measured on llvmpipe (LLVM 15): Keccak-256 leaves were right at 160,000 B and wrong
/// at 216,000 B; BLAKE3 leaves right at 320,000 B and all zeros at 560,000 B. Longer leaves are
/// refused there.
pub const SOFTWARE_MAX_LEAF_BYTES: usize = 128 << 10;

/// The longest leaf, in bytes, that a software adapter hashes correctly with Poseidon2, with a
/// margin of half the loop budget. The permutation runs no loop (every round is written out,
/// `shaders/wgsl/poseidon2.wgsl`) and the sponge reads a block's 4 elements without one, so a
/// leaf of `n` elements costs `ceil(n / 4)` iterations. Measured on llvmpipe (Mesa 22.3, LLVM 15),
/// as that count predicts: leaves of 65,535 blocks (2,097,120 B) were right, leaves of 65,536
/// blocks (2,097,152 B) and more came back as the digest of their first 65,535 blocks.
pub const SOFTWARE_MAX_POSEIDON2_LEAF_BYTES: usize = 1 << 20;

/// The longest leaf, in bytes, that a software adapter hashes correctly with `hash`
/// ([`SOFTWARE_MAX_LEAF_BYTES`], [`SOFTWARE_MAX_POSEIDON2_LEAF_BYTES`]); longer leaves are
/// refused there with [`Error::InvalidArgument`]. A hardware adapter hashes leaves of any length.
pub const fn software_max_leaf_bytes(hash: HashKind) -> usize {
    match hash {
        HashKind::Keccak256 | HashKind::Blake3 => SOFTWARE_MAX_LEAF_BYTES,
        HashKind::Poseidon2 => SOFTWARE_MAX_POSEIDON2_LEAF_BYTES,
    }
}

/// [`backend_api::Backend::hash_leaves_into`].
pub(crate) fn hash_leaves_into(
    gpu: &Gpu,
    matrix: &WgpuBuffer,
    shape: MatrixShape,
    spec: &LeafSpec,
    out: &mut WgpuBuffer,
    out_digest: usize,
) -> Result<()> {
    let validate::LeafOutput { leaves, start: out0 } =
        validate::hash_leaves(shape, spec, matrix.len(), out.len(), out_digest)?;
    let op = "hash_leaves";
    let (space_a, _) = Space::new(gpu, &[&matrix.segs])?;
    let (space_b, _) = Space::new(gpu, &[&out.segs])?;
    let [kernel] = kernels(spec.hash());
    let cols = shape.cols() as u64;
    let s = gpu.seg_elems() as u64;
    if cols > s {
        return Err(Error::InvalidArgument(format!(
            "{NAME}: {op}: a row of {cols} elements exceeds one segment of {s} elements (the storage binding limit)"
        )));
    }
    let leaf_bytes = spec.leaf_bytes();
    let max = software_max_leaf_bytes(spec.hash());
    if gpu.hw.info.device_type == wgpu::DeviceType::Cpu && leaf_bytes > max {
        return Err(Error::InvalidArgument(format!(
            "{NAME}: {op}: a {hash} leaf of {leaf_bytes} B is longer than a software adapter hashes correctly \
             ({max} B): Mesa's llvmpipe stops every loop of an invocation after 65,535 iterations in total, \
             and one invocation hashes one leaf; use a hardware adapter or the CPU backend",
            hash = spec.hash()
        )));
    }
    let out0 = out0 as u64;
    let dw = DIGEST_WORDS as u64;
    let width = (spec.cols().end - spec.cols().start) as u32;
    let chunk = (s / cols).min(s / dw).max(1);
    let mut rec = gpu.recorder(op);
    match spec.layout() {
        LeafLayout::Rows => {
            let mut first = 0u64;
            while first < leaves as u64 {
                let n = chunk.min(leaves as u64 - first);
                let a = space_a.window::<4>(&[(first * cols, (first + n) * cols)], op)?;
                let b = space_b.window::<2>(&[(out0 + first * dw, out0 + (first + n) * dw)], op)?;
                let args =
                    [0, cols as u32, spec.cols().start as u32, width, 0, 0, 0, first as u32, out0 as u32, 0, u32::MAX];
                rec.dispatch(kernel, n as u32, &args, a, b, Table::None)?;
                first += n;
            }
        }
        LeafLayout::LambdaVmPairs => {
            // Rows j and half + j make leaf br(j): contiguous rows scatter their digests over the
            // whole output. When the output exceeds what window B binds, each range of digests
            // [lo, hi) gets its own sweep over the rows, skipping leaves outside it.
            let half = (shape.rows() / 2) as u64;
            let bits = shape.rows().trailing_zeros() - 1;
            let out_chunk = (s / dw).max(1);
            let mut lo = 0u64;
            while lo < leaves as u64 {
                let hi = (lo + out_chunk).min(leaves as u64);
                let b = space_b.window::<2>(&[(out0 + lo * dw, out0 + hi * dw)], op)?;
                let mut first = 0u64;
                while first < half {
                    let n = chunk.min(half - first);
                    let spans =
                        [(first * cols, (first + n) * cols), ((half + first) * cols, (half + first + n) * cols)];
                    let a = space_a.window::<4>(&spans, op)?;
                    let args = [
                        0,
                        cols as u32,
                        spec.cols().start as u32,
                        width,
                        1,
                        bits,
                        half as u32,
                        first as u32,
                        out0 as u32,
                        lo as u32,
                        hi as u32,
                    ];
                    rec.dispatch(kernel, n as u32, &args, a, b, Table::None)?;
                    first += n;
                }
                lo = hi;
            }
        }
    }
    rec.flush()
}
