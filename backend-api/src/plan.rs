//! The in-place transpose plan: pure, backend-independent, so every backend executes the same
//! sequence of moves.
//!
//! A `rows x cols` row-major matrix becomes column-major inside its own buffer, with at most
//! [`TransposeGeometry::scratch_bytes`] of extra memory. Following the design of lambda_vm PR #956
//! ("transpose the fused commit's LDE in place"):
//!
//! 1. **Geometry.** Rows are cut into `full_blocks` blocks of `run_rows = R` rows (a power of two,
//!    the largest with `(cols + 1) * R * 8 <= cap`), plus a `tail_rows = T < R` row tail when `R`
//!    does not divide `rows`. A *run* is `R` consecutive rows of one column.
//! 2. **Block pass.** Each full block is transposed (out of place, by a tiled kernel) into its
//!    `cols` runs, through one spare block of scratch: block 0 -> scratch, block `b` -> slot
//!    `b - 1`, scratch -> the last slot. Slot `s` then holds block `(s + 1) mod full_blocks`.
//! 3. **Run pass.** The runs are permuted to their column-major positions cycle by cycle. A cycle
//!    that fits the scratch moves in two batches (runs -> scratch, scratch -> destinations); a
//!    longer one is shifted along in chunks. Short cycles share batches while scratch lasts. Every
//!    batch is a set of independent copies, so a backend may run a batch in any order or at once.
//! 4. **Tail** (only when `T > 0`). The tail rows are transposed through scratch first; after the
//!    run pass the top columns are spread out to stride `rows` and the tail columns dropped in.
//!    This path is for odd shapes; power-of-two row counts never take it.
//!
//! Steps run in order; the copies inside one [`Step::Copies`] are independent. A device backend
//! executes the plan through its [`schedule`], which composes the run pass's two moves per run
//! into one.

use crate::error::{Error, Result};

pub mod schedule;
use crate::shape::{ELEM_BYTES, MatrixShape};

/// Default scratch cap: 256 MiB.
pub const DEFAULT_SCRATCH_CAP: usize = 256 << 20;

/// A location a step reads or writes: an element offset in the matrix buffer or in scratch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Loc {
    /// Offset in the matrix buffer, in elements.
    Buf(usize),
    /// Offset in the scratch buffer, in elements.
    Scratch(usize),
}

impl Loc {
    /// This location moved `by` elements further.
    pub fn offset_by(self, by: usize) -> Loc {
        match self {
            Loc::Buf(o) => Loc::Buf(o + by),
            Loc::Scratch(o) => Loc::Scratch(o + by),
        }
    }

    /// The offset, whichever buffer it is in.
    pub fn offset(self) -> usize {
        match self {
            Loc::Buf(o) | Loc::Scratch(o) => o,
        }
    }
}

/// One copy of a plan step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Move {
    /// Where the elements come from.
    pub src: Loc,
    /// Where they go.
    pub dst: Loc,
    /// How many elements.
    pub len: usize,
}

/// One step of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Out-of-place transpose of a `rows x cols` row-major block at `src` into `cols` runs of
    /// `rows` elements (column-major) at `dst`. The two regions never overlap.
    TransposeBlock {
        /// The row-major block.
        src: Loc,
        /// The column-major destination.
        dst: Loc,
        /// Rows in the block.
        rows: usize,
    },
    /// Independent copies: no destination overlaps another range of the step.
    Copies(Vec<Move>),
}

/// The numbers of a plan, computable for any shape without building the steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransposeGeometry {
    /// The matrix.
    pub shape: MatrixShape,
    /// Rows per block, which is also the run length `R`: a power of two, or the whole row count
    /// when the matrix fits in one block.
    pub run_rows: usize,
    /// Full blocks of `R` rows.
    pub full_blocks: usize,
    /// Rows left after the full blocks, `rows - full_blocks * R < R`.
    pub tail_rows: usize,
    /// Scratch the plan uses, in elements: one block plus one run, `(cols + 1) * R`.
    pub scratch_elems: usize,
}

impl TransposeGeometry {
    /// The geometry for `shape` under a scratch cap of `cap` bytes.
    ///
    /// # Errors
    /// [`Error::ScratchTooSmall`] when the cap cannot hold one block of one row plus one run;
    /// [`Error::InvalidShape`] when one row plus one run, `(cols + 1) * 8` B, overflows `usize`.
    pub fn new(shape: MatrixShape, cap: usize) -> Result<Self> {
        let per_row = (shape.cols() + 1)
            .checked_mul(ELEM_BYTES)
            .ok_or_else(|| Error::InvalidShape(format!("{shape} overflows")))?;
        let max_rows = cap / per_row;
        if max_rows == 0 {
            return Err(Error::ScratchTooSmall { cap, cols: shape.cols(), min: per_row });
        }
        // The largest power of two within the cap, and no larger than the matrix needs.
        let run_rows = (1usize << max_rows.ilog2()).min(shape.rows().next_power_of_two());
        let run_rows = if run_rows > shape.rows() { shape.rows() } else { run_rows };
        let full_blocks = shape.rows() / run_rows;
        let tail_rows = shape.rows() - full_blocks * run_rows;
        Ok(Self { shape, run_rows, full_blocks, tail_rows, scratch_elems: (shape.cols() + 1) * run_rows })
    }

    /// Scratch the plan uses, in bytes (never above the cap it was made with).
    pub fn scratch_bytes(&self) -> usize {
        self.scratch_elems * ELEM_BYTES
    }

    /// Blocks including the tail block, if any.
    pub fn blocks(&self) -> usize {
        self.full_blocks + usize::from(self.tail_rows > 0)
    }

    /// Runs the run pass permutes, `full_blocks * cols`.
    pub fn runs(&self) -> usize {
        self.full_blocks * self.shape.cols()
    }
}

/// A complete in-place transpose: the geometry and the steps to execute in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransposePlan {
    /// The numbers.
    pub geometry: TransposeGeometry,
    /// The moves, in order.
    pub steps: Vec<Step>,
}

impl TransposePlan {
    /// Builds the plan for `shape` under a scratch cap of `cap` bytes.
    ///
    /// Memory and time are `O(full_blocks * cols)` for the run pass, plus `O(cols * rows / R)`
    /// steps for a tail.
    ///
    /// # Errors
    /// As [`TransposeGeometry::new`].
    pub fn new(shape: MatrixShape, cap: usize) -> Result<Self> {
        let geometry = TransposeGeometry::new(shape, cap)?;
        let mut steps = Vec::new();
        let g = &geometry;
        let (cols, r, fb, t) = (shape.cols(), g.run_rows, g.full_blocks, g.tail_rows);
        let block = r * cols;
        let top = fb * block;
        // One row or one column: row-major and column-major are the same bytes.
        let trivial = cols == 1 || shape.rows() == 1;
        if !trivial {
            if t > 0 {
                // Tail rows -> column-major through scratch, back into place.
                steps.push(Step::TransposeBlock { src: Loc::Buf(top), dst: Loc::Scratch(0), rows: t });
                steps.push(Step::Copies(vec![Move { src: Loc::Scratch(0), dst: Loc::Buf(top), len: t * cols }]));
            }
            block_pass(&mut steps, fb, block, r);
            run_pass(&mut steps, g);
            if t > 0 {
                merge_tail(&mut steps, g);
            }
        }
        Ok(Self { geometry, steps })
    }

    /// Number of [`Step::Copies`] batches.
    pub fn batches(&self) -> usize {
        self.steps.iter().filter(|s| matches!(s, Step::Copies(_))).count()
    }

    /// Number of copies across all batches.
    pub fn copies(&self) -> usize {
        self.steps.iter().map(|s| if let Step::Copies(m) = s { m.len() } else { 0 }).sum()
    }

    /// Executes the plan on a host model: `buf` is the matrix, `scratch` at least
    /// `scratch_elems` long. Every backend's device execution must agree with this.
    ///
    /// # Panics
    /// If a step reads or writes out of bounds (a bug in the plan, caught by the tests).
    pub fn execute_host<T: Copy>(&self, buf: &mut [T], scratch: &mut [T]) {
        let cols = self.geometry.shape.cols();
        for step in &self.steps {
            match step {
                Step::TransposeBlock { src, dst, rows } => {
                    let n = rows * cols;
                    let src_vals: Vec<T> = read(buf, scratch, *src, n).to_vec();
                    let out = write(buf, scratch, *dst, n);
                    for rr in 0..*rows {
                        for c in 0..cols {
                            out[c * rows + rr] = src_vals[rr * cols + c];
                        }
                    }
                }
                Step::Copies(moves) => {
                    // Independent copies: reading them all first must not change the result.
                    let vals: Vec<Vec<T>> = moves.iter().map(|m| read(buf, scratch, m.src, m.len).to_vec()).collect();
                    for (m, v) in moves.iter().zip(vals) {
                        write(buf, scratch, m.dst, m.len).copy_from_slice(&v);
                    }
                }
            }
        }
    }
}

fn read<'a, T>(buf: &'a [T], scratch: &'a [T], loc: Loc, len: usize) -> &'a [T] {
    match loc {
        Loc::Buf(o) => &buf[o..o + len],
        Loc::Scratch(o) => &scratch[o..o + len],
    }
}

fn write<'a, T>(buf: &'a mut [T], scratch: &'a mut [T], loc: Loc, len: usize) -> &'a mut [T] {
    match loc {
        Loc::Buf(o) => &mut buf[o..o + len],
        Loc::Scratch(o) => &mut scratch[o..o + len],
    }
}

/// Block 0 -> scratch, block b -> slot b-1, scratch -> last slot.
fn block_pass(steps: &mut Vec<Step>, fb: usize, block: usize, r: usize) {
    steps.push(Step::TransposeBlock { src: Loc::Buf(0), dst: Loc::Scratch(0), rows: r });
    for b in 1..fb {
        steps.push(Step::TransposeBlock { src: Loc::Buf(b * block), dst: Loc::Buf((b - 1) * block), rows: r });
    }
    steps.push(Step::Copies(vec![Move { src: Loc::Scratch(0), dst: Loc::Buf((fb - 1) * block), len: block }]));
}

/// Where the run in slot `s` must go, after the block pass's rotation.
fn run_destination(s: usize, fb: usize, cols: usize) -> usize {
    let (slot_block, c) = (s / cols, s % cols);
    let block = (slot_block + 1) % fb;
    c * fb + block
}

/// Permutes the runs of the top `full_blocks * R` rows cycle by cycle.
fn run_pass(steps: &mut Vec<Step>, g: &TransposeGeometry) {
    let (cols, r, fb) = (g.shape.cols(), g.run_rows, g.full_blocks);
    let runs = fb * cols;
    let scratch_runs = g.scratch_elems / r;
    let mut visited = vec![false; runs];
    // The batches under construction: short cycles are packed together while scratch lasts.
    let mut to_scratch: Vec<Move> = Vec::new();
    let mut from_scratch: Vec<Move> = Vec::new();
    let mut used = 0usize;
    let mut cycle = Vec::new();
    for start in 0..runs {
        if visited[start] {
            continue;
        }
        cycle.clear();
        let mut s = start;
        while !visited[s] {
            visited[s] = true;
            cycle.push(s);
            s = run_destination(s, fb, cols);
        }
        if cycle.len() == 1 {
            continue; // a fixed point
        }
        if cycle.len() <= scratch_runs {
            if used + cycle.len() > scratch_runs {
                flush(steps, &mut to_scratch, &mut from_scratch);
                used = 0;
            }
            for &s in &cycle {
                let d = run_destination(s, fb, cols);
                to_scratch.push(Move { src: Loc::Buf(s * r), dst: Loc::Scratch(used * r), len: r });
                from_scratch.push(Move { src: Loc::Scratch(used * r), dst: Loc::Buf(d * r), len: r });
                used += 1;
            }
        } else {
            flush(steps, &mut to_scratch, &mut from_scratch);
            used = 0;
            long_cycle(steps, &cycle, r, scratch_runs);
        }
    }
    flush(steps, &mut to_scratch, &mut from_scratch);
}

fn flush(steps: &mut Vec<Step>, a: &mut Vec<Move>, b: &mut Vec<Move>) {
    if !a.is_empty() {
        steps.push(Step::Copies(std::mem::take(a)));
        steps.push(Step::Copies(std::mem::take(b)));
    }
}

/// A cycle `c[0] -> c[1] -> ... -> c[L-1] -> c[0]` longer than the scratch: the content of slot
/// `c[i]` moves to `c[i+1]`. Scratch run 0 keeps `c[L-1]`; the others carry chunks of `K` runs,
/// from the end of the cycle backwards, so each chunk only overwrites slots already read.
fn long_cycle(steps: &mut Vec<Step>, cycle: &[usize], r: usize, scratch_runs: usize) {
    let len = cycle.len();
    let k = scratch_runs - 1;
    let mut saved = Some(Move { src: Loc::Buf(cycle[len - 1] * r), dst: Loc::Scratch(0), len: r });
    // Chunks cover i in [lo, hi) for the moves c[i] -> c[i+1], i = 0..len-1.
    let mut hi = len - 1;
    while hi > 0 {
        let lo = hi.saturating_sub(k);
        let mut to: Vec<Move> = saved.take().into_iter().collect();
        let mut from = Vec::with_capacity(hi - lo + 1);
        for (j, i) in (lo..hi).enumerate() {
            let sc = Loc::Scratch((1 + j) * r);
            to.push(Move { src: Loc::Buf(cycle[i] * r), dst: sc, len: r });
            from.push(Move { src: sc, dst: Loc::Buf(cycle[i + 1] * r), len: r });
        }
        if lo == 0 {
            from.push(Move { src: Loc::Scratch(0), dst: Loc::Buf(cycle[0] * r), len: r });
        }
        steps.push(Step::Copies(to));
        steps.push(Step::Copies(from));
        hi = lo;
    }
}

/// After the run pass the buffer is `[top columns (P each)][tail columns (T each)]`, with
/// `P = full_blocks * R`. Spread the top columns to stride `rows` and drop the tails in.
fn merge_tail(steps: &mut Vec<Step>, g: &TransposeGeometry) {
    let (rows, cols, t) = (g.shape.rows(), g.shape.cols(), g.tail_rows);
    let p = rows - t;
    let tails = t * cols;
    // 1. The tail columns go to scratch, out of the way.
    steps.push(Step::Copies(vec![Move { src: Loc::Buf(p * cols), dst: Loc::Scratch(0), len: tails }]));
    // 2. Top column c moves from c*P to c*rows, last column first, so a move only overwrites
    //    slots already moved out. An overlapping move (shift < P) bounces through the free
    //    scratch in chunks, from the column's end backwards.
    let free = g.scratch_elems - tails;
    for c in (1..cols).rev() {
        let (src, dst) = (c * p, c * rows);
        let shift = dst - src;
        if shift >= p {
            steps.push(Step::Copies(vec![Move { src: Loc::Buf(src), dst: Loc::Buf(dst), len: p }]));
            continue;
        }
        let mut end = p;
        while end > 0 {
            // Direct copies are safe in chunks up to the shift; otherwise bounce through scratch.
            let direct = shift >= free;
            let chunk = end.min(if direct { shift } else { free });
            let from = end - chunk;
            if direct {
                steps.push(Step::Copies(vec![Move {
                    src: Loc::Buf(src + from),
                    dst: Loc::Buf(dst + from),
                    len: chunk,
                }]));
            } else {
                let bounce = Loc::Scratch(tails);
                steps.push(Step::Copies(vec![Move { src: Loc::Buf(src + from), dst: bounce, len: chunk }]));
                steps.push(Step::Copies(vec![Move { src: bounce, dst: Loc::Buf(dst + from), len: chunk }]));
            }
            end = from;
        }
    }
    // 3. Tail column c lands right after top column c.
    let moves = (0..cols).map(|c| Move { src: Loc::Scratch(c * t), dst: Loc::Buf(c * rows + p), len: t }).collect();
    steps.push(Step::Copies(moves));
}

#[cfg(test)]
mod tests;
