//! The opening products (open.cu): [`backend_api::Backend::row_dot_products`] as one launch of a
//! warp per row, [`backend_api::Backend::column_dot_products`] as partial sums per chunk of rows
//! then one block per output adding them. The coefficients or weights go up, the products come down; both
//! calls block until the products have landed. [`backend_api::Backend::fri_fold`] is one launch of
//! a thread per folded element, after its challenges' matrices go up.
//! [`backend_api::Backend::reduce_openings`] is one launch of a warp per 32 rows: the lanes sum
//! each row's combination together, then each lane finishes one row's points (an inversion each),
//! so no lane idles through the per-row arithmetic.

use std::sync::Arc;

use backend_api::field::{canonical, inverse, pow, root_of_unity};
use backend_api::{DeviceBuffer as _, MatrixShape, ReductionCall, ReductionPoint, Result, RowStride};

use crate::context::Device;
use crate::launch::{LaunchArgs, LaunchConfig};
use crate::memory::{self, CudaBuffer};
use crate::module::Source;

const BLOCK: u32 = 256;
/// Resident threads per multiprocessor the column kernel aims for (it has no shared memory, so
/// occupancy is set by registers: about 2048 threads on sm_80 and newer).
const THREADS_PER_SM: usize = 2048;
/// The fewest rows a column kernel's thread sums, where the selection has that many.
const MIN_CHUNK_ROWS: usize = 32;

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
    // Enough chunks of rows to fill the device, each of at least MIN_CHUNK_ROWS rows where there
    // are that many: a narrow matrix (a quotient chunk's two columns) would otherwise get a chunk
    // per row, and the finish as many partial sums to add.
    let chunks = (device.sm_count as usize * THREADS_PER_SM / cols).clamp(1, rows.count.div_ceil(MIN_CHUNK_ROWS));
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
    let grid = u32::try_from(k * cols).map_err(|_| {
        backend_api::Error::InvalidArgument(format!("column_dot_products: {k} x {cols} sums exceed one launch's grid"))
    })?;
    let args = LaunchArgs::new().arg(&p).arg(&o).arg(&c64).arg(&ch).arg(&k64);
    // SAFETY: (const u64*, u64*, u64, u64, u64) as column_dot_finish declares, one block of
    // BLOCK (at most 256, its shared array's 8 warps) threads per output; the partial sums hold
    // chunks x k x cols elements and the output k x cols.
    unsafe { device.launch(&kernel, LaunchConfig::linear(grid, BLOCK, 0), args)? };
    memory::download(&products, 0, out)
}

/// [`backend_api::Backend::fri_fold`], on validated arguments.
pub(crate) fn fri_fold(
    device: &Arc<Device>,
    input: &CudaBuffer,
    beta: &[u64],
    addend: Option<(&CudaBuffer, &[u64])>,
    out: &mut CudaBuffer,
) -> Result<()> {
    device.bind()?;
    let d = beta.len().isqrt();
    let n = out.len() / d;
    let log_n = n.trailing_zeros();
    // The two matrices in one upload: beta, then gamma (or beta again, unread).
    let mut matrices = beta.to_vec();
    matrices.extend_from_slice(addend.map_or(beta, |(_, gamma)| gamma));
    let matrices = memory::upload(device, &matrices)?;
    let kernel = device.kernel(Source::Open, "fri_fold", 0)?;
    let grid = u32::try_from(n.div_ceil(BLOCK as usize)).map_err(|_| {
        backend_api::Error::InvalidArgument(format!("fri_fold: {n} folded elements exceed one launch's grid"))
    })?;
    let (i, b, g, o) = (input.ptr(), matrices.ptr(), matrices.ptr_at(d * d), out.ptr());
    let a = addend.map_or(0, |(v, _)| v.ptr());
    let (n64, d64, log_n64) = (n as u64, d as u64, u64::from(log_n));
    let (w_inv, half) = (inverse(root_of_unity(log_n + 1)), inverse(2));
    let args = LaunchArgs::new()
        .arg(&i)
        .arg(&b)
        .arg(&a)
        .arg(&g)
        .arg(&o)
        .arg(&n64)
        .arg(&d64)
        .arg(&log_n64)
        .arg(&w_inv)
        .arg(&half);
    // SAFETY: (const u64*, const u64*, const u64*, const u64*, u64*, u64 x 5) as
    // fri_fold declares; the input holds 2n x d words, the output and the addend (or null, never
    // read) n x d, the matrices 2 x d x d (the front validated the lengths; d <= 8 =
    // FOLD_MAX_DEGREE, n < 2^31).
    unsafe { device.launch(&kernel, LaunchConfig::linear(grid.max(1), BLOCK, 0), args)? };
    Ok(())
}

/// [`backend_api::Backend::reduce_openings`], on validated arguments.
pub(crate) fn reduce_openings(
    device: &Arc<Device>,
    matrix: &CudaBuffer,
    shape: MatrixShape,
    call: &ReductionCall<'_>,
    acc: &mut CudaBuffer,
) -> Result<()> {
    device.bind()?;
    let (rows, cols, d) = (shape.rows(), shape.cols(), call.degree());
    // The coefficients, then each point's words, in one upload.
    let mut words = call.coeffs.to_vec();
    let points_at = words.len();
    for point in call.points {
        words.extend(point.words());
    }
    debug_assert_eq!(words.len(), points_at + call.points.len() * ReductionPoint::words_per_point(d));
    let constants = memory::upload(device, &words)?;
    let kernel = device.kernel(Source::Open, "reduce_openings", 0)?;
    let warps_per_block = (BLOCK / 32) as usize;
    let grid = rows.div_ceil(32 * warps_per_block).min(device.sm_count as usize * 64).max(1);
    let w = root_of_unity(rows.trailing_zeros());
    let w_stride = pow(w, (grid * warps_per_block * 32) as u64);
    let (m, c, p, a) = (matrix.ptr(), constants.ptr(), constants.ptr_at(points_at), acc.ptr());
    let (rows64, cols64, d64, n64) = (rows as u64, cols as u64, d as u64, call.points.len() as u64);
    let (shift, accumulate) = (canonical(call.shift), u64::from(call.accumulate));
    let args = LaunchArgs::new()
        .arg(&m)
        .arg(&c)
        .arg(&p)
        .arg(&a)
        .arg(&rows64)
        .arg(&cols64)
        .arg(&d64)
        .arg(&n64)
        .arg(&shift)
        .arg(&w)
        .arg(&w_stride)
        .arg(&accumulate);
    // SAFETY: (const u64*, const u64*, const u64*, u64*, u64 x 8) as reduce_openings declares; the
    // front validated the call: the matrix holds rows x cols elements (rows a power of two), the
    // coefficients are d x cols words, the accumulator rows x d, 1 <= d <= 8 and 1 to
    // MAX_REDUCTION_POINTS points of 2d + d^2 + d^3 words each (uploaded above after the
    // coefficients), none whose characteristic polynomial vanishes on the coset. The matrix and
    // the accumulator are distinct buffers.
    unsafe { device.launch(&kernel, LaunchConfig::linear(grid as u32, BLOCK, 0), args)? };
    Ok(())
}
