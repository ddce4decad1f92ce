//! Batched copies: one copy shader dispatch per group of tiles (`shaders/wgsl/copy.wgsl`).
//!
//! Each copy is cut into tiles of at most [`COPY_TILE_ELEMS`] elements that lie inside one
//! source and one destination segment; tiles are grouped into dispatches that touch at most four
//! segments (window A). A batch is independent (validated first), so its tiles run in any order,
//! and a whole batch of thousands of copies is a handful of dispatches. The same path executes
//! the copy steps of the transpose plan, where source and destination may be the same wgpu
//! buffer (which `copy_buffer_to_buffer` forbids).

use backend_api::copy::{BatchTarget, validate_batch};
use backend_api::{CopyRange, Result};

use crate::context::{COPY_TILE_ELEMS, Gpu, Kernel, Module, Recorder, Space, Table, Window};
use crate::memory::WgpuBuffer;

pub(crate) const COPY: Kernel = Kernel { module: Module::Copy, entry: "copy_tiles", items_per_group: 1 };

/// A copy in a [`Space`]: virtual source, virtual destination, length, in elements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Move {
    pub src: u64,
    pub dst: u64,
    pub len: u64,
}

/// Records the independent copies `moves` (one batch) into `rec`.
pub(crate) fn record_moves(
    gpu: &Gpu,
    rec: &mut Recorder<'_>,
    space: &Space<'_>,
    moves: &[Move],
    op: &str,
) -> Result<()> {
    let shift = gpu.seg_shift;
    let seg = 1u64 << shift;
    // (src segment, dst segment, src, dst, len)
    let mut tiles: Vec<(u64, u64, u32, u32, u32)> = Vec::new();
    for m in moves {
        let (mut s, mut d, mut left) = (m.src, m.dst, m.len);
        while left > 0 {
            let n = left.min(COPY_TILE_ELEMS as u64).min(seg - (s & (seg - 1))).min(seg - (d & (seg - 1)));
            tiles.push((s >> shift, d >> shift, s as u32, d as u32, n as u32));
            s += n;
            d += n;
            left -= n;
        }
    }
    tiles.sort_unstable();
    let max_tiles = rec.max_table_words() / 4;
    let mut start = 0;
    while start < tiles.len() {
        // Grow the group while it touches at most four segments.
        let mut segs: Vec<u64> = Vec::with_capacity(4);
        let mut end = start;
        while end < tiles.len() && end - start < max_tiles {
            let t = tiles[end];
            let mut add = segs.clone();
            for s in [t.0, t.1] {
                if !add.contains(&s) {
                    add.push(s);
                }
            }
            if add.len() > 4 {
                break;
            }
            segs = add;
            end += 1;
        }
        let group = &tiles[start..end];
        let spans: Vec<(u64, u64)> = segs.iter().map(|&s| (s << shift, (s << shift) + 1)).collect();
        let window = space.window::<4>(&spans, op)?;
        let words: Vec<u32> = group.iter().flat_map(|t| [t.2, t.3, t.4, 0]).collect();
        rec.dispatch(COPY, group.len() as u32, &[0], window, Window::empty(), Table::Arena(words))?;
        start = end;
    }
    Ok(())
}

/// [`backend_api::Backend::batched_copy`].
pub(crate) fn batched_copy(gpu: &Gpu, src: &WgpuBuffer, dst: &mut WgpuBuffer, copies: &[CopyRange]) -> Result<()> {
    use backend_api::DeviceBuffer as _;
    let op = "batched_copy";
    validate_batch(copies, BatchTarget::Between { src_len: src.len(), dst_len: dst.len() })?;
    let (space, bases) = Space::new(gpu, &[&src.segs, &dst.segs])?;
    let moves: Vec<Move> = copies
        .iter()
        .map(|c| Move { src: bases[0] as u64 + c.src as u64, dst: bases[1] as u64 + c.dst as u64, len: c.len as u64 })
        .collect();
    let mut rec = gpu.recorder(op);
    record_moves(gpu, &mut rec, &space, &moves, op)?;
    rec.flush()
}

/// [`backend_api::Backend::batched_copy_within`].
pub(crate) fn batched_copy_within(gpu: &Gpu, buf: &mut WgpuBuffer, copies: &[CopyRange]) -> Result<()> {
    use backend_api::DeviceBuffer as _;
    let op = "batched_copy_within";
    validate_batch(copies, BatchTarget::Within { len: buf.len() })?;
    let (space, _) = Space::new(gpu, &[&buf.segs])?;
    let moves: Vec<Move> =
        copies.iter().map(|c| Move { src: c.src as u64, dst: c.dst as u64, len: c.len as u64 }).collect();
    let mut rec = gpu.recorder(op);
    record_moves(gpu, &mut rec, &space, &moves, op)?;
    rec.flush()
}
