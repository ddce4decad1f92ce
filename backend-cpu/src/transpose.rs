//! The in-place transpose: executes the shared [`TransposePlan`] over the buffer and one scratch.
//!
//! - **Bounded scratch.** The only allocation is `geometry.scratch_elems` elements of scratch,
//!   through the tracker; the matrix is never copied whole.
//! - **Block steps** ([`Step::TransposeBlock`]) are cache-blocked out-of-place tile transposes
//!   between two disjoint regions (buffer and scratch, or two blocks of the buffer split apart
//!   with `split_at_mut`), parallel over row tiles with rayon.
//! - **Copy steps** ([`Step::Copies`]) are independent copies, carved into disjoint slices by
//!   [`crate::copy::Carved`] (which also rejects any plan step that is not independent) and run in
//!   parallel.

use backend_api::plan::{Loc, Step, TransposePlan};
use backend_api::{Error, MatrixShape, Result, validate};
use rayon::prelude::*;

use crate::copy::{Carved, run_pairs};
use crate::memory::{Allocator, check_range};

/// Rows of one tile: a tile writes runs of this many elements (512 B) per column.
const TILE_ROWS: usize = 64;
/// Columns of one tile: a tile reads this many consecutive elements (128 B) per row.
const TILE_COLS: usize = 16;

/// [`crate::CpuBackend::transpose_in_place`].
///
/// # Errors
/// [`Error::LengthMismatch`] when `buf` does not
/// hold `shape`, [`Error::ScratchTooSmall`] from the plan, out of memory for the scratch, and an
/// error naming the step should a plan step ever be out of bounds or not independent.
pub(crate) fn transpose_in_place(alloc: &Allocator, buf: &mut [u64], shape: MatrixShape, cap: usize) -> Result<()> {
    validate::transpose(shape, buf.len(), cap)?;
    let plan = TransposePlan::new(shape, cap)?;
    if plan.steps.is_empty() {
        // One row or one column: row-major and column-major are the same bytes.
        return Ok(());
    }
    let mut scratch = alloc.zeroed(plan.geometry.scratch_elems)?;
    let scratch = scratch.as_mut_slice();
    for step in &plan.steps {
        match step {
            Step::TransposeBlock { src, dst, rows } => transpose_step(buf, scratch, *src, *dst, *rows, shape.cols())?,
            Step::Copies(moves) => {
                let (mut in_buf, mut in_scratch) = (Vec::new(), Vec::new());
                for (i, m) in moves.iter().enumerate() {
                    match m.dst {
                        Loc::Buf(o) => in_buf.push((o, m.len, i)),
                        Loc::Scratch(o) => in_scratch.push((o, m.len, i)),
                    }
                }
                let buf_parts = Carved::new("transpose step destination (buffer)", buf, &in_buf)?;
                let scratch_parts = Carved::new("transpose step destination (scratch)", scratch, &in_scratch)?;
                let mut sources = Vec::with_capacity(moves.len());
                for (i, m) in moves.iter().enumerate().filter(|(_, m)| m.len > 0) {
                    let s = match m.src {
                        Loc::Buf(o) => buf_parts.source("transpose step source (buffer)", o, m.len, i)?,
                        Loc::Scratch(o) => scratch_parts.source("transpose step source (scratch)", o, m.len, i)?,
                    };
                    sources.push(s);
                }
                let mut dsts = buf_parts.into_dsts();
                dsts.extend(scratch_parts.into_dsts());
                dsts.sort_unstable_by_key(|d| d.0);
                run_pairs(sources.into_iter().zip(dsts).map(|(s, (_, d))| (s, d)).collect());
            }
        }
    }
    Ok(())
}

/// One [`Step::TransposeBlock`]: the `rows x cols` row-major block at `src` into `cols` runs of
/// `rows` elements at `dst`.
fn transpose_step(buf: &mut [u64], scratch: &mut [u64], src: Loc, dst: Loc, rows: usize, cols: usize) -> Result<()> {
    let n = rows * cols;
    let what = "transpose block";
    match (src, dst) {
        (Loc::Buf(s), Loc::Scratch(d)) => {
            check_range(what, s, n, buf.len())?;
            check_range(what, d, n, scratch.len())?;
            transpose_block(&buf[s..s + n], &mut scratch[d..d + n], rows, cols);
        }
        (Loc::Scratch(s), Loc::Buf(d)) => {
            check_range(what, s, n, scratch.len())?;
            check_range(what, d, n, buf.len())?;
            transpose_block(&scratch[s..s + n], &mut buf[d..d + n], rows, cols);
        }
        (Loc::Buf(s), Loc::Buf(d)) => transpose_within(buf, s, d, rows, cols)?,
        (Loc::Scratch(s), Loc::Scratch(d)) => transpose_within(scratch, s, d, rows, cols)?,
    }
    Ok(())
}

/// A block step between two disjoint regions of one slice, split apart with `split_at_mut`.
fn transpose_within(v: &mut [u64], s: usize, d: usize, rows: usize, cols: usize) -> Result<()> {
    let n = rows * cols;
    check_range("transpose block source", s, n, v.len())?;
    check_range("transpose block destination", d, n, v.len())?;
    if s < d + n && d < s + n {
        return Err(Error::OverlappingCopies {
            first: 0,
            first_kind: "src",
            first_start: s,
            first_end: s + n,
            second: 0,
            second_kind: "dst",
            second_start: d,
            second_end: d + n,
        });
    }
    if s < d {
        let (lo, hi) = v.split_at_mut(d);
        transpose_block(&lo[s..s + n], &mut hi[..n], rows, cols);
    } else {
        let (lo, hi) = v.split_at_mut(s);
        transpose_block(&hi[..n], &mut lo[d..d + n], rows, cols);
    }
    Ok(())
}

/// A raw pointer that rayon tasks may share because they write disjoint elements through it.
#[derive(Clone, Copy)]
struct SharedMut(*mut u64);

// SAFETY: `SharedMut` is only created in `transpose_block`, whose tasks write pairwise disjoint
// elements of one exclusively borrowed slice and never read through it; the borrow outlives the
// parallel loop, which joins before `transpose_block` returns.
unsafe impl Send for SharedMut {}
// SAFETY: as above: shared between tasks only to write disjoint elements.
unsafe impl Sync for SharedMut {}

impl SharedMut {
    /// The pointer (a method, so closures capture the `Send` wrapper and not the bare field).
    fn ptr(self) -> *mut u64 {
        self.0
    }
}

/// Out-of-place transpose: `dst[c * rows + r] = src[r * cols + c]` for a `rows x cols` block.
///
/// Parallel over tiles of [`TILE_ROWS`] rows; inside one, [`TILE_COLS`]-column tiles are
/// written column by column, so each write is a run of up to 64 consecutive elements and the
/// tile's rows stay in L1 while they are read. (4 x 4 register sub-tiles and 16 x 16 or
/// 32 x 32 tiles measured no better on the dev VM; the kernel is bound by memory, not
/// instructions.)
///
/// # Panics
/// If either slice is not `rows * cols` long (callers check ranges first).
pub(crate) fn transpose_block(src: &[u64], dst: &mut [u64], rows: usize, cols: usize) {
    assert!(src.len() == rows * cols && dst.len() == rows * cols, "transpose_block: slices must hold the block");
    let out = SharedMut(dst.as_mut_ptr());
    let row_tiles = rows.div_ceil(TILE_ROWS);
    (0..row_tiles).into_par_iter().for_each(|t| {
        let r0 = t * TILE_ROWS;
        let r1 = (r0 + TILE_ROWS).min(rows);
        for c0 in (0..cols).step_by(TILE_COLS) {
            for c in c0..(c0 + TILE_COLS).min(cols) {
                let base = c * rows;
                for r in r0..r1 {
                    // SAFETY: r < rows and c < cols, so `r * cols + c < src.len()` and
                    // `base + r < rows * cols = dst.len()`; the element (r, c) belongs to exactly
                    // one row tile `t`, so no two tasks write the same element, and nothing reads
                    // `dst` while the loop runs. `dst` is borrowed mutably for the whole call.
                    unsafe { *out.ptr().add(base + r) = *src.get_unchecked(r * cols + c) };
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use backend_api::AllocTracker;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::sync::Arc;

    fn allocator() -> Allocator {
        Allocator { tracker: Arc::new(AllocTracker::new()), limit: None }
    }

    #[test]
    fn tile_transpose_matches_the_index_definition() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for (rows, cols) in [(1, 1), (1, 7), (7, 1), (63, 17), (64, 16), (65, 33), (130, 5), (3, 200)] {
            let m: Vec<u64> = (0..rows * cols).map(|_| rng.random()).collect();
            let mut out = vec![0; m.len()];
            transpose_block(&m, &mut out, rows, cols);
            assert_eq!(out, naive_reference::transpose(&m, rows, cols), "{rows} x {cols}");
        }
    }

    #[test]
    fn in_place_matches_the_naive_transpose_with_bounded_scratch() {
        // Caps chosen so that blocks hold 1, 2, 4, ... rows: every path of the plan (several
        // blocks, long cycles chunked through scratch, tails, one block, trivial shapes) runs.
        // Values include non-canonical ones: the transpose moves bytes, never changes them.
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let shapes =
            [(1, 1), (1, 9), (9, 1), (2, 2), (8, 3), (16, 5), (33, 7), (64, 12), (100, 3), (256, 31), (37, 64)];
        for (rows, cols) in shapes {
            let shape = MatrixShape::new(rows, cols).unwrap();
            for run in [1usize, 2, 4, 16, 1 << 20] {
                let cap = (cols + 1) * run * 8;
                let m: Vec<u64> =
                    (0..rows * cols).map(|_| rng.random::<u64>() | (rng.random::<u64>() & 1) << 63).collect();
                let mut buf = m.clone();
                let a = allocator();
                transpose_in_place(&a, &mut buf, shape, cap).unwrap();
                assert_eq!(buf, naive_reference::transpose(&m, rows, cols), "{rows} x {cols}, cap {cap}");
                let counters = a.tracker.counters();
                assert!(counters.peak <= cap, "{rows} x {cols}: scratch peak {} > cap {cap}", counters.peak);
                assert_eq!(counters.live, 0);
            }
        }
    }

    #[test]
    fn bad_calls_are_rejected_before_anything_moves() {
        let a = allocator();
        let shape = MatrixShape::new(4, 4).unwrap();
        let mut buf: Vec<u64> = (0..15).collect();
        let err = transpose_in_place(&a, &mut buf, shape, 1 << 20).unwrap_err();
        assert!(matches!(err, Error::LengthMismatch { expected: 16, actual: 15, .. }), "{err}");
        let mut buf: Vec<u64> = (0..16).collect();
        let err = transpose_in_place(&a, &mut buf, shape, 39).unwrap_err();
        assert!(matches!(err, Error::ScratchTooSmall { cap: 39, cols: 4, min: 40 }), "{err}");
        assert_eq!(buf, (0..16).collect::<Vec<_>>());
        assert_eq!(a.tracker.counters().allocations, 0);
    }
}
