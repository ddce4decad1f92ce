//! In-place transpose: executes the schedule of the shared [`TransposePlan`]
//! ([`backend_api::plan::schedule`], unfused), launch by launch.
//!
//! - `Launch::Block` runs the tiled kernel of `shaders/wgsl/transpose.wgsl` (32 x 32 elements
//!   through workgroup memory).
//! - `Launch::Copies`, every batch, runs the copy shader ([`crate::copy`]).
//!
//! The matrix and the scratch are one virtual space (matrix segments first), so a launch may read
//! one and write the other. wgpu orders dispatches that share a buffer, so launches run in order.
//! A copy batch carries its table in the recorder's arena; the recorder reserves a table and its
//! parameter block together, so that a tiny scratch cap's thousands of small batches (each one a
//! dispatch) never find their table in another submission's arena.
//! Submissions: the block pass is submitted as soon as it is recorded, so that the GPU works
//! while the host records (or, the first time for a shape, composes) the run pass; schedules are
//! kept per shape and scratch.

use std::sync::Arc;

use backend_api::plan::schedule::{FuseLimits, Launch, ScheduleCache, ScheduleKey, schedule_each};
use backend_api::plan::{Loc, TransposePlan};
use backend_api::{DeviceBuffer as _, Error, MatrixShape, Result, validate};

use crate::context::{Gpu, Kernel, Module, NAME, Recorder, Space, Table, Window};
use crate::copy::{Move, record_moves};
use crate::memory::{self, WgpuBuffer};

const TRANSPOSE: Kernel = Kernel { module: Module::Transpose, entry: "transpose_block", items_per_group: 1 };
const TILE: usize = 32;
/// Recent schedules (the host composition of 2^22 x 316 takes tens of milliseconds).
static SCHEDULES: ScheduleCache = ScheduleCache::new(8);

/// The kernels [`transpose_in_place`] launches: the block transpose and the copy shader.
pub(crate) const KERNELS: [Kernel; 2] = [TRANSPOSE, crate::copy::COPY];

/// [`backend_api::Backend::transpose_in_place`].
pub(crate) fn transpose_in_place(gpu: &Arc<Gpu>, buf: &mut WgpuBuffer, shape: MatrixShape, cap: usize) -> Result<()> {
    let op = "transpose_in_place";
    let geometry = validate::transpose(shape, buf.len(), cap)?;
    if shape.rows() == 1 || shape.cols() == 1 {
        // One row or one column: row-major and column-major are the same bytes (an empty plan).
        return gpu.check(op);
    }
    // First: an out-of-memory here leaves the matrix as it was.
    let scratch = memory::alloc(gpu, geometry.scratch_elems)?;
    let (space, bases) = Space::new(gpu, &[&buf.segs, &scratch.segs])?;
    let at = |loc: Loc| match loc {
        Loc::Buf(o) => o as u64,
        Loc::Scratch(o) => bases[1] as u64 + o as u64,
    };
    let mut rec = gpu.recorder(op);
    // Every run-pass batch runs as it is, through the copy shader: fused launches (each run moving
    // once) measured 2x slower on the H200.
    let limits = FuseLimits::NONE;
    let key = ScheduleKey::new(&geometry, limits);
    let mut after_block = false;
    let mut run = |rec: &mut Recorder<'_>, launch: &Launch| -> Result<()> {
        let block = matches!(launch, Launch::Block { .. });
        if after_block && !block {
            // The block pass goes to the GPU while the host records the rest.
            rec.flush()?;
        }
        after_block = block;
        match launch {
            Launch::Block { src, dst, rows } => record_block(gpu, rec, &space, at(*src), at(*dst), *rows, shape.cols()),
            Launch::Copies(moves) => {
                let moves: Vec<Move> =
                    moves.iter().map(|m| Move { src: at(m.src), dst: at(m.dst), len: m.len as u64 }).collect();
                record_moves(gpu, rec, &space, &moves, op)
            }
            Launch::Fused { .. } => {
                Err(Error::InvalidArgument(format!("{NAME}: {op}: a fused launch in a schedule made without fusion")))
            }
        }
    };
    match SCHEDULES.get(&key) {
        Some(launches) => launches.iter().try_for_each(|l| run(&mut rec, l))?,
        None => {
            let plan = TransposePlan::new(shape, cap)?;
            let mut launches = Vec::new();
            schedule_each(&plan, &limits, &mut |l| {
                run(&mut rec, &l)?;
                launches.push(l);
                Ok(())
            })?;
            SCHEDULES.insert(key, launches);
        }
    }
    rec.flush()?;
    // The scratch handles drop here; wgpu keeps the memory until the queued launches are done.
    drop(scratch);
    Ok(())
}

/// Records `dst[c * rows + r] = src[r * cols + c]` for a `rows x cols` block, cut into
/// sub-blocks whose source rows and destination columns each span at most one segment.
pub(crate) fn record_block(
    gpu: &Gpu,
    rec: &mut Recorder<'_>,
    space: &Space<'_>,
    src: u64,
    dst: u64,
    rows: usize,
    cols: usize,
) -> Result<()> {
    let s = gpu.seg_elems();
    if cols > s {
        return Err(Error::InvalidArgument(format!(
            "{NAME}: transpose: a row of {cols} elements exceeds one segment of {s} elements (the storage binding limit)"
        )));
    }
    let mut nr = rows.min(s / cols);
    if nr >= TILE {
        nr -= nr % TILE;
    }
    let nc = cols.min((s - nr) / rows + 1);
    for r0 in (0..rows).step_by(nr) {
        let r = nr.min(rows - r0);
        for c0 in (0..cols).step_by(nc) {
            let c = nc.min(cols - c0);
            let spans = [
                (src + (r0 * cols) as u64, src + ((r0 + r) * cols) as u64),
                (dst + (c0 * rows + r0) as u64, dst + ((c0 + c - 1) * rows + r0 + r) as u64),
            ];
            let window = space.window::<4>(&spans, "transpose block")?;
            let tiles_c = c.div_ceil(TILE);
            let tiles = r.div_ceil(TILE) * tiles_c;
            let args = [
                src as u32,
                dst as u32,
                rows as u32,
                cols as u32,
                r0 as u32,
                c0 as u32,
                r as u32,
                c as u32,
                tiles_c as u32,
            ];
            rec.dispatch(TRANSPOSE, tiles as u32, &args, window, Window::empty(), Table::None)?;
        }
    }
    Ok(())
}
