//! Batched copies: validated as the trait requires, then one gather launch per (parameter-sized)
//! chunk of the batch, or the copy engine for a few large copies.

use backend_api::copy::{BatchTarget, validate_batch};
use std::ops::Range;

use backend_api::{CopyRange, DeviceBuffer as _, ELEM_BYTES, MatrixShape, Result};
use cudarc::driver::result as cu;
use cudarc::driver::sys;

use crate::context::Device;
use crate::driver::err;
use crate::launch::{KernelParam, LaunchArgs, LaunchConfig};
use crate::memory::CudaBuffer;
use crate::module::Source;

/// Copies per launch: the kernel's parameter block (`CopyBatch` in copy.cu) holds this many.
pub(crate) const COPY_MAX: usize = 1280;
/// Copies at least this long (elements) go to the copy engine when the batch is small.
const ENGINE_MIN_LEN: usize = 1 << 20;
/// Batches of at most this many copies may use the copy engine.
const ENGINE_MAX_COPIES: usize = 8;
/// Elements one block moves per chunk (`blockDim.x * COPY_PER_THREAD` in copy.cu).
const BLOCK: u32 = 256;
const CHUNK: usize = BLOCK as usize * 8;

/// The kernel parameter block of `copy_gather`; layout identical to `CopyBatch` in copy.cu.
#[repr(C)]
#[derive(Clone, Copy)]
struct CopyBatch {
    n: u64,
    src: [u64; COPY_MAX],
    dst: [u64; COPY_MAX],
    start: [u64; COPY_MAX + 1],
}

// SAFETY: `#[repr(C)]` u64 fields and arrays, the layout of copy.cu's `CopyBatch` (n,
// src[COPY_MAX], dst[COPY_MAX], start[COPY_MAX + 1]); no padding.
unsafe impl KernelParam for CopyBatch {}
const _: () = assert!(std::mem::size_of::<CopyBatch>() == (2 + 3 * COPY_MAX) * 8, "CopyBatch is unpadded u64s");

/// Marks a location in the second base pointer of a gather launch (`LOC_B1` in common.cuh).
pub(crate) const LOC_B1: u64 = 1 << 63;

/// One copy of a gather launch: locations (offsets, `LOC_B1` for the second base) and a length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Gather {
    pub(crate) src: u64,
    pub(crate) dst: u64,
    pub(crate) len: usize,
}

/// Queues `copies` (independent: no destination overlaps any other range) between two bases, in
/// launches of at most [`COPY_MAX`] copies.
///
/// # Safety
/// Every copy's source and destination lie inside the allocation its location names (`b0`, or
/// `b1` when `LOC_B1` is set), and the copies are independent.
pub(crate) unsafe fn gather(
    device: &Device,
    b0: sys::CUdeviceptr,
    b1: sys::CUdeviceptr,
    copies: &[Gather],
) -> Result<()> {
    let copies: Vec<Gather> = copies.iter().copied().filter(|c| c.len > 0).collect();
    if copies.is_empty() {
        return Ok(());
    }
    let kernel = device.kernel(Source::Copy, "copy_gather", 0)?;
    let mut batch = Box::new(CopyBatch { n: 0, src: [0; COPY_MAX], dst: [0; COPY_MAX], start: [0; COPY_MAX + 1] });
    for part in copies.chunks(COPY_MAX) {
        batch.n = part.len() as u64;
        let mut total = 0u64;
        for (k, c) in part.iter().enumerate() {
            batch.src[k] = c.src;
            batch.dst[k] = c.dst;
            batch.start[k] = total;
            total += c.len as u64;
        }
        batch.start[part.len()] = total;
        let chunks = (total as usize).div_ceil(CHUNK);
        let grid = chunks.min(device.sm_count as usize * 16).max(1) as u32;
        let args = LaunchArgs::new().arg(&b0).arg(&b1).arg(&*batch);
        // SAFETY: the arguments are (u64*, u64*, CopyBatch) as copy_gather declares; the caller
        // guarantees every range is inside its allocation and the copies are independent.
        unsafe { device.launch(&kernel, LaunchConfig::linear(grid, BLOCK, 0), args)? };
    }
    Ok(())
}

/// [`backend_api::Backend::bit_reversed_rows`] on validated arguments: one launch that computes
/// each row's source on the device (a warp per row of 32 elements or more, a thread per shorter
/// row), so no list of ranges is built, checked or sent.
pub(crate) fn bit_reversed_rows(
    device: &Device,
    src: &CudaBuffer,
    src_at: usize,
    shape: MatrixShape,
    rows: Range<usize>,
    dst: &mut CudaBuffer,
    dst_at: usize,
) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    device.bind()?;
    let kernel = device.kernel(Source::Copy, "bit_reversed_rows", 0)?;
    let per_block = if shape.cols() < 32 { BLOCK as usize } else { BLOCK as usize / 32 };
    // Four blocks per multiprocessor: plenty for a copy, and a grid-stride loop beyond that.
    let grid = rows.len().div_ceil(per_block).min(device.sm_count as usize * 4).max(1) as u32;
    let (s, d) = (src.ptr_at(src_at), dst.ptr_at(dst_at));
    let (cols, first, count) = (shape.cols() as u64, rows.start as u64, rows.len() as u64);
    let log_rows = u64::from(shape.rows().trailing_zeros());
    let args = LaunchArgs::new().arg(&s).arg(&d).arg(&cols).arg(&first).arg(&count).arg(&log_rows);
    // SAFETY: (const u64*, u64*, u64, u64, u64, u64) as bit_reversed_rows declares; the front
    // validated that `src` holds the matrix from `src_at` and `dst` the `count` rows from
    // `dst_at`, and the two are distinct buffers (one shared, one exclusive borrow).
    unsafe { device.launch(&kernel, LaunchConfig::linear(grid, BLOCK, 0), args) }
}

/// [`backend_api::Backend::batched_copy`].
pub(crate) fn batched_copy(
    device: &Device,
    src: &CudaBuffer,
    dst: &mut CudaBuffer,
    copies: &[CopyRange],
) -> Result<()> {
    validate_batch(copies, BatchTarget::Between { src_len: src.len(), dst_len: dst.len() })?;
    run(device, src, dst, copies)
}

/// [`backend_api::Backend::batched_copy_within`].
pub(crate) fn batched_copy_within(device: &Device, buf: &mut CudaBuffer, copies: &[CopyRange]) -> Result<()> {
    validate_batch(copies, BatchTarget::Within { len: buf.len() })?;
    run(device, buf, buf, copies)
}

/// A batch validated against `src` and `dst` (which may be one buffer): a few large copies on the
/// copy engine, everything else in gather launches.
fn run(device: &Device, src: &CudaBuffer, dst: &CudaBuffer, copies: &[CopyRange]) -> Result<()> {
    device.bind()?;
    let engine = copies.len() <= ENGINE_MAX_COPIES && copies.iter().all(|c| c.len >= ENGINE_MIN_LEN || c.len == 0);
    if engine {
        for c in copies.iter().filter(|c| c.len > 0) {
            // SAFETY: the batch was validated: both ranges are in bounds and no destination
            // overlaps another range of the batch (its own source included).
            unsafe { cu::memcpy_dtod_async(dst.ptr_at(c.dst), src.ptr_at(c.src), c.len * ELEM_BYTES, device.stream()) }
                .map_err(err("cuMemcpyDtoDAsync"))?;
        }
        return Ok(());
    }
    let list: Vec<Gather> =
        copies.iter().map(|c| Gather { src: c.src as u64, dst: c.dst as u64 | LOC_B1, len: c.len }).collect();
    // SAFETY: validated as above; sources are offsets in `src` (base 0), destinations in `dst`
    // (base 1).
    unsafe { gather(device, src.ptr(), dst.ptr(), &list) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_block_fits_the_launch_limit() {
        // CUDA 12.1+ accepts up to 32,764 bytes of kernel parameters; copy_gather's other two
        // parameters are pointers.
        assert!(std::mem::size_of::<CopyBatch>() + 16 <= 32_764, "{}", std::mem::size_of::<CopyBatch>());
        assert_eq!(std::mem::size_of::<CopyBatch>(), 8 * (1 + 3 * COPY_MAX + 1));
    }
}
