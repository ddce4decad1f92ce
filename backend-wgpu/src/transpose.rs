//! In-place transpose: executes the shared [`TransposePlan`] step by step.
//!
//! `Step::TransposeBlock` runs the tiled kernel of `shaders/wgsl/transpose.wgsl` (32 x 32
//! elements through workgroup memory); `Step::Copies` runs the copy shader ([`crate::copy`]).
//! The matrix and the scratch are one virtual space (matrix segments first), so a step may read
//! one and write the other. Every step is a dispatch (or a few, when it spans more segments than
//! one dispatch binds), and wgpu orders dispatches that share a buffer, so steps run in order.
//!
//! Submissions: the block pass is submitted as soon as it is recorded, so that the GPU works
//! while the host records the run pass; the run pass then goes in as few submissions as the
//! parameter arena allows (one copy-table entry per run, see [`crate::copy`]).

use std::sync::Arc;

use backend_api::plan::{Loc, Step, TransposePlan};
use backend_api::{DeviceBuffer as _, Error, MatrixShape, Result};

use crate::context::{Gpu, Kernel, Module, NAME, Recorder, Space, Table, Window};
use crate::copy::{Move, record_moves};
use crate::memory::{self, WgpuBuffer};

const TRANSPOSE: Kernel = Kernel { module: Module::Transpose, entry: "transpose_block", items_per_group: 1 };
const TILE: usize = 32;

/// [`backend_api::Backend::transpose_in_place`].
pub(crate) fn transpose_in_place(gpu: &Arc<Gpu>, buf: &mut WgpuBuffer, shape: MatrixShape, cap: usize) -> Result<()> {
    shape.check_len("transpose_in_place buffer", buf.len())?;
    let plan = TransposePlan::new(shape, cap)?;
    if plan.steps.is_empty() {
        return gpu.check("transpose_in_place");
    }
    let scratch = memory::alloc(gpu, plan.geometry.scratch_elems)?;
    let (space, bases) = Space::new(gpu, &[&buf.segs, &scratch.segs])?;
    let at = |loc: Loc| match loc {
        Loc::Buf(o) => o as u64,
        Loc::Scratch(o) => bases[1] as u64 + o as u64,
    };
    let op = "transpose_in_place";
    let mut rec = gpu.recorder(op);
    let last_block = plan.steps.iter().rposition(|s| matches!(s, Step::TransposeBlock { .. }));
    for (i, step) in plan.steps.iter().enumerate() {
        match step {
            Step::TransposeBlock { src, dst, rows } => {
                record_block(gpu, &mut rec, &space, at(*src), at(*dst), *rows, shape.cols())?;
            }
            Step::Copies(moves) => {
                let moves: Vec<Move> =
                    moves.iter().map(|m| Move { src: at(m.src), dst: at(m.dst), len: m.len as u64 }).collect();
                record_moves(gpu, &mut rec, &space, &moves, op)?;
            }
        }
        if Some(i) == last_block {
            rec.flush()?;
        }
    }
    rec.flush()?;
    // The scratch handles drop here; wgpu keeps the memory until the queued steps are done.
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
