//! The in-place transpose: executes [`backend_api::plan::TransposePlan`] in order.
//!
//! `TransposeBlock` steps run the tiled kernel. The plan runs through its fused schedule
//! ([`backend_api::plan::schedule`]), which composes the run pass's batch pairs into parallel
//! assignments of whole aligned runs. One `transpose_fused_runs` launch executes each: block `w`
//! owns a window of offsets of every slot, reads all its sources into shared memory, then writes
//! all destinations; since whole aligned slots only ever move to whole aligned slots, no two
//! blocks touch one element. A run thus moves once instead of twice (into scratch and out again).
//! Any other batch is one gather launch (`copy_gather`). (lambda_vm PR #956 runs the batches as
//! `cuMemcpyBatchAsync` calls on the copy engine; that route, and one `cuMemcpyDtoDAsync` per
//! copy, measured slower here and were removed: BENCHMARKS.md.)
//!
//! The scratch (`geometry.scratch_elems`, within the cap) is allocated before any byte moves, so an
//! out-of-memory leaves the matrix untouched; moves travel as kernel parameters, so nothing else is
//! allocated.

use backend_api::DeviceBuffer as _;
use backend_api::plan::schedule::{FuseLimits, Launch, ScheduleCache, ScheduleKey, schedule_each};
use backend_api::plan::{Loc, Step, TransposePlan};
use backend_api::{ELEM_BYTES, MatrixShape, Result, validate};
use cudarc::driver::sys;

use crate::context::Device;
use crate::copy::{Gather, LOC_B1, gather};
use crate::driver;
use crate::hash::{BlockPassLeaves, Rows};
use crate::launch::{KernelParam, LaunchArgs, LaunchConfig};
use crate::memory::CudaBuffer;
use crate::module::Source;

/// Net moves one fused launch carries (`FUSE_MAX` in transpose.cu).
pub(crate) const FUSE_MAX: usize = 384;
/// Shared memory a fused launch aims for: the window (elements of each slot one block owns) is the
/// largest power of two in [16, 4096] with `moves * window * 8` within it. 48 KiB lets four
/// blocks share a multiprocessor, so one block's loads overlap another's stores.
const FUSE_SHARED: usize = 48 << 10;
/// What one fused launch holds: [`FUSE_MAX`] moves anywhere in the matrix and the scratch.
const LIMITS: FuseLimits = FuseLimits::moves(FUSE_MAX);
/// Recent schedules (the host composition of 2^22 x 316 takes tens of milliseconds).
static SCHEDULES: ScheduleCache = ScheduleCache::new(8);

/// The parameter block of `transpose_fused_runs_*`; layout identical to `FusedRuns` in transpose.cu.
#[repr(C)]
#[derive(Clone, Copy)]
struct FusedRuns {
    n: u64,
    unit: u64,
    log_win: u64,
    src: [u64; FUSE_MAX],
    dst: [u64; FUSE_MAX],
}

// SAFETY: `#[repr(C)]` u64 fields and arrays, the layout of transpose.cu's `FusedRuns` (n, unit,
// log_win, src[FUSE_MAX], dst[FUSE_MAX]); no padding.
unsafe impl KernelParam for FusedRuns {}
const _: () = assert!(std::mem::size_of::<FusedRuns>() == (3 + 2 * FUSE_MAX) * 8, "FusedRuns is unpadded u64s");

/// [`backend_api::Backend::transpose_in_place`].
pub(crate) fn transpose_in_place(device: &Device, buf: &mut CudaBuffer, shape: MatrixShape, cap: usize) -> Result<()> {
    transpose_hashing(device, buf, shape, cap, None)
}

/// [`transpose_in_place`] whose block pass also hashes `leaves` (when given), each block's rows
/// in the launch that moves the block before it ([`BlockPassLeaves`]), after the first blocks'
/// rows hashed up front; the caller validated the leaves against `shape`. The plan of a row count
/// that blocks do not divide transposes a tail of rows through scratch first; there, and wherever
/// the block steps do not cover the rows in order before any other step, the leaves are hashed
/// in one pass first and the transpose runs as usual.
pub(crate) fn transpose_hashing(
    device: &Device,
    buf: &mut CudaBuffer,
    shape: MatrixShape,
    cap: usize,
    leaves: Option<&BlockPassLeaves>,
) -> Result<()> {
    let geometry = validate::transpose(shape, buf.len(), cap)?;
    if shape.rows() == 1 || shape.cols() == 1 {
        // One row or one column: row-major and column-major are the same bytes (an empty plan).
        // The leaves are hashed in one launch that moves nothing.
        return leaves.map_or(Ok(()), |l| l.hash_rows(device, buf, 0, shape.rows(), shape.cols()));
    }
    // First: an out-of-memory here leaves the matrix as it was.
    let scratch = CudaBuffer::alloc(buf.device(), geometry.scratch_elems)?;
    let buf = &*buf;
    let key = ScheduleKey::new(&geometry, LIMITS);
    let cached = SCHEDULES.get(&key);
    // The leaves of the first blocks go first, before the host builds or looks up the plan: one
    // block when the schedule is cached; more when the host still has to build the plan
    // ([`BlockPassLeaves::cold_prefix_blocks`]), so that the device hashes meanwhile instead of
    // waiting for the first launch of the block pass.
    let hashed = match leaves {
        Some(l) if geometry.tail_rows == 0 => {
            let blocks = if cached.is_some() { 1 } else { l.cold_prefix_blocks(geometry.full_blocks) };
            let count = blocks * geometry.run_rows;
            l.hash_rows(device, buf, 0, count, shape.cols())?;
            count
        }
        _ => 0,
    };
    match cached {
        Some(launches) => {
            let steps = launches.iter().map(launch_block);
            let bases = Bases::new(device, buf, &scratch, shape, leaves, hashed, steps)?;
            launches.iter().try_for_each(|l| bases.run(device, l))?
        }
        None => {
            let plan = TransposePlan::new(shape, cap)?;
            let steps = plan.steps.iter().map(step_block);
            let bases = Bases::new(device, buf, &scratch, shape, leaves, hashed, steps)?;
            // Launch each piece as soon as it is scheduled: the block pass runs on the device while
            // the host composes the run pass.
            let mut launches = Vec::new();
            schedule_each(&plan, &LIMITS, &mut |l| {
                bases.run(device, &l)?;
                launches.push(l);
                Ok(())
            })?;
            SCHEDULES.insert(key, launches);
        }
    }
    // `scratch` is freed here, ordered after the launches that use it.
    drop(scratch);
    Ok(())
}

/// The two allocations a plan addresses, borrowed (so live) for as long as launches are queued
/// through it; the plan's locations and lengths lie inside them (the plan's invariant, checked
/// against its host model by its own tests).
struct Bases<'a> {
    buf: &'a CudaBuffer,
    scratch: &'a CudaBuffer,
    cols: usize,
    /// Leaves the block pass hashes, if any.
    leaves: Option<HashingBlocks<'a>>,
}

/// The leaves a block pass hashes: the launch that moves block `j` hashes block `j + 1` when
/// that block starts at or after `hashed`.
struct HashingBlocks<'a> {
    leaves: &'a BlockPassLeaves,
    /// The plan's blocks, `(first row, rows)`, in row order.
    blocks: Vec<(usize, usize)>,
    /// Rows `[0, hashed)` had their leaves queued before the block pass.
    hashed: usize,
}

/// A plan step's block, `(source, rows)`, if it is a block transpose.
fn step_block(step: &Step) -> Option<(Loc, usize)> {
    match step {
        Step::TransposeBlock { src, rows, .. } => Some((*src, *rows)),
        Step::Copies(_) => None,
    }
}

/// A launch's block, `(source, rows)`, if it is a block transpose.
fn launch_block(launch: &Launch) -> Option<(Loc, usize)> {
    match launch {
        Launch::Block { src, rows, .. } => Some((*src, *rows)),
        Launch::Copies(_) | Launch::Fused { .. } => None,
    }
}

/// The blocks `(first row, rows)` of a plan whose block transposes, in order (`None` for any other
/// step), read the rows of a `rows x cols` matrix from the matrix itself, each row once, in order,
/// before any other step moves a byte; `None` for any other plan. Then each block's leaves can be
/// hashed beside the launch that moves the block before it. The plans of row counts that the
/// blocks divide have this form; a plan with a tail does not.
fn blocks_in_row_order(
    steps: impl Iterator<Item = Option<(Loc, usize)>>,
    rows: usize,
    cols: usize,
) -> Option<Vec<(usize, usize)>> {
    let mut blocks = Vec::new();
    let mut covered = 0;
    let mut other_step_seen = false;
    for step in steps {
        match step {
            Some((Loc::Buf(offset), n)) if !other_step_seen && offset == covered * cols && n > 0 => {
                blocks.push((covered, n));
                covered += n;
            }
            Some(_) => return None,
            None => other_step_seen = true,
        }
    }
    (covered == rows).then_some(blocks)
}

impl<'a> Bases<'a> {
    /// Bases for a plan whose block steps are `steps`, with the leaves of rows `[0, hashed)`
    /// already queued, hashing the rest of `leaves` (if any) beside its block pass when the
    /// blocks allow it ([`blocks_in_row_order`]): each block launch hashes the next block, unless
    /// that block's rows were hashed already. Otherwise the remaining leaves are hashed now, in
    /// one launch that moves nothing, and the transpose runs without them.
    fn new(
        device: &Device,
        buf: &'a CudaBuffer,
        scratch: &'a CudaBuffer,
        shape: MatrixShape,
        leaves: Option<&'a BlockPassLeaves>,
        hashed: usize,
        steps: impl Iterator<Item = Option<(Loc, usize)>>,
    ) -> Result<Self> {
        let cols = shape.cols();
        let Some(l) = leaves.filter(|_| hashed < shape.rows()) else {
            // No leaves, or all of them queued already: the plain block pass.
            return Ok(Self { buf, scratch, cols, leaves: None });
        };
        // Fused only when the rows hashed so far are the plan's first whole blocks (at least the
        // first: a block launch hashes only blocks after the one it moves).
        let whole_blocks = |b: &Vec<(usize, usize)>| hashed > 0 && b.iter().any(|&(f, _)| f == hashed);
        match blocks_in_row_order(steps, shape.rows(), cols).filter(whole_blocks) {
            Some(blocks) => Ok(Self { buf, scratch, cols, leaves: Some(HashingBlocks { leaves: l, blocks, hashed }) }),
            None => {
                l.hash_rows(device, buf, hashed, shape.rows() - hashed, cols)?;
                Ok(Self { buf, scratch, cols, leaves: None })
            }
        }
    }

    fn addr(&self, loc: Loc) -> sys::CUdeviceptr {
        match loc {
            Loc::Buf(o) => self.buf.ptr_at(o),
            Loc::Scratch(o) => self.scratch.ptr_at(o),
        }
    }

    /// Queues one launch of the kernel route. Plan locations are inside the matrix or the scratch
    /// (the plan's own tests check it against its host model).
    fn run(&self, device: &Device, launch: &Launch) -> Result<()> {
        match launch {
            Launch::Block { src: Loc::Buf(offset), dst, rows } if self.leaves.is_some() => {
                let HashingBlocks { leaves, blocks, hashed } = self.leaves.as_ref().expect("checked by the guard");
                let first = offset / self.cols;
                let j = blocks.binary_search_by_key(&first, |b| b.0).map_err(|_| backend_api::Error::Device {
                    backend: driver::BACKEND,
                    op: "hash_leaves_then_transpose".into(),
                    source: format!("the transpose schedule moves a block at row {first} that its plan does not have")
                        .into(),
                })?;
                let next = blocks.get(j + 1).filter(|&&(first, _)| first >= *hashed).map(|&(first, count)| Rows {
                    src: self.buf.ptr_at(first * self.cols),
                    first,
                    count,
                });
                let block = Rows { src: self.buf.ptr_at(*offset), first, count: *rows };
                // SAFETY: this block and the next are rows of the matrix that no earlier launch
                // moved ([`blocks_in_row_order`]: blocks move in row order, each one's destination
                // being scratch or an earlier block); the destination is disjoint from both and
                // from every other range of this launch (plan invariant).
                unsafe { leaves.launch(device, next, Some((block, self.addr(*dst))), self.cols) }
            }
            Launch::Block { src, dst, rows } => {
                let kernel = device.kernel(Source::Transpose, "transpose_tile", 0)?;
                let (s, d, r, c) = (self.addr(*src), self.addr(*dst), *rows as u64, self.cols as u64);
                let tiles = rows.div_ceil(32) * self.cols.div_ceil(32);
                let grid = tiles.min(device.sm_count as usize * 16).max(1) as u32;
                let args = LaunchArgs::new().arg(&s).arg(&d).arg(&r).arg(&c);
                let config = LaunchConfig { grid: (grid, 1, 1), block: (32, 8, 1), shared: 0 };
                // SAFETY: (const u64*, u64*, u64, u64) as transpose_tile declares; the block and
                // its destination are disjoint ranges of the matrix or scratch (plan invariant).
                unsafe { device.launch(&kernel, config, args) }
            }
            Launch::Copies(moves) => {
                let list: Vec<Gather> =
                    moves.iter().map(|m| Gather { src: encode(m.src), dst: encode(m.dst), len: m.len }).collect();
                // SAFETY: plan moves lie inside the matrix or the scratch, and the moves of one
                // batch are independent (plan invariant).
                unsafe { gather(device, self.buf.ptr(), self.scratch.ptr(), &list) }
            }
            Launch::Fused { unit, moves } => {
                let vec2 = unit % 2 == 0;
                let name = if vec2 { "transpose_fused_runs_v2" } else { "transpose_fused_runs_v1" };
                let win = fuse_window(moves.len());
                let shared = moves.len() * win * ELEM_BYTES;
                let kernel = device.kernel(Source::Transpose, name, shared)?;
                let mut block = Box::new(FusedRuns {
                    n: moves.len() as u64,
                    unit: *unit as u64,
                    log_win: win.trailing_zeros() as u64,
                    src: [0; FUSE_MAX],
                    dst: [0; FUSE_MAX],
                });
                for (k, (s, d)) in moves.iter().enumerate() {
                    block.src[k] = encode(*s);
                    block.dst[k] = encode(*d);
                }
                let windows = unit.div_ceil(win);
                let grid = windows.min(device.sm_count as usize * 16).max(1) as u32;
                let (b, s) = (self.buf.ptr(), self.scratch.ptr());
                let args = LaunchArgs::new().arg(&b).arg(&s).arg(&*block);
                // SAFETY: (u64*, u64*, FusedRuns) as declared; every slot is a whole aligned
                // `unit`-element range inside the matrix or the scratch (schedule invariant), at
                // most FUSE_MAX of them (LIMITS), and the shared memory holds `n * WIN` elements.
                unsafe { device.launch(&kernel, LaunchConfig::linear(grid, 256, shared as u32), args) }
            }
        }
    }
}

/// The fused kernel's window for `moves` slots: a power of two in [16, 4096].
fn fuse_window(moves: usize) -> usize {
    let fit = FUSE_SHARED / (moves.max(1) * ELEM_BYTES);
    (1usize << fit.max(1).ilog2()).clamp(16, 4096)
}

fn encode(loc: Loc) -> u64 {
    match loc {
        Loc::Buf(o) => o as u64,
        Loc::Scratch(o) => o as u64 | LOC_B1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window is a power of two in [16, 4096], and a full launch's shared memory stays within
    /// the target wherever the floor of 16 allows.
    #[test]
    fn fuse_window_fits_the_shared_memory() {
        for moves in 0..=FUSE_MAX {
            let w = fuse_window(moves);
            assert!(w.is_power_of_two() && (16..=4096).contains(&w), "{moves} moves: window {w}");
            if w > 16 {
                assert!(moves * w * ELEM_BYTES <= FUSE_SHARED, "{moves} moves: window {w} over the shared target");
            }
            if w < 4096 {
                assert!(moves.max(1) * 2 * w * ELEM_BYTES > FUSE_SHARED, "{moves} moves: window {w} not the largest");
            }
        }
        assert_eq!((fuse_window(384), fuse_window(1)), (16, 4096));
    }

    /// The plans whose blocks divide the rows move their blocks first, in row order, from the
    /// matrix itself: the fused block pass can hash each block beside the move of the one before.
    /// A plan with a tail cannot, nor can any sequence out of order, with a gap, with a block read
    /// from scratch or with a block after another step.
    #[test]
    fn fused_leaves_ride_only_plans_that_move_blocks_first_in_row_order() {
        let blocks = |rows: usize, cols: usize, k: usize| {
            let shape = MatrixShape::new(rows, cols).unwrap();
            let plan = TransposePlan::new(shape, (cols + 1) * ELEM_BYTES * k).unwrap();
            blocks_in_row_order(plan.steps.iter().map(step_block), rows, cols)
        };
        assert_eq!(blocks(64, 5, 8), Some((0..8).map(|j| (8 * j, 8)).collect()));
        assert_eq!(blocks(1 << 12, 316, 1 << 9), Some((0..8).map(|j| (512 * j, 512)).collect()));
        assert_eq!(blocks(64, 5, 64), Some(vec![(0, 64)]), "one block");
        assert_eq!(blocks(33, 9, 8), None, "a tail");
        // The schedule's launches carry the plan's blocks unchanged.
        let shape = MatrixShape::new(256, 35).unwrap();
        let plan = TransposePlan::new(shape, 36 * ELEM_BYTES * 32).unwrap();
        let mut launches = Vec::new();
        schedule_each(&plan, &LIMITS, &mut |l| {
            launches.push(l);
            Ok(())
        })
        .unwrap();
        assert_eq!(
            blocks_in_row_order(launches.iter().map(launch_block), 256, 35),
            Some((0..8).map(|j| (32 * j, 32)).collect())
        );

        let b = |row: usize, n: usize| Some((Loc::Buf(row * 3), n));
        let run = |steps: Vec<Option<(Loc, usize)>>| blocks_in_row_order(steps.into_iter(), 8, 3);
        assert_eq!(run(vec![b(0, 4), b(4, 4), None]), Some(vec![(0, 4), (4, 4)]));
        assert_eq!(run(vec![b(4, 4), b(0, 4), None]), None, "out of order");
        assert_eq!(run(vec![b(0, 4), b(5, 3), None]), None, "a gap");
        assert_eq!(run(vec![b(0, 4), None, b(4, 4)]), None, "a block after another step");
        assert_eq!(run(vec![b(0, 4), Some((Loc::Scratch(12), 4))]), None, "a block read from scratch");
        assert_eq!(run(vec![b(0, 4), None]), None, "rows left over");
        assert_eq!(run(vec![b(0, 4), b(4, 0), b(4, 4)]), None, "an empty block");
    }
}
