//! The opening products (`shaders/wgsl/open.wgsl`): [`backend_api::Backend::row_dot_products`]
//! with an invocation per row, [`backend_api::Backend::column_dot_products`] with an invocation
//! per (vector, column), the coefficients or weights of each dispatch in its table.
//!
//! The matrix is bound through window A, the products through window B. A call runs as several
//! dispatches that add into the products: over ranges of columns (row products) or of selected
//! rows (column products) short enough for every invocation's loops to stay far below the 65,535
//! iterations after which Mesa's llvmpipe silently ends them, and for each dispatch's table to fit
//! the arena; and over ranges of rows (row products) that span at most one segment. A row wider
//! than one segment is refused, as the leaf hashes refuse it. Both calls download the products
//! and return when they have landed.
//!
//! [`backend_api::Backend::fri_fold`] runs an invocation per folded element, the input and the
//! addend bound through window A (one space), the output through window B, the challenges' matrices
//! and the fold's two constants in the table; its dispatches cover ranges of elements whose input
//! spans at most two segments.

use std::sync::Arc;

use backend_api::field::{inverse, root_of_unity};
use backend_api::{DeviceBuffer as _, Error, MatrixShape, Result, RowStride};

use crate::context::{Gpu, Kernel, LOOP_BUDGET, Module, NAME, Space, Table};
use crate::memory::{self, WgpuBuffer};

const ROW_DOT: Kernel = Kernel { module: Module::Open, entry: "row_dot", items_per_group: 64 };
const COLUMN_DOT: Kernel = Kernel { module: Module::Open, entry: "column_dot", items_per_group: 64 };
const FRI_FOLD: Kernel = Kernel { module: Module::Open, entry: "fri_fold", items_per_group: 64 };

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
    let (rows, cols) = (shape.rows(), shape.cols());
    let k = coeffs.len() / cols;
    check_bindings(gpu, op, shape, out.len())?;
    let s = gpu.seg_elems();
    let products = memory::alloc(gpu, rows * k)?;
    let (space_a, _) = Space::new(gpu, &[&matrix.segs])?;
    let (space_b, _) = Space::new(gpu, &[&products.segs])?;
    // Each invocation loops over width x (k + 1) iterations; each table holds k x width elements.
    let width = (LOOP_BUDGET / (k + 1)).min(TABLE_ELEMS / k).min(cols).max(1);
    let row_chunk = (s / cols).min(s / k).max(1);
    let mut rec = gpu.recorder(op);
    for (part, c0) in (0..cols).step_by(width).enumerate() {
        let c1 = (c0 + width).min(cols);
        let table = words((0..k).flat_map(|j| coeffs[j * cols + c0..j * cols + c1].iter().copied()));
        let mut first = 0;
        while first < rows {
            let n = row_chunk.min(rows - first);
            let a = space_a.window::<4>(&[((first * cols) as u64, ((first + n) * cols) as u64)], op)?;
            let b = space_b.window::<2>(&[((first * k) as u64, ((first + n) * k) as u64)], op)?;
            let args = [0, cols as u32, k as u32, c0 as u32, c1 as u32, first as u32, u32::from(part > 0), 0];
            rec.dispatch(ROW_DOT, n as u32, &args, a, b, Table::Arena(table.clone()))?;
            first += n;
        }
    }
    rec.flush()?;
    memory::download(gpu, &products, 0, out)
}

/// [`backend_api::Backend::column_dot_products`], on validated arguments.
pub(crate) fn column_dot_products(
    gpu: &Arc<Gpu>,
    matrix: &WgpuBuffer,
    shape: MatrixShape,
    rows: RowStride,
    weights: &[u64],
    out: &mut [u64],
) -> Result<()> {
    let op = "column_dot_products";
    let cols = shape.cols();
    let k = weights.len() / rows.count;
    // One row reads no step: any step is then as good as 1, and one past the matrix (the front
    // accepts it) must not reach the arithmetic below.
    let step = if rows.count == 1 { 1 } else { rows.step };
    check_bindings(gpu, op, shape, out.len())?;
    let s = gpu.seg_elems();
    let products = memory::alloc(gpu, k * cols)?;
    let (space_a, _) = Space::new(gpu, &[&matrix.segs])?;
    let (space_b, _) = Space::new(gpu, &[&products.segs])?;
    let b = space_b.window::<2>(&[(0, (k * cols) as u64)], op)?;
    // Each invocation loops over `chunk` rows; the table holds k x chunk weights; the chunk's rows
    // span at most three segments, so they touch at most the four window A binds.
    let span_rows = (3 * s / step.saturating_mul(cols)).max(1);
    let chunk = LOOP_BUDGET.min(TABLE_ELEMS / k).min(span_rows).min(rows.count).max(1);
    let mut rec = gpu.recorder(op);
    for (part, i0) in (0..rows.count).step_by(chunk).enumerate() {
        let i1 = (i0 + chunk).min(rows.count);
        let table = words((0..k).flat_map(|j| weights[j * rows.count + i0..j * rows.count + i1].iter().copied()));
        // Rows of the matrix (the front checked `first + (count - 1) * step < rows`).
        let (lo, hi) = (rows.first + i0 * step, rows.first + (i1 - 1) * step);
        let a = space_a.window::<4>(&[((lo * cols) as u64, ((hi + 1) * cols) as u64)], op)?;
        let args =
            [0, cols as u32, k as u32, i0 as u32, i1 as u32, rows.first as u32, u32::from(part > 0), 0, step as u32];
        rec.dispatch(COLUMN_DOT, (k * cols) as u32, &args, a, b, Table::Arena(table))?;
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
