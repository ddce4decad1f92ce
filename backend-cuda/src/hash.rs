//! Leaf hashing (hash.cu): one thread per leaf, Keccak-256 or standard BLAKE3 (the full chunk
//! tree for leaves over 1 KiB), both leaf layouts, any column range.

use backend_api::DeviceBuffer as _;
use backend_api::{ELEM_BYTES, Error, HashKind, LeafLayout, LeafSpec, MatrixShape, Result, validate};

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

/// The leaf kernel for a spec.
pub(crate) fn kernel_name(hash: HashKind, layout: LeafLayout, leaf_bytes: usize) -> &'static str {
    let long = leaf_bytes.div_ceil(1024) > SHORT_CHUNKS;
    match (hash, layout, long) {
        (HashKind::Keccak256, LeafLayout::Rows, _) => "leaves_keccak_rows",
        (HashKind::Keccak256, LeafLayout::LambdaVmPairs, _) => "leaves_keccak_pairs",
        (HashKind::Blake3, LeafLayout::Rows, false) => "leaves_blake3_rows",
        (HashKind::Blake3, LeafLayout::LambdaVmPairs, false) => "leaves_blake3_pairs",
        (HashKind::Blake3, LeafLayout::Rows, true) => "leaves_blake3_rows_long",
        (HashKind::Blake3, LeafLayout::LambdaVmPairs, true) => "leaves_blake3_pairs_long",
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
        out: out.ptr() + (start * ELEM_BYTES) as u64,
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
