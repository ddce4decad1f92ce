//! In-place transpose: executes the fused schedule of the shared [`TransposePlan`]
//! ([`backend_api::plan::schedule`]), launch by launch.
//!
//! - `Launch::Block` runs the tiled kernel of `shaders/wgsl/transpose.wgsl` (32 x 32 elements
//!   through workgroup memory).
//! - `Launch::Fused`, the run pass's batch pairs composed into one parallel assignment of whole
//!   runs, runs `shaders/wgsl/transpose_fused.wgsl` on the wide layout: each workgroup stages a
//!   window of every source run in workgroup memory, then writes every destination, so a run
//!   moves once instead of twice (into scratch and out again). The schedule keeps every run
//!   inside one segment (the run length divides the segment size) and a launch within
//!   twelve segments (the wide layout). Adapters without the wide layout run unfused.
//! - `Launch::Copies`, any other batch, runs the copy shader ([`crate::copy`]).
//!
//! The matrix and the scratch are one virtual space (matrix segments first), so a launch may read
//! one and write the other. wgpu orders dispatches that share a buffer, so launches run in order.
//! Submissions: the block pass is submitted as soon as it is recorded, so that the GPU works
//! while the host records (or, the first time for a shape, composes) the run pass; schedules are
//! kept per shape, scratch and segment size.

use std::sync::Arc;

use backend_api::plan::schedule::{FuseLimits, Launch, Regions, ScheduleCache, ScheduleKey, schedule_each};
use backend_api::plan::{Loc, TransposePlan};
use backend_api::{DeviceBuffer as _, Error, MatrixShape, Result, validate};

use crate::context::{Gpu, Kernel, Module, NAME, Recorder, Space, Table, Window};
use crate::copy::{Move, record_moves};
use crate::memory::{self, WgpuBuffer};

const TRANSPOSE: Kernel = Kernel { module: Module::Transpose, entry: "transpose_block", items_per_group: 1 };
const FUSED: Kernel = Kernel { module: Module::TransposeFused, entry: "transpose_fused_runs", items_per_group: 1 };
const TILE: usize = 32;
/// Net moves one fused launch carries: a run-pass batch pair holds `cols + 1` runs (the scratch),
/// so 384 fuses every pair up to 383 columns.
const FUSE_MAX: usize = 384;
/// Recent schedules (the host composition of 2^22 x 316 takes tens of milliseconds).
static SCHEDULES: ScheduleCache = ScheduleCache::new(8);

/// What one fused launch may hold on `gpu`: nothing unless fusing was asked for
/// ([`crate::WgpuOptions::fused_transpose`]) and the adapter has the wide layout.
pub(crate) fn limits(gpu: &Gpu) -> FuseLimits {
    match gpu.wide_slots() {
        Some(max) if gpu.fused_transpose => {
            FuseLimits { max_moves: FUSE_MAX, regions: Some(Regions { elems: gpu.seg_elems(), max }) }
        }
        _ => FuseLimits::NONE,
    }
}

/// The kernels [`transpose_in_place`] launches on `gpu`: the block transpose, the copy shader
/// (every run-pass batch, or those not fused), and the fused kernel where [`limits`] fuses.
pub(crate) fn kernels(gpu: &Gpu) -> Vec<Kernel> {
    let mut k = vec![TRANSPOSE, crate::copy::COPY];
    if limits(gpu).regions.is_some() {
        k.push(FUSED);
    }
    k
}

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
    let limits = limits(gpu);
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
            Launch::Fused { unit, moves } => {
                let moves: Vec<(u64, u64)> = moves.iter().map(|&(s, d)| (at(s), at(d))).collect();
                record_fused(gpu, rec, &space, *unit as u64, &moves)
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

/// Records one fused launch: `moves` are `(src, dst)` virtual starts of `unit`-element slots,
/// each inside one segment, at most [`Gpu::wide_slots`] segments in all (the schedule's limits).
fn record_fused(gpu: &Gpu, rec: &mut Recorder<'_>, space: &Space<'_>, unit: u64, moves: &[(u64, u64)]) -> Result<()> {
    let shift = gpu.hw.seg_shift;
    let mask = (1u64 << shift) - 1;
    let max = gpu.wide_slots().unwrap_or(0);
    let mut segs: Vec<u32> = Vec::new();
    let mut words: Vec<u32> = Vec::with_capacity(moves.len() * 4);
    for &(s, d) in moves {
        for v in [s, d] {
            let seg = (v >> shift) as u32;
            if (v + unit - 1) >> shift != u64::from(seg) {
                return Err(Error::InvalidArgument(format!(
                    "{NAME}: transpose: a fused slot of {unit} elements at {v} crosses a segment of 2^{shift}"
                )));
            }
            let slot = match segs.iter().position(|&x| x == seg) {
                Some(k) => k,
                None => {
                    segs.push(seg);
                    segs.len() - 1
                }
            };
            words.extend([slot as u32, (v & mask) as u32]);
        }
    }
    if segs.len() > max {
        return Err(Error::InvalidArgument(format!(
            "{NAME}: transpose: a fused launch touches {} segments, the wide layout binds {max}",
            segs.len()
        )));
    }
    let bufs: Vec<&wgpu::Buffer> = segs
        .iter()
        .map(|&s| space.segment(s))
        .collect::<Option<_>>()
        .ok_or_else(|| Error::InvalidArgument(format!("{NAME}: transpose: a fused slot outside the buffers")))?;
    // The window: the largest power of two with every move's window staged, at most the slot.
    let n = moves.len() as u64;
    let fit = (u64::from(gpu.stage_elems()) / n.max(1)).max(1);
    let win = (1u64 << fit.ilog2()).min(unit.next_power_of_two()).min(4096);
    let groups = unit.div_ceil(win);
    let args = [0, n as u32, unit as u32, win.trailing_zeros()];
    rec.dispatch_wide(FUSED, groups as u32, &args, &bufs, Table::Arena(words))
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
