//! The opening products, FRI's fold and its input (`shaders/wgsl/open.wgsl`).
//!
//! - [`backend_api::Backend::row_dot_products`]: up to 32 invocations per row, reading its
//!   columns side by side and folding their sums in workgroup memory, the coefficients of each
//!   dispatch in its table, the matrix through window A and the products through window B; a
//!   call runs as dispatches over ranges of rows that span at most one segment and over ranges of
//!   columns short enough for every invocation's loops to stay far below the 65,535 iterations
//!   after which Mesa's llvmpipe silently ends them (each adding into the products).
//! - [`backend_api::Backend::column_dot_products`]: partial sums per (chunk of selected rows,
//!   column), then a workgroup per output adding its chunks' sums (as the CUDA backend does), so
//!   that a call of a few outputs still spreads over the whole device; the weights go up as one
//!   buffer bound with the matrix in window A.
//! - A row wider than one segment is refused by both, as the leaf hashes refuse it. Both calls
//!   download the products and return when they have landed.
//! - [`backend_api::Backend::fri_fold`]: an invocation per folded element, the input and the
//!   addend bound through window A (one space), the output through window B, the challenges'
//!   matrices and the fold's two constants in the table; its dispatches cover ranges of elements
//!   whose input spans at most two segments.
//! - [`backend_api::Backend::reduce_openings`]: the rows' combinations by the row products'
//!   kernel into a scratch buffer, then the points' terms, eight rows an invocation sharing one
//!   inversion per point.

use std::sync::Arc;

use backend_api::field::{canonical, inverse, mul, pow, root_of_unity};
use backend_api::{DeviceBuffer as _, Error, MatrixShape, ReductionCall, ReductionPoint, Result, RowStride};

use crate::context::{Gpu, Kernel, LOOP_BUDGET, Module, NAME, Recorder, Space, Table};
use crate::memory::{self, WgpuBuffer};

/// One workgroup of [`ROW_DOT_GROUP`] invocations per `ROW_DOT_GROUP / lanes` rows.
const ROW_DOT: Kernel = Kernel { module: Module::Open, entry: "row_dot", items_per_group: 1 };
/// Invocations per workgroup of the row products (`row_dot` in open.wgsl).
const ROW_DOT_GROUP: usize = 256;
const COLUMN_PARTIAL: Kernel = Kernel { module: Module::Open, entry: "column_dot_partial", items_per_group: 64 };
/// One workgroup per output.
const COLUMN_FINISH: Kernel = Kernel { module: Module::Open, entry: "column_dot_finish", items_per_group: 1 };
/// Rows per invocation of `reduce_points` (`REDUCE_ROWS` in open.wgsl).
const REDUCE_ROWS: usize = 8;
const REDUCE_POINTS: Kernel = Kernel { module: Module::Open, entry: "reduce_points", items_per_group: 64 };
const FRI_FOLD: Kernel = Kernel { module: Module::Open, entry: "fri_fold", items_per_group: 64 };

/// Invocations the first pass of the column products aims for: about 2,048 resident threads on
/// each of a large GPU's ~130 multiprocessors (an H100's 132), so that every one streams rows.
const COLUMN_PARTIAL_THREADS: usize = 1 << 18;
/// The fewest selected rows a chunk of the column products sums, where the selection has that
/// many: a narrow matrix (a quotient chunk's two columns) would otherwise get a chunk per row, and
/// the second pass as many sums to add.
const MIN_CHUNK_ROWS: usize = 32;
/// Invocations per workgroup of the column products' second pass (`FINISH_GROUP` in open.wgsl).
const FINISH_GROUP: usize = 64;

/// Table elements (u64) one dispatch carries at most: a quarter of the arena.
const TABLE_ELEMS: usize = 1 << 15;

/// `values` as the table's `u32` words (low word first).
fn words(values: impl Iterator<Item = u64>) -> Vec<u32> {
    values.flat_map(|x| [x as u32, (x >> 32) as u32]).collect()
}

/// Refuses a matrix whose row does not fit one segment (what a dispatch binds), or whose elements
/// or products the kernels' 32-bit indices do not reach.
fn check_bindings(gpu: &Gpu, op: &str, shape: MatrixShape, products: usize) -> Result<()> {
    let (cols, s) = (shape.cols(), gpu.seg_elems());
    let why = if cols > s {
        format!("a row of {cols} elements exceeds one segment of {s} elements")
    } else if shape.len().max(products) > u32::MAX as usize {
        format!("a {shape} matrix or its products need more than 32-bit indices")
    } else {
        return Ok(());
    };
    Err(Error::InvalidArgument(format!("{NAME}: {op}: {why} (the storage binding limit)")))
}

/// [`backend_api::Backend::row_dot_products`], on validated arguments.
pub(crate) fn row_dot_products(
    gpu: &Arc<Gpu>,
    matrix: &WgpuBuffer,
    shape: MatrixShape,
    coeffs: &[u64],
    out: &mut [u64],
) -> Result<()> {
    let op = "row_dot_products";
    check_bindings(gpu, op, shape, out.len())?;
    let products = memory::alloc(gpu, out.len())?;
    let mut rec = gpu.recorder(op);
    record_row_dots(gpu, &mut rec, matrix, shape, coeffs, &products, op)?;
    rec.flush()?;
    memory::download(gpu, &products, 0, out)
}

/// Records the row products of `matrix` with the `coeffs.len() / cols` vectors of `coeffs` into
/// `products` (`rows x k`, row-major), on arguments [`check_bindings`] accepted.
fn record_row_dots(
    gpu: &Gpu,
    rec: &mut Recorder<'_>,
    matrix: &WgpuBuffer,
    shape: MatrixShape,
    coeffs: &[u64],
    products: &WgpuBuffer,
    op: &str,
) -> Result<()> {
    let (rows, cols) = (shape.rows(), shape.cols());
    let k = coeffs.len() / cols;
    let s = gpu.seg_elems();
    let (space_a, _) = Space::new(gpu, &[&matrix.segs])?;
    let (space_b, _) = Space::new(gpu, &[&products.segs])?;
    // Each invocation loops over width x (k + 1) iterations; each table holds k x width elements.
    let width = (LOOP_BUDGET / (k + 1)).min(TABLE_ELEMS / k).min(cols).max(1);
    let row_chunk = (s / cols).min(s / k).max(1);
    for (part, c0) in (0..cols).step_by(width).enumerate() {
        let c1 = (c0 + width).min(cols);
        let table = words((0..k).flat_map(|j| coeffs[j * cols + c0..j * cols + c1].iter().copied()));
        // Lanes a row: about four columns each, at most 32 (a warp's width on NVIDIA).
        let log_lanes = (c1 - c0).div_ceil(4).next_power_of_two().min(32).trailing_zeros();
        let mut first = 0;
        while first < rows {
            let n = row_chunk.min(rows - first);
            let a = space_a.window::<4>(&[((first * cols) as u64, ((first + n) * cols) as u64)], op)?;
            let b = space_b.window::<2>(&[((first * k) as u64, ((first + n) * k) as u64)], op)?;
            let args = [
                0,
                cols as u32,
                k as u32,
                c0 as u32,
                c1 as u32,
                first as u32,
                u32::from(part > 0),
                0,
                log_lanes,
                n as u32,
            ];
            let groups = n.div_ceil(ROW_DOT_GROUP >> log_lanes);
            rec.dispatch(ROW_DOT, groups as u32, &args, a, b, Table::Arena(table.clone()))?;
            first += n;
        }
    }
    Ok(())
}

/// [`backend_api::Backend::column_dot_products`], on validated arguments.
///
/// Two passes, as the CUDA backend's: invocations per (chunk of selected rows, column) that keep
/// `k` sums of the chunk's rows, enough of them to fill a large GPU
/// ([`COLUMN_PARTIAL_THREADS`]); then a workgroup per output that adds its chunks' sums. The
/// weights go up interleaved (the `k` weights of a selected row side by side), so that a chunk's
/// weights are one range of the buffer and bind with its rows in window A.
pub(crate) fn column_dot_products(
    gpu: &Arc<Gpu>,
    matrix: &WgpuBuffer,
    shape: MatrixShape,
    rows: RowStride,
    weights: &[u64],
    out: &mut [u64],
) -> Result<()> {
    use rayon::prelude::*;
    let op = "column_dot_products";
    let (cols, count) = (shape.cols(), rows.count);
    let k = weights.len() / count;
    // One row reads no step: any step is then as good as 1, and one past the matrix (the front
    // accepts it) must not reach the arithmetic below.
    let step = if count == 1 { 1 } else { rows.step };
    check_bindings(gpu, op, shape, out.len())?;
    let s = gpu.seg_elems();
    let products = memory::alloc(gpu, k * cols)?;
    let (space_out, _) = Space::new(gpu, &[&products.segs])?;
    let out_window = space_out.window::<2>(&[(0, (k * cols) as u64)], op)?;

    // Rows per chunk: enough chunks for the device, each of at least MIN_CHUNK_ROWS rows where
    // there are that many, and short enough that a chunk's loop stays within the loop budget and
    // its rows (a range of at most one segment) and its weights (at most one segment) bind.
    let span_rows = ((s / cols - 1) / step + 1).max(1);
    let max_rows = (LOOP_BUDGET / (k + 1)).min(span_rows).min(s / k).max(1);
    let wanted = (COLUMN_PARTIAL_THREADS / cols).clamp(1, count.div_ceil(MIN_CHUNK_ROWS));
    let m = count.div_ceil(wanted).min(max_rows);
    let chunks = count.div_ceil(m);

    let mut interleaved = vec![0u64; count * k];
    interleaved.par_chunks_mut(k << 12).enumerate().for_each(|(b, part)| {
        for (e, slot) in part.iter_mut().enumerate() {
            let (i, j) = ((b << 12) + e / k, e % k);
            *slot = weights[j * count + i];
        }
    });
    let weights = memory::upload(gpu, &interleaved)?;
    drop(interleaved);
    let partial = memory::alloc(gpu, chunks * cols * k)?;
    let (space_a, bases) = Space::new(gpu, &[&matrix.segs, &weights.segs])?;
    let (space_p, _) = Space::new(gpu, &[&partial.segs])?;
    let weights_at = bases[1] as usize;

    // First pass: one dispatch where the selected rows, the weights and the sums fit the windows
    // (a 4 GiB LDE on an H100, whose segments are 2 GiB), so that every chunk runs at once; else
    // dispatches of whole chunks (their rows, weights and sums each within one segment), or,
    // where one chunk's k x cols sums exceed a segment, of one chunk's columns.
    let (last_row, sums) = (rows.first + (count - 1) * step, chunks * cols * k);
    let whole = space_a
        .window::<4>(
            &[
                ((rows.first * cols) as u64, ((last_row + 1) * cols) as u64),
                (weights_at as u64, (weights_at + count * k) as u64),
            ],
            op,
        )
        .is_ok()
        && space_p.window::<2>(&[(0, sums as u64)], op).is_ok();
    let (width, per_dispatch) = if whole {
        (cols, chunks)
    } else if cols * k <= s {
        (cols, (span_rows / m).min(s / (m * k)).min(s / (cols * k)).max(1))
    } else {
        ((s / k).max(1), 1)
    };
    let mut rec = gpu.recorder(op);
    for g0 in (0..chunks).step_by(per_dispatch) {
        let g1 = (g0 + per_dispatch).min(chunks);
        let (i0, i1) = (g0 * m, (g1 * m).min(count));
        let (lo, hi) = (rows.first + i0 * step, rows.first + (i1 - 1) * step);
        for c0 in (0..cols).step_by(width) {
            let w = width.min(cols - c0);
            let a = space_a.window::<4>(
                &[
                    ((lo * cols) as u64, ((hi + 1) * cols) as u64),
                    ((weights_at + i0 * k) as u64, (weights_at + i1 * k) as u64),
                ],
                op,
            )?;
            let b =
                space_p.window::<2>(&[(((g0 * cols + c0) * k) as u64, (((g1 - 1) * cols + c0 + w) * k) as u64)], op)?;
            let args = [
                0,
                cols as u32,
                k as u32,
                m as u32,
                count as u32,
                rows.first as u32,
                step as u32,
                g0 as u32,
                c0 as u32,
                w as u32,
                weights_at as u32,
            ];
            rec.dispatch(COLUMN_PARTIAL, ((g1 - g0) * w) as u32, &args, a, b, Table::None)?;
        }
    }

    // Second pass: the chunks' sums of each output, in dispatches whose sums span at most three
    // segments (k x cols fits two: the output's window), each after the first adding to it, and
    // few enough that an invocation's loop stays within the budget.
    let per_finish = (3 * s / (cols * k)).clamp(1, FINISH_GROUP * (LOOP_BUDGET / 2));
    for (part, g0) in (0..chunks).step_by(per_finish).enumerate() {
        let g1 = (g0 + per_finish).min(chunks);
        let a = space_p.window::<4>(&[((g0 * cols * k) as u64, (g1 * cols * k) as u64)], op)?;
        let args = [0, cols as u32, k as u32, g0 as u32, g1 as u32, u32::from(part > 0)];
        rec.dispatch(COLUMN_FINISH, (k * cols) as u32, &args, a, out_window, Table::None)?;
    }
    rec.flush()?;
    memory::download(gpu, &products, 0, out)
}

/// [`backend_api::Backend::fri_fold`], on validated arguments. Returns once the dispatches are
/// submitted.
pub(crate) fn fri_fold(
    gpu: &Arc<Gpu>,
    input: &WgpuBuffer,
    beta: &[u64],
    addend: Option<(&WgpuBuffer, &[u64])>,
    out: &mut WgpuBuffer,
) -> Result<()> {
    let op = "fri_fold";
    let d = beta.len().isqrt();
    let n = out.len() / d;
    let log_n = n.trailing_zeros();
    let mut sources = vec![input.segs.as_slice()];
    if let Some((v, _)) = addend {
        sources.push(v.segs.as_slice());
    }
    let (space_a, bases) = Space::new(gpu, &sources)?;
    let (space_b, _) = Space::new(gpu, &[&out.segs])?;
    let addend_base = bases.get(1).copied().unwrap_or(0);
    let gamma = addend.map_or(beta, |(_, gamma)| gamma);
    let constants = [inverse(root_of_unity(log_n + 1)), inverse(2)];
    let table = words(beta.iter().chain(gamma).chain(&constants).copied());
    // A dispatch's input (2 x chunk x d words) spans at most two segments, its addend and its
    // output (chunk x d words each) at most two each: window A binds four, window B two.
    let chunk = (gpu.seg_elems() / (2 * d)).max(1);
    let mut rec = gpu.recorder(op);
    for i0 in (0..n).step_by(chunk) {
        let m = chunk.min(n - i0);
        let (lo, hi) = ((i0 * d) as u64, ((i0 + m) * d) as u64);
        let mut spans = vec![(2 * lo, 2 * hi)];
        if addend.is_some() {
            spans.push((u64::from(addend_base) + lo, u64::from(addend_base) + hi));
        }
        let a = space_a.window::<4>(&spans, op)?;
        let b = space_b.window::<2>(&[(lo, hi)], op)?;
        let args = [0, d as u32, log_n, i0 as u32, u32::from(addend.is_some()), addend_base];
        rec.dispatch(FRI_FOLD, m as u32, &args, a, b, Table::Arena(table.clone()))?;
    }
    rec.flush()
}

/// [`backend_api::Backend::reduce_openings`], on validated arguments. Returns once the dispatches
/// are submitted.
///
/// Two steps in one submission: the rows' combinations `v_j` by the row products' kernel into a
/// `rows x d` scratch buffer, then `reduce_points` over them and the accumulator, eight rows an
/// invocation sharing one inversion per point. The points, the coset's generator and each
/// dispatch's first point go in the dispatch's table.
///
/// # Errors
/// As the row products: `InvalidArgument` for a row wider than one segment, or a matrix whose
/// elements 32-bit indices do not reach; out of memory for the scratch; a device error.
pub(crate) fn reduce_openings(
    gpu: &Arc<Gpu>,
    matrix: &WgpuBuffer,
    shape: MatrixShape,
    call: &ReductionCall<'_>,
    acc: &mut WgpuBuffer,
) -> Result<()> {
    let op = "reduce_openings";
    let (rows, d) = (shape.rows(), call.degree());
    check_bindings(gpu, op, shape, rows * d)?;
    let combinations = memory::alloc(gpu, rows * d)?;
    let mut rec = gpu.recorder(op);
    record_row_dots(gpu, &mut rec, matrix, shape, call.coeffs, &combinations, op)?;

    let mut points: Vec<u64> = call.points.iter().flat_map(ReductionPoint::words).collect();
    debug_assert_eq!(points.len(), call.points.len() * ReductionPoint::words_per_point(d));
    let w = root_of_unity(rows.trailing_zeros());
    points.extend([w, 0, pow(w, REDUCE_ROWS as u64)]);
    let x_at = points.len() - 2;
    let (space_a, _) = Space::new(gpu, &[&combinations.segs])?;
    let (space_b, _) = Space::new(gpu, &[&acc.segs])?;
    // Rows per dispatch: their combinations and accumulator words one segment each (two bound).
    let per_dispatch = (gpu.seg_elems() / d).max(1);
    let shift = canonical(call.shift);
    for r0 in (0..rows).step_by(per_dispatch) {
        let n = per_dispatch.min(rows - r0);
        points[x_at] = mul(shift, pow(w, r0 as u64));
        let span = [((r0 * d) as u64, ((r0 + n) * d) as u64)];
        let (a, b) = (space_a.window::<4>(&span, op)?, space_b.window::<2>(&span, op)?);
        let args = [0, d as u32, call.points.len() as u32, r0 as u32, n as u32, u32::from(call.accumulate)];
        let table = words(points.iter().copied());
        rec.dispatch(REDUCE_POINTS, n.div_ceil(REDUCE_ROWS) as u32, &args, a, b, Table::Arena(table))?;
    }
    rec.flush()
}
