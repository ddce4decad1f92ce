//! The opening products (open.cu): [`backend_api::Backend::row_dot_products`] as one launch of a
//! warp per row, [`backend_api::Backend::column_dot_products`] as partial sums per chunk of rows
//! then one sum per output. The coefficients or weights go up, the products come down; both
//! calls block until the products have landed.

use std::sync::Arc;

use backend_api::{MatrixShape, Result, RowStride};

use crate::context::Device;
use crate::launch::{LaunchArgs, LaunchConfig};
use crate::memory::{self, CudaBuffer};
use crate::module::Source;

const BLOCK: u32 = 256;
/// Resident threads per multiprocessor the column kernel aims for (it has no shared memory, so
/// occupancy is set by registers: about 2048 threads on sm_80 and newer).
const THREADS_PER_SM: usize = 2048;

/// [`backend_api::Backend::row_dot_products`], on validated arguments.
pub(crate) fn row_dot_products(
    device: &Arc<Device>,
    matrix: &CudaBuffer,
    shape: MatrixShape,
    coeffs: &[u64],
    out: &mut [u64],
) -> Result<()> {
    device.bind()?;
    let k = (coeffs.len() / shape.cols()) as u64;
    let coeffs = memory::upload(device, coeffs)?;
    let products = CudaBuffer::alloc(device, out.len())?;
    let kernel = device.kernel(Source::Open, "row_dot_products", 0)?;
    let rows_per_block = (BLOCK / 32) as usize;
    let grid = shape.rows().div_ceil(rows_per_block).min(device.sm_count as usize * 64).max(1) as u32;
    let (m, c, o, rows, cols) = (matrix.ptr(), coeffs.ptr(), products.ptr(), shape.rows() as u64, shape.cols() as u64);
    let args = LaunchArgs::new().arg(&m).arg(&c).arg(&o).arg(&rows).arg(&cols).arg(&k);
    // SAFETY: (const u64*, const u64*, u64*, u64, u64, u64) as row_dot_products declares; the
    // matrix holds rows x cols elements, the coefficients k x cols and the output rows x k (the
    // front validated the first two, the output is allocated here).
    unsafe { device.launch(&kernel, LaunchConfig::linear(grid, BLOCK, 0), args)? };
    memory::download(&products, 0, out)
}

/// [`backend_api::Backend::column_dot_products`], on validated arguments.
pub(crate) fn column_dot_products(
    device: &Arc<Device>,
    matrix: &CudaBuffer,
    shape: MatrixShape,
    rows: RowStride,
    weights: &[u64],
    out: &mut [u64],
) -> Result<()> {
    device.bind()?;
    let cols = shape.cols();
    let k = weights.len() / rows.count;
    // Enough chunks of rows to fill the device, no more than there are rows.
    let chunks = (device.sm_count as usize * THREADS_PER_SM / cols).clamp(1, rows.count);
    let weights = memory::upload(device, weights)?;
    let partial = CudaBuffer::alloc(device, chunks * k * cols)?;
    let products = CudaBuffer::alloc(device, out.len())?;
    let (m, w, p, o) = (matrix.ptr(), weights.ptr(), partial.ptr(), products.ptr());
    let (c64, first, step, count, ch, k64) =
        (cols as u64, rows.first as u64, rows.step as u64, rows.count as u64, chunks as u64, k as u64);

    let kernel = device.kernel(Source::Open, "column_dot_partial", 0)?;
    let grid = (chunks * cols).div_ceil(BLOCK as usize) as u32;
    let args =
        LaunchArgs::new().arg(&m).arg(&w).arg(&p).arg(&c64).arg(&first).arg(&step).arg(&count).arg(&ch).arg(&k64);
    // SAFETY: (const u64*, const u64*, u64*, u64 x 7) as column_dot_partial declares; every
    // row read, first + i * step for i < count, is a row of the matrix (validated by the front),
    // the weights hold k x count elements and the partial sums chunks x k x cols.
    unsafe { device.launch(&kernel, LaunchConfig::linear(grid, BLOCK, 0), args)? };

    let kernel = device.kernel(Source::Open, "column_dot_finish", 0)?;
    let grid = (k * cols).div_ceil(BLOCK as usize) as u32;
    let args = LaunchArgs::new().arg(&p).arg(&o).arg(&c64).arg(&ch).arg(&k64);
    // SAFETY: (const u64*, u64*, u64, u64, u64) as column_dot_finish declares; the partial sums
    // hold chunks x k x cols elements and the output k x cols.
    unsafe { device.launch(&kernel, LaunchConfig::linear(grid, BLOCK, 0), args)? };
    memory::download(&products, 0, out)
}
