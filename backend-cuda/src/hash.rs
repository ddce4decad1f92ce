//! Leaf hashing (hash.cu): one thread per leaf, Keccak-256 or standard BLAKE3 (the full chunk
//! tree for leaves over 1 KiB) over both leaf layouts, or Poseidon2 (poseidon2.cuh) over the
//! `rows` layout, any column range.

use backend_api::DeviceBuffer as _;
use backend_api::{DIGEST_WORDS, ELEM_BYTES, Error, HashKind, LeafLayout, LeafSpec, MatrixShape, Result, validate};

use crate::context::Device;
use crate::launch::{KernelParam, LaunchArgs, LaunchConfig};
use crate::memory::CudaBuffer;
use crate::module::Source;

/// The parameter of every leaf kernel; layout identical to `LeafParams` in hash.cu.
#[repr(C)]
#[derive(Clone, Copy)]
struct LeafParams {
    matrix: u64,
    out: u64,
    cols: u64,
    c0: u64,
    width: u64,
    leaves: u64,
    log_rows: u64,
}

// SAFETY: `#[repr(C)]` u64 fields, the layout of hash.cu's `LeafParams` (matrix, out, cols, c0,
// width, leaves, log_rows); no padding.
unsafe impl KernelParam for LeafParams {}
const _: () = assert!(std::mem::size_of::<LeafParams>() == 7 * 8, "LeafParams is seven u64, unpadded");

/// Threads per block of the leaf kernels (`__launch_bounds__(128)`).
const BLOCK: u32 = 128;
/// BLAKE3 leaves of at most this many chunks use the kernels whose chunk stack stays in registers.
const SHORT_CHUNKS: usize = 16;

/// Whether a BLAKE3 leaf of `leaf_bytes` needs the kernels whose chunk stack spills (more than
/// [`SHORT_CHUNKS`] chunks).
fn long_leaf(leaf_bytes: usize) -> bool {
    leaf_bytes.div_ceil(1024) > SHORT_CHUNKS
}

/// The leaf kernel for a spec.
pub(crate) fn kernel_name(hash: HashKind, layout: LeafLayout, leaf_bytes: usize) -> &'static str {
    match (hash, layout, long_leaf(leaf_bytes)) {
        (HashKind::Keccak256, LeafLayout::Rows, _) => "leaves_keccak_rows",
        (HashKind::Keccak256, LeafLayout::LambdaVmPairs, _) => "leaves_keccak_pairs",
        (HashKind::Blake3, LeafLayout::Rows, false) => "leaves_blake3_rows",
        (HashKind::Blake3, LeafLayout::LambdaVmPairs, false) => "leaves_blake3_pairs",
        (HashKind::Blake3, LeafLayout::Rows, true) => "leaves_blake3_rows_long",
        (HashKind::Blake3, LeafLayout::LambdaVmPairs, true) => "leaves_blake3_pairs_long",
        // `LeafSpec::new` refuses Poseidon2 with the pairs layout, so only rows reach here.
        (HashKind::Poseidon2, _, _) => "leaves_poseidon2_rows",
    }
}

/// [`backend_api::Backend::hash_leaves_into`].
pub(crate) fn hash_leaves_into(
    device: &Device,
    matrix: &CudaBuffer,
    shape: MatrixShape,
    spec: &LeafSpec,
    out: &mut CudaBuffer,
    out_digest: usize,
) -> Result<()> {
    let validate::LeafOutput { leaves, start } =
        validate::hash_leaves(shape, spec, matrix.len(), out.len(), out_digest)?;
    if shape.rows() > u32::MAX as usize && spec.layout() == LeafLayout::LambdaVmPairs {
        return Err(Error::InvalidShape(format!(
            "the CUDA backend's pairs layout indexes rows with 32 bits, got {} rows",
            shape.rows()
        )));
    }
    let name = kernel_name(spec.hash(), spec.layout(), spec.leaf_bytes());
    let kernel = device.kernel(Source::Hash, name, 0)?;
    let params = LeafParams {
        matrix: matrix.ptr(),
        out: out.ptr_at(start),
        cols: shape.cols() as u64,
        c0: spec.cols().start as u64,
        width: (spec.cols().end - spec.cols().start) as u64,
        leaves: leaves as u64,
        log_rows: shape.rows().trailing_zeros() as u64,
    };
    let grid = leaves.div_ceil(BLOCK as usize).clamp(1, 1 << 20) as u32;
    let args = LaunchArgs::new().arg(&params);
    // SAFETY: one LeafParams as the kernel declares; every row a leaf reads is inside `matrix`
    // (shape and column range validated), every digest it writes is inside `out` (checked above).
    unsafe { device.launch(&kernel, LaunchConfig::linear(grid, BLOCK, 0), args) }
}

/// The most trees one fused launch hashes (`FUSED_TREES` in hash.cu).
pub(crate) const FUSED_TREES: usize = 8;

/// The parameter of `leaves_block_*`; layout identical to `BlockLeaves` in hash.cu.
#[repr(C)]
#[derive(Clone, Copy)]
struct BlockLeaves {
    hash_src: u64,
    hash_rows: u64,
    trees: u64,
    out: [u64; FUSED_TREES],
    c0: [u64; FUSED_TREES],
    width: [u64; FUSED_TREES],
    move_src: u64,
    move_dst: u64,
    move_rows: u64,
    cols: u64,
    movers: u64,
}

// SAFETY: `#[repr(C)]` u64 fields and arrays, the layout of hash.cu's `BlockLeaves` (hash_src,
// hash_rows, trees, out[8], c0[8], width[8], move_src, move_dst, move_rows, cols, movers); no
// padding.
unsafe impl KernelParam for BlockLeaves {}
const _: () = assert!(std::mem::size_of::<BlockLeaves>() == (8 + 3 * FUSED_TREES) * 8, "BlockLeaves is unpadded u64s");

/// Rows of a `cols`-column row-major matrix for [`BlockPassLeaves::launch`]: the address of the
/// first and how many.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rows {
    /// Device address of the first row.
    pub(crate) src: u64,
    /// The index of the first row in the matrix (for the digests' places).
    pub(crate) first: usize,
    /// Rows.
    pub(crate) count: usize,
}

/// Movers per multiprocessor in a block-pass launch that hashes nothing (its block's leaves were
/// queued before the block pass): as many as a multiprocessor holds at the kernels' registers.
const ONLY_MOVERS_PER_SM: usize = 5;

/// The fused block-pass kernel of `hash` and its movers per multiprocessor: the best of 1, 2, 4
/// and 8 on the H200 at 2^22 x 316 (the git history of BENCHMARKS.md, "The leaves beside the transpose's block
/// pass"). A multiprocessor holds five blocks of either kernel, so every mover takes a hashing
/// block's place. Keccak-256 leaves (0.36 ms a 2^16-row block) hide one mover's block; BLAKE3
/// leaves (0.12 ms) are shorter than one mover takes to move a block, so the chain of moves sets
/// the pace and two movers shorten it. `None` for Poseidon2, whose leaves never ride the block
/// pass ([`BlockPassLeaves::new`]).
pub(crate) fn block_pass_kernel(hash: HashKind) -> Option<(&'static str, usize)> {
    match hash {
        HashKind::Keccak256 => Some(("leaves_block_keccak", 1)),
        HashKind::Blake3 => Some(("leaves_block_blake3", 2)),
        HashKind::Poseidon2 => None,
    }
}

/// `rows`-layout leaves that the in-place transpose's block pass hashes on its way
/// ([`backend_api::Backend::hash_leaves_then_transpose`]): one kernel, and each tree's first
/// digest address and columns.
pub(crate) struct BlockPassLeaves {
    /// The hash of every tree.
    hash: HashKind,
    /// Its kernel and movers per multiprocessor ([`block_pass_kernel`]).
    kernel: (&'static str, usize),
    /// `(address of the digest of row 0, first column, columns)` per tree.
    trees: Vec<(u64, u64, u64)>,
}

impl BlockPassLeaves {
    /// The fused form of `jobs` (each `(spec, output, first digest)`, validated), or `None` when
    /// they cannot ride the block pass: a `lambda-vm-pairs` job (its leaves pair rows of
    /// different blocks), hashes of both kinds, more than [`FUSED_TREES`] trees, or BLAKE3 leaves
    /// too long for the kernels whose chunk stack stays in registers; or Poseidon2 leaves, whose
    /// hashing is bound by the integer pipes rather than memory, so that hashing them beside the
    /// block moves gains nothing and loses the full-grid launch: on an H200 (2026-12-06, a
    /// one-shot `prover commit --hash poseidon2` of 2^21 x 316) the fused call took 346.5 ms,
    /// about 50 ms more than the leaves alone (282.5 ms on an H100, the same integer throughput)
    /// plus the transpose (12.4 ms); its fused kernel is gone from hash.cu since (git keeps it).
    pub(crate) fn new(jobs: &[(&LeafSpec, &CudaBuffer, usize)]) -> Option<Self> {
        let (first, ..) = jobs.first()?;
        let hash = first.hash();
        let kernel = block_pass_kernel(hash)?;
        let fits = jobs.len() <= FUSED_TREES
            && jobs.iter().all(|(s, ..)| {
                s.layout() == LeafLayout::Rows
                    && s.hash() == hash
                    && !(hash == HashKind::Blake3 && long_leaf(s.leaf_bytes()))
            });
        if !fits {
            return None;
        }
        // Each output address from its validated digest offset, through the bounds-checked
        // `ptr_at`: an offset past the output (which the front refuses first) never becomes an
        // address.
        let trees = jobs
            .iter()
            .map(|(s, out, digest)| {
                let first = digest.checked_mul(DIGEST_WORDS).filter(|&e| e <= out.len())?;
                let cols = s.cols();
                Some((out.ptr_at(first), cols.start as u64, cols.len() as u64))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self { hash, kernel, trees })
    }

    /// Blocks of a plan of `full_blocks` whose leaves go first, in one launch, when the host has
    /// yet to build the plan (~2 ms at 2^22 x 316, during which the device would otherwise wait):
    /// an eighth of them for Keccak-256 (about 3 ms of hashing); all of them for BLAKE3, whose
    /// leaves take less time than the plan, so that a fresh process hashes them as the unfused
    /// path does (the git history of BENCHMARKS.md, "The fresh process").
    pub(crate) fn cold_prefix_blocks(&self, full_blocks: usize) -> usize {
        match self.hash {
            HashKind::Blake3 => full_blocks,
            HashKind::Keccak256 | HashKind::Poseidon2 => (full_blocks / 8).max(1),
        }
    }

    /// Queues the leaves of rows `[first, first + count)` of the `cols`-column row-major matrix in
    /// `matrix`, in one launch that moves nothing.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for rows past the matrix (an internal error: the callers pass
    /// validated shapes); the launch's errors.
    pub(crate) fn hash_rows(
        &self,
        device: &Device,
        matrix: &CudaBuffer,
        first: usize,
        count: usize,
        cols: usize,
    ) -> Result<()> {
        if (first + count) * cols > matrix.len() {
            return Err(Error::InvalidArgument(format!(
                "leaves of rows {first}..{} of a {cols}-column matrix of {} elements",
                first + count,
                matrix.len()
            )));
        }
        let rows = Rows { src: matrix.ptr_at(first * cols), first, count };
        // SAFETY: the rows lie in the matrix (checked above); nothing moves in this launch; every
        // tree's output holds the digests of the matrix's rows (the jobs were validated against
        // the whole matrix).
        unsafe { self.launch(device, Some(rows), None, cols) }
    }

    /// Queues one launch of a fused block pass: the leaves of `hash` (if any) and the move of
    /// the block `mv` (if any) into the `cols` runs of its rows at `dst`, beside each other. A
    /// launch with neither queues nothing.
    ///
    /// # Safety
    /// Both row ranges lie in the matrix; `dst` holds `mv.count * cols` elements and overlaps
    /// neither row range nor anything else read or written until the launch completes; every
    /// tree's output holds the digests of rows `[0, hash.first + hash.count)` (the jobs were
    /// validated against the whole matrix).
    pub(crate) unsafe fn launch(
        &self,
        device: &Device,
        hash: Option<Rows>,
        mv: Option<(Rows, u64)>,
        cols: usize,
    ) -> Result<()> {
        let hash = hash.filter(|h| h.count > 0);
        let mv = mv.filter(|(m, _)| m.count > 0);
        if hash.is_none() && mv.is_none() {
            return Ok(());
        }
        let (name, movers_per_sm) = self.kernel;
        let kernel = device.kernel(Source::Hash, name, 0)?;
        let mut params = BlockLeaves {
            hash_src: 0,
            hash_rows: 0,
            trees: self.trees.len() as u64,
            out: [0; FUSED_TREES],
            c0: [0; FUSED_TREES],
            width: [0; FUSED_TREES],
            move_src: 0,
            move_dst: 0,
            move_rows: 0,
            cols: cols as u64,
            movers: 0,
        };
        let mut hashers = 0;
        if let Some(h) = hash {
            (params.hash_src, params.hash_rows) = (h.src, h.count as u64);
            for (t, &(out, c0, width)) in self.trees.iter().enumerate() {
                params.out[t] = out + (h.first * DIGEST_WORDS * ELEM_BYTES) as u64;
                params.c0[t] = c0;
                params.width[t] = width;
            }
            hashers = h.count.div_ceil(BLOCK as usize).min(1 << 20);
        }
        if let Some((m, dst)) = mv {
            (params.move_src, params.move_dst, params.move_rows) = (m.src, dst, m.count as u64);
            // Movers per multiprocessor, each keeping a 32 KiB tile of loads in flight; a launch
            // that hashes nothing moves with more.
            let per_sm = if hashers > 0 { movers_per_sm } else { ONLY_MOVERS_PER_SM };
            let tiles = m.count.div_ceil(64) * cols.div_ceil(64);
            params.movers = tiles.min(per_sm * device.sm_count as usize).max(1) as u64;
        }
        let grid = (params.movers as usize + hashers) as u32;
        let args = LaunchArgs::new().arg(&params);
        let config = LaunchConfig::linear(grid, BLOCK, 0);
        if mv.is_some() {
            // SAFETY: one BlockLeaves as the kernel declares; the ranges are the caller's
            // contract. The movers wait for the kernel before (`griddepcontrol.wait`); the
            // hashing blocks read rows that no kernel of the block pass writes before the launch
            // after next, whose movers wait for this launch to complete.
            unsafe { device.launch_overlapping(&kernel, config, args) }
        } else {
            // SAFETY: one BlockLeaves as the kernel declares; the ranges are the caller's contract.
            unsafe { device.launch(&kernel, config, args) }
        }
    }
}
